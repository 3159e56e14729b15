"""`python -m fairshare`: the plan for a stack, a what-if on it, or a scenario file; `... cost`: what was used."""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from config.issues import ConfigError
from config.sources import read_stack_file
from fairshare.cost import cost_report, measure, render_cost
from fairshare.markdown import render_markdown
from fairshare.plan import Plan, plan, pool_capacity
from fairshare.prometheus import Prometheus
from fairshare.scenario import fair_share_json, read_scenario
from fairshare.table import render

PROJECT_ROOT = Path(__file__).resolve().parent.parent
INVALID_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fairshare", description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="read Pulumi.<STACK>.yaml from the project, e.g. dev")
    source.add_argument("--scenario", type=Path, help="JSON file: {capacity, queues[] with a request per leaf}")
    parser.add_argument("--demand", action="append", default=[], metavar="QUEUE=AMOUNT", help="what-if demand")
    parser.add_argument("--capacity", type=float, help="GPUs in the pool (default: the roots' quotas)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--format", choices=["text", "markdown"], default="text", help="markdown: a table and charts for a PR comment"
    )
    parser.add_argument(
        "--price-per-gpu-hour", type=float, metavar="P", help="add each team's guaranteed GPU-hours per month and cost"
    )
    return parser


def _demand(pairs: Sequence[str], leaves: Sequence[str]) -> dict[str, float] | None:
    if not pairs:
        return None
    demand: dict[str, float] = {}
    for pair in pairs:
        name, sep, amount = pair.partition("=")
        if not sep or name not in leaves:
            raise ConfigError([f"--demand {pair!r}: use LEAF=AMOUNT with one of the leaf queues: {', '.join(leaves)}"])
        try:
            demand[name] = float(amount)
        except ValueError:
            raise ConfigError([f"--demand {pair!r}: {amount!r} is not a number"]) from None
        if not 0 <= demand[name] < float("inf"):
            raise ConfigError([f"--demand {pair!r}: the amount must be a finite number >= 0"])
    return demand


def _stack_plan(args: argparse.Namespace) -> Plan:
    settings = read_stack_file(PROJECT_ROOT / f"Pulumi.{args.stack}.yaml")
    capacity = args.capacity if args.capacity is not None else pool_capacity(settings.queues)
    if capacity is None or capacity < 0:
        raise ConfigError(["a root queue's GPU quota is unlimited, so the pool size is unknown: pass --capacity N"])
    return plan(settings.queues, capacity, _demand(args.demand, settings.queue_tree.leaves))


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
    parser.add_argument("--price-per-gpu-hour", type=float, required=True, metavar="P")
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
        price = _price(args.price_per_gpu_hour) or 0.0
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["cost"]:
        return cost_main(argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.scenario is not None:
            if args.demand or args.capacity is not None:
                raise ConfigError(["--demand and --capacity go with --stack; a scenario file carries its own"])
            if args.format == "markdown" or args.price_per_gpu_hour is not None:
                raise ConfigError(["--format markdown and --price-per-gpu-hour go with --stack"])
            scenario = read_scenario(args.scenario)
            for warning in scenario.stricter_than_kai():
                print(f"fairshare: warning: {warning} (gpu-tenancy:queues would refuse this)", file=sys.stderr)
            if args.json:
                print(json.dumps(fair_share_json(scenario), indent=2))
            else:
                demand = {q.name: q.request or 0.0 for q in scenario.queues if q.request is not None}
                print(render(plan(scenario.queues, scenario.capacity, demand)))
            return 0
        price = _price(args.price_per_gpu_hour)
        result = _stack_plan(args)
    except ConfigError as error:
        print(f"fairshare: {'; '.join(error.problems)}", file=sys.stderr)
        return INVALID_INPUT
    if args.json:
        print(json.dumps(result.to_data(), indent=2))
    elif args.format == "markdown":
        print(render_markdown(result, stack=args.stack, price=price), end="")
    else:
        print(render(result, price))
    return 0
