"""Runs the real program (or any Pulumi code) under the mocks and records what it registers."""

import asyncio
import functools
import json
import logging
import runpy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pulumi
import pulumi.runtime
from pulumi.output import Unknown

from harness.mocks import FreshPreviewMocks, RealisticMocks
from harness.monitor import RecordingMonitor, Registration

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "__main__.py"
PROJECT = "gpu-tenancy"


@dataclass
class ExportedValue:
    value: Any
    secret: bool
    known: bool = True


class _LogCapture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class ProgramRun:
    registrations: list[Registration]
    exports: dict[str, ExportedValue] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)
    invokes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Each provider function the program called, with its arguments: (token, args)."""

    def world_after(self) -> dict[str, Any]:
        """What this `up` leaves for the next one to find (the `previous` of run_main): the memory it wrote on the
        host (the node ports, and which teams there are)."""
        for registration in self.registrations:
            data = registration.inputs.get("data") or {}
            if registration.type == "kubernetes:core/v1:ConfigMapPatch" and "ports.json" in data:
                return {"nodePorts": json.loads(data["ports.json"]), "tenants": json.loads(data["tenants.json"])}
        return {}

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_]

    def one(self, type_: str, name: str | None = None) -> Registration:
        found = [r for r in self.of_type(type_) if name is None or r.name == name]
        assert len(found) == 1, f"expected one {type_} {name or ''}, found {[r.name for r in found]}"
        return found[0]

    def longest_chain(self, end: Registration | None = None) -> list[Registration]:
        """The longest path of resources each waiting for the one before, ending at `end` (or anywhere).

        A component is done when its children are, so depending on one means waiting for them all;
        components themselves take no time and do not count. Providers do count: they are
        configured before anything that uses them.
        """
        by_urn = {r.urn: r for r in self.registrations}
        children: dict[str, list[str]] = {}
        for r in self.registrations:
            children.setdefault(r.parent, []).append(r.urn)
        best: dict[str, list[Registration]] = {}

        def chain(urn: str) -> list[Registration]:
            if urn not in best:
                registration = by_urn.get(urn)
                if registration is None:
                    return []
                waits = set(registration.dependencies)
                if registration.provider:
                    # A provider reference is `<urn>::<id>`; a resource waits for its provider too.
                    waits.add(registration.provider.rsplit("::", 1)[0])
                own = [registration]
                if registration.type.startswith("gpu-tenancy:"):
                    waits |= set(children.get(urn, []))
                    own = []
                longest = max((chain(dep) for dep in waits), key=len, default=[])
                best[urn] = [*longest, *own]
            return best[urn]

        if end is not None:
            return chain(end.urn)
        return max((chain(r.urn) for r in self.registrations), key=len, default=[])


@dataclass
class Attempt:
    """What a run registered, kept even when the program raised."""

    run: ProgramRun | None = None


def run_pulumi(
    build: Callable[[], Mapping[str, Any] | None],
    config: Mapping[str, Any] | None = None,
    secrets: Mapping[str, str] | None = None,
    stack: str = "dev",
    attempt: Attempt | None = None,
    *,
    preview: bool = False,
    previous: Mapping[str, Any] | None = None,
    secret_config: Sequence[str] = (),
    mocks: RealisticMocks | None = None,
) -> ProgramRun:
    """Run `build` under mocks; whatever it returns (or exports) is resolved with its secrecy. `secret_config`: config
    keys Pulumi holds as secret, as `pulumi config set --path --secret` under them makes them.

    With `preview`, the run is a dry run of a fresh stack (see FreshPreviewMocks); `mocks` replaces the realistic
    ones (the lab's answer reads from a real cluster).
    """
    attempt = attempt or Attempt()
    if mocks is None:
        mocks = FreshPreviewMocks(previous) if preview else RealisticMocks(previous)
    monitor = RecordingMonitor(mocks)
    capture = _LogCapture()
    logger = logging.getLogger(f"gpu-tenancy-tests-{id(monitor)}")
    logger.addHandler(capture)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    pulumi.runtime.set_mocks(
        monitor.mocks,
        project=PROJECT,
        stack=stack,
        preview=preview,
        monitor=monitor,
        logger=logger,
        organization="organization",
    )
    # A key with a namespace (`kubernetes:foo`) is passed as it is; the rest are the project's.
    all_config = {k if ":" in k else f"{PROJECT}:{k}": json.dumps(v) for k, v in (config or {}).items()}
    all_config.update({f"{PROJECT}:{k}": v for k, v in (secrets or {}).items()})
    secret_keys = [f"{PROJECT}:{k}" for k in [*(secrets or {}), *secret_config]]
    pulumi.runtime.set_all_config(all_config, secret_keys=secret_keys)

    run = ProgramRun(registrations=monitor.registrations, invokes=mocks.invokes)
    exported: dict[str, Any] = {}
    attempt.run = run

    async def resolve() -> None:
        for key, value in exported.items():
            output = pulumi.Output.from_input(value)
            run.exports[key] = ExportedValue(await output.future(), await output.is_secret(), await output.is_known())

    @pulumi.runtime.test
    def program() -> Any:
        with mock.patch.object(pulumi, "export", exported.__setitem__):
            returned = build()
        exported.update(returned or {})
        return pulumi.Output.from_input(asyncio.ensure_future(resolve()))

    try:
        program()
    finally:
        pulumi.runtime.set_all_config({}, secret_keys=[])
    run.warnings = [r.getMessage() for r in capture.records if r.levelno == logging.WARNING]
    run.infos = [r.getMessage() for r in capture.records if r.levelno == logging.INFO]
    return run


def is_unknown(value: Any) -> bool:
    """Whether a registered input was unknown when it was registered (as in a preview)."""
    return isinstance(value, Unknown)


def main_program() -> None:
    """`__main__.py`, run as `pulumi up` runs it."""
    runpy.run_path(str(MAIN), run_name="__main__")


def run_main(
    config: Mapping[str, Any],
    secrets: Mapping[str, str] | None = None,
    stack: str = "dev",
    *,
    preview: bool = False,
    shared: bool = True,
    previous: Mapping[str, Any] | None = None,
    secret_config: Sequence[str] = (),
) -> ProgramRun:
    """Run `__main__.py` exactly as `pulumi up` (or, with `preview`, a fresh stack's `pulumi preview`) would.

    The program is deterministic (a test runs it twice with `shared=False` to check), so a run is
    shared by every test that asks for the same inputs; tests treat it as read-only.
    """
    key = json.dumps([config, secrets or {}, stack, preview, previous or {}, list(secret_config)], sort_keys=True)
    return _cached_run(key) if shared else _cached_run.__wrapped__(key)


@functools.cache
def _cached_run(key: str) -> ProgramRun:
    config, secrets, stack, preview, previous, secret_config = json.loads(key)
    return run_pulumi(
        main_program,
        config=config,
        secrets=secrets,
        stack=stack,
        preview=preview,
        previous=previous,
        secret_config=secret_config,
    )


def attempt_main(
    config: Mapping[str, Any],
    secrets: Mapping[str, str] | None = None,
    secret_config: Sequence[str] = (),
    *,
    stack: str = "dev",
    preview: bool = False,
    previous: Mapping[str, Any] | None = None,
) -> tuple[BaseException | None, ProgramRun]:
    """Like run_main, but hands back the error together with whatever was registered before it."""
    attempt = Attempt()
    try:
        run = run_pulumi(
            main_program,
            config=config,
            secrets=secrets,
            stack=stack,
            attempt=attempt,
            preview=preview,
            previous=previous,
            secret_config=secret_config,
        )
    except Exception as error:
        assert attempt.run is not None
        return error, attempt.run
    return None, run
