"""The commands that read a stack file: its plan (with a what-if, past use or a base to compare), and `cost` and
`usage`, which read its queues and ask Prometheus."""

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from config.changes import hazards
from config.issues import ConfigError
from config.kai_scheduler.fairness import USAGE_ALLOCATION_METRIC, USAGE_CAPACITY_METRIC
from config.sources import read_stack_file
from config.stack import StackConfig
from fairshare.arguments import INVALID_INPUT, checked_capacity, checked_price
from fairshare.compare import compare
from fairshare.cost import cost_report, measure, render_cost
from fairshare.plan import PastUse, Plan, plan, pool_capacity
from fairshare.prometheus import Prometheus
from fairshare.review import Review
from fairshare.usage import read_usage_file, read_usage_prometheus, usage_document

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _past_use(args: argparse.Namespace, settings: StackConfig) -> PastUse | None:
    """Past use from a file or from Prometheus, weighed at the stack's kValue (KAI's default 1 if unset)."""
    tree = settings.queue_tree
    if args.usage is not None:
        usage = read_usage_file(args.usage, tree)
    elif args.usage_from is not None:
        usage = read_usage_prometheus(
            Prometheus(args.usage_from),
            settings.fairness,
            allocation=USAGE_ALLOCATION_METRIC,
            capacity=USAGE_CAPACITY_METRIC,
            now=int(time.time()),
            tree=tree,
        )
    else:
        return None
    return PastUse(usage, settings.fairness.k_value, in_stack=settings.fairness.time_based)


def _demand_file(argument: str) -> list[tuple[str, str, object]]:
    """`--demand FILE.json`: a JSON object of leaf queue -> GPUs asked for (examples/demand.json)."""
    try:
        document = json.loads(Path(argument).read_text())
    except OSError as error:
        raise ConfigError([f"--demand {argument}: cannot be read ({error.strerror})"]) from None
    except json.JSONDecodeError as error:
        raise ConfigError([f"--demand {argument} is not valid JSON: {error}"]) from None
    if not isinstance(document, dict):
        raise ConfigError([f'--demand {argument}: give an object of leaf queue -> GPUs, e.g. {{"team-nlp": 1}}'])
    return [(f"--demand {argument}: {name!r}", str(name), amount) for name, amount in document.items()]


def _demand(arguments: Sequence[str], leaves: Sequence[str]) -> dict[str, float] | None:
    """What each leaf asks for in a what-if: LEAF=AMOUNT pairs and JSON files, later ones winning."""
    if not arguments:
        return None
    entries: list[tuple[str, str, object]] = []
    for argument in arguments:
        name, sep, amount = argument.partition("=")
        if sep:
            entries.append((f"--demand {argument!r}", name, amount))
        elif argument.endswith(".json"):
            entries += _demand_file(argument)
        else:
            raise ConfigError([f"--demand {argument!r}: use LEAF=AMOUNT, or a JSON file of leaf queue -> GPUs"])
    demand: dict[str, float] = {}
    for where, leaf, asked in entries:
        if leaf not in leaves:
            raise ConfigError([f"{where}: not a leaf queue; the leaf queues are {', '.join(leaves)}"])
        try:
            value = float(asked) if isinstance(asked, (str, int, float)) and not isinstance(asked, bool) else None
        except ValueError:
            value = None
        if value is None or not 0 <= value < float("inf"):
            raise ConfigError([f"{where}: {asked!r} is not a number of GPUs: give a finite number >= 0"])
        demand[leaf] = value
    return demand


def _pool(args: argparse.Namespace, settings: StackConfig) -> float:
    capacity = checked_capacity(args.capacity) or pool_capacity(settings.queues)
    if capacity is None:
        raise ConfigError(
            ["a root queue's GPU quota is unlimited (-1), so the pool's size is unknown: pass --capacity N"]
        )
    return capacity


def stack_plan(args: argparse.Namespace) -> tuple[Plan, Review | None]:
    settings = read_stack_file(PROJECT_ROOT / f"Pulumi.{args.stack}.yaml")
    demand = _demand(args.demand, settings.queue_tree.leaves)
    head = plan(settings.queues, _pool(args, settings), demand, _past_use(args, settings))
    return head, _review(args, settings, head)


def _review(args: argparse.Namespace, settings: StackConfig, head: Plan) -> Review | None:
    """The change from `--base`: what it takes from teams, and whose shares move. A base this code cannot read is
    said, not fatal: the pull request may be the one that changes the format."""
    if args.base is None:
        return None
    if not args.base.is_file():
        raise ConfigError([f"--base {args.base}: no such file (a new stack has no base: leave --base out)"])
    try:
        base = read_stack_file(args.base)
        base_plan = plan(base.queues, _pool(args, base))
    except ConfigError as error:
        return Review(
            note=f"The base's stack file does not validate with this change's code, so nothing is compared: "
            f"{error.problems[0]}"
        )
    return Review(hazards(base, settings), compare(base_plan, head))


def _cost_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairshare cost", description="GPU-hours and cost per queue over a window, from Prometheus."
    )
    parser.add_argument(
        "--prometheus",
        required=True,
        metavar="URL",
        help="Prometheus' base URL, without credentials: those come from PROMETHEUS_BEARER_TOKEN(_FILE) or "
        "PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD(_FILE)",
    )
    parser.add_argument("--window", default="30d", help="how far back: 30d, 12h, 2w, 90m (default 30d)")
    parser.add_argument(
        "--price-per-gpu-hour", type=float, metavar="P", help="add each team's cost (default: GPU-hours only)"
    )
    parser.add_argument("--stack", default="dev", help="the stack whose queues to report (default dev)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def cost_main(argv: Sequence[str]) -> int:
    args = _cost_parser().parse_args(argv)
    try:
        price = checked_price(args.price_per_gpu_hour)
        settings = read_stack_file(PROJECT_ROOT / f"Pulumi.{args.stack}.yaml")
        prometheus = Prometheus(args.prometheus)
        measured = measure(prometheus, settings.queues, args.window)
        report = cost_report(
            settings.queues,
            measured.gpu_hours,
            measured.utilisation,
            window=args.window,
            price=price,
            coverage=measured.coverage,
            notes=tuple(measured.notes),
        )
    except ConfigError as error:
        print(f"fairshare cost: {'; '.join(error.problems)}", file=sys.stderr)
        return INVALID_INPUT
    print(json.dumps(report.to_data(), indent=2) if args.json else render_cost(report))
    return 0


def usage_main(argv: Sequence[str]) -> int:
    """`python -m fairshare usage`: the past use KAI would read now, as a `--usage` file (a snapshot to commit, so
    the plan of a pull request, rendered without access to the cluster, shows it)."""
    parser = argparse.ArgumentParser(
        prog="python -m fairshare usage",
        description="Past GPU use per queue over the stack's fairness.windowSize, read as KAI reads it, as JSON for "
        "--usage.",
    )
    parser.add_argument(
        "--prometheus", required=True, metavar="URL", help="Prometheus' base URL (credentials as for cost)"
    )
    parser.add_argument(
        "--stack", default="dev", help="the stack whose queues and fairness window to read (default dev)"
    )
    args = parser.parse_args(argv)
    try:
        settings = read_stack_file(PROJECT_ROOT / f"Pulumi.{args.stack}.yaml")
        now = int(time.time())
        usage = read_usage_prometheus(
            Prometheus(args.prometheus),
            settings.fairness,
            allocation=USAGE_ALLOCATION_METRIC,
            capacity=USAGE_CAPACITY_METRIC,
            now=now,
            tree=settings.queue_tree,
        )
    except ConfigError as error:
        print(f"fairshare usage: {'; '.join(error.problems)}", file=sys.stderr)
        return INVALID_INPUT
    print(json.dumps(usage_document(usage, settings.fairness.window_size, now), indent=2))
    return 0
