"""Rules of the Pulumi engine and its providers that Pulumi's mocks do not apply, reproduced from their source.

The fast tests of changes, upgrades, removals and recovery plan an `up` with `plan` here, in every host mode. The
lab's real engine (v3.274.0, pulumi-kubernetes v4.25.0) holds `plan` equal to its own steps wherever it can run:
each rule on a program of ConfigMaps (tests/test_lab_engine.py), and the whole reference stack in kubeconfig mode,
through a quota, a team's vCluster version, a floor, the KAI version, a team added and one removed
(tests/test_lab_stack_life.py). What this module still adds: the brev and ssh programs, whose pulumi-command,
pulumi-random and pulumi-tls providers the module proxy refuses (so `replaceOnChanges` on commands and
TLS_FORCE_NEW are shown on no real engine); a create over an existing object as pulumi-kubernetes 4.3x answers it
(`create_over_existing`: v4.25.0 still upserts); and pulumi-command's failure text (`failure_text`).

- pulumi-command's error for a failed command: the exit error, the whole command text (Go `%q`), then
  everything it printed on stdout and stderr, whatever `logging` says:
  `fmt.Errorf("%w: running %q:\\n%s", err, command, stdouterrbuf.String())`
  (pulumi/pulumi-command provider/pkg/provider/{local,remote}/commandOutputs.go @v1.2.1).
"""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness import ProgramRun, Registration


def failure_text(command: str, stdout: str, stderr: str, exit_error: str = "exit status 1") -> str:
    """What `pulumi up` prints when a command step fails. Go's %q escapes as JSON does for this text."""
    return f"{exit_error}: running {json.dumps(command)}:\n{stdout}{stderr}"


# --- what an `up` does to each resource -------------------------------------------------------------------------
#
# The engine's step generator (pulumi/pulumi pkg/resource/deploy/step_generator.go @v3.259.0), for the rules this
# program relies on:
# - ignoreChanges: the old value of each ignored path is put into the new inputs before any diff
#   (processIgnoreChanges);
# - replaceOnChanges: a change under one of its paths replaces the resource, whatever the provider says
#   (pulumi-command's SDKs add `triggers[*]`: provider/pkg/provider/common/inputs.go @v1.2.1);
# - a resource whose provider is replaced is replaced too;
# - a replacement creates the new resource first and deletes the old one at the end of the update, in reverse
#   dependency order, unless deleteBeforeReplace;
# - the Kubernetes provider replaces itself when its clusterIdentifier changes, and not otherwise while it is set
#   (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go DiffConfig @v4.32.0); a ConfigMap or Secret whose
#   contents change is replaced unless its provider says they are mutable (diff.go forceNewProperties); a Helm
#   release is replaced when its name or namespace changes (helm_release.go Diff, forceNewFields ".name",
#   ".namespace"), any other object when its metadata.name or metadata.namespace does, or a field the API server
#   keeps immutable (diff.go forceNew).

_PATH = re.compile(r"[^.\[\]]+|\[(\d+|\*)\]")


def _parts(path: str) -> list[str]:
    return [m.group(1) if m.group(1) is not None else m.group(0) for m in _PATH.finditer(path)]


def _get(value: Any, parts: list[str]) -> Iterator[Any]:
    if not parts:
        yield value
        return
    head, rest = parts[0], parts[1:]
    if head == "*" and isinstance(value, list):
        for item in value:
            yield from _get(item, rest)
    elif head.isdigit() and isinstance(value, list) and int(head) < len(value):
        yield from _get(value[int(head)], rest)
    elif isinstance(value, dict) and head in value:
        yield from _get(value[head], rest)


def _set(value: Any, parts: list[str], new: Any) -> None:
    head, rest = parts[0], parts[1:]
    if head.isdigit() and isinstance(value, list) and int(head) < len(value):
        if rest:
            _set(value[int(head)], rest, new)
        else:
            value[int(head)] = new
    elif isinstance(value, dict):
        if rest:
            _set(value.setdefault(head, {}), rest, new)
        else:
            value[head] = new


def _with_ignored(old: Registration, new: Registration) -> dict[str, Any]:
    inputs: dict[str, Any] = json.loads(json.dumps(new.inputs, default=str))
    for path in new.ignore_changes:
        for value in _get(old.inputs, _parts(path)):
            _set(inputs, _parts(path), value)
    return inputs


@dataclass(frozen=True)
class Step:
    op: str
    """create, update, replace (the new one created), delete (removed, or the old half of a replacement)."""
    name: str
    type: str


def _replaces(
    old: Registration, new: Registration, inputs: dict[str, Any], replaced: set[str], mutable: frozenset[str]
) -> bool:
    if new.type.startswith("pulumi:providers:kubernetes"):
        before, after = old.inputs.get("clusterIdentifier"), inputs.get("clusterIdentifier")
        return bool(before and after and before != after)
    return (
        new.provider.rsplit("::", 1)[0] in replaced
        or any(list(_get(old.inputs, _parts(p))) != list(_get(inputs, _parts(p))) for p in new.replace_on_changes)
        or _provider_replaces(old, new, inputs, mutable)
    )


def _provider_replaces(
    old: Registration, new: Registration, inputs: dict[str, Any], mutable: frozenset[str] = frozenset()
) -> bool:
    """What pulumi-kubernetes' (and pulumi-tls') Diff asks to replace. `mutable`: the kinds (ConfigMap, Secret) the
    resource's provider was told are mutable; the others are replaced when their contents change
    (pulumi/pulumi-kubernetes provider/pkg/provider/diff.go forceNewProperties @v4.32.0)."""
    if new.type == "kubernetes:helm.sh/v3:Release":
        return any(old.inputs.get(k) != inputs.get(k) for k in ("name", "namespace"))
    if new.type in TLS_FORCE_NEW:
        return any(old.inputs.get(k) != inputs.get(k) for k in TLS_FORCE_NEW[new.type])
    if not new.type.startswith("kubernetes:"):
        return False
    before, after = old.inputs.get("metadata") or {}, inputs.get("metadata") or {}
    # Also the fields the API server will not change in place (diff.go forceNew: a Job's template, completions,
    # parallelism and selector; a binding's roleRef).
    kind = new.type.rsplit(":", 1)[-1]
    immutable = FORCE_NEW.get(kind, ()) + (() if kind in mutable else CONTENTS_UNLESS_MUTABLE.get(kind, ()))
    return any(before.get(k) != after.get(k) for k in ("name", "namespace")) or any(
        _field(old.inputs, path) != _field(inputs, path) for path in immutable
    )


TLS_FORCE_NEW = {
    "tls:index/selfSignedCert:SelfSignedCert": (
        "privateKeyPem",
        "validityPeriodHours",
        "allowedUses",
        "dnsNames",
        "ipAddresses",
        "subject",
    ),
}
"""A certificate is never changed in place: each of these has RequiresReplace (hashicorp/terraform-provider-tls
internal/provider/resource_self_signed_cert.go Schema @v4.2.1, which pulumi-tls 5 bridges)."""

FORCE_NEW = {
    "Job": ("spec.template", "spec.completions", "spec.parallelism", "spec.selector"),
    "RoleBinding": ("roleRef",),
    "ClusterRoleBinding": ("roleRef",),
}


CONTENTS_UNLESS_MUTABLE = {"ConfigMap": ("data", "binaryData"), "Secret": ("data", "stringData", "type")}
MUTABLE_FLAGS = {"ConfigMap": "enableConfigMapMutable", "Secret": "enableSecretMutable"}


def _mutable_kinds(registration: Registration, providers: dict[str, Registration]) -> frozenset[str]:
    provider = providers.get(registration.provider.rsplit("::", 1)[0]) if registration.provider else None
    flags = provider.inputs if provider is not None else {}
    return frozenset(kind for kind, flag in MUTABLE_FLAGS.items() if flags.get(flag) in (True, "true"))


def _field(inputs: dict[str, Any], path: str) -> Any:
    node: Any = inputs
    for key in path.split("."):
        node = node.get(key) if isinstance(node, dict) else None
    return node


def plan(before: ProgramRun, after: ProgramRun) -> list[Step]:
    """The steps `pulumi up` takes from the state `before` left to the program `after`, in order."""
    old = {r.urn: r for r in before.registrations if not r.read}
    providers = {r.urn: r for r in after.registrations if r.type.startswith("pulumi:providers:")}
    steps: list[Step] = []
    replaced: set[str] = set()
    late_deletes: list[Registration] = []
    for new in after.registrations:
        if new.read:
            continue
        previous = old.get(new.urn)
        if previous is None:
            steps.append(Step("create", new.name, new.type))
            continue
        inputs = _with_ignored(previous, new)
        if _replaces(previous, new, inputs, replaced, _mutable_kinds(new, providers)):
            replaced.add(new.urn)
            if new.delete_before_replace:
                steps.append(Step("delete", previous.name, previous.type))
            else:
                late_deletes.append(previous)
            steps.append(Step("replace", new.name, new.type))
        elif json.loads(json.dumps(previous.inputs, default=str)) != inputs:
            steps.append(Step("update", new.name, new.type))
    kept = {r.urn for r in after.registrations}
    removed = [r for r in before.registrations if not r.read and r.urn not in kept]
    order = {r.urn: i for i, r in enumerate(before.registrations)}
    for gone in sorted([*removed, *late_deletes], key=lambda r: order[r.urn], reverse=True):
        steps.append(Step("delete", gone.name, gone.type))
    return steps


# --- creating an object the cluster already holds ------------------------------------------------------------------
#
# pulumi-kubernetes creates with server-side apply. A Patch resource (its type ends in "Patch"), or any resource
# when the provider sets upsertExistingObjects, is sent as an apply patch, which takes over an existing object (with
# patchForce, its fields from other field managers too); anything else is a plain create, which an existing object
# fails with AlreadyExists and "The resource already exists in the cluster" (provider/pkg/await/await.go Creation,
# kinds.IsPatchResource @v4.32.0).


def create_over_existing(registration: Registration, *, upsert_existing_objects: bool = False) -> str:
    """`upsert` (taken over, fields forced when the resource asks) or `AlreadyExists`."""
    if registration.type.endswith("Patch") or upsert_existing_objects:
        annotations = (registration.inputs.get("metadata") or {}).get("annotations") or {}
        return "upsert, forcing" if annotations.get("pulumi.com/patchForce") == "true" else "upsert"
    return "AlreadyExists"
