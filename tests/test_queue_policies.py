"""The queue-pinning admission policies, evaluated offline with cel-python against sample pods.

The API server evaluates the same CEL: match conditions first, then variables,
then each validation. What cel-python cannot run (the mutation's typed
ApplyConfiguration) is at least compiled, and is covered by the README's
real-host checks.
"""

from typing import Any

import celpy
import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

from components.queue_policies import mutating_policy_spec, validating_policy_spec

TENANT, QUEUE = "team-nlp", "team-nlp"
SYNCED = {"vcluster.loft.sh/managed-by": "team-nlp", "vcluster.loft.sh/namespace": "default"}


def _eval(expression: str, activation: dict[str, Any]) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(expression)).evaluate(activation)


def admission(spec: dict[str, Any], pod: dict[str, Any]) -> list[str] | None:
    """None when the policy does not apply to the pod, else the messages of the validations it fails."""
    activation: dict[str, Any] = {"object": json_to_cel(pod)}
    if not all(_eval(c["expression"], activation) for c in spec["matchConditions"]):
        return None
    variables = celtypes.MapType()
    for variable in spec.get("variables", []):
        variables[celtypes.StringType(variable["name"])] = _eval(
            variable["expression"], {**activation, "variables": variables}
        )
    activation["variables"] = variables
    return [v["message"] for v in spec["validations"] if not _eval(v["expression"], activation)]


def pod(
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    scheduler: str | None = None,
    limits: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    init_limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p-x-default-x-team-nlp", "namespace": "vcluster-team-nlp"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox", "resources": resources}]}
    if init_limits:
        spec["initContainers"] = [{"name": "init", "image": "busybox", "resources": {"limits": init_limits}}]
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


KAI = "kai-scheduler"
OWN = {**SYNCED, "kai.scheduler/queue": QUEUE}
OTHER = {**SYNCED, "kai.scheduler/queue": "team-vision"}

CASES = [
    ("cpu-pod-without-kai-fields", pod(labels=SYNCED), []),
    ("gpu-pod-through-kai-in-own-queue", pod(labels=OWN, limits={"nvidia.com/gpu": "1"}, scheduler=KAI), []),
    ("fraction-through-kai", pod(labels=OWN, annotations={"gpu-fraction": "0.33"}, scheduler=KAI), []),
    ("names-another-queue", pod(labels=OTHER), ["may only use KAI queue team-nlp"]),
    (
        "gpu-in-another-queue",
        pod(labels=OTHER, limits={"nvidia.com/gpu": "1"}, scheduler=KAI),
        ["may only use KAI queue team-nlp", "get GPUs only through KAI"],
    ),
    ("gpu-past-kai", pod(labels=OWN, limits={"nvidia.com/gpu": "1"}), ["get GPUs only through KAI"]),
    ("gpu-request-past-kai", pod(labels=SYNCED, requests={"nvidia.com/gpu": "1"}), ["get GPUs only through KAI"]),
    ("mig-slice-past-kai", pod(labels=SYNCED, limits={"nvidia.com/mig-1g.10gb": "1"}), ["get GPUs only through KAI"]),
    ("gpu-in-init-container", pod(labels=SYNCED, init_limits={"nvidia.com/gpu": "1"}), ["get GPUs only through KAI"]),
    ("fraction-past-kai", pod(labels=SYNCED, annotations={"gpu-fraction": "0.5"}), ["get GPUs only through KAI"]),
    ("gpu-memory-past-kai", pod(labels=SYNCED, annotations={"gpu-memory": "8000"}), ["get GPUs only through KAI"]),
    (
        "gpu-through-kai-without-queue",
        pod(labels=SYNCED, limits={"nvidia.com/gpu": "1"}, scheduler=KAI),
        ["through KAI"],
    ),
]


@pytest.mark.parametrize(("sample", "denials"), [pytest.param(p, d, id=i) for i, p, d in CASES])
def test_tenant_pods_stay_in_their_queue_and_get_gpus_only_through_kai(
    sample: dict[str, Any], denials: list[str]
) -> None:
    messages = admission(validating_policy_spec(TENANT, QUEUE), sample)
    assert messages is not None, "a synced pod must be checked"
    assert len(messages) == len(denials), messages
    for message, expected in zip(messages, denials, strict=True):
        assert expected in message


@pytest.mark.parametrize(
    "control_plane",
    [
        pod(labels={"app": "vcluster", "release": "team-nlp", "kai.scheduler/queue": "team-vision"}),
        pod(),
    ],
    ids=["labelled", "unlabelled"],
)
def test_the_vcluster_control_plane_is_left_alone(control_plane: dict[str, Any]) -> None:
    assert admission(validating_policy_spec(TENANT, QUEUE), control_plane) is None
    (condition,) = mutating_policy_spec(QUEUE)["matchConditions"]
    assert not _eval(condition["expression"], {"object": json_to_cel(control_plane)})


def test_the_mutation_pins_new_synced_pods_to_the_queue_and_kai() -> None:
    spec = mutating_policy_spec(QUEUE)
    assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    (condition,) = spec["matchConditions"]
    assert _eval(condition["expression"], {"object": json_to_cel(pod(labels=SYNCED))})
    (mutation,) = spec["mutations"]
    assert mutation["patchType"] == "ApplyConfiguration"
    expression = mutation["applyConfiguration"]["expression"]
    celpy.Environment().compile(expression)
    assert "'kai.scheduler/queue': 'team-nlp'" in expression
    assert "schedulerName: 'kai-scheduler'" in expression
