"""Turning validation failures into messages a person can act on.

Every message has the same three parts: the config key path as the user would
type it (`gpu-tenancy:queues[1].resources.gpu.limit`), the bad value, and what
would be valid.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

PROJECT = "gpu-tenancy"

Path = tuple[str | int, ...]


MISSING: Any = object()
"""The value of a ConfigIssue about a key that is not set at all."""


class ConfigIssue(ValueError):
    """One problem found by a cross-field check, at a path relative to the model that raised it.

    Raised inside pydantic validators: pydantic keeps the exception object in the
    error's context, which is how the path survives the trip.
    """

    def __init__(self, path: Path, value: Any, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.value = value
        self.message = message


class ConfigIssues(ValueError):
    """Several cross-field problems found at once, reported together."""

    def __init__(self, issues: Sequence[ConfigIssue]) -> None:
        super().__init__("; ".join(issue.message for issue in issues))
        self.issues = list(issues)


class ConfigError(Exception):
    """The stack config is invalid. `str()` is the whole, human-readable report."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        heading = "Invalid stack config" + (f" ({count} problems):" if count > 1 else ":")
        super().__init__("\n".join([heading, *(f"  - {p}" for p in self.problems)]))


STACK_KEYS = f"{PROJECT}:"
"""How a key path starts in stack config; another document (a planner scenario) names its own file instead."""


def key_path(path: Path, prefix: str = STACK_KEYS) -> str:
    """`('queues', 1, 'resources')` -> `gpu-tenancy:queues[1].resources`."""
    if not path:
        return prefix.rstrip(":")
    head, *rest = path
    text = f"{prefix}{head}"
    for part in rest:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def describe(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def problem(path: Path, value: Any, message: str, prefix: str = STACK_KEYS) -> str:
    if value is MISSING:
        return f"{key_path(path, prefix)} {message}"
    return f"{key_path(path, prefix)} = {describe(value)}: {message}"


def _missing(path: Path, prefix: str) -> str:
    return f"{key_path(path, prefix)} is required but not set"


def _without_tags(loc: Path, unions: Mapping[str, Sequence[str]]) -> Path:
    """Pydantic puts a tagged union's tag in the path (`host.ssh.address`); the user never writes it."""
    kept: list[str | int] = []
    for part in loc:
        if kept and isinstance(kept[-1], str) and part in unions.get(kept[-1], ()):
            continue
        kept.append(part)
    return tuple(kept)


Explain = Callable[[Mapping[str, Any], Path], str]
"""Pydantic's failure, at its path, in the house style (config/messages.py)."""


def problems_from(
    error: ValidationError,
    unions: Mapping[str, Sequence[str]] | None = None,
    *,
    explain: Explain | None = None,
    unknown: Callable[[Path], str] | None = None,
    prefix: str = STACK_KEYS,
) -> list[str]:
    """Flatten a pydantic error into one line per problem, expanding our own ConfigIssues.

    `unions` maps a key holding a tagged union to its tags (e.g. `host` -> brev, ssh, kubeconfig);
    `explain` and `unknown` say pydantic's own failures and an unknown key in the house style; `prefix` starts
    each key path.
    """
    unions = unions or {}
    lines: list[str] = []
    for detail in error.errors(include_url=False):
        loc: Path = _without_tags(tuple(detail["loc"]), unions)
        raised = (detail.get("ctx") or {}).get("error")
        if detail["type"] in {"union_tag_invalid", "union_tag_not_found"}:
            tag = detail["ctx"]["discriminator"].strip("'")
            given = detail["input"].get(tag, MISSING) if isinstance(detail["input"], dict) else MISSING
            choices = ", ".join(unions.get(str(loc[-1]), ()))
            lines.append(
                problem(
                    (*loc, tag),
                    given,
                    f"must be one of: {choices}" if given is not MISSING else f"is required: choose one of {choices}",
                    prefix,
                )
            )
        elif isinstance(raised, ConfigIssues):
            lines.extend(_issue_lines(loc, raised.issues, prefix))
        elif isinstance(raised, ConfigIssue):
            lines.extend(_issue_lines(loc, [raised], prefix))
        elif detail["type"] == "missing":
            lines.append(_missing(loc, prefix))
        elif detail["type"] == "extra_forbidden":
            spelling = "is not a known key: check its spelling against docs/configuration.md"
            message = unknown(loc) if unknown else spelling
            lines.append(problem(loc, detail["input"], message, prefix))
        else:
            lines.append(problem(loc, detail["input"], explain(detail, loc) if explain else detail["msg"], prefix))
    return lines


def _issue_lines(base: Path, issues: Iterable[ConfigIssue], prefix: str) -> list[str]:
    return [problem(base + issue.path, issue.value, issue.message, prefix) for issue in issues]
