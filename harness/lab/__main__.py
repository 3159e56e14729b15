"""`python -m harness.lab`: start, fill, inspect and stop a lab (docs/lab.md)."""

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.lab import cluster
from harness.lab.apply import apply_stack
from harness.lab.engine_stack import run_cli
from harness.lab.operators import BY_NAME, start_operator


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.lab",
        description="A real Kubernetes 1.36 with fake GPU nodes on this machine (Linux, as root): docs/lab.md.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a bare lab and return once it is ready (a no-op if one runs)")
    up.add_argument("--state", type=Path, required=True, help="the lab's folder: kubeconfig, lab.json, logs")
    up.add_argument("--gpu-nodes", type=int, default=2)
    up.add_argument("--gpus-per-node", type=int, default=2)
    apply = commands.add_parser("apply", help="apply a stack's program to the lab, as `pulumi up` would")
    apply.add_argument("stack", help="a stack name (Pulumi.<STACK>.yaml) or a stack file's path")
    apply.add_argument("--state", type=Path, required=True)
    status = commands.add_parser("status", help="0 when all is up, 1 when a part is down, 2 when there is no lab")
    status.add_argument("--state", type=Path, required=True)
    status.add_argument("--json", action="store_true", help="lab.json with a `down` list")
    operator = commands.add_parser(
        "operator", help="install a workload operator in a tenant's vCluster and run it until Ctrl-C (docs/lab.md)"
    )
    operator.add_argument("name", choices=sorted(BY_NAME))
    operator.add_argument("--tenant", required=True, help="the tenant's name, as `status` lists it")
    operator.add_argument("--state", type=Path, required=True)
    engine = commands.add_parser(
        "pulumi",
        help="the lab's real Pulumi CLI on a lab copy of a stack: python -m harness.lab pulumi --state DIR "
        "--stack dev -- preview (docs/lab.md)",
    )
    engine.add_argument("--state", type=Path, required=True)
    engine.add_argument("--stack", required=True, help="a stack name (Pulumi.<STACK>.yaml) or a stack file's path")
    engine.add_argument("args", nargs=argparse.REMAINDER, help="the CLI's arguments, after --")
    down = commands.add_parser("down", help="stop everything up and apply started; the logs stay")
    down.add_argument("--state", type=Path, required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "up": _up,
        "status": lambda a: cluster.status(a.state, as_json=a.json),
        "down": _down,
        "operator": lambda a: _run_operator(a.name, a.tenant, a.state),
        "pulumi": lambda a: run_cli(a.state.resolve(), a.stack, a.args[1:] if a.args[:1] == ["--"] else a.args),
        "apply": lambda a: apply_stack(a.stack, a.state),
    }
    return commands[args.command](args)


def _down(args: argparse.Namespace) -> int:
    cluster.down(args.state)
    return 0


def _up(args: argparse.Namespace) -> int:
    if args.gpu_nodes < 1 or args.gpus_per_node < 1:
        print("lab: --gpu-nodes and --gpus-per-node are at least 1", file=sys.stderr)
        return 2
    cluster.up(args.state, gpu_nodes=args.gpu_nodes, gpus_per_node=args.gpus_per_node)
    return 0


def _run_operator(name: str, tenant: str, state: Path) -> int:
    running = start_operator(BY_NAME[name], tenant, state)
    print(f"lab: {name} {running.operator.version} runs for {tenant}; its log is {running.process.log}", flush=True)
    try:
        assert running.process.child is not None
        return running.process.child.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        running.stop()


if __name__ == "__main__":
    sys.exit(main())
