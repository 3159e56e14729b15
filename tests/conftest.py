"""Shared fixtures: the reference stack's settings, a stand-in kubeconfig, upstream reference data, the lab."""

import json
import os
import uuid
from typing import Any

import hypothesis
import jsonschema
import pytest
import yaml

from harness import dev_settings
from tests.charts import chart_text, crd_errors
from tests.lab import RUN_VARIABLE, Lab, shared_lab, stop_if_ours

# Every property test draws the same examples on every run, so a landing never depends on a draw; the examples
# a draw once found are kept as explicit tests beside them.
hypothesis.settings.register_profile("deterministic", derandomize=True, deadline=None, database=None)
hypothesis.settings.load_profile("deterministic")

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

KAI_CHART = "kai-scheduler-v0.16.8.tgz"
VCLUSTER_CHART = "vcluster-0.35.1.tgz"
GPU_OPERATOR_CHART = "gpu-operator-v26.3.3.tgz"
KUBE_PROMETHEUS_CHART = "kube-prometheus-stack-88.5.3.tgz"


@pytest.fixture
def dev_config() -> dict[str, Any]:
    return dev_settings()


def queue_schema_errors(manifest: dict[str, Any]) -> list[str]:
    """Problems KAI's Queue CRD (from the pinned chart) finds in a manifest, unknown fields included."""
    crd = yaml.safe_load(chart_text(KAI_CHART, "kai-scheduler/crds/scheduling.run.ai_queues.yaml"))
    return crd_errors(crd, manifest)


def vcluster_schema_errors(values: dict[str, Any]) -> list[str]:
    """Problems the pinned vCluster chart's schema finds in Helm values."""
    schema = json.loads(chart_text(VCLUSTER_CHART, "vcluster/values.schema.json"))
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(values)]


def pytest_configure(config: pytest.Config) -> None:
    """The controller names this session, so the worker that starts the lab can say it did (tests/lab.py)."""
    if not hasattr(config, "workerinput"):
        os.environ[RUN_VARIABLE] = uuid.uuid4().hex


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller stops the lab this session started, once every worker is done."""
    if not hasattr(session.config, "workerinput"):
        stop_if_ours(os.environ.get(RUN_VARIABLE, ""))


@pytest.fixture(scope="session")
def lab() -> Lab:
    """The session's lab (tests/lab.py): a real API server, controller manager, scheduler and KWOK."""
    return shared_lab()
