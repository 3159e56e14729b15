"""The gang controller's and the team views' liveness probes: alive while their loop comes round, restarted once it
is stuck, each probe's command run as the kubelet runs it (the python in the image, the file it reads)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import ProgramRun, dev_settings, run_main

DEPLOYMENT = "kubernetes:apps/v1:Deployment"


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return run_main(dev_settings())


def _probe(run: ProgramRun, deployment: str, container: str) -> dict[str, object]:
    spec = run.one(DEPLOYMENT, deployment).inputs["spec"]["template"]["spec"]
    (found,) = [c for c in spec["containers"] if c["name"] == container]
    return dict(found["livenessProbe"])


# (deployment, container, the file the probe reads, alive with no file yet)
PROBES = [
    ("gangs-deployment", "controller", "/run/gangs/alive", False),
    ("observability-team-views-grafana", "reconciler", "/run/team-views/ready", True),
]


@pytest.mark.parametrize(("deployment", "container", "path", "alive_without"), PROBES)
@pytest.mark.parametrize(("age", "alive"), [(0, True), (60, True), (100_000, False)])
def test_a_loop_that_stops_coming_round_is_restarted(
    run: ProgramRun,
    tmp_path: Path,
    deployment: str,
    container: str,
    path: str,
    alive_without: bool,
    age: int,
    alive: bool,
) -> None:
    command = _probe(run, deployment, container)["exec"]["command"]  # type: ignore[index]
    assert command[0].startswith("/usr/local/bin/python"), "the image's python, since it has no shell tools"
    beat = tmp_path / "beat"
    script = command[2].replace(path, str(beat))
    assert path in command[2]
    without = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True)
    assert (without.returncode == 0) == alive_without
    beat.write_text("x")
    os.utime(beat, (time.time() - age, time.time() - age))
    assert (subprocess.run([sys.executable, "-c", script], check=False).returncode == 0) == alive


def test_grafana_is_restarted_when_it_stops_answering(run: ProgramRun) -> None:
    probe = _probe(run, "observability-team-views-grafana", "grafana")
    assert probe["httpGet"] == {"path": "/api/health", "port": 3000, "scheme": "HTTPS"}
