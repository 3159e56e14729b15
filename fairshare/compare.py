"""What a change of the queues moves: each team's guaranteed, all-busy and alone share before and after it.

A pull request's reviewer needs the teams that lose first: those are the ones to ask. So
teams are ordered by what their all-busy share loses (then their guarantee, then their share
alone), and teams whose shares all stay within the table's last digit are only counted.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fairshare.plan import Plan, QueuePlan, guaranteed_hours

UNCHANGED = 0.005
"""Below the table's last shown digit: no change."""


@dataclass(frozen=True)
class Shares:
    """A team's three shares in one plan, in GPUs, and its guaranteed GPU-hours a month."""

    guaranteed: float
    busy: float
    alone: float
    guaranteed_hours: float

    @staticmethod
    def of(queue: QueuePlan) -> "Shares":
        return Shares(queue.rigid or 0.0, queue.saturated, queue.alone or 0.0, guaranteed_hours(queue) or 0.0)


NOTHING = Shares(0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class TeamChange:
    name: str
    before: Shares | None
    """None: the team is new."""
    after: Shares | None
    """None: the team is gone."""

    def _delta(self, field: str) -> float:
        after, before = self.after or NOTHING, self.before or NOTHING
        value: float = getattr(after, field) - getattr(before, field)
        return value

    @property
    def busy(self) -> float:
        return self._delta("busy")

    @property
    def guaranteed(self) -> float:
        return self._delta("guaranteed")

    @property
    def alone(self) -> float:
        return self._delta("alone")

    @property
    def moved(self) -> float:
        """What decides whether the team loses or gains: its all-busy change, else its guarantee's, else alone's."""
        return next((d for d in (self.busy, self.guaranteed, self.alone) if abs(d) >= UNCHANGED), 0.0)

    @property
    def changed(self) -> bool:
        return self.before is None or self.after is None or self.moved != 0.0


@dataclass(frozen=True)
class Comparison:
    base: Plan
    head: Plan
    teams: Sequence[TeamChange]
    """Changed teams only: losers first, then gainers."""
    unchanged: int

    def to_data(self, price: float | None) -> dict[str, Any]:
        def shares(value: Shares | None) -> dict[str, float] | None:
            if value is None:
                return None
            data = {"guaranteed": value.guaranteed, "saturated": value.busy, "alone": value.alone}
            if price is not None:
                data["guaranteedCostPerMonth"] = round(value.guaranteed_hours * price, 6)
            return {key: round(number, 6) for key, number in data.items()}

        return {
            "capacity": {"before": self.base.capacity, "after": self.head.capacity},
            "teams": [
                {"name": team.name, "before": shares(team.before), "after": shares(team.after)} for team in self.teams
            ],
            "unchanged": self.unchanged,
        }


def _leaves(plan: Plan) -> dict[str, Shares]:
    return {q.name: Shares.of(q) for q in plan.queues if q.alone is not None}


def compare(base: Plan, head: Plan) -> Comparison:
    before, after = _leaves(base), _leaves(head)
    names = list(before) + [name for name in after if name not in before]
    every = [TeamChange(name, before.get(name), after.get(name)) for name in names]
    changed = [team for team in every if team.changed]
    losers = sorted((t for t in changed if t.moved < 0), key=lambda team: team.moved)
    gainers = sorted((t for t in changed if t.moved >= 0), key=lambda team: -team.moved)
    return Comparison(base, head, losers + gainers, len(every) - len(changed))
