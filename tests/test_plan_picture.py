"""The plan as a pull request shows it: a Markdown table and one Mermaid bar chart per scenario; and its price."""

import contextlib
import io
import re

import pytest
import yaml

from fairshare.cli import main
from fairshare.plan import HOURS_PER_MONTH

LEAVES = ["team-nlp", "team-vision", "team-recommender"]
CHART = re.compile(r"```mermaid\n(.*?)```", re.DOTALL)
# The xychart grammar this renderer relies on (mermaid-js/mermaid packages/mermaid/src/docs/syntax/xyChart.md),
# after the frontmatter that configures the chart.
LINES = [
    re.compile(r"^xychart-beta horizontal$"),
    re.compile(r'^    title "[^"]+"$'),
    re.compile(r'^    x-axis "[^"]+" \[("[^"]+"(, "[^"]+")*)\]$'),
    re.compile(r'^    y-axis "[^"]+" 0 --> [0-9.]+$'),
    re.compile(r"^    bar \[([0-9.]+(, [0-9.]+)*)\]$"),
]


@pytest.fixture(scope="module")
def markdown() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--stack", "dev", "--format", "markdown", "--price-per-gpu-hour", "2.5"]) == 0
    return out.getvalue()


def _charts(markdown: str) -> list[tuple[str, list[str], list[float]]]:
    charts = []
    for block in CHART.findall(markdown):
        _, frontmatter, body = block.split("---\n", 2)
        config = yaml.safe_load(frontmatter)["config"]
        assert config["xyChart"]["showDataLabel"] is True, "every bar shows its value"
        lines = body.rstrip("\n").split("\n")
        assert len(lines) == len(LINES), block
        matches = [pattern.match(line) for pattern, line in zip(LINES, lines, strict=True)]
        assert all(matches), block
        names = re.findall(r'"([^"]+)"', matches[2].group(1))  # type: ignore[union-attr]
        values = [float(v) for v in matches[4].group(1).split(", ")]  # type: ignore[union-attr]
        charts.append((lines[1], names, values))
    return charts


def test_one_chart_per_scenario_names_every_leaf_queue(markdown: str) -> None:
    charts = _charts(markdown)
    assert len(charts) == 3, "all busy, alone, rigid: one series each, never drawn over each other"
    for _title, names, values in charts:
        assert names == LEAVES
        assert len(values) == len(LEAVES)
    busy, alone, rigid = (values for _, _, values in charts)
    assert busy == [0.34, 0.33, 0.33]
    assert alone == [1.0, 1.0, 1.0]
    assert rigid == [0.33, 0.33, 0.33]


def test_the_table_has_a_row_per_queue_with_its_guaranteed_hours_and_cost(markdown: str) -> None:
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header[-2:] == ["GPU-h/month", "cost/month"]
    body = {cell[0].strip("*` "): cell for cell in ([c.strip() for c in r.strip("|").split("|")] for r in rows[2:])}
    assert list(body) == ["ml-org", *LEAVES]
    hours = round(0.33 * HOURS_PER_MONTH, 1)
    assert body["team-nlp"][-2:] == [f"{hours:.1f}", f"{hours * 2.5:.2f}"]
    assert body["ml-org"][-2:] == ["", ""], "a parent's guarantee is its teams'"
    for name in LEAVES:
        shown_hours, shown_cost = (float(cell) for cell in body[name][-2:])
        assert f"{shown_hours * 2.5:.2f}" == f"{shown_cost:.2f}", "the cost is the hours shown times the price"


def test_a_price_must_be_a_price(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "dev", "--price-per-gpu-hour", "-1"]) == 2
    assert "finite price" in capsys.readouterr().err
