"""`python -m harness.check <stack>`: validate a stack file and list what `pulumi up` would create, offline.

It reads `Pulumi.<stack>.yaml` as Pulumi does (config/sources.read_stack_document), then runs the
real program under the same mocks as the tests, as a fresh stack's `pulumi preview`. No Pulumi CLI,
cloud account or cluster is needed, so a newcomer can try a stack before owning any of them.

What it cannot see: encrypted secrets (a `secure:` value needs the stack's passphrase or KMS key),
so a credential present in the file is stood in for by one of the right shape; `pulumi preview`
checks the real one. A stack whose credential is not set yet (setting it needs the Pulumi CLI) is
refused, unless `--stand-in-secrets` asks for stand-ins of the credentials its host.mode needs,
which the output then names. Exit status: 0 valid, 1 a config error (one line per problem on
stderr), 2 a usage error.
"""

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi

from config.issues import ConfigError
from config.sources import CREDENTIALS_OF_MODE, read_stack_document
from harness.mocks import FAKE_HOST_KEY, FAKE_HOST_KUBECONFIG
from harness.monitor import Registration
from harness.program import ProgramRun, attempt_main

STAND_INS = {"kubeconfig": FAKE_HOST_KUBECONFIG, "sshPrivateKey": FAKE_HOST_KEY}
"""Shaped like the real credentials (config/credentials.py checks their shape), valid nowhere."""
CONFIG_ERROR = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.check",
        description="Validate a stack file and list what `pulumi up` would create on a new stack, offline.",
    )
    parser.add_argument(
        "stack", help="a stack name (reads Pulumi.<STACK>.yaml in the current directory) or a stack file's path"
    )
    parser.add_argument(
        "--stand-in-secrets",
        action="store_true",
        help="check an ssh or kubeconfig stack before its credential is set: stand in for the ones host.mode needs",
    )
    return parser


def stack_file_of(argument: str) -> tuple[Path, str]:
    """The stack file and the stack's name, from `dev` or from `path/to/Pulumi.dev.yaml`."""
    path = Path(argument)
    if path.suffix in {".yaml", ".yml"}:
        name = path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
        return path, name
    return Path.cwd() / f"Pulumi.{argument}.yaml", argument


def _tree(run: ProgramRun) -> list[str]:
    """Each resource under its component, in a stable order: component type and name, then children by type."""
    children: dict[str, list[Registration]] = {}
    for registration in run.registrations:
        children.setdefault(registration.parent, []).append(registration)
    known = {registration.urn for registration in run.registrations}
    roots = [parent for parent in children if parent not in known]
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for child in sorted(children.get(parent, []), key=lambda r: (r.type, r.name)):
            read = "  (read, not created)" if child.read else ""
            lines.append(f"{'  ' * depth}{child.type}  {child.name}{read}")
            walk(child.urn, depth + 1)

    for root in sorted(roots):
        walk(root, 0)
    return lines


def _kind(registration: Registration) -> str:
    """`kubernetes:core/v1:Namespace` -> Namespace; `pulumi:providers:kubernetes` -> kubernetes provider."""
    package, _, kind = registration.type.rpartition(":")
    return f"{kind} provider" if package == "pulumi:providers" else kind


def _summary(created: Sequence[Registration]) -> str:
    counts = Counter(_kind(r) for r in created if not r.type.startswith("gpu-tenancy:"))
    return ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _needed(settings: Mapping[str, Any]) -> frozenset[str]:
    """The credentials the stack's host.mode reads, from the raw settings (which may not validate yet)."""
    host = settings.get("host")
    mode = host.get("mode") if isinstance(host, Mapping) else None
    return CREDENTIALS_OF_MODE.get(str(mode), frozenset())


def check(argument: str, *, stand_in_secrets: bool = False) -> int:
    path, stack = stack_file_of(argument)
    try:
        stack_file = read_stack_document(path)
    except ConfigError as invalid:
        print(invalid, file=sys.stderr)
        return CONFIG_ERROR
    for warning in stack_file.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    stand_ins = {key: STAND_INS[key] for key in sorted(stack_file.secrets)}
    unset = sorted(_needed(stack_file.settings) - stack_file.secrets) if stand_in_secrets else []
    error, run = attempt_main(
        stack_file.settings, {**stand_ins, **{key: STAND_INS[key] for key in unset}}, stack=stack, preview=True
    )
    if isinstance(error, pulumi.RunError):
        print(error, file=sys.stderr)
        return CONFIG_ERROR
    if error is not None:
        raise error
    for warning in run.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    created = [r for r in run.registrations if not r.read]
    print(f"{path.name} is valid. On a new stack, `pulumi up` would create {len(created)} resources:")
    print("\n".join(f"  {line}" for line in _tree(run)))
    print(f"Besides the components: {_summary(created)}; and it reads {len(run.registrations) - len(created)} objects.")
    print(f"Stack outputs: {', '.join(sorted(run.exports))}.")
    if stand_ins:
        print(
            f"Stood in for the encrypted {', '.join(stand_ins)}: `pulumi preview` checks the real "
            f"{'ones' if len(stand_ins) > 1 else 'one'}."
        )
    for key in unset:
        print(
            f"Stood in for {key}, which the stack does not set yet (--stand-in-secrets): set it with "
            f"`pulumi config set --secret gpu-tenancy:{key} < FILE` before `pulumi preview`."
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return check(args.stack, stand_in_secrets=args.stand_in_secrets)


if __name__ == "__main__":
    sys.exit(main())
