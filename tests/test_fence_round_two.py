"""The fence, tried again as a cluster-admin inside a vCluster would: Services, volumes, seccomp, Grafana's labels.

Each object is what vCluster's syncer writes to the host for what a team created (a
Service's whole spec, a used ConfigMap or Secret with its labels, a pod with its volumes
and security context: loft-sh/vcluster pkg/controllers/resources @v0.35.1), sent through
the policies the real program registers, as the API server evaluates them
(tests/lab_admission.py: bindings, selectors, subresources, variables, mutations first). Every
attack is refused; the objects of ordinary work (DDP, fractions, vLLM, Jupyter, Ray,
`kubectl debug`) are not.
"""

import copy
from typing import Any

import pytest

from config.gpu_host.kubelet import KubeletSettings
from config.upstream import GRAFANA_SIDECAR_LABELS
from harness import ProgramRun, dev_settings, run_main
from harness.mocks import script_input
from tests.conftest import FAKE_KUBECONFIG
from tests.lab_admission import Request
from tests.stacks import stack
from tests.tenant_pods import (
    CUDA,
    SYNCER,
    admit,
    admitted,
    as_team,
    container,
    create,
    gpus,
    namespace,
    pod,
    synced,
    team_pod,
)
from tests.vcluster_syncer import VIRTUAL_UID, Syncer, to_host

Json = dict[str, Any]
REMOTE = "command:remote:Command"
HOST_ADDRESS = "198.51.100.7"
"""The Brev host's address in the mocks: its API at 16443, every team's node port."""


@pytest.fixture(scope="module", params=["brev", "kubeconfig"])
def run(request: pytest.FixtureRequest) -> ProgramRun:
    return stack(request.param)


@pytest.fixture(scope="module")
def validate_only_elsewhere() -> ProgramRun:
    """An existing cluster, with `vcluster.admission: validate` (no MutatingAdmissionPolicy before 1.36)."""
    config = dev_settings()
    config["host"] = {"mode": "kubeconfig", "address": "203.0.113.30"}
    config["vcluster"] = {"admission": "validate"}
    return run_main(config, {"kubeconfig": FAKE_KUBECONFIG})


def _request(run: ProgramRun, obj: Json, resource: str, **fields: Any) -> Request:
    return Request(object=obj, namespace=namespace(run, "team-nlp"), resource=resource, user=SYNCER, **fields)


# --- Services -----------------------------------------------------------------------------------------------


def team_service(name: str = "web", **spec: Any) -> Json:
    """A Service as the team writes it in its cluster."""
    spec = {"ports": [{"port": 443, "targetPort": 8443}], **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def service(**spec: Any) -> Json:
    """A Service as the syncer writes it to the host (tests/vcluster_syncer.py): the team's spec, its selector
    translated."""
    return Syncer("team-nlp").host_service(team_service(**spec))


HIJACKS = {
    "the-host-api": [HOST_ADDRESS],
    "a-worker": ["203.0.113.21"],
    "the-dns-resolvers": ["8.8.8.8", "8.8.4.4"],
    "the-metadata-service": ["169.254.169.254"],
}


@pytest.mark.parametrize("addresses", HIJACKS.values(), ids=HIJACKS)
def test_a_service_cannot_claim_an_address_outside_the_cluster(run: ProgramRun, addresses: list[str]) -> None:
    """kube-proxy on every node would send that address's traffic to the team's pods (CVE-2020-8554)."""
    created = service(selector={"app": "web"}, externalIPs=addresses)
    assert any("externalIPs" in d for d in admit(run, _request(run, created, "services")))
    # Nor later: the syncer copies externalIPs both ways on update.
    plain = service(selector={"app": "web"})
    later = _request(run, created, "services", operation="UPDATE", old_object=plain)
    assert any("externalIPs" in d for d in admit(run, later))


def test_a_selectorless_service_with_hand_written_endpoints_cannot_claim_an_address_either(run: ProgramRun) -> None:
    assert admit(run, _request(run, service(externalIPs=[HOST_ADDRESS]), "services"))


def test_a_service_cannot_claim_load_balancer_addresses(run: ProgramRun) -> None:
    old = service(selector={"app": "web"}, type="LoadBalancer")
    claimed = {**copy.deepcopy(old), "status": {"loadBalancer": {"ingress": [{"ip": HOST_ADDRESS}]}}}
    request = _request(run, claimed, "services", operation="UPDATE", old_object=old, sub_resource="status")
    assert any("load balancer" in d for d in admit(run, request))


ORDINARY_SERVICES: dict[str, Json] = {
    # name: the Service's spec, as the team writes it
    "ddp-rendezvous": {"selector": {"job": "ddp"}, "ports": [{"port": 29500}]},
    "headless-for-a-statefulset": {"selector": {"app": "ray"}, "clusterIP": "None", "ports": [{"port": 6379}]},
    "vllm-api": {"selector": {"app": "vllm"}, "ports": [{"port": 8000}]},
    "selectorless-to-an-outside-database": {"ports": [{"port": 5432}]},
}


@pytest.mark.parametrize("spec", ORDINARY_SERVICES.values(), ids=ORDINARY_SERVICES)
def test_ordinary_services_are_admitted(run: ProgramRun, spec: Json) -> None:
    assert admit(run, _request(run, service(**spec), "services")) == []


def test_the_quota_caps_what_the_syncer_writes_of_endpoints(run: ProgramRun) -> None:
    """Endpoints and EndpointSlices of a selector-less Service are synced, and each loads every node's kube-proxy."""
    (release,) = [r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.name == "team-nlp-vcluster"]
    quota = release.inputs["values"]["policies"]["resourceQuota"]["quota"]
    assert int(quota["count/endpointslices.discovery.k8s.io"]) > 0
    assert int(quota["count/endpoints"]) > 0
    assert quota["services.loadbalancers"] == "0"


def test_every_container_gets_an_ephemeral_storage_limit_so_the_kubelet_evicts_it_first(run: ProgramRun) -> None:
    """A pod writing past its limit is evicted on its own, before the node's disk runs low for everyone."""
    (release,) = [r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.name == "team-nlp-vcluster"]
    limit_range = release.inputs["values"]["policies"]["limitRange"]
    assert limit_range["enabled"] is True
    assert limit_range["default"]["ephemeral-storage"]
    assert limit_range["defaultRequest"]["ephemeral-storage"]


# --- ConfigMaps and Secrets Grafana would load ---------------------------------------------------------------


def team_config(kind: str, labels: Json, name: str = "dash") -> Json:
    """A ConfigMap or Secret as the team writes it in its cluster."""
    # A Secret's data is base64 (the API server refuses anything else): "{}".
    data = {"fleet.json": "{}" if kind == "ConfigMap" else "e30="}
    metadata = {"name": name, "namespace": "default", "labels": labels}
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata, "data": data}


def config_object(kind: str, labels: Json) -> Json:
    """The host copy the syncer writes once a pod uses it (tests/vcluster_syncer.py)."""
    stored_config = team_config(kind, labels)
    stored_config["metadata"]["uid"] = VIRTUAL_UID
    return Syncer("team-nlp").host_config(stored_config)


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
@pytest.mark.parametrize("label", GRAFANA_SIDECAR_LABELS)
def test_a_team_cannot_hand_grafana_a_dashboard_or_data_source(run: ProgramRun, kind: str, label: str) -> None:
    """A ConfigMap the team's pod uses reaches the host with its labels; Grafana's sidecars read both kinds."""
    obj = config_object(kind, {label: "1"})
    denials = admit(run, _request(run, obj, f"{kind.lower()}s"))
    assert any(label in d for d in denials)
    # Nor by relabelling one the host already has.
    plain = config_object(kind, {})
    assert admit(run, _request(run, obj, f"{kind.lower()}s", operation="UPDATE", old_object=plain))


def test_an_existing_grafanas_own_dashboard_label_is_refused_too() -> None:
    config = dev_settings()
    config["observability"] = {"mode": "existing", "dashboardLabels": {"team_dashboards": "yes"}}
    run = run_main(config)
    assert admit(run, _request(run, config_object("ConfigMap", {"team_dashboards": "yes"}), "configmaps"))


def test_a_teams_own_configmaps_and_secrets_are_admitted(run: ProgramRun) -> None:
    for kind in ("ConfigMap", "Secret"):
        obj = config_object(kind, {"app": "jupyter", "dashboard": "mine"})
        assert admit(run, _request(run, obj, f"{kind.lower()}s")) == [], kind


def test_grafana_reads_dashboards_only_from_the_platforms_namespace() -> None:
    """Where the platform installs Grafana, its dashboard sidecar no longer searches every namespace."""
    config = dev_settings()
    config["observability"] = {"mode": "install"}
    run = run_main(config)
    (release,) = [r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.name == "observability-stack"]
    dashboards = release.inputs["values"]["grafana"]["sidecar"]["dashboards"]
    assert dashboards["searchNamespace"] == "observability"


# --- volumes the kubelet mounts from the node ---------------------------------------------------------------

NODE_NETWORK_VOLUMES: dict[str, Json] = {
    "nfs": {"nfs": {"server": "10.0.0.10", "path": "/"}},
    "iscsi": {"iscsi": {"targetPortal": "10.0.0.10:3260", "iqn": "iqn.2001-04.com.example:storage", "lun": 0}},
    "rbd": {"rbd": {"monitors": ["10.0.0.10:6789"], "image": "disk"}},
    "cephfs": {"cephfs": {"monitors": ["10.0.0.10:6789"]}},
    "glusterfs": {"glusterfs": {"endpoints": "gluster", "path": "vol"}},
    "git-repo": {"gitRepo": {"repository": "https://10.0.0.10/repo.git"}},
    "flex-volume": {"flexVolume": {"driver": "example.com/nfs"}},
    "fibre-channel": {"fc": {"wwids": ["3600508b400105e210000900000490000"]}},
    "host-path": {"hostPath": {"path": "/var/snap/microk8s"}},
}


def mounting(source: Json) -> Json:
    """A team's pod that mounts a volume of `source`."""
    return team_pod(
        containers=[container(volumeMounts=[{"name": "data", "mountPath": "/data"}])],
        volumes=[{"name": "data", **source}],
    )


@pytest.mark.parametrize("source", NODE_NETWORK_VOLUMES.values(), ids=NODE_NETWORK_VOLUMES)
def test_no_pod_mounts_a_volume_the_kubelet_fetches_from_the_nodes_network(run: ProgramRun, source: Json) -> None:
    denials = create(run, synced(run, mounting(source)), kai_serves=False)
    # Pod Security baseline refuses a hostPath volume before the policies see it; the policies refuse the rest.
    assert any("volume types" in d or "hostPath volumes" in d for d in denials), denials


ORDINARY_PODS: dict[str, Json] = {
    "jupyter": team_pod(
        containers=[container(image="quay.io/jupyter/pytorch-notebook:2026-11-24", resources=gpus())],
        volumes=[
            {"name": "work", "persistentVolumeClaim": {"claimName": "work"}},
            {"name": "config", "configMap": {"name": "jupyter-config"}},
            {"name": "token", "secret": {"secretName": "jupyter-token"}},
        ],
    ),
    "vllm": team_pod(
        containers=[container(image="vllm/vllm-openai:v0.11.2", resources=gpus())],
        volumes=[
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
            {
                "name": "cache",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}}
                    }
                },
            },
            {
                "name": "weights",
                "image": {"reference": "registry.example.com/models/llama:3.1", "pullPolicy": "IfNotPresent"},
            },
        ],
    ),
    "ray": team_pod(
        containers=[container(image="rayproject/ray:2.52.0")],
        volumes=[
            {
                "name": "podinfo",
                "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
            },
            {"name": "token", "projected": {"sources": [{"secret": {"name": "ray"}}]}},
            {"name": "scratch", "csi": {"driver": "inline.storage.example.com"}},
        ],
    ),
}
"""Team pods with the volumes their workloads use, as the team writes them."""


@pytest.mark.parametrize("name", ORDINARY_PODS)
def test_ordinary_workloads_keep_their_volumes(run: ProgramRun, name: str) -> None:
    assert create(run, synced(run, ORDINARY_PODS[name])) == []


# --- seccomp on a cluster this stack did not build -------------------------------------------------------------


def _synced_plain_pod() -> Json:
    """A team's pod with no securityContext at all, as the syncer writes it."""
    virtual = {
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": CUDA}]},
    }
    synced = to_host(virtual, vcluster="team-nlp")
    return pod(
        containers=synced["spec"]["containers"], labels=synced["metadata"]["labels"], volumes=synced["spec"]["volumes"]
    )


def test_on_an_existing_cluster_a_pod_that_names_no_profile_gets_runtime_default() -> None:
    run = stack("kubeconfig")
    stored, denials = admitted(run, _request(run, _synced_plain_pod(), "pods"))
    assert denials == []
    assert stored["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_pods_own_profile_is_kept() -> None:
    run = stack("kubeconfig")
    localhost = {"type": "Localhost", "localhostProfile": "profiles/train.json"}
    own = _synced_plain_pod()
    own["spec"]["securityContext"] = {"seccompProfile": localhost, "runAsUser": 1000}
    stored, denials = admitted(run, _request(run, own, "pods"))
    assert denials == []
    assert stored["spec"]["securityContext"] == {"seccompProfile": localhost, "runAsUser": 1000}


def test_validate_only_an_existing_cluster_refuses_a_pod_without_a_profile(validate_only_elsewhere: ProgramRun) -> None:
    run = validate_only_elsewhere
    plain = as_team("validate", _synced_plain_pod())
    assert any("seccomp" in d for d in admit(run, _request(run, plain, "pods")))
    profiled = copy.deepcopy(plain)
    profiled["spec"]["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
    assert admit(run, _request(run, profiled, "pods")) == []


def test_kubectl_debug_on_an_existing_cluster_runs_under_the_pods_profile() -> None:
    run = stack("kubeconfig")
    stored, _ = admitted(run, _request(run, _synced_plain_pod(), "pods"))
    debugged = copy.deepcopy(stored)
    debugged["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox", "targetContainerName": "main"}]
    request = _request(run, debugged, "pods", operation="UPDATE", old_object=stored, sub_resource="ephemeralcontainers")
    assert admit(run, request) == []


def test_a_cluster_this_stack_builds_leaves_the_default_to_the_kubelet() -> None:
    """--seccomp-default on every machine it bootstraps (components/gpu_host/kubelet_args.py)."""
    run = stack("brev")
    stored, denials = admitted(run, _request(run, _synced_plain_pod(), "pods"))
    assert denials == []
    # The API server defaults an empty securityContext; nothing sets a profile in it.
    assert "seccompProfile" not in stored["spec"].get("securityContext", {})
    for on, name in ((run, "host-kubelet"), (stack("ssh-2-workers"), "host-203.0.113.21-kubelet")):
        flags = script_input(on.one(REMOTE, name).inputs["create"], "KUBELET_FLAGS").split()
        assert "--seccomp-default=true" in flags, name
        assert f"--pod-max-pids={KubeletSettings().pod_max_pids}" in flags, name
