"""The real prom-label-proxy between the team views and a real Prometheus: the lab's build of v0.14.0.

It runs with the flags the program gives its container (components/observability/team_objects.py
proxy_args), two of them replaced: the upstream, by the test's Prometheus on 127.0.0.1, and the
listen address, by a free port of 127.0.0.1.
"""

import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

from harness.lab.build import built
from harness.lab.processes import free_port

LISTEN = "-insecure-listen-address="
UPSTREAM = "-upstream="


def binary() -> str:
    folder = built()
    if folder is None:
        message = "prom-label-proxy is built with the lab: venv/bin/python -m harness.tools build-lab"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return str(folder / "prom-label-proxy")


@contextmanager
def prom_label_proxy(args: Sequence[str], *, upstream: str) -> Iterator[str]:
    """prom-label-proxy with the container's `args`, in front of `upstream`, at the URL yielded."""
    port = free_port()
    flags = [a for a in args if not a.startswith((LISTEN, UPSTREAM))]
    assert len(flags) == len(args) - 2, f"the container names no listen address or upstream: {args}"
    command = [binary(), f"{LISTEN}127.0.0.1:{port}", f"{UPSTREAM}{upstream}", *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    output = process.stdout.read().decode() if process.stdout else ""
                    raise AssertionError(f"prom-label-proxy did not start: {output}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
