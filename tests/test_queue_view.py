"""The queue view a team reads inside its vCluster: what it says for each state KAI can leave a queue in.

Pure: Queues, PodGroups and the scheduler's metrics are given as KAI writes them (the field names
and forms of scheduling.run.ai/v2 Queue status, v2alpha2 PodGroup status, and the gauge of
pkg/scheduler/metrics/metrics.go @v0.16.8). The controller writing it on the lab's API server is in
tests/test_gang_controller.py; the view reaching a tenant through the real syncer, in tests/test_lab_tenants.py.
"""

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.gang_controller.gangcontrol.gangs import Tenant
from components.gang_controller.gangcontrol.queue_view import (
    MAX_WAITING,
    Waiting,
    configmap_data,
    fair_shares,
    quantity,
    summary,
    view,
    waiting_of,
)
from harness import ROOT

Json = dict[str, Any]
NLP = Tenant("team-nlp", "team-nlp")

METRICS = """\
# HELP kai_queue_fair_share_gpu GPU Fair share of queue, as a gauge. Values in GPU devices
# TYPE kai_queue_fair_share_gpu gauge
kai_queue_fair_share_gpu{queue_display_name="",queue_metadata_name="ml-org",queue_name="ml-org"} 3
kai_queue_fair_share_gpu{queue_display_name="NLP",queue_metadata_name="team-nlp",queue_name="NLP"} 1.5
kai_queue_fair_share_gpu_total{queue_metadata_name="team-vision"} 9
kai_queue_fair_share_cpu_cores{queue_display_name="",queue_metadata_name="team-nlp",queue_name="team-nlp"} 12
"""
"""The scheduler's /metrics as Prometheus's text format writes a GaugeVec: labels sorted, the display name as
queue_name when one is set (pkg/scheduler/plugins/proportion/resource_division/resource_division.go @v0.16.8)."""


def _queue(name: str, parent: str | None, quota: float, limit: float, weight: float, **status: Json) -> Json:
    spec: Json = {"resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": weight}}}
    if parent:
        spec["parentQueue"] = parent
    return {"metadata": {"name": name}, "spec": spec, "status": status}


QUEUES = {
    "ml-org": _queue("ml-org", None, 3, -1, 1, allocated={"nvidia.com/gpu": "2250m"}),
    "team-nlp": _queue(
        "team-nlp",
        "ml-org",
        1,
        2,
        1,
        allocated={"nvidia.com/gpu": "1250m", "cpu": "8"},
        allocatedNonPreemptible={"nvidia.com/gpu": "250m"},
        requested={"nvidia.com/gpu": "5250m"},
    ),
}


def _group(name: str, *, requested: Json, allocated: Json, conditions: list[Json], **extra: Any) -> Json:
    return {
        "metadata": {"name": name, "namespace": "vcluster-team-nlp", **extra},
        "spec": {"minMember": 4, "queue": "team-nlp"},
        "status": {
            "resourcesStatus": {"requested": requested, "allocated": allocated},
            "schedulingConditions": conditions,
        },
    }


OVER_LIMIT = {
    "type": "UnschedulableOnNodePool",
    "nodePool": "default",
    "reason": "Unschedulable",
    "message": "old summary",
    "status": "True",
    "transitionID": "3",
    "reasons": [
        {"reason": "OverLimit", "message": "queue team-nlp would exceed its limit of 2 GPUs", "details": {}},
    ],
}


@pytest.mark.parametrize(
    ("text", "number"),
    [("1", 1.0), ("250m", 0.25), ("1500m", 1.5), ("0", 0.0), ("2Gi", 2.0**31), ("100k", 1e5), (3, 3.0), ("1e3", 1e3)],
)
def test_quantities_read_as_the_api_server_writes_them(text: Any, number: float) -> None:
    assert quantity(text) == pytest.approx(number)


def test_fair_shares_are_read_by_queue_name_from_the_gpu_gauge_alone() -> None:
    assert fair_shares(METRICS) == {"ml-org": 3.0, "team-nlp": 1.5}


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True), st.floats(0, 1e4, allow_nan=False))
def test_any_queue_name_and_share_survive_the_text_format(name: str, share: float) -> None:
    line = (
        f'kai_queue_fair_share_gpu{{queue_display_name="a \\"quoted\\" name",queue_metadata_name="{name}"}} {share!r}'
    )
    assert fair_shares(line) == {name: share}


WAITING_CASES: dict[str, tuple[Json, str | None]] = {
    "gang-over-its-limit": (
        _group("team-nlp.research.bert", requested={"nvidia.com/gpu": "4"}, allocated={}, conditions=[OVER_LIMIT]),
        "gang research/bert (4 pods, 4 GPUs): queue team-nlp would exceed its limit of 2 GPUs",
    ),
    # KAI leaves its reasons on the group once it runs: allocated decides.
    "running-with-old-reasons": (
        _group(
            "team-nlp.research.bert",
            requested={"nvidia.com/gpu": "4"},
            allocated={"nvidia.com/gpu": "4"},
            conditions=[OVER_LIMIT],
        ),
        None,
    ),
    "finished": (_group("team-nlp.research.bert", requested={}, allocated={}, conditions=[OVER_LIMIT]), None),
    "a-pod-not-scheduled-yet": (
        _group(
            "pg-nb-x-lab-x-team-nlp-7f3c",
            requested={"nvidia.com/gpu": "250m", "cpu": "1"},
            allocated={"cpu": "0"},
            conditions=[],
            annotations={"vcluster.loft.sh/object-name": "nb", "vcluster.loft.sh/object-namespace": "lab"},
        ),
        "pod lab/nb (4 pods, 0.25 GPUs): not scheduled yet",
    ),
    "an-older-condition-message": (
        _group(
            "someone-elses-name",
            requested={"cpu": "2"},
            allocated={},
            conditions=[{"type": "UnschedulableOnNodePool", "message": "0/1 nodes are available"}],
        ),
        "group someone-elses-name (4 pods, 0 GPUs): 0/1 nodes are available",
    ),
}


@pytest.mark.parametrize("name", WAITING_CASES)
def test_a_group_waits_when_kai_has_allocated_it_nothing_and_says_why(name: str) -> None:
    group, line = WAITING_CASES[name]
    found = waiting_of(group, NLP)
    shown = None if found is None else summary(view(NLP, QUEUES, {}, "", [found])).splitlines()[-1].strip()
    assert shown == line


def test_the_view_shows_the_queue_and_its_parents_with_kais_numbers() -> None:
    text = summary(view(NLP, QUEUES, fair_shares(METRICS), "", []))
    assert text.splitlines() == [
        "Your queue team-nlp, in GPUs:",
        "  guaranteed (quota)   1",
        "  cap (limit)          2",
        "  over-quota weight    1",
        "  fair share now       1.5",
        "  in use               1.25 (non-preemptible 0.25)",
        "  asked for            5.25 (running and pending)",
        "Its parent ml-org, in GPUs:",
        "  guaranteed (quota)   3",
        "  cap (limit)          none",
        "  over-quota weight    1",
        "  fair share now       3",
        "  in use               2.25 (non-preemptible 0)",
        "  asked for            0 (running and pending)",
        "Waiting: nothing",
    ]


def test_an_unknown_fair_share_says_why_and_a_missing_queue_says_so() -> None:
    text = summary(view(Tenant("team-new", "team-new"), {}, None, "KAI's scheduler did not answer: refused", []))
    assert text == "Your queue team-new: KAI has no such queue yet\nWaiting: nothing\n"
    text = summary(view(NLP, QUEUES, None, "KAI's scheduler did not answer: refused", []))
    assert "  fair share now       unknown (KAI's scheduler did not answer: refused)" in text.splitlines()


def test_a_flood_of_waiting_groups_is_counted_not_listed() -> None:
    many = [Waiting(f"pod default/p{i:04d}", 1, 1.0, "not scheduled yet") for i in range(MAX_WAITING * 3)]
    data = view(NLP, QUEUES, {}, "", many)
    text = summary(data)
    assert f"Waiting: {MAX_WAITING * 3}" in text
    assert f"  and {MAX_WAITING * 2} more" in text
    assert len(configmap_data(data, "2026-12-03T00:00:00Z")["queue.json"]) < 64 * 1024


def test_the_configmap_holds_the_text_the_data_and_when_it_was_checked() -> None:
    data = view(NLP, QUEUES, fair_shares(METRICS), "", [])
    content = configmap_data(data, "2026-12-03T10:00:00Z")
    assert set(content) == {"summary", "queue.json", "checked"}
    assert json.loads(content["queue.json"]) == data
    assert content["checked"] == "2026-12-03T10:00:00Z"


def test_the_teams_page_shows_the_view_as_the_controller_writes_it() -> None:
    """docs/teams.md's example is this module's queues with the gang over its limit waiting, line for line."""
    (example,) = re.findall(r"```text\n(.*?)```", (ROOT / "docs" / "teams.md").read_text(), flags=re.S)
    gang = waiting_of(WAITING_CASES["gang-over-its-limit"][0], NLP)
    assert gang is not None
    written = summary(view(NLP, QUEUES, fair_shares(METRICS), "", [gang])).splitlines()
    shown = example.splitlines()
    cut = shown.index("  ...")
    assert shown[:cut] == written[:cut]
    assert shown[cut + 1 :] == written[-len(shown[cut + 1 :]) :]
