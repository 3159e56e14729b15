"""Reading a stack file as Pulumi does: YAML 1.2's core schema, and a key twice is an error.

PyYAML implements YAML 1.1: `yes`, `no`, `on` and `off` are booleans there, `0777` is octal and
`1:20` a number, and a mapping with a key twice keeps the last. Pulumi reads stack files with a
YAML 1.2 parser (gopkg.in/yaml.v3: pulumi/pulumi sdk/go/common/encoding/marshal.go @v3.259.0), which keeps
`yes` a string and refuses a duplicate key. The offline readers (the planner CLI, the offline
check, the tests) must see what `pulumi up` sees, so they read with this loader.

One place yaml.v3 keeps YAML 1.1: an integer with a leading zero is octal (`022` is 18:
strconv.ParseInt(plain, 0, 64), gopkg.in/yaml.v3 resolve.go @v3.0.1, "Octals from the 1.1 spec,
spelled as 0777, are still decoded"), where 1.2 reads 22. Rather than guess which one a user
meant, the loader keeps such a number as a `LeadingZero`, which the readers refuse by its key.
"""

import re
from typing import Any

import yaml

BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
# The core schema's tags: yaml.org/spec/1.2.2, 10.3.2 Tag Resolution.


LEADING_ZERO = re.compile(r"^[-+]?0[0-9]+$")


class LeadingZero(str):
    """An integer written with a leading zero (`022`): Pulumi reads it as octal, a reader of YAML 1.2 as decimal."""

    def octal(self) -> int | None:
        """What Pulumi reads: the octal value, or None where a digit is 8 or 9 (yaml.v3 then reads a float)."""
        try:
            return int(self, 8)
        except ValueError:
            return None


def leading_zeros(document: Any, path: tuple[str | int, ...] = ()) -> list[tuple[tuple[str | int, ...], LeadingZero]]:
    """Every such number in a loaded document, with its key path."""
    if isinstance(document, LeadingZero):
        return [(path, document)]
    if isinstance(document, dict):
        return [found for key, value in document.items() for found in leading_zeros(value, (*path, key))]
    if isinstance(document, list):
        return [found for index, value in enumerate(document) for found in leading_zeros(value, (*path, index))]
    return []


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's core schema resolvers, refusing a key given twice."""

    yaml_implicit_resolvers = {}  # noqa: RUF012 - PyYAML's own class attribute, emptied for 1.2's resolvers

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {key!r} appears twice (first on line {seen[key] + 1}): Pulumi refuses that",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

    def construct_core_int(self, node: yaml.ScalarNode) -> int | LeadingZero:
        text = str(self.construct_scalar(node))
        if LEADING_ZERO.match(text):
            return LeadingZero(text)
        if text.startswith("0o"):
            return int(text[2:], 8)
        return int(text, 0) if text.startswith("0x") else int(text)


Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool", BOOL, list("tTfF"))
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:null", NULL, ["~", "n", "N", ""])
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:int", INT, list("-+0123456789"))
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:float", FLOAT, list("-+.0123456789"))
Yaml12Loader.add_constructor("tag:yaml.org,2002:int", Yaml12Loader.construct_core_int)


def load(text: str) -> Any:
    return yaml.load(text, Loader=Yaml12Loader)
