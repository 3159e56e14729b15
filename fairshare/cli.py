"""`python -m fairshare`: the plan for a stack, a what-if on it, or a scenario file; `... cost`: what was used.

A scenario needs nothing of the stack config: the stack's commands (fairshare/stack_cli.py) are imported only
when asked for, so `--scenario` starts without the whole config tree (a tenth of a second off every run).
"""

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from config.issues import ConfigError
from fairshare.arguments import INVALID_INPUT, checked_price
from fairshare.markdown import render_markdown
from fairshare.plan import Plan, plan
from fairshare.review import Review, review_data
from fairshare.review import render_markdown as review_markdown
from fairshare.review import render_text as review_text
from fairshare.scenario import read_scenario
from fairshare.table import render

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


def _stack_plan(args: argparse.Namespace) -> tuple[Plan, Review | None]:
    from fairshare.stack_cli import stack_plan  # noqa: PLC0415 -- the stack config, only for a stack

    return stack_plan(args)


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
    return plan(scenario.queues, scenario.capacity, demand, tree=scenario.tree)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["cost"], ["usage"]):
        from fairshare.stack_cli import cost_main, usage_main  # noqa: PLC0415 -- only the stack's commands need it

        return (cost_main if argv[0] == "cost" else usage_main)(argv[1:])
    args = _parser().parse_args(argv)
    try:
        if args.json and args.format is not None:
            raise ConfigError([f"--json and --format {args.format}: choose one"])
        price = checked_price(args.price_per_gpu_hour)
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
