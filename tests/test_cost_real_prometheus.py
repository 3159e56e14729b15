"""The cost report and every dashboard expression, against a real Prometheus holding a month of history.

The history is shaped as KAI v0.16.8, dcgm-exporter and kube-state-metrics export it (config/upstream.py):
a team on GPU fractions, a queue that starts late, a scrape gap of six hours, a parent whose series is
the sum of its children's, and a kube-state-metrics rollout, when two `kube_namespace_labels` series
exist for one namespace for five minutes (two replicas give that all the time). Expected figures come
from the same curves, summed minute by minute, independently of the report's own integration.
"""

import contextlib
import io
import json
import math
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from components.observability.dashboards import fleet_dashboard, team_dashboard
from config.upstream import KSM_NAMESPACE_LABELS
from fairshare.cli import main
from fairshare.prometheus import step_for
from fairshare.queries import KSM_QUEUE_LABEL
from tests.real_prometheus import BASIC_AUTH_PASSWORD, BASIC_AUTH_USER, STEP, Series, real_prometheus

DAY = 86400.0
HOUR = 3600.0
PRICE = 2.5
LEAVES = ("team-nlp", "team-vision", "team-recommender")
QUOTA = 0.33
END = math.floor(__import__("time").time() / STEP) * STEP
START = END - 31 * DAY
ROLLOUT = (START + 15 * DAY, START + 15 * DAY + 5 * 60)
GAP = (START + 20 * DAY, START + 20 * DAY + 6 * HOUR)
VISION_STARTS = START + 5 * DAY


def nlp(t: float) -> float:
    """GPU fractions: half a GPU, a whole one from 08:00 to 20:00 (UTC) on the first five days of each week."""
    in_day = (t % DAY) / HOUR
    weekday = int((t - START) // DAY) % 7 < 5
    return 1.0 if weekday and 8 <= in_day < 20 else 0.5


def vision(t: float) -> float | None:
    """A queue created five days into the month: no series before; a quarter GPU, three quarters every third day."""
    if t < VISION_STARTS:
        return None
    return 0.75 if int((t - START) // DAY) % 3 == 0 else 0.25


def recommender(t: float) -> float | None:
    """A third of a GPU, with a six-hour gap where nothing was scraped."""
    return None if GAP[0] <= t < GAP[1] else 0.33


CURVES = {"team-nlp": nlp, "team-vision": vision, "team-recommender": recommender}


def parent(t: float) -> float:
    return sum(curve(t) or 0.0 for curve in CURVES.values())


def _kai(name: str, queue: str, curve: Any) -> Series:
    labels = {"queue_name": queue, "queue_metadata_name": queue, "queue_display_name": queue}
    return Series(name, {**labels, "job": "queue-controller", "instance": "10.1.0.7:8080"}, curve)


def _ksm(team: str, pod: str, during: tuple[float, float] | None = None) -> Series:
    labels = {
        "namespace": f"vcluster-{team}",
        KSM_QUEUE_LABEL: team,
        "label_gpu_tenancy_tenant": team,
        "pod": pod,
        "instance": f"{pod}:8080",
        "job": "kube-state-metrics",
    }
    return Series(KSM_NAMESPACE_LABELS, labels, lambda t: 1.0 if during is None or during[0] <= t < during[1] else None)


def _dcgm(name: str, value: float) -> Series:
    labels = {
        "gpu": "0",
        "UUID": "GPU-5e1f0c2a",
        "modelName": "NVIDIA L40S",
        "Hostname": "gpu-node-1",
        "namespace": "vcluster-team-nlp",
        "pod": "train-x-default-x-team-nlp",
        "container": "main",
    }
    return Series(name, labels, lambda t: value)


FAIR_SHARE = {"team-nlp": 0.34, "team-vision": 0.33, "team-recommender": 0.33}


def _constant(value: float) -> Any:
    return lambda t: value


def month() -> list[Series]:
    series = [_kai("kai_queue_allocated_gpus", queue, curve) for queue, curve in CURVES.items()]
    series.append(_kai("kai_queue_allocated_gpus", "ml-org", parent))
    series += [_kai("kai_queue_deserved_gpus", queue, lambda t: QUOTA) for queue in LEAVES]
    series += [_kai("kai_queue_fair_share_gpu", queue, _constant(FAIR_SHARE[queue])) for queue in LEAVES]
    series += [_kai("kai_queue_info", queue, lambda t: 1.0) for queue in (*LEAVES, "ml-org")]
    series += [_ksm(team, "kube-state-metrics-5d8f-a") for team in LEAVES]
    series.append(_ksm("team-nlp", "kube-state-metrics-7c2e-b", ROLLOUT))
    series += [_dcgm("DCGM_FI_DEV_GPU_UTIL", 80.0), _dcgm("DCGM_FI_DEV_FB_USED", 20000.0)]
    return series


def exact_hours(curve: Any, start: float, end: float) -> float:
    """GPU-hours minute by minute: each scraped value holds until the next scrape."""
    total, t = 0.0, math.ceil(start / STEP) * STEP
    while t < end:
        total += (curve(t) or 0.0) * STEP
        t += STEP
    return total / HOUR


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with real_prometheus(tmp_path_factory.mktemp("prometheus"), month(), START, END) as served:
        yield served


def _cost(url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, env or {}),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main(["cost", "--prometheus", url, "--price-per-gpu-hour", str(PRICE), *args])
    return code, out.getvalue(), err.getvalue()


# --- GPU-hours ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", ["1d", "7d", "30d"])
def test_gpu_hours_agree_with_the_exact_integral_within_one_percent(url: str, window: str) -> None:
    seconds = {"1d": DAY, "7d": 7 * DAY, "30d": 30 * DAY}[window]
    code, out, err = _cost(url, "--window", window, "--json")
    assert code == 0, err
    report = json.loads(out)["queues"]
    for queue, curve in CURVES.items():
        exact = exact_hours(curve, END - seconds, END)
        assert report[queue]["gpuHours"] == pytest.approx(exact, rel=0.01), queue
        assert report[queue]["cost"] == pytest.approx(report[queue]["gpuHours"] * PRICE)
    assert report["ml-org"]["gpuHours"] == pytest.approx(sum(report[q]["gpuHours"] for q in LEAVES))
    assert report["ml-org"]["gpuHours"] == pytest.approx(exact_hours(parent, END - seconds, END), rel=0.01)


def test_a_kube_state_metrics_rollout_leaves_the_utilisation_in_the_report(url: str) -> None:
    """Two kube_namespace_labels series for one namespace: the join reduces that side first."""
    code, out, err = _cost(url, "--window", "30d")
    assert code == 0, err
    nlp_row = next(line for line in out.splitlines() if line.strip().startswith("team-nlp"))
    assert nlp_row.rstrip().endswith("80%")
    assert "Note:" not in out


def test_the_join_without_that_reduction_is_what_real_prometheus_refuses(url: str) -> None:
    """The fault the reduction fixes, shown on the server: the join as it was, over the rollout's minutes."""
    old = (
        f"avg by ({KSM_QUEUE_LABEL}) (DCGM_FI_DEV_GPU_UTIL * on (namespace) group_left ({KSM_QUEUE_LABEL})"
        f' {KSM_NAMESPACE_LABELS}{{{KSM_QUEUE_LABEL}=~"team-nlp"}})'
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        _query(url, "query_range", query=old, start=ROLLOUT[0], end=ROLLOUT[1], step=60)
    assert "many-to-many" in refused.value.read().decode()


def test_gpu_hours_are_reported_even_when_utilisation_cannot_be_read(url: str) -> None:
    with mock.patch("fairshare.queries.utilisation", return_value="DCGM_FI_DEV_GPU_UTIL * on (namespace)"):
        code, out, err = _cost(url, "--window", "1d")
    assert code == 0, err
    assert "team-nlp" in out
    assert "Note: mean utilisation could not be read" in out


def test_a_window_longer_than_the_data_says_what_the_data_covers(url: str) -> None:
    code, out, err = _cost(url, "--window", "60d")
    assert code == 0, err
    assert "60d asked, but the data covers only the last 31.0 days" in out
    code, out, _ = _cost(url, "--window", "60d", "--json")
    # The range query samples once per step (472 s for 60 days): the first sample is within a step of the data's.
    assert json.loads(out)["coveredSeconds"] == pytest.approx(31 * DAY, abs=step_for(int(60 * DAY)))


# --- the dashboards ----------------------------------------------------------------------------------------------


def _query(url: str, kind: str, **parameters: Any) -> Any:
    query = urllib.parse.urlencode(parameters)
    with urllib.request.urlopen(f"{url}/api/v1/{kind}?{query}", timeout=30) as response:
        return json.load(response)["data"]["result"]


def _instant(url: str, expr: str) -> dict[str, float]:
    """Each result's value, by its queue (or node) label, evaluated at the end of the history."""
    expr = expr.replace("$__range", "7d").replace('"$queue"', '"team-nlp"').replace("$queue", "team-nlp")
    found = {}
    for entry in _query(url, "query", query=expr, time=END):
        key = next(iter(entry["metric"].values()), "") if entry["metric"] else ""
        found[key] = float(entry["value"][1])
    return found


def _panels() -> Iterator[tuple[str, str, str]]:
    for dashboard in (fleet_dashboard(LEAVES), team_dashboard({q: 1.0 for q in LEAVES})):
        for panel in dashboard["panels"]:
            for target in panel["targets"]:
                yield dashboard["uid"], panel["title"], target["expr"]


def _over_quota_share() -> float:
    minutes = [nlp(t) > QUOTA for t in range(int(END - 7 * DAY), int(END), STEP)]
    return 100 * sum(minutes) / len(minutes)


EXPECTED: dict[str, dict[str, float]] = {
    "GPUs allocated per team": {q: CURVES[q](END) or 0.0 for q in LEAVES},
    "GPU utilisation per node": {"gpu-node-1": 80.0},
    "GPU memory used per node": {"gpu-node-1": 20000.0},
    "Time over quota": {"team-nlp": _over_quota_share()},
    "GPU utilisation of the team's pods": {"team-nlp": 80.0},
    "GPU memory used by the team's pods": {"team-nlp": 20000.0},
}


PANELS = list(_panels())


@pytest.mark.parametrize(("uid", "title", "expr"), PANELS, ids=[f"{u}:{t}:{i}" for i, (u, t, _) in enumerate(PANELS)])
def test_every_dashboard_expression_answers_what_the_history_holds(url: str, uid: str, title: str, expr: str) -> None:
    found = _instant(url, expr)
    assert found, f"{title}: no result"
    if title in EXPECTED:
        for key, value in EXPECTED[title].items():
            assert found[key] == pytest.approx(value, rel=0.01, abs=0.01), (title, key)
    else:
        # Quota, fair share, allocation and limit lines: each a known constant or the team's allocation now.
        allowed = {QUOTA, 0.34, 0.33, 1.0, nlp(END), *(c(END) or 0.0 for c in CURVES.values())}
        assert all(any(math.isclose(v, a, abs_tol=1e-6) for a in allowed) for v in found.values()), (title, found)


@pytest.mark.parametrize("title", ["GPU utilisation of the team's pods", "GPU memory used by the team's pods"])
def test_the_team_panels_answer_during_a_kube_state_metrics_rollout(url: str, title: str) -> None:
    (expr,) = [e for _, t, e in PANELS if t == title]
    expr = expr.replace('"$queue"', '"team-nlp"').replace("$queue", "team-nlp")
    result = _query(url, "query", query=expr, time=ROLLOUT[0] + 120)
    assert len(result) == 1, "one series per queue, as outside the rollout"


# --- failures, each one line -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same history's last day, behind basic auth."""
    with real_prometheus(tmp_path_factory.mktemp("guarded"), month(), END - DAY, END, auth=True) as served:
        yield served


@pytest.mark.parametrize(
    ("target", "env", "message"),
    [
        ("{url}/graph", {}, "give Prometheus' base URL"),
        ("{guarded}", {}, "credentials are needed"),
        ("{guarded}", {"PROMETHEUS_USERNAME": BASIC_AUTH_USER, "PROMETHEUS_PASSWORD": "wrong"}, "were refused"),
        ("http://127.0.0.1:9", {}, "cannot reach Prometheus"),
    ],
    ids=["a-wrong-path", "auth-needed", "auth-refused", "nothing-listening"],
)
def test_each_failure_is_one_line_that_says_what_to_do(
    url: str, guarded: str, target: str, env: dict[str, str], message: str
) -> None:
    code, out, err = _cost(target.format(url=url, guarded=guarded), "--window", "1d", env=env)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert message in err
    assert "wrong" not in err, "no credential is repeated"


def test_credentials_come_from_the_environment_or_a_file(guarded: str, tmp_path: Path) -> None:
    env = {"PROMETHEUS_USERNAME": BASIC_AUTH_USER, "PROMETHEUS_PASSWORD": BASIC_AUTH_PASSWORD}
    code, _, err = _cost(guarded, "--window", "1d", env=env)
    assert code == 0, err
    secret = tmp_path / "password"
    secret.write_text(BASIC_AUTH_PASSWORD + "\n")
    env = {"PROMETHEUS_USERNAME": BASIC_AUTH_USER, "PROMETHEUS_PASSWORD_FILE": str(secret)}
    code, _, err = _cost(guarded, "--window", "1d", env=env)
    assert code == 0, err


def test_a_url_with_a_password_in_it_is_refused_without_repeating_it(guarded: str) -> None:
    with_password = guarded.replace("http://", f"http://{BASIC_AUTH_USER}:{urllib.parse.quote(BASIC_AUTH_PASSWORD)}@")
    code, _, err = _cost(with_password, "--window", "1d")
    assert code == 2
    assert "PROMETHEUS_USERNAME" in err
    assert BASIC_AUTH_PASSWORD not in err
    assert urllib.parse.quote(BASIC_AUTH_PASSWORD) not in err
