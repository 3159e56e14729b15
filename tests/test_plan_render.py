"""The plan's picture as a reviewer sees it, and the picture of a change: rendered by Mermaid (mermaid-cli in
Chromium) at 3 and 30 teams, and a change at 3 and 40.

The Markdown `python -m fairshare --format markdown` prints for a pull request is rendered by
mermaid-cli 11.17.0 (Mermaid 11.17.2) in Debian's Chromium, in Mermaid's default and dark themes, and
the chart's SVG is read back: every team's name and values on a line of their own, in type a reader can
read, bars that stand out on GitHub's light and dark pages, an axis that ends at the largest value, and
a picture no taller than the table it illustrates.
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
from fairshare.compare import NOTHING, Comparison, TeamChange, compare
from fairshare.markdown import ALONE_COLOUR, BAR_COLOUR, render_markdown
from fairshare.plan import PastUse, Plan, QueuePlan, plan
from fairshare.review import BEFORE_COLOUR, CHART_TEAMS, Review
from fairshare.review import render_markdown as review_markdown
from fairshare.usage import PastUsage
from harness.tools import browser_path, mmdc_path
from tests.charts import missing

SVG = "{http://www.w3.org/2000/svg}"
GITHUB_BACKGROUNDS = {"light": "#ffffff", "dark": "#0d1117"}
"""GitHub's page colours (Primer's canvas default, light and dark), behind a rendered Mermaid block."""
THEMES = ("default", "dark")
MIN_TEXT = 11
"""Pixels: the smallest text a reviewer should have to read."""
TABLE_ROW = 37
"""Pixels of a row of a Markdown table on GitHub: 16 px text at line-height 1.5, 6 px of padding above and
below, a 1 px border (Primer's markdown-body: `table th, table td { padding: 6px 13px }`)."""


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
class Picture:
    height: float
    names: list[tuple[str, float, float]]
    """Each team's label, its centre along the names' axis, and its font size."""
    text_sizes: list[float]
    """Every text's font size in the picture."""
    alone: list[tuple[float, str]]
    busy: list[tuple[float, str]]
    """Each bar's length in pixels and its fill."""
    ticks: list[float]
    rows: int
    """The table's rows, its header included."""
    plan: Plan


def _position(element: ET.Element) -> tuple[float, float]:
    found = re.search(r"translate\(\s*([-\d.]+)\s*,\s*([-\d.]+)", element.get("transform", ""))
    if found:
        return float(found.group(1)), float(found.group(2))
    return float(element.get("x", "0")), float(element.get("y", "0"))


def _group(root: ET.Element, name: str) -> ET.Element:
    found = root.find(f".//{SVG}g[@class='{name}']")
    assert found is not None, name
    return found


def _size(element: ET.Element) -> float:
    found = re.search(r"([\d.]+)(px)?$", element.get("font-size", ""))
    return float(found.group(1)) if found else float("nan")


def _bars(root: ET.Element, name: str) -> list[tuple[float, str]]:
    return [(float(rect.get("width", "0")), rect.get("fill", "")) for rect in _group(root, name).iter(f"{SVG}rect")]


def _read(svg: Path, markdown: str, result: Plan) -> Picture:
    root = ET.parse(svg).getroot()
    names = _group(_group(root, "left-axis"), "label")
    ticks = _group(_group(root, "top-axis"), "label")
    return Picture(
        height=float(root.get("viewBox", "0 0 0 0").split()[3]),
        names=[(t.text or "", _position(t)[1], _size(t)) for t in names.iter(f"{SVG}text")],
        text_sizes=[_size(t) for t in root.iter(f"{SVG}text") if (t.text or "").strip()],
        alone=_bars(root, "bar-plot-0"),
        busy=_bars(root, "bar-plot-1"),
        ticks=[float(text.text or "nan") for text in ticks.iter(f"{SVG}text")],
        rows=len([line for line in markdown.splitlines() if line.startswith("| ")]) - 1,
        plan=result,
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


@pytest.fixture(scope="module", params=[(teams, theme) for teams in (3, 30) for theme in THEMES], ids=str)
def picture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Picture:
    teams, theme = request.param
    queues = _queues(teams)
    # Time-based fairness adds a value per team: every team busy, past use weighed; the first team used the most.
    used = {q.name: 40.0 / (i + 1) for i, q in enumerate(queues) if q.parent_queue is not None}
    past = PastUse(PastUsage(8 * 24, used, "a day's use"), k_value=1, in_stack=True)
    result = plan(queues, 8, past=past)
    markdown = render_markdown(result, subject="stack `big`", price=2.5)
    svgs = _render(tmp_path_factory.mktemp(f"render-{teams}-{theme}"), markdown, theme)
    assert len(svgs) == 1, "one picture"
    return _read(svgs[0], markdown, result)


def _leaves(result: Plan) -> list[QueuePlan]:
    return [q for q in result.queues if q.alone is not None]


def test_every_team_is_on_a_line_of_its_own_with_its_values(picture: Picture) -> None:
    leaves = _leaves(picture.plan)
    assert len(picture.names) == len(leaves)
    for (label, _, _), queue in zip(picture.names, leaves, strict=True):
        assert label.startswith(f"{queue.name}  busy {queue.saturated:.2f} / alone {queue.alone:.2f}"), label
        assert f"with past use {queue.usage_adjusted:.2f}" in label
    placed = sorted(picture.names, key=lambda named: named[1])
    for (first, at, size), (second, then, _) in itertools.pairwise(placed):
        assert then - at >= size, f"{first} and {second} overlap"


def test_every_word_is_at_least_eleven_pixels(picture: Picture) -> None:
    assert picture.text_sizes, "the picture has text"
    assert min(picture.text_sizes) >= MIN_TEXT, sorted(set(picture.text_sizes))


def test_the_picture_is_no_taller_than_its_table(picture: Picture) -> None:
    assert picture.height <= picture.rows * TABLE_ROW, (picture.height, picture.rows * TABLE_ROW)


def _luminance(colour: str) -> float:
    red, green, blue = (int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4))

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(a: str, b: str) -> float:
    """WCAG 2.1's contrast ratio; 3:1 is its minimum for graphical objects."""
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_bars_stand_out_on_githubs_light_and_dark_pages(picture: Picture) -> None:
    assert {fill.lower() for _, fill in picture.busy} == {BAR_COLOUR}
    assert {fill.lower() for _, fill in picture.alone} == {ALONE_COLOUR}
    for page in GITHUB_BACKGROUNDS.values():
        assert contrast(BAR_COLOUR, page) >= 3.0, page
    assert contrast(BAR_COLOUR, ALONE_COLOUR) >= 1.5, "the busy bar reads over the alone bar"


def test_the_axis_ends_at_the_largest_value(picture: Picture) -> None:
    """Each team alone gets what its limit allows, so the longest "alone" bar spans the axis."""
    leaves = _leaves(picture.plan)
    largest = max(max(q.alone or 0.0, q.saturated) for q in leaves)
    assert max(picture.ticks) <= largest + 0.01
    alone = [q.alone or 0.0 for q in leaves]
    busy = [q.saturated for q in leaves]
    bars = [*zip(picture.alone, alone, strict=True), *zip(picture.busy, busy, strict=True)]
    longest = max(width for (width, _), _ in bars)
    assert next(width for (width, _), value in bars if value == largest) == longest, "the largest spans the axis"
    for ((first, _), a), ((second, _), b) in itertools.combinations(bars, 2):
        if a > b + 0.01:
            assert first > second, (a, b)


# --- the change's picture: a pull request's base against its head ---------------------------------------------


def _grown(queues: list[QueueConfig], every: int) -> list[QueueConfig]:
    """The base of a change that halves every `every`-th team's quota, from the first: those teams lose."""
    return [
        q.model_copy(
            update={
                "resources": q.resources.model_copy(
                    update={"gpu": q.resources.gpu.model_copy(update={"quota": q.resources.gpu.quota * 2})}
                )
            }
        )
        if q.parent_queue is not None and index % every == 1
        else q
        for index, q in enumerate(queues)
    ]


@dataclass(frozen=True)
class ChangePicture:
    comparison: Comparison
    pictures: int
    height: float
    names: list[tuple[str, float, float]]
    text_sizes: list[float]
    before: list[tuple[float, str]]
    after: list[tuple[float, str]]
    rows: int
    """The change table's rows, its header included."""


@pytest.fixture(scope="module", params=[(teams, theme) for teams in (3, 40) for theme in THEMES], ids=str)
def change_picture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ChangePicture:
    teams, theme = request.param
    head = _queues(teams)
    comparison = compare(plan(_grown(head, 2), 8), plan(head, 8))
    review = review_markdown(Review(comparison=comparison), price=2.5)
    markdown = render_markdown(comparison.head, subject="stack `big`", price=2.5, review=review)
    svgs = _render(tmp_path_factory.mktemp(f"change-{teams}-{theme}"), markdown, theme)
    root = ET.parse(svgs[0]).getroot()
    change_table = markdown[markdown.index("#### What this change moves") : markdown.index("```mermaid")]
    return ChangePicture(
        comparison=comparison,
        pictures=len(svgs),
        height=float(root.get("viewBox", "0 0 0 0").split()[3]),
        names=[
            (t.text or "", _position(t)[1], _size(t))
            for t in _group(_group(root, "left-axis"), "label").iter(f"{SVG}text")
        ],
        text_sizes=[_size(t) for t in root.iter(f"{SVG}text") if (t.text or "").strip()],
        before=_bars(root, "bar-plot-0"),
        after=_bars(root, "bar-plot-1"),
        rows=len([line for line in change_table.splitlines() if line.startswith("| ")]) - 1,
    )


def _charted(comparison: Comparison) -> list[TeamChange]:
    most = sorted(comparison.teams, key=lambda team: -abs(team.moved))[:CHART_TEAMS]
    return [team for team in comparison.teams if team in most]


def test_the_change_is_one_picture_before_the_plans_with_each_moved_team_on_a_line(
    change_picture: ChangePicture,
) -> None:
    assert len(change_picture.comparison.teams) >= 2, "one team's move is its row: no picture"
    assert change_picture.pictures == 2, "the change's picture, then the plan's"
    charted = _charted(change_picture.comparison)
    assert len(charted) == min(len(change_picture.comparison.teams), CHART_TEAMS)
    assert [name for name, _, _ in change_picture.names] == [
        f"{t.name}  {(t.before or NOTHING).busy:.2f} -> {(t.after or NOTHING).busy:.2f}" for t in charted
    ]
    placed = sorted(change_picture.names, key=lambda named: named[1])
    for (first, at, size), (second, then, _) in itertools.pairwise(placed):
        assert then - at >= size, f"{first} and {second} overlap"
    assert min(change_picture.text_sizes) >= MIN_TEXT, sorted(set(change_picture.text_sizes))
    assert change_picture.height <= change_picture.rows * TABLE_ROW, (change_picture.height, change_picture.rows)


def test_a_loss_shows_grey_beyond_the_blue_and_a_gain_blue_beyond_the_grey(change_picture: ChangePicture) -> None:
    assert {fill.lower() for _, fill in change_picture.before} == {BEFORE_COLOUR}
    assert {fill.lower() for _, fill in change_picture.after} == {BAR_COLOUR}
    assert contrast(BEFORE_COLOUR, BAR_COLOUR) >= 1.5, "the after bar reads over the before bar"
    charted = _charted(change_picture.comparison)
    for team, (before, _), (after, _) in zip(charted, change_picture.before, change_picture.after, strict=True):
        if team.busy <= -0.01:
            assert before > after, team.name
        elif team.busy >= 0.01:
            assert after > before, team.name
