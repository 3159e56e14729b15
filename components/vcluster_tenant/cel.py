"""CEL expressions over a pod, as the API server's admission policies evaluate them.

Every helper returns the text of one expression. The API server type-checks each
expression, so both branches of a conditional always have one type (a string, with
'' for absent), and a map is only iterated behind `has(...)`.
"""

from collections.abc import Sequence
from typing import Any, Literal

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
Kind = Literal["labels", "annotations"]


def cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


def _each(field: str, quantifier: str, predicate: str) -> str:
    if field == "containers":
        return f"object.spec.containers.{quantifier}(c, {predicate})"
    if quantifier == "all":
        return f"(!has(object.spec.{field}) || object.spec.{field}.all(c, {predicate}))"
    return f"(has(object.spec.{field}) && object.spec.{field}.exists(c, {predicate}))"


def every_container(predicate: str, lists: Sequence[str] = CONTAINER_LISTS) -> str:
    """`predicate` (over `c`) holds for every container of the given lists (all three by default).

    Each list is checked on its own: they are different types, which CEL does not concatenate.
    """
    return " && ".join(_each(field, "all", predicate) for field in lists)


def any_container(predicate: str, lists: Sequence[str] = CONTAINER_LISTS[:2]) -> str:
    """`predicate` (over `c`) holds for some container of the given lists (regular and init by default)."""
    return " || ".join(_each(field, "exists", predicate) for field in lists)


def value(obj: str, kind: Kind, key: str) -> str:
    """The label's or annotation's value, or '' when it is absent."""
    entries = f"{obj}.metadata.{kind}"
    return f"(has({entries}) && '{key}' in {entries} ? {entries}['{key}'] : '')"


def present(obj: str, kind: Kind, key: str) -> str:
    entries = f"{obj}.metadata.{kind}"
    return f"(has({entries}) && '{key}' in {entries})"


def unchanged(kind: Kind, key: str) -> str:
    """The key is as it was: absent before and after, or present with the same value."""
    return (
        f"{present('object', kind, key)} == {present('oldObject', kind, key)} && "
        f"{value('object', kind, key)} == {value('oldObject', kind, key)}"
    )


def any_with_prefix(obj: str, kind: Kind, prefix: str) -> str:
    entries = f"{obj}.metadata.{kind}"
    return f"(has({entries}) && {entries}.exists(k, k.startsWith('{prefix}')))"


def unchanged_with_prefix(kind: Kind, prefix: str) -> str:
    """Every key starting with `prefix` is as it was: none added, changed or removed."""
    new, old = f"object.metadata.{kind}", f"oldObject.metadata.{kind}"
    same = f"has({old}) && k in {old} && {old}[k] == {new}[k]"
    kept = f"(!has({new}) || {new}.all(k, !k.startsWith('{prefix}') || ({same})))"
    not_removed = f"(!has({old}) || {old}.all(k, !k.startsWith('{prefix}') || (has({new}) && k in {new})))"
    return f"{kept} && {not_removed}"


def validation(expression: str, message: str, message_expression: str | None = None) -> dict[str, Any]:
    """A check that refuses the request when `expression` is false; `message_expression` may say with what."""
    check = {"expression": expression, "message": message, "reason": "Forbidden"}
    if message_expression is not None:
        check["messageExpression"] = message_expression
    return check
