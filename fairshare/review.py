"""A change as a reviewer reads it: what it takes from teams first, then whose shares move, then a picture.

The same review goes before the plan in the text table and in the pull request's Markdown.
Hazards (config/changes.py) come first and loudly: a deleted team or a lost kubeconfig matters
more than any share. Then each team whose shares move, losers first; then, in Markdown, one
bar chart of the all-busy share before and after, each team's bars drawn over each other as
in the plan's own chart (fairshare/markdown.py), so a loss shows as grey beyond the blue and
a gain as blue beyond the grey.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fairshare.compare import NOTHING, Comparison, Shares, TeamChange
from fairshare.markdown import BAR_COLOUR, overlaid_bars
from fairshare.table import aligned

BEFORE_COLOUR = "#afb8c1"
"""The bar before the change, behind the blue: 2.0:1 on GitHub's light page, 9.4:1 on its dark one, 1.9:1 under
the blue, as the plan's light "alone" bar sits under its busy one."""
if TYPE_CHECKING:  # the stack config's whole tree, which a scenario's plan does not load
    from config.changes import Hazard

CHART_TEAMS = 30
"""At most this many teams in the picture (those that move most); the table lists them all."""


@dataclass(frozen=True)
class Review:
    """What a change does, or why it cannot be said: `comparison` is None with a `note` instead."""

    hazards: "Sequence[Hazard]" = ()
    comparison: Comparison | None = None
    note: str = ""


def review_data(review: Review, price: float | None) -> dict[str, object]:
    """The review in `--json`: the hazards, and the teams that move (or the note saying why none is compared)."""
    data: dict[str, object] = {
        "hazards": [{"key": h.key, "what": h.what, "data": h.data} for h in review.hazards],
    }
    if review.comparison is None:
        return data | {"note": review.note}
    return data | review.comparison.to_data(price)


def _cell(team: TeamChange, field: str, digits: int = 2) -> str:
    before = None if team.before is None else getattr(team.before, field)
    after = None if team.after is None else getattr(team.after, field)
    if before is None:
        return f"new: {after:.{digits}f}"
    if after is None:
        return f"{before:.{digits}f} -> gone"
    if abs(after - before) < 0.5 * 10**-digits:
        return f"{after:.{digits}f}"
    return f"{before:.{digits}f} -> {after:.{digits}f} ({after - before:+.{digits}f})"


def _cost(team: TeamChange, price: float) -> str:
    def cost(shares: Shares | None) -> float | None:
        return None if shares is None else shares.guaranteed_hours * price

    before, after = cost(team.before), cost(team.after)
    if before is None:
        return f"new: {after:.2f}"
    if after is None:
        return f"{before:.2f} -> gone"
    return f"{after:.2f}" if abs(after - before) < 0.005 else f"{before:.2f} -> {after:.2f} ({after - before:+.2f})"


def change_rows(comparison: Comparison, price: float | None) -> list[list[str]]:
    header = ["team", "guaranteed", "all busy", "alone"] + (["cost/month"] if price is not None else [])
    rows = [header]
    for team in comparison.teams:
        row = [team.name, _cell(team, "guaranteed"), _cell(team, "busy"), _cell(team, "alone")]
        rows.append(row + ([_cost(team, price)] if price is not None else []))
    return rows


def summary(comparison: Comparison) -> str:
    base, head = comparison.base, comparison.head
    pool = f"{base.capacity:g}" if base.capacity == head.capacity else f"{base.capacity:g} -> {head.capacity:g}"
    busy = (
        f"{head.saturated_utilisation:.0%}"
        if round(base.saturated_utilisation, 2) == round(head.saturated_utilisation, 2)
        else f"{base.saturated_utilisation:.0%} -> {head.saturated_utilisation:.0%}"
    )
    return f"GPU pool: {pool}. All teams busy: {busy} of the pool in use."


def _moves(comparison: Comparison) -> str:
    if not comparison.teams:
        return f"No team's share moves ({comparison.unchanged} teams)."
    unchanged = f"; {comparison.unchanged} unchanged" if comparison.unchanged else ""
    return f"{len(comparison.teams)} teams move, losers first{unchanged}."


def render_text(review: Review, price: float | None) -> list[str]:
    """The review as lines before the text table."""
    lines = [f"!! {hazard.key}: {hazard.what}" for hazard in review.hazards]
    if review.comparison is None:
        return [*lines, review.note] if review.note else lines
    lines += ["Against the base: " + summary(review.comparison) + " " + _moves(review.comparison)]
    if review.comparison.teams:
        lines += aligned(change_rows(review.comparison, price))
    return lines


def _chart(teams: Sequence[TeamChange]) -> list[str]:
    before = [(t.before or NOTHING).busy for t in teams]
    after = [(t.after or NOTHING).busy for t in teams]
    names = [f"{t.name}  {b:.2f} -> {a:.2f}" for t, b, a in zip(teams, before, after, strict=True)]
    return overlaid_bars(names, "GPUs, all busy", before, after, (BEFORE_COLOUR, BAR_COLOUR))


def render_markdown(review: Review, price: float | None) -> list[str]:
    """The review as Markdown before the plan: a caution block, the teams that move, and their picture."""
    lines: list[str] = []
    if review.hazards:
        # GitHub's alert: a top-level blockquote whose first line is the marker alone, drawn in red for CAUTION
        # (github/docs content/get-started/writing-on-github/.../basic-writing-and-formatting-syntax.md#alerts).
        lines += [
            "> [!CAUTION]",
            "> **This change deletes a team's data or takes away its access.** Read this before approving:",
            *(f"> - **`{hazard.key}`**: {hazard.what}" for hazard in review.hazards),
            "",
        ]
    lines += ["#### What this change moves", ""]
    comparison = review.comparison
    if comparison is None:
        return [*lines, review.note, ""]
    lines += [summary(comparison) + " " + _moves(comparison), ""]
    if not comparison.teams:
        return lines
    rows = change_rows(comparison, price)
    lines += ["| " + " | ".join(rows[0]) + " |", "| --- |" + " ---: |" * (len(rows[0]) - 1)]
    lines += ["| " + " | ".join([f"`{row[0]}`", *row[1:]]) + " |" for row in rows[1:]]
    if len(comparison.teams) < 2:
        return [*lines, ""]  # one team's move is its row; its picture would be taller than the table
    shown = {team.name for team in sorted(comparison.teams, key=lambda team: -abs(team.moved))[:CHART_TEAMS]}
    teams = [team for team in comparison.teams if team.name in shown]
    more = f" (the {CHART_TEAMS} that move most)" if len(comparison.teams) > CHART_TEAMS else ""
    lines += [
        "",
        f"Each team's share with every team busy, before (grey) and after (blue), in GPUs{more}.",
        "",
        *_chart(teams),
        "",
    ]
    return lines
