"""The SDK's own cost for exactly what a program registers: each recorded registration registered again, bare.

A bare ConfigMap holds five values; a team's vCluster release holds some 240 and its gate Job 120, and the SDK
serialises every value on the way to the engine and deserialises the outputs that come back. Registering the
recorded resources again, each by its type's SDK class with its recorded inputs and no program around it,
costs what those resources cost whatever program makes them; the difference from the program's own run is
what the program itself adds (its config, plan, values and the outputs that wire its resources together).

One provider stands for all of the program's, and components come back as bare components.
"""

import importlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import pulumi
import pulumi_command
import pulumi_kubernetes as k8s
import pulumi_random
import pulumi_tls

from harness import Registration

_CAMEL_HUMP = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(key: str) -> str:
    return _CAMEL_HUMP.sub("_", key).lower()


class _Bare(pulumi.ComponentResource):
    def __init__(self, type_: str, name: str) -> None:
        super().__init__(type_, name, None, None)
        self.register_outputs({})


def _sdk_class(type_: str) -> Any:
    """The SDK's class for a type token, or None for a custom resource kind the Kubernetes SDK has no class of."""
    package, module, name = type_.split(":")
    if package == "kubernetes":
        group, version = module.split("/")
        try:
            return getattr(importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0]}.{version}"), name)
        except (ImportError, AttributeError):
            return None
    modules: dict[str, Any] = {
        "random": pulumi_random,
        "tls": pulumi_tls,
        "command": getattr(pulumi_command, module, None),
    }
    return getattr(modules[package], name)


def _again(registration: Registration, opts: pulumi.ResourceOptions) -> None:
    type_, name, inputs = registration.type, registration.name, registration.inputs
    if type_.startswith("gpu-tenancy:"):
        _Bare(type_, name)
        return
    kubernetes = type_.startswith("kubernetes:")
    cls = _sdk_class(type_)
    if registration.read:
        cls.get(name, registration.import_id, opts=opts)
    elif cls is None:
        group_version, kind = type_.split(":")[1:]
        k8s.apiextensions.CustomResource(
            name,
            api_version=group_version,
            kind=kind,
            metadata=inputs.get("metadata"),
            spec=inputs.get("spec"),
            opts=opts,
        )
    else:
        cls(name, **{_snake(key): value for key, value in inputs.items()}, opts=opts if kubernetes else None)


def replay(registrations: Sequence[Registration]) -> Callable[[], None]:
    """A program that registers each of these again (providers aside), in order."""

    def program() -> None:
        opts = pulumi.ResourceOptions(provider=k8s.Provider("replay", kubeconfig="unused"))
        for registration in registrations:
            if not registration.type.startswith("pulumi:providers:"):
                _again(registration, opts)

    return program
