"""The plan as text: the table `python -m fairshare` prints and `pulumi preview` shows."""

from config.types import UNLIMITED
from fairshare.plan import HOURS_PER_MONTH, Plan, guaranteed_hours

PRICE_NOTE = (
    "Guaranteed: each team's quota for a {hours}-hour month at {price:g} per GPU-hour, "
    "what it is promised whatever the others do; bursting above it is not counted."
)


def _gpus(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def aligned(rows: list[list[str]]) -> list[str]:
    """Rows as text columns: the first (names) left-aligned, the numbers right-aligned, a rule under the header."""
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    line = "  ".join(f"{{:{'<' if i == 0 else '>'}{width}}}" for i, width in enumerate(widths))
    lines = [line.format(*row) for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def plan_rows(plan: Plan, price: float | None = None) -> list[list[str]]:
    """The plan's header and one row per queue; with a price, each leaf's guaranteed GPU-hours and their cost."""
    what_if = any(q.what_if is not None for q in plan.queues)
    header = ["queue", "quota", "limit", "weight", "priority", "all busy", "alone", "rigid"]
    if what_if:
        header += ["demand", "what-if"]
    if plan.usage is not None:
        header += ["used GPU-h", "busy, with usage", "change"]
    if price is not None:
        header += ["GPU-h/month", "cost/month"]
    rows = [header]
    for q in plan.queues:
        # Formatted inline, not through _gpus: a plan of 100,000 queues has a million cells.
        row = [
            q.name if q.parent is None else f"  {q.name}",
            "none" if q.quota == UNLIMITED else f"{q.quota:g}",
            "none" if q.limit == UNLIMITED else f"{q.limit:g}",
            f"{q.weight:g}",
            str(q.priority),
            f"{q.saturated:.2f}",
            "" if q.alone is None else f"{q.alone:.2f}",
            "" if q.rigid is None else f"{q.rigid:.2f}",
        ]
        if what_if:
            row += ["" if q.demand is None else f"{q.demand:.2f}", "" if q.what_if is None else f"{q.what_if:.2f}"]
        if plan.usage is not None:
            change = q.usage_change
            row += [
                f"{q.used_gpu_hours or 0.0:.1f}",
                _gpus(q.usage_adjusted),
                "" if change is None else f"{change:+.2f}",
            ]
        if price is not None:
            hours = guaranteed_hours(q)
            row += ["" if hours is None else f"{hours:.1f}", "" if hours is None else f"{hours * price:.2f}"]
        rows.append(row)
    return rows


GAIN_THRESHOLD = 0.005
"""Changes smaller than the table's last shown digit are no change."""


def usage_lines(plan: Plan) -> list[str]:
    """Who gains and who loses against the usage-blind plan when all are busy, and what the column means."""
    if plan.usage is None:
        return []
    note = plan.usage
    lines = [
        f"With usage: past use ({note.source}; cluster {note.cluster_gpu_hours:.1f} GPU-hours) weighed at "
        f"kValue {note.k_value:g}, all teams busy."
        + ("" if note.in_stack else " Time-based fairness is off in this stack: this is what turning it on gives.")
    ]
    leaves = [q for q in plan.queues if q.alone is not None and q.usage_change is not None]
    gains = [q for q in leaves if (q.usage_change or 0.0) > GAIN_THRESHOLD]
    losses = [q for q in leaves if (q.usage_change or 0.0) < -GAIN_THRESHOLD]
    for verb, queues in (("Gains", gains), ("Loses", losses)):
        if queues:
            lines.append(f"{verb}: " + ", ".join(f"{q.name} {q.usage_change:+.2f} GPU" for q in queues))
    if not gains and not losses:
        lines.append("No team gains or loses: past use changes nothing at this kValue.")
    return lines


def render(plan: Plan, price: float | None = None) -> str:
    lines = aligned(plan_rows(plan, price))
    lines.append("")
    lines.append(f"GPU pool: {plan.capacity:g}. Shares in GPUs; 'alone' is what a team gets while the others are idle.")
    lines.append(
        f"All teams busy: {plan.saturated_utilisation:.0%} of the pool in use "
        f"(rigid partition by quota: {plan.rigid_utilisation:.0%})."
    )
    for q in plan.queues:
        if q.alone is not None and q.rigid is not None:
            lines.append(f"{q.name} alone: {q.alone:.2f} GPU (rigid partition: {q.rigid:.2f})")
    if plan.what_if_utilisation is not None:
        lines.append(f"What-if: {plan.what_if_utilisation:.0%} of the pool in use.")
    lines += usage_lines(plan)
    if price is not None:
        lines.append(PRICE_NOTE.format(hours=HOURS_PER_MONTH, price=price))
    return "\n".join(lines)
