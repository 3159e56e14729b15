"""Forget a dead cluster: the stack's state without the objects that lived in it and the steps run on its machines.

pulumi-kubernetes refuses to delete a Helm release through an unreachable cluster whatever
PULUMI_K8S_DELETE_UNREACHABLE says (the variable is honoured for plain objects only), and every
release here that must free its name first is deleted before its replacement. So the restore `up`
after `host.name` or `clusterId` changes, and `destroy` of a dead cluster, stop at the first old
release. This tool takes `pulumi stack export` and writes the state without:

- every `kubernetes:` object and Helm release, and every Kubernetes provider (the host cluster's and
  each team's vCluster, reached through it);
- every `command:remote:Command`: a step over SSH on a machine of that cluster, whose delete
  (draining, leaving, `snap remove`) cannot run on a machine that is gone.

Kept: the Brev instance steps (local commands, whose delete removes the old instance by its id when
this stack created it and deleteOnDestroy allows), passwords, keys and certificates, and the
components. Every reference a kept resource holds to a forgotten one (dependencies, property
dependencies, deletedWith) is dropped, so the state passes Pulumi's integrity check on import
(pulumi/pulumi pkg/resource/deploy/snapshot.go VerifyIntegrity: each parent, provider and dependency
names a resource earlier in the list).

    pulumi stack export --file before.json
    python3 -m ops.forget_cluster before.json > after.json
    pulumi stack import --file after.json

It prints what it forgets on stderr. Only for a cluster that is gone: on a live one, the objects
stay running with nothing in the state to remove them.
"""

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

FORGOTTEN_PREFIXES = ("kubernetes:", "pulumi:providers:kubernetes", "command:remote:Command")


def forgotten(resource: Mapping[str, Any]) -> bool:
    return str(resource.get("type", "")).startswith(FORGOTTEN_PREFIXES)


def _provider_urn(reference: str) -> str:
    """A provider reference is `<urn>::<id>`."""
    return reference.rsplit("::", 1)[0]


def _without(urns: Iterable[str], gone: set[str]) -> list[str]:
    return [urn for urn in urns if urn not in gone]


def forget(deployment: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The export (version 3) without the dead cluster, and the URNs forgotten."""
    document = json.loads(json.dumps(deployment))
    body = document["deployment"]
    resources = body.get("resources") or []
    gone = {r["urn"] for r in resources if forgotten(r)}
    kept = []
    for resource in resources:
        if resource["urn"] in gone:
            continue
        provider = resource.get("provider")
        if provider and _provider_urn(provider) in gone:
            raise ValueError(f"{resource['urn']} uses a provider of the dead cluster; it cannot be kept")
        if resource.get("dependencies"):
            resource["dependencies"] = _without(resource["dependencies"], gone)
        if resource.get("propertyDependencies"):
            resource["propertyDependencies"] = {
                key: _without(urns, gone) for key, urns in resource["propertyDependencies"].items()
            }
        if resource.get("deletedWith") in gone:
            del resource["deletedWith"]
        kept.append(resource)
    body["resources"] = kept
    body["pending_operations"] = [
        op for op in body.get("pending_operations") or [] if op.get("resource", {}).get("urn") not in gone
    ]
    return document, sorted(gone)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m ops.forget_cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("export", help="the file `pulumi stack export --file` wrote")
    args = parser.parse_args(argv)
    with open(args.export) as export:
        document = json.load(export)
    if document.get("version") != 3 or "deployment" not in document:
        print(f"{args.export} is not a `pulumi stack export` (version 3)", file=sys.stderr)
        return 2
    result, gone = forget(document)
    for urn in gone:
        print(f"forgetting {urn}", file=sys.stderr)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
