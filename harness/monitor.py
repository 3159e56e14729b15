"""A mock monitor that keeps every registration request whole, with the URNs the engine would give.

Pulumi's `Mocks.new_resource` hook sees only a resource's type, name and inputs. Tests
also assert on dependencies, providers, secrecy, aliases and resource options, so the
monitor records the whole request.
"""

from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor, Mocks


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    provider: str
    inputs: dict[str, Any]
    """Inputs with secrets unwrapped; see `secret_inputs` for which were secret."""
    secret_inputs: set[str]
    dependencies: set[str]
    delete_before_replace: bool
    additional_secret_outputs: list[str]
    custom_timeouts: dict[str, str]
    import_id: str = ""
    """For a read (`Resource.get`) or an import, the id of the existing object."""
    read: bool = False
    retain_on_delete: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    aliases: list[dict[str, Any]] = field(default_factory=list)
    """What the program says this resource was once: `{"urn": ...}`, or a spec (name, type, stack, project,
    parentUrn, noParent) with empty fields meaning "as now", which the engine turns into URNs."""

    def depends_on(self, other: "Registration") -> bool:
        return other.urn in self.dependencies


def unwrap_secrets(value: Any) -> tuple[Any, bool]:
    """Strip secret markers at any depth, reporting whether any was present."""
    if rpc.is_rpc_secret(value):
        inner, _ = unwrap_secrets(value["value"])
        return inner, True
    if isinstance(value, dict):
        pairs = {k: unwrap_secrets(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [unwrap_secrets(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


def _alias(alias: Any) -> dict[str, Any]:
    if alias.HasField("spec"):
        spec = alias.spec
        return {
            "name": spec.name,
            "type": spec.type,
            "stack": spec.stack,
            "project": spec.project,
            "parentUrn": spec.parentUrn,
            "noParent": spec.noParent,
        }
    return {"urn": alias.urn}


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine gives: the parent's whole qualified type, and no prefix under the root stack.

        Pulumi's mock monitor keeps only the parent's own type and prefixes top-level resources with
        the stack's (pulumi/runtime/mocks.py make_urn, SDK 3.272.0), so its URNs are not the ones in a
        stack's state (pulumi/pulumi pkg/resource/deploy/deployment.go generateURN @v3.259.0).
        """
        parent_type = parent.split("::")[2] if parent else ""
        if parent_type and parent_type != ROOT_STACK_TYPE:
            type_ = f"{parent_type}${type_}"
        return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_}::{name}"

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self._record(request, response.urn, request.object, read=False)
        return response

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().ReadResource(request)
        self._record(request, response.urn, request.properties, read=True)
        return response

    def _record(self, request: Any, urn: str, properties: Any, *, read: bool) -> None:
        raw = rpc.deserialize_properties(properties)
        unwrapped = {key: unwrap_secrets(value) for key, value in raw.items()}
        timeouts = getattr(request, "customTimeouts", None)
        self.registrations.append(
            Registration(
                type=request.type,
                name=request.name,
                urn=urn,
                parent=request.parent,
                provider=request.provider,
                inputs={key: value for key, (value, _) in unwrapped.items()},
                secret_inputs={key for key, (_, secret) in unwrapped.items() if secret},
                dependencies=set(request.dependencies),
                delete_before_replace=getattr(request, "deleteBeforeReplace", False),
                additional_secret_outputs=list(request.additionalSecretOutputs),
                custom_timeouts={
                    "create": timeouts.create if timeouts else "",
                    "update": timeouts.update if timeouts else "",
                    "delete": timeouts.delete if timeouts else "",
                },
                import_id=request.id if read else getattr(request, "importId", ""),
                read=read,
                retain_on_delete=getattr(request, "retainOnDelete", False),
                ignore_changes=list(getattr(request, "ignoreChanges", [])),
                replace_on_changes=list(getattr(request, "replaceOnChanges", [])),
                aliases=[_alias(alias) for alias in getattr(request, "aliases", [])],
            )
        )
