"""The plan as a pull request shows it: a Markdown table and one Mermaid bar chart of it; and its price."""

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
    re.compile(r'^    x-axis "[^"]+" \[("[^"]+"(, "[^"]+")*)\]$'),
    re.compile(r'^    y-axis "[^"]+" 0 --> ([0-9.]+)$'),
    re.compile(r"^    bar \[([0-9.]+(, [0-9.]+)*)\]$"),
    re.compile(r"^    bar \[([0-9.]+(, [0-9.]+)*)\]$"),
]


@pytest.fixture(scope="module")
def markdown() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--stack", "dev", "--format", "markdown", "--price-per-gpu-hour", "2.5"]) == 0
    return out.getvalue()


def _charts(markdown: str) -> list[tuple[list[str], float, list[float], list[float]]]:
    """Each chart's team labels, axis end, and its two series: each team alone, and every team busy."""
    charts = []
    for block in CHART.findall(markdown):
        _, frontmatter, body = block.split("---\n", 2)
        config = yaml.safe_load(frontmatter)["config"]["xyChart"]
        assert config["showDataLabel"] is False, "values go in the labels, which keep their size"
        assert config["xAxis"]["labelFontSize"] >= 11
        lines = body.rstrip("\n").split("\n")
        assert len(lines) == len(LINES), block
        matches = [pattern.match(line) for pattern, line in zip(LINES, lines, strict=True)]
        assert all(matches), block
        names = re.findall(r'"([^"]+)"', matches[1].group(1))  # type: ignore[union-attr]
        top = float(matches[2].group(1))  # type: ignore[union-attr]
        alone, busy = ([float(v) for v in m.group(1).split(", ")] for m in matches[3:])  # type: ignore[union-attr]
        charts.append((names, top, alone, busy))
    return charts


def test_one_chart_names_every_leaf_queue_with_its_values(markdown: str) -> None:
    (chart,) = _charts(markdown)
    names, top, alone, busy = chart
    assert names == [
        "team-nlp  busy 0.34 / alone 1.00",
        "team-vision  busy 0.33 / alone 1.00",
        "team-recommender  busy 0.33 / alone 1.00",
    ]
    assert alone == [1.0, 1.0, 1.0]
    assert busy == [0.34, 0.33, 0.33]
    assert top == 1, "the axis ends at the largest value"


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
