"""The plan as a picture for a pull request: a Markdown table and one Mermaid bar chart of it.

GitHub renders Mermaid's `xychart-beta` (the keyword every Mermaid since 10.6 knows;
`xychart` alone needs 11.10). Labels are always quoted: unquoted, Mermaid drops their
spaces and refuses `:` and `/` (mermaid-js/mermaid packages/mermaid/src/docs/syntax/xyChart.md).

One chart, no taller than the table it illustrates: each team's bar for "alone" with its
"all busy" bar drawn over it (several bar series in one chart are drawn over each other,
mermaid-js/mermaid#7392, which here is the point), on an axis that ends at the largest
value. The values are written in each team's label, not on the bars: Mermaid sizes every
bar's value to fit inside the narrowest bar (0.7 x the bar's height, shrunk until it fits
its width: xychartDiagram, Mermaid 11.17.2), so one small share made every value a few
pixels tall; an axis label keeps the size it is given.
"""

import math
from collections.abc import Sequence

from fairshare.plan import HOURS_PER_MONTH, Plan, QueuePlan
from fairshare.table import PRICE_NOTE, plan_rows, usage_lines


def label(text: str) -> str:
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
LABEL_FONT = 12
"""Pixels of each team's label: GitHub's own small text, and above the 11 a reader needs."""
TEAM_PITCH = 16
"""Pixels per team along the names' axis: a label's line and a little air."""
CHART_FRAME = 72
"""Pixels the value axis, its ticks and the margins take besides the bars."""
ALONE_COLOUR = "#9ec5fe"
"""The "alone" bar behind: lighter, so the darker "all busy" bar reads over it."""


def _team_label(queue: QueuePlan, usage: bool) -> str:
    text = f"{queue.name}  busy {queue.saturated:.2f} / alone {queue.alone or 0.0:.2f}"
    if usage:
        text += f" / with past use {queue.usage_adjusted or 0.0:.2f}"
    return text


def overlaid_bars(
    names: Sequence[str], axis: str, behind: Sequence[float], over: Sequence[float], colours: tuple[str, str]
) -> list[str]:
    """A Mermaid block of horizontal bars, one line per name (`horizontal`, with frontmatter config: Mermaid 10.5
    and later, mermaid-js/mermaid packages/mermaid/src/docs/config/configuration.md): each name's `behind` bar
    with its `over` bar drawn over it, no title (the Markdown says what it shows), values in the names and not
    on the bars, and the value axis ending at the largest value."""
    top = max([*behind, *over, 0.0]) or 1.0
    return [
        "```mermaid",
        "---",
        "config:",
        "  xyChart:",
        "    width: 800",
        f"    height: {CHART_FRAME + TEAM_PITCH * len(names)}",
        "    showTitle: false",
        "    showDataLabel: false",
        "    xAxis:",
        f"      labelFontSize: {LABEL_FONT}",
        "      showTitle: false",
        "    yAxis:",
        f"      labelFontSize: {LABEL_FONT}",
        "      showTitle: false",
        "  themeVariables:",
        "    xyChart:",
        f'      plotColorPalette: "{colours[0]}, {colours[1]}"',
        "---",
        "xychart-beta horizontal",
        f"    x-axis {label('team')} [{', '.join(label(name) for name in names)}]",
        f"    y-axis {label(axis)} 0 --> {math.ceil(top * 100) / 100:g}",
        f"    bar [{', '.join(f'{v:.2f}' for v in behind)}]",
        f"    bar [{', '.join(f'{v:.2f}' for v in over)}]",
        "```",
    ]


def _chart(leaves: list[QueuePlan], usage: bool) -> list[str]:
    """Each team alone (light, behind) and with every team busy (dark, over it)."""
    alone = [q.alone or 0.0 for q in leaves]
    busy = [q.saturated for q in leaves]
    names = [_team_label(q, usage) for q in leaves]
    return overlaid_bars(names, "GPUs", alone, busy, (ALONE_COLOUR, BAR_COLOUR))


def render_markdown(plan: Plan, *, subject: str, price: float | None = None, review: Sequence[str] = ()) -> str:
    """`subject` says whose plan it is: "stack `dev`", or "scenario `file.json`"; `review`: what a change does,
    shown first (fairshare/review.py), the plan then being the one after it."""
    leaves = [q for q in plan.queues if q.alone is not None]
    lines = [f"### Fair-share plan for {subject}", ""]
    if review:
        lines += [*review, "#### The plan after this change", ""]
    lines += [
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
    lines += [
        "Each team alone (light) and with every team busy (dark), in GPUs; the rigid split is its quota.",
        "",
        *_chart(leaves, plan.usage is not None),
        "",
    ]
    return "\n".join(lines).rstrip() + "\n"
