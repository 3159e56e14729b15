"""`python -m harness.lab`: start, fill, inspect and stop a lab (docs/lab.md)."""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.lab import cluster
from harness.lab.apply import apply_stack
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
    down = commands.add_parser("down", help="stop everything up and apply started; the logs stay")
    down.add_argument("--state", type=Path, required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "up":
        if args.gpu_nodes < 1 or args.gpus_per_node < 1:
            print("lab: --gpu-nodes and --gpus-per-node are at least 1", file=sys.stderr)
            return 2
        cluster.up(args.state, gpu_nodes=args.gpu_nodes, gpus_per_node=args.gpus_per_node)
        return 0
    if args.command == "status":
        return cluster.status(args.state, as_json=args.json)
    if args.command == "down":
        cluster.down(args.state)
        return 0
    if args.command == "operator":
        return _run_operator(args.name, args.tenant, args.state)
    return apply_stack(args.stack, args.state)


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
