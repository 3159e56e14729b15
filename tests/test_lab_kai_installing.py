"""While KAI installs, a tenant's pods are admitted: the real API server on a cluster without KAI's CRDs.

A ValidatingAdmissionPolicy whose paramKind is not served refuses every request its
matchConstraints match, before it looks at a binding or a matchCondition (apiserver
pkg/admission/plugin/policy/validating/dispatcher.go Dispatch, ConfigurationError from
generic/policy_source.go @v0.36.3). The gang-consistency policy reads KAI's PodGroups, so
registered before KAI it refused every pod in every tenant namespace, the vCluster control
planes included, for the whole GPU-stack install. The program now creates it after KAI's
gate; this lab starts bare, applies what the engine would apply before KAI, and sends a
control-plane pod, a CPU pod and a gang pod.
"""

from collections.abc import Iterator

import pytest

from components.vcluster_tenant.kai_rules import GPU_MEMORY_PARAMS
from harness import ProgramRun, Registration, dev_settings, run_main
from harness.lab.cluster import wait_for
from harness.lab.kube import ApiError
from tests.lab import Lab, apply_registrations, install_kai_crds, private_lab
from tests.tenant_pods import SYNCER, pod
from tests.vcluster_syncer import to_host, virtual_gang_pod

ADMISSION_TYPES = {
    "kubernetes:core/v1:Namespace",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy",
    "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding",
}
KAI_GATE = "kai-gate"
STATEFULSET_CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"


@pytest.fixture(scope="module")
def bare() -> Iterator[Lab]:
    with private_lab("kai-installing", kai_crds=False) as lab:
        yield lab


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return run_main(dev_settings())


def _closure(run: ProgramRun, registration: Registration) -> set[str]:
    """Everything a registration waits for, a component standing for all it holds."""
    children: dict[str, list[str]] = {}
    for r in run.registrations:
        children.setdefault(r.parent, []).append(r.urn)
    by_urn = {r.urn: r for r in run.registrations}
    seen: set[str] = set()
    stack = list(registration.dependencies)
    while stack:
        urn = stack.pop()
        if urn in seen:
            continue
        seen.add(urn)
        stack += children.get(urn, [])
        if urn in by_urn:
            stack += by_urn[urn].dependencies
    return seen


def _before_kai(run: ProgramRun) -> list[Registration]:
    """The namespaces and admission objects, in registration order, that do not wait for KAI's gate."""
    (gate,) = [r for r in run.of_type("kubernetes:batch/v1:Job") if r.name == KAI_GATE]
    return [
        r for r in run.registrations if (r.type in ADMISSION_TYPES or _params(r)) and gate.urn not in _closure(run, r)
    ]


def _params(registration: Registration) -> bool:
    """The pod policy's params: there before its binding (the GPUs' memory is patched on after the GPU gate)."""
    metadata = registration.inputs.get("metadata") or {}
    return registration.type == "kubernetes:core/v1:ConfigMap" and metadata.get("name") == GPU_MEMORY_PARAMS["name"]


def _control_plane_pod() -> dict[str, object]:
    """team-nlp's vCluster control plane as the StatefulSet controller creates it (labels of the chart's pod
    template: loft-sh/vcluster chart/templates/statefulset.yaml @v0.35.1)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "team-nlp-0", "labels": {"app": "vcluster", "release": "team-nlp"}},
        "spec": {"containers": [{"name": "syncer", "image": "ghcr.io/loft-sh/vcluster-oss:0.35.1"}]},
    }


def _gang_pod() -> dict[str, object]:
    """A worker of a 2-pod gang as team-nlp's syncer writes it to the host."""
    return to_host(
        virtual_gang_pod("bert-worker-0", "bert", 2, "nvcr.io/nvidia/pytorch:25.10-py3"), vcluster="team-nlp"
    )


def _refusal(lab: Lab, user: str, obj: dict[str, object]) -> str | None:
    metadata = dict(obj["metadata"])  # type: ignore[call-overload]
    metadata["namespace"] = "vcluster-team-nlp"
    body = {**obj, "metadata": metadata}
    try:
        lab.as_user(user).create(body, dry_run=True)
    except ApiError as error:
        return error.message
    return None


REQUESTS = {
    "vcluster-control-plane": (STATEFULSET_CONTROLLER, _control_plane_pod),
    "cpu-pod": (SYNCER, pod),
    "gang-pod": (SYNCER, _gang_pod),
}


def test_what_the_engine_applies_before_kai_leaves_the_consistency_policy_out(run: ProgramRun) -> None:
    names = {r.inputs["metadata"]["name"] for r in _before_kai(run)}
    assert "gpu-tenancy-tenant-pods" in names
    assert "gpu-tenancy-gang-consistency" not in names


def _apply_before_kai(lab: Lab, run: ProgramRun) -> None:
    apply_registrations(lab, _before_kai(run))
    # The account a synced pod runs as, which team-nlp's vCluster release creates.
    account = {"name": "vc-workload-team-nlp", "namespace": "vcluster-team-nlp"}
    lab.admin.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account})


def test_tenant_pods_are_admitted_while_kai_installs(bare: Lab, run: ProgramRun) -> None:
    _apply_before_kai(bare, run)
    for name, (user, build) in REQUESTS.items():
        assert _eventually_admitted(bare, user, build()), name


def test_the_consistency_policy_before_kai_refuses_every_tenant_pod_and_recovers_once_kai_serves(
    bare: Lab, run: ProgramRun
) -> None:
    """The rule the program now avoids, on the real API server: applied before KAI (as the program did), the
    policy's configuration error refuses even the control plane, whose labels no matchCondition selects."""
    _apply_before_kai(bare, run)
    consistency = [
        r
        for r in run.registrations
        if r.type in ADMISSION_TYPES and r.inputs["metadata"].get("name") == "gpu-tenancy-gang-consistency"
    ]
    apply_registrations(bare, consistency)
    for name, (user, build) in REQUESTS.items():
        refusal = _eventually_refused(bare, user, build())
        assert "failed to find resource referenced by paramKind" in refusal, name
    install_kai_crds(bare.admin)
    for name, (user, build) in REQUESTS.items():
        assert _eventually_admitted(bare, user, build(), within=90), name
    for registration in reversed(consistency):
        bare.admin.delete(
            "admissionregistration.k8s.io/v1",
            registration.type.rsplit(":", 1)[1],
            registration.inputs["metadata"]["name"],
        )


def _eventually_admitted(lab: Lab, user: str, obj: dict[str, object], within: float = 30) -> bool:
    return wait_for(lambda: _refusal(lab, user, obj) is None, within, 0.2)


def _eventually_refused(lab: Lab, user: str, obj: dict[str, object]) -> str:
    found: list[str] = []

    def refused() -> bool:
        message = _refusal(lab, user, obj)
        if message:
            found.append(message)
        return bool(message)

    assert wait_for(refused, 30, 0.2), "never refused"
    return found[-1]
