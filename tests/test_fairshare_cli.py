"""`python -m fairshare` as a user drives it: one JSON layout, refused combinations, and the shipped examples."""

import json
from pathlib import Path
from typing import Any

import pytest

from fairshare.cli import main
from harness import ROOT
from tests.prometheus_double import Metric, Served, prometheus

SCENARIO = str(ROOT / "examples" / "scenario.json")
DEMAND = str(ROOT / "examples" / "demand.json")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _bad_demand(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "demand.json"
    path.write_text(json.dumps(document))
    return str(path)


REFUSED: list[tuple[str, list[str], str]] = [
    ("json-with-markdown", ["--stack", "dev", "--json", "--format", "markdown"], "--json and --format markdown"),
    ("json-with-text", ["--stack", "dev", "--json", "--format", "text"], "--json and --format text"),
    *[
        (f"capacity-{value}", ["--stack", "dev", f"--capacity={value}"], f"--capacity {value}: give the pool's size")
        for value in ("0", "-1", "nan", "inf", "-inf")
    ],
    ("scenario-with-demand", ["--scenario", SCENARIO, "--demand", "team-nlp=1"], "go with --stack"),
    ("scenario-with-capacity", ["--scenario", SCENARIO, "--capacity", "4"], "go with --stack"),
    ("demand-without-amount", ["--stack", "dev", "--demand", "team-nlp"], "use LEAF=AMOUNT"),
    ("demand-on-a-parent", ["--stack", "dev", "--demand", "ml-org=1"], "not a leaf queue"),
    ("demand-not-a-number", ["--stack", "dev", "--demand", "team-nlp=lots"], "'lots' is not a number of GPUs"),
    ("demand-infinite", ["--stack", "dev", "--demand", "team-nlp=inf"], "finite number >= 0"),
    ("negative-price", ["--stack", "dev", "--price-per-gpu-hour", "-1"], "finite price >= 0"),
]


@pytest.mark.parametrize(("args", "complaint"), [pytest.param(a, c, id=i) for i, a, c in REFUSED])
def test_a_combination_or_value_that_cannot_work_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], complaint: str
) -> None:
    code, out, err = _run(capsys, *args)
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1, err
    assert complaint in err
    assert "unlimited" not in err, "an explicit capacity is never blamed on the queues"


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"team-nlp": "lots"}, "'team-nlp': 'lots' is not a number of GPUs"),
        ({"team-nlp": True}, "True is not a number of GPUs"),
        ({"nobody": 1}, "'nobody': not a leaf queue"),
        (["team-nlp", 1], "give an object of leaf queue -> GPUs"),
    ],
    ids=["text", "bool", "unknown-queue", "list"],
)
def test_a_bad_demand_file_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: Any, complaint: str
) -> None:
    code, out, err = _run(capsys, "--stack", "dev", "--demand", _bad_demand(tmp_path, document))
    assert (code, out) == (2, "")
    assert complaint in err


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (b'{"capacity": 1,', "is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 16"),
        (b"", "is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
        (b'{"capacity": 1, "queues": [NaN]}', "queues[0] = nan: must be a mapping of keys to values"),
        (b'{"capacity": "1", "queues": [{"name": "a"}]}', "capacity = '1': must be a number (more than 0), unquoted"),
    ],
    ids=["truncated", "empty", "nan", "quoted-number"],
)
def test_a_scenario_that_is_not_sound_json_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: bytes, complaint: str
) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_bytes(text)
    code, out, err = _run(capsys, "--scenario", str(scenario))
    assert (code, out) == (2, "")
    assert complaint in err
    assert len(err.splitlines()) == 1


def test_a_stack_and_a_scenario_print_the_same_layout_with_price_and_cost(capsys: pytest.CaptureFixture[str]) -> None:
    price = ["--price-per-gpu-hour", "2.5", "--json"]
    _, stack_out, _ = _run(capsys, "--stack", "dev", "--demand", DEMAND, *price)
    _, scenario_out, _ = _run(capsys, "--scenario", SCENARIO, *price)
    stack, scenario = json.loads(stack_out), json.loads(scenario_out)
    assert stack.keys() == scenario.keys()
    assert {"pricePerGpuHour", "hoursPerMonth", "whatIfUtilisation"} <= stack.keys()
    for plan in (stack, scenario):
        for queue in plan["queues"].values():
            if "rigid" in queue:
                hours = queue["guaranteedGpuHoursPerMonth"]
                assert hours == round(queue["rigid"] * plan["hoursPerMonth"], 1)
                assert queue["guaranteedCostPerMonth"] == round(hours * 2.5, 2)
    leaf_keys = {frozenset(q) for plan in (stack, scenario) for q in plan["queues"].values() if "rigid" in q}
    assert len(leaf_keys) == 1, leaf_keys


def test_the_json_cost_is_the_cost_the_table_shows(capsys: pytest.CaptureFixture[str]) -> None:
    _, table, _ = _run(capsys, "--stack", "dev", "--price-per-gpu-hour", "2.5")
    _, data, _ = _run(capsys, "--stack", "dev", "--price-per-gpu-hour", "2.5", "--json")
    for name, queue in json.loads(data)["queues"].items():
        if "guaranteedCostPerMonth" in queue:
            row = next(line for line in table.splitlines() if line.strip().startswith(f"{name} "))
            assert row.split()[-1] == f"{queue['guaranteedCostPerMonth']:.2f}"


def test_a_scenario_renders_as_markdown_too(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--scenario", SCENARIO, "--format", "markdown", "--price-per-gpu-hour", "1")
    assert code == 0
    assert out.startswith("### Fair-share plan for scenario `scenario.json`")


def test_the_top_level_usage_shows_cost(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "python -m fairshare cost --prometheus URL" in capsys.readouterr().out


def test_the_example_scenario_is_sound_under_stack_rules_and_asks_for_a_what_if(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = _run(capsys, "--scenario", SCENARIO, "--json")
    assert (code, err) == (0, ""), "the example teaches what stack config accepts: no warning"
    queues = json.loads(out)["queues"]
    assert all("demand" in q for q in queues.values() if "rigid" in q), "every team in the example asks for GPUs"


def test_the_example_demand_names_every_team_of_the_reference_stack(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--stack", "dev", "--demand", DEMAND, "--json")
    assert code == 0
    queues = json.loads(out)["queues"]
    assert {name for name, q in queues.items() if "rigid" in q} == set(json.loads(Path(DEMAND).read_text()))
    assert {name: q["demand"] for name, q in queues.items() if "demand" in q} == json.loads(Path(DEMAND).read_text())


def test_cost_without_a_price_reports_gpu_hours_only(capsys: pytest.CaptureFixture[str]) -> None:
    teams = {"team-nlp": lambda t: 1.0, "team-vision": lambda t: 0.0, "team-recommender": lambda t: 0.0}
    served = Served({"kai_queue_allocated_gpus": Metric("queue_metadata_name", teams)})
    with prometheus(served) as url:
        assert main(["cost", "--prometheus", url, "--window", "1d", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert main(["cost", "--prometheus", url, "--window", "1d"]) == 0
        table = capsys.readouterr().out
    assert "pricePerGpuHour" not in data
    assert data["queues"]["team-nlp"] == {"gpuHours": pytest.approx(24, rel=0.02)}
    assert table.splitlines()[0].split() == ["queue", "GPU-hours", "share", "mean", "util"]
    assert "per GPU-hour" not in table
