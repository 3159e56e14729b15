"""The house shows the design card: a package per component, each saying what it owns, wired by main.

import-linter (`.importlinter`) keeps the layers (config, the planner, components, the
harness) and keeps the component packages from importing one another. What it cannot
see is checked here: `__main__.py` (not an importable package) uses only each
component's interface, every package says what it owns, the README's diagram names
the packages, and config/ registers no resource.
"""

import ast
import re
from pathlib import Path

from config.pulumi_stack import load_stack_inputs
from harness import MAIN, ROOT, dev_settings, run_pulumi

COMPONENT_PACKAGES = sorted(
    path.parent.name for path in (ROOT / "components").glob("*/__init__.py") if path.parent.name != "shared"
)
PACKAGES = sorted(path.parent for root in ("components", "config") for path in (ROOT / root).rglob("__init__.py"))


def test_every_design_card_component_has_its_package() -> None:
    assert COMPONENT_PACKAGES == [
        "gang_controller",
        "gpu_host",
        "kai_scheduler",
        "observability",
        "queue_hierarchy",
        "vcluster_tenant",
    ]


def _imported_modules(path: Path) -> list[str]:
    return [
        node.module or ""
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("components")
    ]


def test_main_uses_only_each_components_interface() -> None:
    """`from components.<package> import ...`: never a module inside a package, never the shared pieces."""
    imported = _imported_modules(MAIN)
    assert imported
    assert sorted(set(imported)) == sorted(f"components.{package}" for package in COMPONENT_PACKAGES)


def test_every_package_says_what_it_owns() -> None:
    silent = [
        str(path.relative_to(ROOT))
        for path in PACKAGES
        if not ast.get_docstring(ast.parse((path / "__init__.py").read_text()))
    ]
    assert not silent


def test_the_readme_diagram_names_every_component_package() -> None:
    readme = (ROOT / "README.md").read_text()
    (diagram,) = re.findall(r"```mermaid\n(.*?)```", readme, flags=re.S)
    missing = [package for package in COMPONENT_PACKAGES if f"components/{package}" not in diagram]
    assert not missing, f"the README diagram does not name {missing}"


RESOURCE_CONSTRUCTORS = re.compile(r"\bpulumi\.(StackReference|ComponentResource|CustomResource|Resource)\(")


def test_reading_the_config_registers_nothing() -> None:
    """config/ validates and reads; it never creates a resource (the node-port memory lives with the tenants).

    Only config.pulumi_stack may import Pulumi at all (import-linter); it constructs no resource, and
    reading a stack's config under the mocks registers none.
    """
    assert not RESOURCE_CONSTRUCTORS.findall((ROOT / "config" / "pulumi_stack.py").read_text())
    config = dev_settings()
    run = run_pulumi(lambda: {"settings": load_stack_inputs().settings.host.mode}, config=config)
    assert run.registrations == []
    assert run.exports["settings"].value == "brev"
