"""A team's CPU, memory, disk and pods follow from its GPUs: sized for ML work from the machines' share per GPU."""

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from config.quantities import quantity
from config.stack import StackConfig, parse_stack_config
from config.vcluster_tenant.capacity import SIZED_RESOURCES, gpu_pod_shortfalls, limit_range_of, sized_quota
from harness import ROOT, dev_settings
from harness.check import check
from tests.teams_page import page_manifests
from tests.workload_operators import pods_of

Json = dict[str, Any]
PAGE = page_manifests()


def _stack(**edits: Any) -> StackConfig:
    config = dev_settings()
    config.update(edits)
    return parse_stack_config(config)


def _pod_resources(pod: Json, limit_range: Json) -> dict[str, Decimal]:
    """What a pod counts against a ResourceQuota: each container's requests and limits with the LimitRange's
    defaults for what it leaves out (a stated limit is its request too), its init containers' largest beside the
    sum (kubernetes pkg/api/v1/resource PodRequests @v1.36.3)."""

    def container(spec: Json) -> dict[str, Decimal]:
        resources = spec.get("resources") or {}
        stated_limits, stated_requests = resources.get("limits") or {}, resources.get("requests") or {}
        counted = {}
        for name in SIZED_RESOURCES:
            limit = stated_limits.get(name, limit_range["default"][name])
            request = stated_requests.get(name, stated_limits.get(name, limit_range["defaultRequest"][name]))
            counted[f"requests.{name}"] = quantity(str(request))
            counted[f"limits.{name}"] = quantity(str(limit))
        return counted

    spec = pod["spec"]
    total = {key: Decimal(0) for key in container({})}
    for part in spec["containers"]:
        for key, amount in container(part).items():
            total[key] += amount
    for part in spec.get("initContainers") or []:
        for key, amount in container(part).items():
            total[key] = max(total[key], amount)
    return total


@pytest.mark.parametrize("key", PAGE)
def test_each_manifest_on_the_teams_page_states_its_needs_and_fits_a_reference_teams_quota(key: str) -> None:
    """As written, beside the team's own control plane, in the quota the reference stack gives each team."""
    reference = _stack()
    tenant = reference.tenants[0]
    quota = reference.vcluster.quota_for(tenant, reference.sized_gpus(tenant))
    limit_range = reference.vcluster.limit_range_for(tenant)
    defaults = {"default": limit_range.default, "defaultRequest": limit_range.default_request}
    used = dict(reference.vcluster.footprint_for(tenant))
    pods = pods_of(PAGE[key])
    for pod in pods:
        for part in pod["spec"]["containers"]:
            assert {"cpu", "memory"} <= set(part["resources"]["requests"]), f"{part['name']} states what it needs"
        for amount_key, amount in _pod_resources(pod, defaults).items():
            used[amount_key] += amount
    used["count/pods"] += len(pods)
    over = {k: (str(used[k]), quota[k]) for k in used if k in quota and used[k] > quantity(quota[k])}
    assert not over


@pytest.mark.parametrize("key", [k for k in PAGE if "nvidia.com/gpu" in str(PAGE[k])])
def test_each_whole_gpu_example_gives_pytorch_and_nccl_a_shared_memory_volume(key: str) -> None:
    for pod in pods_of(PAGE[key]):
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        for part in pod["spec"]["containers"]:
            if "nvidia.com/gpu" not in str(part.get("resources")):
                continue
            (mount,) = [m for m in part.get("volumeMounts") or [] if m["mountPath"] == "/dev/shm"]
            assert volumes[mount["name"]]["emptyDir"]["medium"] == "Memory"


@settings(max_examples=60, deadline=None)
@given(
    gpus=st.integers(min_value=1, max_value=64),
    cpu=st.integers(min_value=1, max_value=128),
    memory_gib=st.integers(min_value=1, max_value=2048),
    disk_gib=st.integers(min_value=10, max_value=8192),
)
def test_a_sized_quota_holds_one_pod_per_gpu_with_a_gpus_share_beside_the_control_plane(
    gpus: int, cpu: int, memory_gib: int, disk_gib: int
) -> None:
    share = {"cpu": str(cpu), "memory": f"{memory_gib}Gi", "ephemeral-storage": f"{disk_gib}Gi"}
    reference = _stack()
    footprint = reference.vcluster.footprint_for(reference.tenants[0])
    quota = sized_quota(gpus, share, footprint)
    assert not gpu_pod_shortfalls(quota, gpus, share, footprint)
    for name in SIZED_RESOURCES:
        assert quantity(quota[f"limits.{name}"]) >= quantity(quota[f"requests.{name}"])
    assert gpu_pod_shortfalls(quota, gpus + 1, share, footprint), "sized to the limit: one more GPU's pod is not"


@pytest.mark.parametrize(
    ("team", "parent", "root_quota", "expected"),
    [
        ({"quota": 0.33, "limit": 1}, {"quota": 1, "limit": -1}, 1, 1),
        ({"quota": 0.25, "limit": 0.5}, {"quota": 1, "limit": -1}, 1, 1),
        ({"quota": 1, "limit": 2.5}, {"quota": 4, "limit": -1}, 4, 3),
        ({"quota": 1, "limit": -1}, {"quota": 2, "limit": 3}, 4, 3),
        ({"quota": 1, "limit": -1}, {"quota": 4, "limit": -1}, 4, 4),
    ],
    ids=["limit", "fraction-limit", "rounded-up", "parents-limit", "roots-quota"],
)
def test_a_quota_is_sized_for_the_gpus_the_team_may_use_at_once(
    team: Json, parent: Json, root_quota: float, expected: int
) -> None:
    queues = [
        {"name": "org", "resources": {"gpu": {"quota": root_quota, "limit": -1}}},
        {"name": "dept", "parentQueue": "org", "resources": {"gpu": parent}},
        {"name": "team-a", "parentQueue": "dept", "resources": {"gpu": team}},
    ]
    stack = _stack(queues=queues, tenants=[{"name": "team-a", "queue": "team-a"}])
    assert stack.sized_gpus(stack.tenants[0]) == expected
    quota = stack.vcluster.quota_for(stack.tenants[0], expected)
    assert quantity(quota["requests.memory"]) >= expected * quantity("32Gi")


def test_a_container_that_states_nothing_gets_a_part_of_a_gpus_share_of_the_machines() -> None:
    stack = _stack(vcluster={"perGpu": {"cpu": "16", "memory": "128Gi", "ephemeralStorage": "400Gi"}})
    limit_range = stack.vcluster.limit_range_for(stack.tenants[0])
    assert limit_range.default == {"cpu": "8000m", "memory": "65536Mi", "ephemeral-storage": "204800Mi"}
    assert limit_range.default_request == {"cpu": "2000m", "memory": "16384Mi", "ephemeral-storage": "51200Mi"}
    assert limit_range_of({"cpu": "8", "memory": "32Gi", "ephemeral-storage": "100Gi"})["default"]["memory"] == (
        "16384Mi"
    )


def test_the_offline_check_warns_when_a_teams_quota_cannot_hold_a_pod_per_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's own case: a 4-GPU team held to 40Gi of memory limits."""
    document = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    config = document["config"]
    config["gpu-tenancy:queues"][0]["resources"]["gpu"]["quota"] = 4
    config["gpu-tenancy:queues"][1]["resources"]["gpu"]["limit"] = 4
    config["gpu-tenancy:tenants"][0]["quota"] = {"limits.memory": "40Gi"}
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(yaml.safe_dump(document))
    assert check(str(path)) == 0
    err = capsys.readouterr().err
    (warning,) = [line for line in err.splitlines() if "tenants[0].quota.limits.memory" in line]
    assert "= 40Gi cannot hold one pod per GPU of tenant team-nlp's limit (4)" in warning
    assert "raise it to 135338Mi" in warning
    assert "vcluster.quota" not in err, "the shared quota, sized by the platform, holds"
