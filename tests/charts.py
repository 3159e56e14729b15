"""The pinned charts and a real Helm, for tests: files read from the charts, and releases rendered by Helm.

Both come from outside this repository (harness/tools.py says from where). Missing, a test
is skipped on a workstation and fails in CI, naming the command that fetches it.
pulumi-kubernetes installs with Helm's v3 library; these renders use Helm v4.1.4's
`helm template`, which renders charts the same way for what is checked here, except that
`lookup` finds nothing (no cluster): a template guarded by a lookup renders as on a fresh
install.
"""

import functools
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from harness.tools import chart_path, helm_path


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader, reading a bare `=` as the string Kubernetes' YAML reader makes of it
    (PyYAML tags it YAML 1.1's `value` type and has no constructor for it)."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))
KUBE_VERSION = "1.36"

Json = dict[str, Any]


def missing(what: str, fix: str) -> None:
    """Skip, or in CI (CI=true) fail: there the render tests never skip."""
    message = f"{what} is not available: run `{fix}`"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def helm() -> Path:
    found = helm_path()
    if found is None:
        missing("Helm", "venv/bin/python -m harness.tools install-helm")
    assert found is not None
    return found


def chart(file_name: str) -> Path:
    found = chart_path(file_name)
    if found is None:
        missing(f"the chart {file_name}", "venv/bin/python -m harness.tools pull-charts")
    assert found is not None
    return found


def chart_text(file_name: str, member: str) -> str:
    """A file inside a packaged chart, e.g. ("vcluster-0.35.1.tgz", "vcluster/values.schema.json")."""
    with tarfile.open(chart(file_name)) as package:
        extracted = package.extractfile(member)
        assert extracted is not None, f"{member} is not in {file_name}"
        return extracted.read().decode()


def chart_file_for(chart_ref: str, version: str) -> str:
    """The packaged file of a chart reference (a name in a repository, or an oci:// reference)."""
    return f"{chart_ref.rstrip('/').rsplit('/', 1)[-1]}-{version}.tgz"


def render(name: str, namespace: str, file_name: str, values: Mapping[str, Any], *, crds: bool = False) -> list[Json]:
    """`helm template` of the chart with these values, as objects."""
    return list(_render(name, namespace, file_name, json.dumps(values, sort_keys=True), crds))


def render_text(name: str, namespace: str, file_name: str, values: Mapping[str, Any]) -> str:
    """The rendered manifests as text, or the error Helm gave."""
    return _helm_template(name, namespace, file_name, json.dumps(values, sort_keys=True), False)


@functools.cache
def _helm_template(name: str, namespace: str, file_name: str, values: str, crds: bool) -> str:
    command = [str(helm()), "template", name, str(chart(file_name)), "--namespace", namespace]
    command += ["--kube-version", KUBE_VERSION, "--values", "-"]
    if crds:
        command.append("--include-crds")
    result = subprocess.run(command, input=values, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return f"HELM ERROR: {result.stderr.strip()}"
    return result.stdout


@functools.cache
def _render(name: str, namespace: str, file_name: str, values: str, crds: bool) -> tuple[Json, ...]:
    text = _helm_template(name, namespace, file_name, values, crds)
    assert not text.startswith("HELM ERROR"), text
    return tuple(doc for doc in yaml.load_all(text, Loader=_Loader) if doc)


def _forbid_unknown_fields(schema: Json) -> Json:
    """The API server prunes unknown fields silently; here they fail, so a typo cannot hide. A schema that
    keeps unknown fields (x-kubernetes-preserve-unknown-fields) keeps them here too."""
    schema = dict(schema)
    if "properties" in schema and "additionalProperties" not in schema:
        if not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
        schema["properties"] = {k: _forbid_unknown_fields(v) for k, v in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        schema["items"] = _forbid_unknown_fields(schema["items"])
    if isinstance(schema.get("additionalProperties"), dict):
        schema["additionalProperties"] = _forbid_unknown_fields(schema["additionalProperties"])
    return schema


def crd_errors(crd: Json, obj: Json) -> list[str]:
    """Problems the CRD's schema for the object's version finds in it, unknown fields included."""
    version = obj["apiVersion"].rsplit("/", 1)[-1]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = _forbid_unknown_fields(served["schema"]["openAPIV3Schema"])
    schema["properties"] = {**schema.get("properties", {}), "metadata": {"type": "object"}}
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(obj)
    ]


POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def pod_specs(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind/name, pod spec) of every pod or pod template among rendered objects."""
    for obj in objects:
        kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
        if kind == "Pod":
            yield f"Pod/{name}", obj["spec"]
        elif kind == "StatefulSet":
            yield f"{kind}/{name}", _with_claims(obj)
        elif kind in POD_TEMPLATE_KINDS:
            yield f"{kind}/{name}", obj["spec"]["template"]["spec"]
        elif kind == "CronJob":
            yield f"CronJob/{name}", obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def _with_claims(statefulset: dict[str, Any]) -> dict[str, Any]:
    """A StatefulSet's pod as its controller makes it: a volume for each claim template, claiming
    <template>-<set>-<ordinal> (kubernetes pkg/controller/statefulset/stateful_set_utils.go updateStorage)."""
    spec = dict(statefulset["spec"]["template"]["spec"])
    name = statefulset["metadata"]["name"]
    claims = [
        {"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": f"{t['metadata']['name']}-{name}-0"}}
        for t in statefulset["spec"].get("volumeClaimTemplates") or []
    ]
    known = {v["name"] for v in spec.get("volumes") or []}
    spec["volumes"] = [*(spec.get("volumes") or []), *(c for c in claims if c["name"] not in known)]
    return spec
