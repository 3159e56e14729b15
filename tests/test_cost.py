"""`python -m fairshare cost` against a stand-in Prometheus: GPU-hours, cost, subtotals and clean failures."""

import json
import math
import socket
import time
from typing import Any

import pytest

from fairshare.cli import main
from fairshare.prometheus import MAX_POINTS, step_for, window_seconds
from tests.prometheus_double import Metric, Served, prometheus

DAY = 86400.0
PRICE = 2.5


def _nlp(t: float) -> float:
    """A whole GPU on even days, a quarter on odd ones."""
    return 1.0 if int(t // DAY) % 2 == 0 else 0.25


def _vision(t: float) -> float:
    return 0.5 + 0.5 * math.sin(2 * math.pi * t / (3 * DAY))


def _recommender(start: float) -> Any:
    """A queue created ten days into the window: no series before."""
    return lambda t: None if t < start + 10 * DAY else 0.33


def _served(start: float) -> Served:
    allocated = {"team-nlp": _nlp, "team-vision": _vision, "team-recommender": _recommender(start), "ml-org": _nlp}
    return Served(
        {
            "kai_queue_allocated_gpus": Metric("queue_metadata_name", allocated),
            "DCGM_FI_DEV_GPU_UTIL": Metric("label_gpu_tenancy_queue", {"team-nlp": lambda t: 80.0}),
        }
    )


def _integral(curve: Any, start: float, end: float) -> float:
    """GPU-hours of a curve, by the midpoint rule at one-minute resolution."""
    total, t = 0.0, start
    while t < end:
        value = curve(t + 30)
        total += (value or 0.0) * 60
        t += 60
    return total / 3600


def _run(url: str, *extra: str) -> int:
    return main(["cost", "--prometheus", url, "--window", "30d", "--price-per-gpu-hour", str(PRICE), *extra])


@pytest.fixture
def report(capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], Served]:
    served = _served(time.time() - 30 * DAY)
    with prometheus(served) as url:
        assert _run(url, "--json") == 0
    return json.loads(capsys.readouterr().out), served


def test_gpu_hours_are_the_integral_of_what_prometheus_served(report: tuple[dict[str, Any], Served]) -> None:
    data, served = report
    query = served.queries[0]
    start, end = float(query["start"]), float(query["end"])
    curves = {"team-nlp": _nlp, "team-vision": _vision, "team-recommender": _recommender(start)}
    for team, curve in curves.items():
        expected = _integral(curve, start, end)
        assert data["queues"][team]["gpuHours"] == pytest.approx(expected, rel=0.02), team
        assert data["queues"][team]["cost"] == pytest.approx(data["queues"][team]["gpuHours"] * PRICE)


def test_a_parent_is_its_leaves_subtotal_never_its_own_series(report: tuple[dict[str, Any], Served]) -> None:
    data, _ = report
    leaves = sum(data["queues"][team]["gpuHours"] for team in ("team-nlp", "team-vision", "team-recommender"))
    assert data["queues"]["ml-org"]["gpuHours"] == pytest.approx(leaves)
    assert data["window"] == "30d"
    assert data["pricePerGpuHour"] == PRICE


def test_the_query_stays_within_prometheus_point_limit(report: tuple[dict[str, Any], Served]) -> None:
    _, served = report
    for query in served.queries:
        assert (float(query["end"]) - float(query["start"])) / float(query["step"]) <= MAX_POINTS
        assert '=~"team-nlp|team-vision|team-recommender"' in query["query"], "the stack's leaf queues only"


@pytest.mark.parametrize("window", ["1h", "30d", "52w", "5000d"])
def test_the_step_keeps_every_window_under_the_limit(window: str) -> None:
    seconds = window_seconds(window)
    assert seconds / step_for(seconds) <= MAX_POINTS


def test_the_table_shows_leaves_under_their_parent_with_utilisation(capsys: pytest.CaptureFixture[str]) -> None:
    with prometheus(_served(time.time() - 30 * DAY)) as url:
        assert _run(url) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[2:] if line and not line.startswith("Last")}
    assert list(rows) == ["ml-org", "team-nlp", "team-vision", "team-recommender"]
    assert rows["team-nlp"].startswith("  team-nlp")
    assert rows["team-nlp"].rstrip().endswith("80%")
    assert rows["team-vision"].rstrip().endswith("%"), "its share of the total, and no utilisation"


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize(
    ("case", "hint"),
    [
        ("unreachable", "cannot reach Prometheus"),
        ("missing-series", "no kai_queue_allocated_gpus series for team-vision"),
        ("bad-window", "--window '30x'"),
        ("not-a-url", "base URL"),
    ],
)
def test_a_failure_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], case: str, hint: str) -> None:
    served = Served({"kai_queue_allocated_gpus": Metric("queue_metadata_name", {"team-nlp": _nlp})})
    args = ["cost", "--window", "30d", "--price-per-gpu-hour", "1"]
    if case == "unreachable":
        code = main([*args, "--prometheus", _closed_port()])
    elif case == "not-a-url":
        code = main([*args, "--prometheus", "localhost:9090"])
    else:
        with prometheus(served) as url:
            window = ["--window", "30x"] if case == "bad-window" else []
            code = main([*args, "--prometheus", url, *window])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert hint in captured.err
