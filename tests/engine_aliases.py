"""How the Pulumi engine finds a registered resource's old state: by its URN, then by its aliases.

Pulumi's mocks never compare a program with a stack's state, so a refactor that moves
a resource (a new parent, name or type) looks harmless under them, while a real `up`
would delete the live object and create a new one. This module replays the engine's
matching against a recorded state, exactly as the step generator does it:
pulumi/pulumi pkg/resource/deploy/step_generator.go (collapseAliasToUrn,
inheritedChildAlias, generateAliases, getOldResource) and sdk/go/common/resource/alias.go
(CreateURN) @v3.259.0.

Registrations arrive in the order the program makes them; a child always comes after
its parent, whose URN it needs, so a parent's matched alias is known when its
children are matched (the engine relies on the same order).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def qualified_type(urn: str) -> str:
    """The type with its parents' types, `a$b$c` (sdk/go/common/resource/urn.go QualifiedType)."""
    return urn.split("::")[2]


def urn_name(urn: str) -> str:
    return urn.split("::", 3)[3]


def urn_type(urn: str) -> str:
    return qualified_type(urn).rsplit("$", 1)[-1]


def create_urn(name: str, type_: str, parent: str, project: str, stack: str) -> str:
    """CreateURN: a child's URN carries its parent's qualified type before its own."""
    if not parent:
        return f"urn:pulumi:{stack}::{project}::{type_}::{name}"
    return f"{parent[: parent.rindex('::')]}${type_}::{name}"


@dataclass(frozen=True)
class Registered:
    """What the engine needs of one registration to find its old state."""

    urn: str
    name: str
    type: str
    parent: str
    aliases: Sequence[Mapping[str, Any]] = ()
    """As the SDK sends them: `{"urn": ...}` or a spec (name, type, stack, project, parentUrn, noParent)."""


@dataclass
class OldStateMatch:
    claimed: dict[str, str] = field(default_factory=dict)
    """Old URN -> the URN of the registration that took it over (itself when unchanged)."""
    errors: list[str] = field(default_factory=list)
    """What the engine would refuse: two resources claiming one old resource."""


class _StepGenerator:
    def __init__(self, olds: Iterable[str], *, project: str, stack: str) -> None:
        self.olds = set(olds)
        self.project = project
        self.stack = stack
        self.aliases: dict[str, str] = {}
        """New URN -> the old URN it was matched by (sg.aliases)."""
        self.aliased: dict[str, str] = {}
        """Old URN -> the new URN that claimed it by alias (sg.aliased)."""
        self.urns: set[str] = set()
        """Every URN registered so far (sg.urns)."""

    def collapse(self, resource: Registered, alias: Mapping[str, Any]) -> str:
        if alias.get("urn"):
            return str(alias["urn"])
        name = alias.get("name") or resource.name
        type_ = alias.get("type") or resource.type
        parent = alias.get("parentUrn") or ""
        if not parent:
            parent = resource.parent
        elif parent in self.aliases:
            # A parent that was itself found by an alias: its old URN is where this child was.
            parent = self.aliases[parent]
        if alias.get("noParent") or (parent and urn_type(parent) == ROOT_STACK_TYPE):
            parent = ""
        project = alias.get("project") or self.project
        stack = alias.get("stack") or self.stack
        return create_urn(name, type_, parent, project, stack)

    def inherited(self, child_type: str, child_name: str, parent_name: str, parent_alias: str) -> str:
        """A child named `<parent name>-x` under a renamed parent was `<old parent name>-x`."""
        name = child_name
        if child_name.startswith(parent_name):
            name = urn_name(parent_alias) + child_name.removeprefix(parent_name)
        return f"urn:pulumi:{self.stack}::{self.project}::{qualified_type(parent_alias)}${child_type}::{name}"

    def generate_aliases(self, resource: Registered) -> list[str]:
        found: list[str] = []

        def add(urn: str) -> None:
            if urn not in found:
                found.append(urn)

        for alias in resource.aliases:
            add(self.collapse(resource, alias))
        if resource.parent and resource.parent in self.aliases:
            parent_alias = self.aliases[resource.parent]
            parent_name = urn_name(resource.parent)
            add(self.inherited(resource.type, resource.name, parent_name, parent_alias))
            for alias in resource.aliases:
                child = self.collapse(resource, alias)
                add(self.inherited(urn_type(child), urn_name(child), parent_name, parent_alias))
        return found

    def register(self, resource: Registered, match: OldStateMatch) -> None:
        urn = resource.urn
        if urn in self.aliased:
            match.errors.append(f"{urn} is registered, but {self.aliased[urn]} already claimed it by alias")
        for candidate in [urn, *self.generate_aliases(resource)]:
            if candidate not in self.olds:
                continue
            if candidate != urn:
                if candidate in self.urns:
                    match.errors.append(f"{urn} claims {candidate} by alias, but that URN is registered too")
                if candidate in self.aliased:
                    match.errors.append(f"{urn} and {self.aliased[candidate]} both claim {candidate} by alias")
                self.aliased[candidate] = urn
                self.aliases[urn] = candidate
            match.claimed[candidate] = urn
            break
        self.urns.add(urn)


def match_old_state(
    registrations: Iterable[Registered], olds: Iterable[str], *, project: str, stack: str
) -> OldStateMatch:
    """Which old resources the program's registrations take over; the rest an `up` would delete."""
    generator = _StepGenerator(olds, project=project, stack=stack)
    match = OldStateMatch()
    for resource in registrations:
        generator.register(resource, match)
    return match
