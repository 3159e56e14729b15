"""Shared fixtures: the reference stack's settings, a stand-in kubeconfig, upstream reference data."""

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from harness import ROOT, dev_settings

SHARED_REFERENCE = ROOT.parent / "shared" / "reference"

FAKE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: host
  cluster: {server: "https://203.0.113.10:16443", certificate-authority-data: Y2E=}
users:
- name: admin
  user: {token: not-a-real-token}
contexts:
- name: host
  context: {cluster: host, user: admin}
current-context: host
"""


@pytest.fixture
def dev_config() -> dict[str, Any]:
    return dev_settings()


def reference_file(*parts: str) -> Path:
    """A file under ../shared/reference, or skip: that data is not part of this repository."""
    path = SHARED_REFERENCE.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"upstream reference data not available at {path}")
    return path


def _queue_schema() -> dict[str, Any]:
    crd = yaml.safe_load(reference_file("kai", "queue-crd.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v2"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _forbid_unknown_fields(schema: dict[str, Any]) -> dict[str, Any]:
    """The API server prunes unknown fields silently; here they fail, so a typo cannot hide."""
    if "properties" in schema and "additionalProperties" not in schema:
        schema = {**schema, "additionalProperties": False}
    if "properties" in schema:
        schema["properties"] = {k: _forbid_unknown_fields(v) for k, v in schema["properties"].items()}
    return schema


def queue_schema_errors(manifest: dict[str, Any]) -> list[str]:
    """Problems KAI's Queue CRD (from ../shared, else skip) finds in a manifest, unknown fields included."""
    schema = _forbid_unknown_fields(_queue_schema())
    schema["properties"]["metadata"] = {"type": "object"}
    return [error.message for error in jsonschema.Draft7Validator(schema).iter_errors(manifest)]


def vcluster_schema_errors(values: dict[str, Any]) -> list[str]:
    """Problems vCluster's chart schema (from ../shared, else skip) finds in Helm values."""
    schema = json.loads(reference_file("vcluster", "values.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(values)]
