"""Every name the program derives from config fits where Kubernetes and Helm put it.

A name that validates but is refused by the API server surfaces as a Helm
timeout or a Job that never starts; so the longest names config accepts are run
through the program and every registered name and label is measured.
"""

from collections.abc import Iterator
from typing import Any

import pytest

from config.names import (
    DNS_LABEL_MAX,
    HELM_RELEASE_NAME_MAX,
    LABEL_VALUE_MAX,
    TENANT_NAME_MAX,
    TENANT_NAME_USES,
    tightest_use,
)
from harness import ProgramRun, Registration, dev_settings, run_main

RELEASE = "kubernetes:helm.sh/v3:Release"
SUBDOMAIN_MAX = 253
LABEL_LIMITED_KINDS = {"Namespace", "Job", "Service"}
"""Kinds whose name must be a DNS label, or ends up in a label value (a Job's pods carry job-name)."""
REVISION_HASH = "-" + "9" * 10
"""What a StatefulSet's pods append to its name in controller-revision-hash (up to ten digits)."""

LONGEST_TENANT = "t" * (TENANT_NAME_MAX - len("-x")) + "-x"
LONGEST_NAME = "q" * DNS_LABEL_MAX


@pytest.fixture(scope="module")
def longest_names() -> ProgramRun:
    config = dev_settings()
    config["queues"].append({"name": LONGEST_NAME, "parentQueue": "ml-org", "resources": {"gpu": {"quota": 0}}})
    config["tenants"].append(
        {
            "name": LONGEST_TENANT,
            "queue": LONGEST_NAME,
            "addons": [
                {
                    "name": "a" * HELM_RELEASE_NAME_MAX,
                    "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
                }
            ],
        }
    )
    config["gpuOperator"] = {"releaseName": "g" * HELM_RELEASE_NAME_MAX, "namespace": "o" * DNS_LABEL_MAX}
    config["kaiScheduler"] = {"namespace": "k" * DNS_LABEL_MAX}
    return run_main(config)


def _labels(registration: Registration) -> Iterator[tuple[str, str]]:
    inputs = registration.inputs
    for metadata in (inputs.get("metadata") or {}, (inputs.get("spec") or {}).get("template", {}).get("metadata", {})):
        yield from (metadata.get("labels") or {}).items()


def test_the_tenant_limit_is_set_by_the_vclusters_statefulset() -> None:
    """63 for the pod label, less `-` and a ten-character revision hash (kubernetes/kubernetes#64023)."""
    assert TENANT_NAME_MAX == 52
    assert tightest_use(TENANT_NAME_USES).startswith("its vCluster's StatefulSet")


def test_every_object_name_fits_its_kind(longest_names: ProgramRun) -> None:
    checked = 0
    for registration in longest_names.registrations:
        if not registration.type.startswith("kubernetes:") or registration.read:
            continue
        name = (registration.inputs.get("metadata") or {}).get("name")
        if name is None:
            continue
        kind = registration.type.rsplit(":", 1)[-1]
        limit = DNS_LABEL_MAX if kind in LABEL_LIMITED_KINDS else SUBDOMAIN_MAX
        assert len(name) <= limit, f"{kind} {name} ({len(name)} > {limit})"
        checked += 1
    assert checked > 30


def test_every_label_value_fits(longest_names: ProgramRun) -> None:
    for registration in longest_names.registrations:
        for key, value in _labels(registration):
            assert len(str(value)) <= LABEL_VALUE_MAX, f"{registration.name}: {key}={value}"


def test_every_helm_release_name_fits_and_a_vclusters_pods_can_be_created(longest_names: ProgramRun) -> None:
    names: list[dict[str, Any]] = [r.inputs for r in longest_names.of_type(RELEASE)]
    assert any(len(release["name"]) == HELM_RELEASE_NAME_MAX for release in names)
    for release in names:
        assert len(release["name"]) <= HELM_RELEASE_NAME_MAX, release["name"]
        if release["chart"] == "vcluster":
            revision_label = release["name"] + REVISION_HASH
            assert len(revision_label) <= LABEL_VALUE_MAX, revision_label
