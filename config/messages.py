"""Pydantic's own failures, said as every other config problem is: what is wanted, its range, and the fix.

`problems_from` (config/issues.py) hands each failure it has no message of its own for to `explain`,
with the config model, so a message can name the field's range, the keys that exist at that
place, the nearest one to a typo, or the host mode a key belongs to.
"""

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from config.issues import STACK_KEYS, Path, problems_from
from config.types import PROMETHEUS_URL_PATTERN, REFUSED_BY_CONSTRAINT, Refusal, unquoted_number

UnionModels = Mapping[str, Mapping[str, type[BaseModel]]]
"""A key holding a tagged union -> each tag's model, e.g. host -> {brev: BrevHost, ...}."""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation can hold, through Optional, Annotated, lists, dicts and unions."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if origin in (list, dict, typing.Union, types.UnionType):
        return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]
    return []


def _field(model: type[BaseModel], key: str) -> FieldInfo | None:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    return None


def _models_at(root: type[BaseModel], loc: Path, unions: UnionModels) -> list[type[BaseModel]]:
    """Every model that can sit at `loc` (several for a union such as `host`)."""
    models = [root]
    for part in loc:
        if isinstance(part, int):
            continue
        following: list[type[BaseModel]] = []
        for model in models:
            info = _field(model, part)
            if info is not None:
                following += list(unions.get(part, {}).values()) or _models_in(info.annotation)
        models = following
    return models


def _refusal_in(items: Sequence[Any]) -> Refusal | None:
    """The Refusal in a field's metadata or anywhere in its annotation (through Annotated, Optional, lists)."""
    for item in items:
        if isinstance(item, Refusal):
            return item
        found = _refusal_in(typing.get_args(item))
        if found is not None:
            return found
    return None


def _refusal(root: type[BaseModel], loc: Path, unions: UnionModels) -> Refusal | None:
    """What the field at `loc` (or the list at `loc` holds) says when its own constraint refuses a value."""
    keys = list(loc)
    while keys and isinstance(keys[-1], int):
        keys.pop()
    if not keys or not isinstance(keys[-1], str):
        return None
    for model in _models_at(root, tuple(keys[:-1]), unions):
        info = _field(model, keys[-1])
        if info is not None:
            found = _refusal_in([*info.metadata, info.annotation])
            if found is not None:
                return found
    return None


def _aliases(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _range(info: FieldInfo | None) -> str:
    if info is None:
        return ""
    bounds = []
    for item in info.metadata:
        if isinstance(item, Ge):
            bounds.append(f"at least {item.ge}")
        elif isinstance(item, Gt):
            bounds.append(f"more than {item.gt}")
        elif isinstance(item, Le):
            bounds.append(f"at most {item.le}")
        elif isinstance(item, Lt):
            bounds.append(f"less than {item.lt}")
    return f" ({' and '.join(bounds)})" if bounds else ""


BOUND_TYPES = frozenset({"greater_than_equal", "less_than_equal"})


def _span(info: FieldInfo | None) -> tuple[Any, Any] | None:
    """The field's inclusive range, when it has both ends."""
    if info is None:
        return None
    lows = [item.ge for item in info.metadata if isinstance(item, Ge)]
    highs = [item.le for item in info.metadata if isinstance(item, Le)]
    return (lows[0], highs[0]) if lows and highs else None


def unknown_key(root: type[BaseModel], loc: Path, unions: UnionModels) -> str:
    """A key no model at that place has: the nearest spelling, or the host mode it belongs to."""
    key = str(loc[-1])
    parent = loc[:-1]
    here = _models_at(root, parent, unions)
    known = sorted({alias for model in here for alias in _aliases(model)})
    if parent and str(parent[-1]) in unions:
        owners = [tag for tag, model in unions[str(parent[-1])].items() if key in _aliases(model)]
        if owners:
            return f"is not a setting of this {parent[-1]}.mode: it belongs to {parent[-1]}.mode {' or '.join(owners)}"
    nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if nearest:
        return f"is not a known key: did you mean {nearest[0]}? (docs/configuration.md)"
    return f"is not a known key here (known: {', '.join(known)})" if known else "is not a known key"


def _leaf_field(root: type[BaseModel], loc: Path, unions: UnionModels) -> FieldInfo | None:
    keys = [part for part in loc if isinstance(part, str)]
    if not keys:
        return None
    for model in _models_at(root, tuple(p for p in loc[:-1]), unions) if isinstance(loc[-1], str) else []:
        info = _field(model, keys[-1])
        if info is not None:
            return info
    return None


WANTS = {
    "int_type": "must be a whole number{range}, unquoted, e.g. 3",
    "int_parsing": "must be a whole number{range}, unquoted, e.g. 3",
    "int_from_float": "must be a whole number{range}, not a fraction",
    "float_type": "must be a number{range}, unquoted, e.g. 0.5",
    "float_parsing": "must be a number{range}, unquoted, e.g. 0.5",
    "finite_number": "must be a finite number{range}",
    "bool_type": "must be true or false (unquoted)",
    "bool_parsing": "must be true or false (unquoted)",
    "string_type": "must be a string: quote it in YAML",
    "list_type": "must be a list, e.g. [a, b] or one `- item` per line",
    "dict_type": "must be a mapping of keys to values",
    "model_type": "must be a mapping of keys to values (docs/configuration.md lists them)",
    "model_attributes_type": "must be a mapping of keys to values (docs/configuration.md lists them)",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "too_short": "needs at least {min_length} entries",
    "too_long": "allows at most {max_length} entries",
    "string_too_short": "must be at least {min_length} characters long",
    "string_too_long": "must be at most {max_length} characters long",
    "literal_error": "must be one of: {expected}",
    "enum": "must be one of: {expected}",
    "string_pattern_mismatch": "does not have the expected form ({pattern})",
}


PATTERN_MEANINGS = {
    r"^[a-z_][a-z0-9_-]*$": "must be a Linux user name: lowercase letters, digits, _ and -, not starting with a digit",
    PROMETHEUS_URL_PATTERN: "must be the Prometheus' in-cluster http(s) URL, e.g. "
    "http://kube-prom-stack-kube-prome-prometheus.observability.svc:9090",
}
"""What each pattern a config field uses means, said as a fix rather than as a regular expression."""


def explain(detail: Mapping[str, Any], root: type[BaseModel], loc: Path, unions: UnionModels) -> str:
    """The house-style message for one pydantic failure; pydantic's own words only for a type it has no entry for."""
    # A float field's bound arrives as a float (0.0): say it as written (0).
    context = {
        key: int(value) if isinstance(value, float) and value.is_integer() else value
        for key, value in (detail.get("ctx") or {}).items()
    }
    if detail["type"] == "string_type":
        said = unquoted_number(detail.get("input"))
        if said is not None:
            return said
    if detail["type"] in REFUSED_BY_CONSTRAINT:
        refusal = _refusal(root, loc, unions)
        if refusal is not None:
            return refusal.message
    template = PATTERN_MEANINGS.get(str(context.get("pattern"))) or WANTS.get(str(detail["type"]))
    if template is None:
        return str(detail["msg"])
    field = _leaf_field(root, loc, unions)
    context["range"] = _range(field)
    span = _span(field)
    if span and str(detail["type"]) in BOUND_TYPES:
        # Both ends, so one fix fits: a node port of 80 is told 30000 to 32767, not "at least 30000".
        template = "must be from {low} to {high}"
        context |= {"low": span[0], "high": span[1]}
    try:
        return template.format(**context)
    except (KeyError, IndexError):
        return str(detail["msg"])


def unions_of(root: type[BaseModel], keys: Sequence[str]) -> UnionModels:
    """For each key of `root` holding a tagged union, its models by tag (their `mode` literal)."""
    found: dict[str, dict[str, type[BaseModel]]] = {}
    for key in keys:
        info = _field(root, key)
        for model in _models_in(info.annotation) if info else []:
            mode = model.model_fields.get("mode")
            tag = typing.get_args(mode.annotation)[0] if mode is not None else None
            if isinstance(tag, str):
                found.setdefault(key, {})[tag] = model
    return found


def house_problems(
    error: ValidationError, root: type[BaseModel], union_keys: Sequence[str] = (), prefix: str = STACK_KEYS
) -> list[str]:
    """Every problem in `error`, one line each, in the house style: the key path, the value, what would be valid."""
    models = unions_of(root, union_keys)
    return problems_from(
        error,
        {key: tuple(tags) for key, tags in models.items()},
        explain=lambda detail, loc: explain(detail, root, loc, models),
        unknown=lambda loc: unknown_key(root, loc, models),
        prefix=prefix,
    )
