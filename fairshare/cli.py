"""`python -m fairshare`: the plan for a stack, a what-if on it, or a scenario file; `... cost`: what was used."""

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
from fairshare.compare import compare
from fairshare.cost import cost_report, measure, render_cost
from fairshare.markdown import render_markdown
from fairshare.plan import PastUse, Plan, plan, pool_capacity
from fairshare.prometheus import Prometheus
from fairshare.review import Review, review_data
from fairshare.review import render_markdown as review_markdown
from fairshare.review import render_text as review_text
from fairshare.scenario import read_scenario
from fairshare.table import render
from fairshare.usage import read_usage_file, read_usage_prometheus, usage_document

PROJECT_ROOT = Path(__file__).resolve().parent.parent
INVALID_INPUT = 2


USAGE = """python -m fairshare (--stack STACK | --scenario FILE) [--demand LEAF=AMOUNT|FILE ...] [--capacity N]
                          [--usage FILE | --usage-from URL] [--price-per-gpu-hour P] [--base FILE]
                          [--json | --format {text,markdown}]
       python -m fairshare cost --prometheus URL [--window 30d] [--price-per-gpu-hour P] [--stack STACK] [--json]
       python -m fairshare usage --prometheus URL [--stack STACK]"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairshare",
        usage=USAGE,
        description=__doc__,
        epilog="`python -m fairshare cost --help`: GPU-hours (and, with a price, cost) per team, from Prometheus. "
        "`python -m fairshare usage --help`: the past use KAI reads, as a --usage file.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="read Pulumi.<STACK>.yaml from the project, e.g. dev")
    source.add_argument(
        "--scenario", type=Path, help="JSON file: {capacity, queues[] with a request per leaf} (examples/scenario.json)"
    )
    parser.add_argument(
        "--demand",
        action="append",
        default=[],
        metavar="LEAF=AMOUNT|FILE",
        help="what-if demand (with --stack): repeat LEAF=AMOUNT, or give a JSON file (examples/demand.json)",
    )
    parser.add_argument("--capacity", type=float, help="GPUs in the pool (with --stack; default: the roots' quotas)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON (one layout for both sources)")
    parser.add_argument(
        "--format",
        choices=["text", "markdown"],
        help="text (default), or markdown: a table and its chart for a PR comment",
    )
    parser.add_argument(
        "--price-per-gpu-hour", type=float, metavar="P", help="add each team's guaranteed GPU-hours per month and cost"
    )
    parser.add_argument(
        "--base",
        type=Path,
        metavar="FILE",
        help="with --stack: the stack file before a change (e.g. the pull request's base); shows first what the "
        "change takes from teams (data, access) and whose shares move",
    )
    past = parser.add_mutually_exclusive_group()
    past.add_argument(
        "--usage",
        type=Path,
        metavar="FILE",
        help="with --stack: past GPU-hours per queue and the cluster's (examples/usage.json); adds each team's "
        "all-busy share with time-based fairness, at the stack's fairness.kValue",
    )
    past.add_argument(
        "--usage-from",
        metavar="URL",
        help="with --stack: read that past use from Prometheus as KAI does, over the stack's fairness.windowSize "
        "(credentials as for `cost`)",
    )
    return parser


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


def _capacity(value: float | None) -> float | None:
    if value is not None and not 0 < value < float("inf"):
        raise ConfigError([f"--capacity {value:g}: give the pool's size in GPUs, a finite number above 0"])
    return value


def _pool(args: argparse.Namespace, settings: StackConfig) -> float:
    capacity = _capacity(args.capacity) or pool_capacity(settings.queues)
    if capacity is None:
        raise ConfigError(
            ["a root queue's GPU quota is unlimited (-1), so the pool's size is unknown: pass --capacity N"]
        )
    return capacity


def _stack_plan(args: argparse.Namespace) -> tuple[Plan, Review | None]:
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


def _scenario_plan(args: argparse.Namespace) -> Plan:
    """A scenario's plan; its leaves' requests are the what-if, so `whatIf` is KAI's division of that demand."""
    if args.demand or args.capacity is not None:
        raise ConfigError(["--demand and --capacity go with --stack: a scenario file carries its own"])
    if args.base is not None:
        raise ConfigError(["--base goes with --stack: it compares two stack files"])
    if args.usage is not None or args.usage_from is not None:
        raise ConfigError(["--usage and --usage-from go with --stack: the kValue and window are the stack's"])
    scenario = read_scenario(args.scenario)
    for warning in scenario.stricter_than_kai():
        print(f"fairshare: warning: {warning} (gpu-tenancy:queues would refuse this)", file=sys.stderr)
    demand = {q.name: q.request for q in scenario.queues if q.request is not None}
    return plan(scenario.queues, scenario.capacity, demand)


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


def _price(value: float | None) -> float | None:
    if value is not None and not 0 <= value < float("inf"):
        raise ConfigError([f"--price-per-gpu-hour {value:g}: give a finite price >= 0"])
    return value


def cost_main(argv: Sequence[str]) -> int:
    args = _cost_parser().parse_args(argv)
    try:
        price = _price(args.price_per_gpu_hour)
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cost"]:
        return cost_main(argv[1:])
    if argv[:1] == ["usage"]:
        return usage_main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.json and args.format is not None:
            raise ConfigError([f"--json and --format {args.format}: choose one"])
        price = _price(args.price_per_gpu_hour)
        result, review = (_scenario_plan(args), None) if args.scenario is not None else _stack_plan(args)
    except ConfigError as error:
        print(f"fairshare: {'; '.join(error.problems)}", file=sys.stderr)
        return INVALID_INPUT
    if args.json:
        data = result.to_data(price)
        if review is not None:
            data["change"] = review_data(review, price)
        print(json.dumps(data, indent=2))
    elif args.format == "markdown":
        subject = f"stack `{args.stack}`" if args.stack else f"scenario `{args.scenario.name}`"
        before = review_markdown(review, price) if review is not None else []
        print(render_markdown(result, subject=subject, price=price, review=before), end="")
    else:
        before = [*review_text(review, price), ""] if review is not None else []
        print("\n".join([*before, render(result, price)]))
    return 0
