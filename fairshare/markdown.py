"""The plan as a picture for a pull request: a Markdown table and one Mermaid bar chart per scenario.

GitHub renders Mermaid's `xychart-beta` (the keyword every Mermaid since 10.6 knows;
`xychart` alone needs 11.10). Several bar series in one chart are drawn over each other
(mermaid-js/mermaid#7392), so each scenario gets its own chart with one series. Labels
are always quoted: unquoted, Mermaid drops their spaces and refuses `:` and `/`
(mermaid-js/mermaid packages/mermaid/src/docs/syntax/xyChart.md).
"""

from fairshare.plan import HOURS_PER_MONTH, Plan, QueuePlan
from fairshare.table import PRICE_NOTE, plan_rows

SCENARIOS: tuple[tuple[str, str], ...] = (
    ("saturated", "All teams busy: the GPUs each team gets"),
    ("alone", "Each team alone: what it gets while the others are idle"),
    ("rigid", "Rigid split by quota: one cluster per team"),
)


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


def _chart(title: str, leaves: list[QueuePlan], values: list[float], top: float) -> list[str]:
    return [
        "```mermaid",
        "xychart-beta",
        f"    title {_label(title)}",
        f"    x-axis {_label('leaf queue')} [{', '.join(_label(q.name) for q in leaves)}]",
        f"    y-axis {_label('GPUs')} 0 --> {top:g}",
        f"    bar [{', '.join(f'{v:.2f}' for v in values)}]",
        "```",
    ]


def render_markdown(plan: Plan, *, stack: str, price: float | None = None) -> str:
    leaves = [q for q in plan.queues if q.alone is not None]
    top = max([plan.capacity, *(getattr(q, key) or 0.0 for q in leaves for key, _ in SCENARIOS)])
    lines = [
        f"### Fair-share plan for stack `{stack}`",
        "",
        f"GPU pool: {plan.capacity:g}. All teams busy: {plan.saturated_utilisation:.0%} of the pool in use "
        f"(rigid split by quota: {plan.rigid_utilisation:.0%}).",
        "",
        *_table(plan, price),
        "",
    ]
    if price is not None:
        lines += [PRICE_NOTE.format(hours=HOURS_PER_MONTH, price=price), ""]
    for key, title in SCENARIOS:
        values = [float(getattr(q, key) or 0.0) for q in leaves]
        lines += [*_chart(title, leaves, values, top), ""]
    return "\n".join(lines).rstrip() + "\n"
