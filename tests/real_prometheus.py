"""A real Prometheus on 127.0.0.1 holding a month of history, backfilled with promtool.

The history is written as OpenMetrics and turned into TSDB blocks by `promtool tsdb create-blocks-from
openmetrics` (prometheus/prometheus cmd/promtool/backfill.go: its hidden --max-block-duration lets a month
go into a few blocks instead of one per two hours); Prometheus then serves them like any it scraped. The
package is Debian's (2.42); production runs Prometheus 3, whose range selectors exclude their left
boundary (prometheus/prometheus docs/migration.md @v3.0.0). The cost report's range queries take one
sample per step and no range selector, so they do not depend on it; `avg_over_time(...[$__range:1m])`
(time over quota) can differ by one sample at the window's start, 1 in 10,080 for a week.
"""

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.charts import missing

STEP = 60
"""Seconds between samples: a scrape a minute."""
BASIC_AUTH_USER = "reader"
BASIC_AUTH_PASSWORD = "stand-in password"
BASIC_AUTH_HASH = "$2b$10$abcdefghijklmnopqrstuuwxnLJkwHx.AdH.liHNdTIApjU38WMAW"
"""bcrypt of BASIC_AUTH_PASSWORD, as Prometheus' web config takes it (prometheus/exporter-toolkit web)."""

BACKFILL_FLAGS = ("--quiet", "--max-block-duration=768h")
"""A month in one or two blocks instead of one per two hours."""

Curve = Callable[[float], float | None]


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    curve: Curve
    """The value at a time, or None while the series does not exist."""


def openmetrics(series: list[Series], start: float, end: float) -> str:
    """One sample per STEP for each series while it exists, grouped by metric as OpenMetrics wants."""
    lines: list[str] = []
    for name in dict.fromkeys(s.name for s in series):
        lines.append(f"# TYPE {name} gauge")
        for one in (s for s in series if s.name == name):
            labels = ",".join(f'{key}="{value}"' for key, value in sorted(one.labels.items()))
            t = start
            while t <= end:
                value = one.curve(t)
                if value is not None:
                    lines.append(f"{name}{{{labels}}} {value:g} {t:.0f}")
                t += STEP
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _tools() -> tuple[str, str]:
    found = shutil.which("prometheus"), shutil.which("promtool")
    if not all(found):
        missing("Prometheus and promtool", "venv/bin/python -m harness.tools install-debian")
    return found  # type: ignore[return-value]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def real_prometheus(
    root: Path, series: list[Series], start: float, end: float, *, auth: bool = False, rule_files: Sequence[Path] = ()
) -> Iterator[str]:
    """Prometheus serving `series` from `start` to `end`, at the URL yielded; `auth` asks for basic auth; `rule_files`
    are evaluated from startup on (recording rules see the backfilled samples within the lookback)."""
    prometheus, promtool = _tools()
    data = root / "data"
    data.mkdir(parents=True)
    history = root / "history.om"
    history.write_text(openmetrics(series, start, end))
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", *BACKFILL_FLAGS, str(history), str(data)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    config = root / "prometheus.yml"
    files = "".join(f"  - {path}\n" for path in rule_files)
    config.write_text("global:\n  scrape_interval: 1m\n" + (f"rule_files:\n{files}" if files else ""))
    port = _free_port()
    command = [
        prometheus,
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=400d",
    ]
    if auth:
        web = root / "web.yml"
        web.write_text(f'basic_auth_users:\n  {BASIC_AUTH_USER}: "{BASIC_AUTH_HASH}"\n')
        command.append(f"--web.config.file={web}")
    log = (root / "prometheus.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HOME": str(root)})
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, server, root / "prometheus.log")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _wait_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                return
        except OSError as error:
            # Behind basic auth, /-/ready answers 401 once the server is up.
            if getattr(error, "code", None) == 401:
                return
            time.sleep(0.2)
    raise RuntimeError(f"prometheus did not become ready: {log.read_text()[-2000:]}")
