"""The plan as a picture for a pull request: a Markdown table and one Mermaid bar chart per scenario.

GitHub renders Mermaid's `xychart-beta` (the keyword every Mermaid since 10.6 knows;
`xychart` alone needs 11.10). Several bar series in one chart are drawn over each other
(mermaid-js/mermaid#7392), so each scenario gets its own chart with one series. Labels
are always quoted: unquoted, Mermaid drops their spaces and refuses `:` and `/`
(mermaid-js/mermaid packages/mermaid/src/docs/syntax/xyChart.md).
"""

import math

from fairshare.plan import HOURS_PER_MONTH, Plan, QueuePlan
from fairshare.table import PRICE_NOTE, plan_rows, usage_lines

SCENARIOS: tuple[tuple[str, str], ...] = (
    ("saturated", "All teams busy: the GPUs each team gets"),
    ("alone", "Each team alone: what it gets while the others are idle"),
    ("rigid", "Rigid split by quota: one cluster per team"),
)


USAGE_SCENARIO = ("usage_adjusted", "All teams busy, with past use weighed (time-based fairness)")


def _label(text: str) -> str:
    return '"' + text.replace('"', "") + '"'


def _table(plan: Plan, price: float | None) -> list[str]:
    rows = plan_rows(plan, price)
    header, body = rows[0], rows[1:]
    align = ["---", *("---:" for _ in header[1:])]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    for row in body:
        name = row[0].strip()
        cells = [f"`{name}`" if row[0].startswith(" ") else f"**`{name}`**", *row[1:]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


BAR_COLOUR = "#2f81f7"
"""Contrast 3.7:1 on GitHub's light background (#ffffff) and 5.0:1 on its dark one (#0d1117): a bar shows in both."""
LABEL_COLOUR = "#ffffff"
"""The value written on each bar, on the bar's own colour."""
BAR_HEIGHT = 28
"""Pixels per team: a team's name needs its own line."""


def axis_top(values: list[float]) -> float:
    """The axis end that fits these numbers: the next of 1, 2, 2.5 or 5 times a power of ten at or above the
    largest, so the longest bar fills most of the width, whatever the other scenarios' values."""
    largest = max([*values, 0.0])
    if largest <= 0:
        return 1.0
    power: float = 10.0 ** math.floor(math.log10(largest))
    return next(step * power for step in (1.0, 2.0, 2.5, 5.0, 10.0) if step * power >= largest - 1e-9)


def _chart(title: str, leaves: list[QueuePlan], values: list[float]) -> list[str]:
    """A horizontal bar per team, each labelled with its value, with frontmatter config (Mermaid 10.5 and later,
    mermaid-js/mermaid packages/mermaid/src/docs/config/configuration.md): `horizontal` puts every team's name on
    a line of its own (mermaid-js/mermaid packages/mermaid/src/docs/syntax/xyChart.md)."""
    height = 120 + BAR_HEIGHT * len(leaves)
    return [
        "```mermaid",
        "---",
        "config:",
        "  xyChart:",
        "    width: 800",
        f"    height: {height}",
        "    showDataLabel: true",
        "  themeVariables:",
        "    xyChart:",
        f'      plotColorPalette: "{BAR_COLOUR}"',
        f'      dataLabelColor: "{LABEL_COLOUR}"',
        "---",
        "xychart-beta horizontal",
        f"    title {_label(title)}",
        f"    x-axis {_label('leaf queue')} [{', '.join(_label(q.name) for q in leaves)}]",
        f"    y-axis {_label('GPUs')} 0 --> {axis_top(values):g}",
        f"    bar [{', '.join(f'{v:.2f}' for v in values)}]",
        "```",
    ]


def render_markdown(plan: Plan, *, subject: str, price: float | None = None) -> str:
    """`subject` says whose plan it is: "stack `dev`", or "scenario `file.json`"."""
    leaves = [q for q in plan.queues if q.alone is not None]
    lines = [
        f"### Fair-share plan for {subject}",
        "",
        f"GPU pool: {plan.capacity:g}. All teams busy: {plan.saturated_utilisation:.0%} of the pool in use "
        f"(rigid split by quota: {plan.rigid_utilisation:.0%}).",
        "",
        *_table(plan, price),
        "",
    ]
    if price is not None:
        lines += [PRICE_NOTE.format(hours=HOURS_PER_MONTH, price=price), ""]
    for line in usage_lines(plan):
        lines += [line, ""]
    scenarios = SCENARIOS if plan.usage is None else (*SCENARIOS[:1], USAGE_SCENARIO, *SCENARIOS[1:])
    for key, title in scenarios:
        values = [float(getattr(q, key) or 0.0) for q in leaves]
        lines += [*_chart(title, leaves, values), ""]
    return "\n".join(lines).rstrip() + "\n"
