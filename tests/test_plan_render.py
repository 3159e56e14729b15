"""The plan's pictures as a reviewer sees them: rendered by Mermaid (mermaid-cli in Chromium) at 3 and 30 teams.

The Markdown `python -m fairshare --format markdown` prints for a pull request is rendered by
mermaid-cli 11.17.0 (Mermaid 11.17.2) in Debian's Chromium, in Mermaid's default and dark themes, and
each chart's SVG is read back: every team's name on a line of its own, every bar labelled with its
value, bars that stand out on GitHub's light and dark pages, and an axis that fits the numbers.
"""

import itertools
import json
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from config.queue_hierarchy.queues import QueueConfig
from fairshare.markdown import BAR_COLOUR, LABEL_COLOUR, render_markdown
from fairshare.plan import PastUse, plan
from fairshare.usage import PastUsage
from harness.tools import browser_path, mmdc_path
from tests.charts import missing

SVG = "{http://www.w3.org/2000/svg}"
GITHUB_BACKGROUNDS = {"light": "#ffffff", "dark": "#0d1117"}
"""GitHub's page colours (Primer's canvas default, light and dark), behind a rendered Mermaid block."""
THEMES = ("default", "dark")
LABEL_SIZE = 12
"""Pixels between two team names' centres below which their text overlaps."""


def _queues(teams: int) -> list[QueueConfig]:
    """An org of `teams` teams sharing 8 GPUs; every fifth with no limit, the others capped at one GPU."""
    root = QueueConfig.model_validate({"name": "ml-org", "resources": {"gpu": {"quota": 8}}})
    quota = round(8 / teams / 2, 2)
    return [root] + [
        QueueConfig.model_validate(
            {
                "name": f"team-{index:02d}-research",
                "parentQueue": "ml-org",
                "resources": {"gpu": {"quota": quota, "limit": -1 if index % 5 == 0 else max(1.0, 2 * quota)}},
            }
        )
        for index in range(teams)
    ]


@dataclass(frozen=True)
class Chart:
    title: str
    names: list[tuple[str, float]]
    """Each team's name and its text's centre along the names' axis."""
    across: bool
    """The names run along the horizontal axis (a vertical chart): each needs its width, not just a line."""
    bars: list[tuple[float, str]]
    """Each bar's length in pixels and its fill."""
    labels: list[str]
    """The value written on each bar."""
    ticks: list[float]
    values: list[float]
    """What the Markdown asked the chart to show."""


def _position(element: ET.Element) -> tuple[float, float]:
    found = re.search(r"translate\(\s*([-\d.]+)\s*,\s*([-\d.]+)", element.get("transform", ""))
    if found:
        return float(found.group(1)), float(found.group(2))
    return float(element.get("x", "0")), float(element.get("y", "0"))


def _group(root: ET.Element, name: str) -> ET.Element:
    found = root.find(f".//{SVG}g[@class='{name}']")
    assert found is not None, name
    return found


def _read(svg: Path, values: list[float]) -> Chart:
    root = ET.parse(svg).getroot()
    title = "".join(_group(root, "chart-title").itertext())
    # A horizontal chart puts the names on the left axis and the values on top; a vertical one, below and left.
    horizontal = root.find(f".//{SVG}g[@class='top-axis']") is not None
    names_group = _group(_group(root, "left-axis" if horizontal else "bottom-axis"), "label")
    ticks_group = _group(_group(root, "top-axis" if horizontal else "left-axis"), "label")
    plot = _group(root, "bar-plot-0")
    return Chart(
        title=title,
        names=[(t.text or "", _position(t)[1 if horizontal else 0]) for t in names_group.iter(f"{SVG}text")],
        across=not horizontal,
        bars=[
            (float(rect.get("width" if horizontal else "height", "0")), rect.get("fill", ""))
            for rect in plot.iter(f"{SVG}rect")
        ],
        labels=[text.text or "" for text in plot.iter(f"{SVG}text")],
        ticks=[float(text.text or "nan") for text in ticks_group.iter(f"{SVG}text")],
        values=values,
    )


def _render(root: Path, markdown: str, theme: str) -> list[Path]:
    mmdc, browser = mmdc_path(), browser_path()
    if mmdc is None or browser is None:
        missing("mermaid-cli and Chromium", "venv/bin/python -m harness.tools install-debian install-mermaid")
    assert mmdc is not None
    puppeteer = root / "puppeteer.json"
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    puppeteer.write_text(json.dumps({"executablePath": browser, "args": flags}))
    source = root / "plan.md"
    source.write_text(markdown)
    command = [str(mmdc), "-q", "-p", str(puppeteer), "-i", str(source), "-o", str(root / "out.md"), "-t", theme]
    subprocess.run(command, check=True, capture_output=True, timeout=180)
    return sorted(root.glob("out-*.svg"), key=lambda p: int(p.stem.split("-")[1]))


def _asked(markdown: str) -> list[list[float]]:
    return [[float(v) for v in bars.split(", ")] for bars in re.findall(r"^    bar \[([^\]]*)\]$", markdown, re.M)]


@pytest.fixture(scope="module", params=[(teams, theme) for teams in (3, 30) for theme in THEMES], ids=str)
def charts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[Chart]:
    teams, theme = request.param
    queues = _queues(teams)
    # Time-based fairness adds a scenario: every team busy, past use weighed; the first team used the most.
    used = {q.name: 40.0 / (i + 1) for i, q in enumerate(queues) if q.parent_queue is not None}
    past = PastUse(PastUsage(8 * 24, used, "a day's use"), k_value=1, in_stack=True)
    markdown = render_markdown(plan(queues, 8, past=past), subject="stack `big`", price=2.5)
    root = tmp_path_factory.mktemp(f"render-{teams}-{theme}")
    svgs = _render(root, markdown, theme)
    asked = _asked(markdown)
    assert len(svgs) == len(asked) == 4, "one chart per scenario"
    return [_read(svg, values) for svg, values in zip(svgs, asked, strict=True)]


def test_every_team_name_is_legible_on_a_line_of_its_own(charts: list[Chart]) -> None:
    for chart in charts:
        names = [name for name, _ in chart.names]
        assert len(names) == len(set(names)) == len(chart.values), chart.title
        assert all(name.startswith("team-") for name in names)
        placed = sorted(chart.names, key=lambda named: named[1])
        for (first, at), (second, then) in itertools.pairwise(placed):
            # Side by side, two names need half of each one's width between their centres (about 0.6 of the
            # font size per character); one above the other, a line.
            needed = (len(first) + len(second)) * 0.6 * LABEL_SIZE / 2 if chart.across else LABEL_SIZE
            assert then - at >= needed, f"{chart.title}: {first} and {second} overlap"


def test_every_bar_is_labelled_with_its_value(charts: list[Chart]) -> None:
    for chart in charts:
        assert len(chart.bars) == len(chart.values), chart.title
        assert [float(label) for label in chart.labels] == pytest.approx(chart.values, abs=0.005), chart.title


def _luminance(colour: str) -> float:
    red, green, blue = (int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4))

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(a: str, b: str) -> float:
    """WCAG 2.1's contrast ratio; 3:1 is its minimum for graphical objects."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_bars_stand_out_on_githubs_light_and_dark_pages(charts: list[Chart]) -> None:
    for chart in charts:
        assert {fill.lower() for _, fill in chart.bars} == {BAR_COLOUR}, chart.title
    for page in GITHUB_BACKGROUNDS.values():
        assert contrast(BAR_COLOUR, page) >= 3.0, page
    assert contrast(LABEL_COLOUR, BAR_COLOUR) >= 3.0, "the value on a bar reads against it"


def test_the_axis_fits_the_numbers(charts: list[Chart]) -> None:
    """Each chart's own scale: its longest bar fills most of the width, whatever another scenario holds."""
    for chart in charts:
        top, largest = max(chart.ticks), max(chart.values)
        assert largest <= top + 1e-9, chart.title
        assert largest >= 0.4 * top, f"{chart.title}: the longest bar spans {largest / top:.0%} of the axis"
        longest = max(width for width, _ in chart.bars)
        shortest_nonzero = min(width for width, _ in chart.bars if width > 0)
        assert shortest_nonzero >= 2, "every bar can be seen"
        assert longest > 100, chart.title
