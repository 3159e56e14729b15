"""Every component follows the same contract, checked on the source so a new one cannot drift.

A token or child name change would give resources a new identity (a replacement
on the next `up`), and a component that forgets `register_outputs` never
finishes in the engine's eyes; both are cheap to catch here.
"""

import ast
from pathlib import Path

import pytest

from components.shared.ownership import NOT_APPLIED, PATCH_FORCE
from harness import ROOT
from tests.stacks import STACKS
from tests.stacks import stack as registered

COMPONENT_FILES = sorted((ROOT / "components").rglob("*.py"))


def _component_classes() -> list[tuple[Path, ast.ClassDef]]:
    found = []
    for path in COMPONENT_FILES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base) == "pulumi.ComponentResource" for base in node.bases
            ):
                found.append((path, node))
    return found


COMPONENTS = _component_classes()


def test_there_are_components_to_check() -> None:
    assert {cls.name for _, cls in COMPONENTS} >= {"KaiScheduler", "QueueHierarchy"}


def _init(cls: ast.ClassDef) -> ast.FunctionDef:
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")


def _call(statement: ast.stmt) -> ast.Call | None:
    return statement.value if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) else None


@pytest.mark.parametrize(("path", "cls"), COMPONENTS, ids=[cls.name for _, cls in COMPONENTS])
def test_component_token_outputs_and_register_outputs_last(path: Path, cls: ast.ClassDef) -> None:
    init = _init(cls)
    first, last = _call(init.body[0]), _call(init.body[-1])
    assert first is not None
    assert ast.unparse(first.func) == "super().__init__", f"{cls.name}.__init__ must start with super().__init__"
    assert ast.unparse(first.args[3]) == "owned(opts)", f"{cls.name} owns its objects' fields (shared/ownership.py)"
    token = first.args[0]
    assert isinstance(token, ast.Constant)
    assert token.value == f"gpu-tenancy:index:{cls.name}", path.name

    assert last is not None
    assert ast.unparse(last.func) == "self.register_outputs", f"{cls.name}: register_outputs must come last"
    registered = last.args[0]
    assert isinstance(registered, ast.Dict)
    keys = {str(key.value) for key in registered.keys if isinstance(key, ast.Constant)}
    declared = {
        node.target.id
        for node in cls.body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and ast.unparse(node.annotation).startswith("pulumi.Output")
    }
    assert keys == declared, f"{cls.name}: registered {sorted(keys)} but declares outputs {sorted(declared)}"


# --- providers come through options -----------------------------------------------------------------


def _dataclass_fields(path: Path) -> list[tuple[str, str, str]]:
    """(class, field, annotation) for every annotated field of every class named `*Args`."""
    return [
        (node.name, ast.unparse(field.target), ast.unparse(field.annotation))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name.endswith("Args")
        for field in node.body
        if isinstance(field, ast.AnnAssign)
    ]


def test_no_component_takes_a_provider_in_its_args() -> None:
    """A provider in Args would bypass the caller's `ResourceOptions(provider=...)`; it belongs in `opts`."""
    in_args = [
        f"{cls}.{name}"
        for path in COMPONENT_FILES
        for cls, name, annotation in _dataclass_fields(path)
        if "Provider" in annotation
    ]
    assert not in_args


def _reads_pulumi_config(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and ast.unparse(node) in {"pulumi.Config", "pulumi.config.Config"}:
            return True
        imported = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pulumi") and "Config" in imported:
            return True
    return False


def test_no_component_reads_config_itself() -> None:
    """Components receive validated settings; only config.pulumi_stack reads `pulumi.Config`."""
    assert _reads_pulumi_config(ROOT / "config" / "pulumi_stack.py"), "the check must see the one reader"
    assert not [path.relative_to(ROOT) for path in COMPONENT_FILES if _reads_pulumi_config(path)]


@pytest.mark.parametrize("stack", ["brev", "ssh-2-workers", "kubeconfig"])
def test_no_component_is_given_dependencies_its_children_would_not_wait_for(stack: str) -> None:
    """A component's own depends_on holds none of its children back: each waits only for what it names itself
    (the engine steps resources, not components). The team views' PrometheusRule once raced the release that
    serves its kind this way, and lost when the release took longer than pulumi-kubernetes' retries."""
    run = registered(stack)
    components = [r for r in run.registrations if r.type.startswith("gpu-tenancy:index:")]
    assert components
    assert [(r.type, r.name) for r in components if r.dependencies] == []


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_kubernetes_object_the_program_applies_forces_its_own_fields(stack: str) -> None:
    """A field changed by hand is put back by the next `up` instead of failing it on the conflict
    (components/shared/ownership.py; the lab's real engine shows both: tests/test_lab_stack_life.py)."""
    unforced = [
        r.name
        for r in registered(stack).registrations
        if r.type.startswith("kubernetes:")
        and not r.read
        and not r.type.startswith(NOT_APPLIED)
        and ((r.inputs.get("metadata") or {}).get("annotations") or {}).get(PATCH_FORCE) != "true"
    ]
    assert unforced == []
