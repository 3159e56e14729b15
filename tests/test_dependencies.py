"""The runtime dependencies `pulumi up` installs can run this program."""

import pytest
from packaging.requirements import Requirement

from harness import ROOT

WITHOUT_MUTATING_ADMISSION_POLICY = ("4.18.0", "4.26.0", "4.29.0")
# admissionregistration.k8s.io/v1 MutatingAdmissionPolicy arrived with the Kubernetes 1.36 schema in
# pulumi-kubernetes 4.30.0: pulumi/pulumi-kubernetes CHANGELOG.md and sdk/python/pulumi_kubernetes/
# admissionregistration/v1/MutatingAdmissionPolicy.py @v4.30.0 (absent @v4.29.0).


def _specifier(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#") and Requirement(line).name == name:
            return str(Requirement(line).specifier)
    raise AssertionError(f"{name} is not in requirements.txt")


@pytest.mark.parametrize("version", WITHOUT_MUTATING_ADMISSION_POLICY)
def test_pulumi_kubernetes_never_resolves_to_a_version_without_mutating_admission_policy(version: str) -> None:
    specifier = Requirement(f"pulumi-kubernetes{_specifier('pulumi-kubernetes')}").specifier
    assert not specifier.contains(version)
    assert specifier.contains("4.34.2"), "the version the tests run with"
