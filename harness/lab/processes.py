"""The lab's processes: started detached with a log of their own, found again by pid, stopped for good.

A process outlives the `up` that started it (its own session), so `status` and `down` find
it from lab.json; a pid is trusted only while /proc says it still runs the same program,
so a reused pid is never signalled.
"""

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass
class Process:
    """One entry of lab.json's `processes`."""

    pid: int
    log: str
    version: str
    real: bool
    """Built from the upstream project at `version`; False for the lab's own stand-ins (docs/lab.md)."""
    ports: dict[str, int] = field(default_factory=dict)
    program: str = ""
    """The executable's name, checked against /proc before the pid is trusted."""
    child: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    """In the process that started it: its handle, which knows it lives before /proc shows its program (between
    fork and exec /proc shows the parent's)."""

    def to_data(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "child"}

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> "Process":
        return cls(**data)

    def alive(self) -> bool:
        if self.child is not None:
            return self.child.poll() is None
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        return state != "Z" and any(part.decode(errors="replace").endswith(self.program) for part in cmdline[:3])

    def stop(self, grace: float = 10) -> None:
        """SIGTERM to its process group, SIGKILL after `grace` seconds; done when it is gone."""
        if not self.alive():
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not self.alive():
                    return
                time.sleep(0.1)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(Path(self.log).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def start(
    command: Sequence[str],
    log: Path,
    *,
    version: str,
    real: bool = True,
    ports: Mapping[str, int] | None = None,
    environment: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Process:
    """`command` in a session of its own (so `up` can return and `down` can signal the group), output to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as output:
        child = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(environment or {})},
            cwd=cwd,
        )
    return Process(child.pid, str(log), version, real, dict(ports or {}), program=Path(command[0]).name, child=child)


def wait_until(check: Any, what: str, process: Process, timeout: float = 120) -> None:
    """Poll `check()` until it is true; a process that dies or a timeout ends the wait with its log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        if not process.alive():
            raise SystemExit(f"lab: {what} exited while starting; the end of {process.log}:\n{process.log_tail()}")
        time.sleep(0.25)
    raise SystemExit(
        f"lab: {what} was not ready after {timeout:.0f} s; the end of {process.log}:\n{process.log_tail()}"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
