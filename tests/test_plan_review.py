"""A change's review, as `python -m fairshare --stack S --base FILE` prints it for a pull request: what it takes
from teams first, then each team whose share moves, losers first, with the cost when a price is set."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from config.queue_hierarchy.queues import QueueConfig
from fairshare.cli import main
from fairshare.compare import compare
from fairshare.plan import plan
from fairshare.review import CHART_TEAMS, Review, render_markdown
from harness import ROOT
from harness.stacks import dev_settings


def _stack_file(path: Path, settings_: dict[str, Any]) -> Path:
    document = {"config": {f"gpu-tenancy:{key}": value for key, value in settings_.items()}}
    document["config"]["pulumi:disable-default-providers"] = ["kubernetes"]
    path.write_text(yaml.safe_dump(document))
    return path


def _base(tmp_path: Path, change: Any = None) -> Path:
    """Pulumi.dev.yaml as the base of a change: team-vision had members alice and bob, quotas were as `change`
    leaves them."""
    settings_ = dev_settings()
    settings_["tenants"][1]["members"] = ["alice", "bob"]
    if change is not None:
        change(settings_)
    return _stack_file(tmp_path / "Pulumi.dev.yaml", settings_)


def _nlp_had_more(settings_: dict[str, Any]) -> None:
    """Before: team-nlp had half the pool guaranteed, team-recommender a sixth."""
    settings_["queues"][1]["resources"]["gpu"]["quota"] = 0.5
    settings_["queues"][3]["resources"]["gpu"]["quota"] = 0.17


def test_the_review_says_what_is_lost_first_then_losers_then_gainers_with_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _base(tmp_path, _nlp_had_more)
    assert main(["--stack", "dev", "--base", str(base), "--price-per-gpu-hour", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("!! gpu-tenancy:tenants[1].members: tenant team-vision loses member alice")
    assert lines[1].startswith("!! gpu-tenancy:tenants[1].members: tenant team-vision loses member bob")
    assert lines[2] == "Against the base: GPU pool: 1. All teams busy: 100% of the pool in use. 2 teams move, " + (
        "losers first; 1 unchanged."
    )
    rows = [line.split("  ")[0] for line in lines[5:7]]
    assert rows == ["team-nlp", "team-recommender"], "the loser first"
    nlp, recommender = lines[5], lines[6]
    assert "0.50 -> 0.33 (-0.17)" in nlp
    assert "730.00 -> 481.80 (-248.20)" in nlp
    assert "0.17 -> 0.33 (+0.16)" in recommender
    assert "queue" in lines[8], "the plan after the change follows"


def test_markdown_puts_the_caution_first_and_the_plan_after_the_change_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", "dev", "--base", str(_base(tmp_path, _nlp_had_more)), "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    order = [
        "### Fair-share plan for stack `dev`",
        "> [!CAUTION]",
        "> - **`gpu-tenancy:tenants[1].members`**: tenant team-vision loses member alice",
        "#### What this change moves",
        "| `team-nlp` | 0.50 -> 0.33 (-0.17) | 0.50 -> 0.34 (-0.16) | 1.00 |",
        "| `team-recommender` |",
        '    x-axis "team" ["team-nlp  0.50 -> 0.34", "team-recommender  0.17 -> 0.33"]',
        "#### The plan after this change",
        "| `team-nlp` | 0.33 |",
    ]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions), text


def test_a_change_that_moves_nothing_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _stack_file(tmp_path / "Pulumi.dev.yaml", dev_settings())
    assert main(["--stack", "dev", "--base", str(base), "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    assert "CAUTION" not in text
    assert "```mermaid" in text
    assert "No team's share moves (3 teams)." in text
    assert text.count("```mermaid") == 1, "no picture of nothing"


def test_a_base_this_code_cannot_read_is_said_and_the_plan_still_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings_ = dev_settings()
    settings_["queues"][1]["resources"]["gpu"]["overQuotaWieght"] = 2
    base = _stack_file(tmp_path / "Pulumi.dev.yaml", settings_)
    assert main(["--stack", "dev", "--base", str(base), "--json"]) == 0
    change = json.loads(capsys.readouterr().out)["change"]
    assert change["hazards"] == []
    assert change["note"].startswith(
        "The base's stack file does not validate with this change's code, so nothing is compared: "
        "gpu-tenancy:queues[1].resources.gpu.overQuotaWieght"
    )


def test_json_carries_the_hazards_and_the_moves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "dev", "--base", str(_base(tmp_path, _nlp_had_more)), "--json"]) == 0
    change = json.loads(capsys.readouterr().out)["change"]
    assert [h["key"] for h in change["hazards"]] == ["gpu-tenancy:tenants[1].members"] * 2
    assert change["teams"][0] == {
        "name": "team-nlp",
        "before": {"guaranteed": 0.5, "saturated": 0.5, "alone": 1.0},
        "after": {"guaranteed": 0.33, "saturated": 0.34, "alone": 1.0},
    }
    assert change["unchanged"] == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--stack", "dev", "--base", "nosuch.yaml"], "--base nosuch.yaml: no such file"),
        (
            ["--scenario", str(ROOT / "examples" / "scenario.json"), "--base", str(ROOT / "Pulumi.dev.yaml")],
            "--base goes with --stack",
        ),
    ],
    ids=["missing", "with-a-scenario"],
)
def test_a_base_that_cannot_be_compared_is_refused_in_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert says in error
    assert len(error.splitlines()) == 1


def _tree(quotas: list[float]) -> list[QueueConfig]:
    root = QueueConfig.model_validate({"name": "org", "resources": {"gpu": {"quota": 4}}})
    return [root] + [
        QueueConfig.model_validate({"name": f"t{i}", "parentQueue": "org", "resources": {"gpu": {"quota": q}}})
        for i, q in enumerate(quotas)
    ]


quota_lists = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(before=quota_lists, after=quota_lists)
def test_every_team_is_listed_once_or_counted_unchanged_losers_before_gainers(
    before: list[float], after: list[float]
) -> None:
    comparison = compare(plan(_tree(before), 4), plan(_tree(after), 4))
    names = {f"t{i}" for i in range(max(len(before), len(after)))}
    listed = [team.name for team in comparison.teams]
    assert len(listed) == len(set(listed))
    assert len(listed) + comparison.unchanged == len(names)
    moves = [team.moved for team in comparison.teams]
    losses = [m for m in moves if m < 0]
    assert moves[: len(losses)] == sorted(losses), "losers first, the largest loss first"
    assert all(team.before is None or team.after is None or team.moved for team in comparison.teams)


def test_the_picture_keeps_to_the_teams_that_move_most_and_says_so() -> None:
    before, after = [0.1] * (CHART_TEAMS + 10), [0.1 + 0.01 * (i % 7) for i in range(CHART_TEAMS + 10)]
    comparison = compare(plan(_tree(before), 4 * CHART_TEAMS), plan(_tree(after), 4 * CHART_TEAMS))
    assert len(comparison.teams) > CHART_TEAMS
    lines = render_markdown(Review(comparison=comparison), price=None)
    (axis,) = [line for line in lines if line.startswith("    x-axis")]
    assert axis.count('", "') == CHART_TEAMS - 1
    assert f"(the {CHART_TEAMS} that move most)" in "\n".join(lines)


def _docs_example() -> list[str]:
    """The review docs/fair-share.md shows, up to the plan after the change."""
    text = (ROOT / "docs" / "fair-share.md").read_text()
    block = text[text.index("```\n!! ") + len("```\n") :]
    return block.split("\n\n")[0].splitlines()


def test_the_docs_example_is_what_the_review_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base = dev_settings()
    base["tenants"][1]["members"] = ["alice", "bob"]
    head = dev_settings()
    head["tenants"][1]["members"] = ["alice"]
    head["queues"][1]["resources"]["gpu"]["quota"] = 0.5
    head["queues"][3]["resources"]["gpu"]["quota"] = 0.17
    _stack_file(tmp_path / "Pulumi.dev.yaml", head)
    monkeypatch.setattr("fairshare.stack_cli.PROJECT_ROOT", tmp_path)
    base_file = _stack_file(tmp_path / "base.yaml", base)
    assert main(["--stack", "dev", "--base", str(base_file), "--price-per-gpu-hour", "2.5"]) == 0
    printed = capsys.readouterr().out.split("\n\n")[0].splitlines()
    assert printed == _docs_example()
