"""Every component follows the same contract, checked on the source so a new one cannot drift.

A token or child name change would give resources a new identity (a replacement
on the next `up`), and a component that forgets `register_outputs` never
finishes in the engine's eyes; both are cheap to catch here.
"""

import ast
from pathlib import Path

import pytest

from harness import ROOT

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
