"""How the fair-share planner grows with the queue tree: `python -m fairshare --scenario` as a whole process.

Each size is one organisation: a root, departments, and teams under each department, every
team with its own quota, a weight of 1 to 3 and a request of 0 to 4 GPUs. The scenario is
written to a temporary file and planned by a fresh process, as a pull request's check runs it;
the row gives the wall time, the time per queue (flat when the planner is linear) and the
process's peak memory.

Figures only: nothing here passes or fails. Run it from the repository root:

    venv/bin/python -m benchmarks.planner [--sizes 10x100 100x999 ...]
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIZES = ("10x99", "100x100", "100x999")
"""Departments x teams: 1,001, 10,101 and 100,001 queues with the root."""


def organisation(departments: int, teams: int) -> dict[str, Any]:
    """A scenario file's document: every quota fits its parent, as stack config would require."""
    queues: list[dict[str, Any]] = [
        {"name": "org", "resources": {"gpu": {"quota": departments * teams, "limit": -1, "overQuotaWeight": 1}}}
    ]
    for d in range(departments):
        department = f"dept-{d:03d}"
        queues.append(
            {"name": department, "parentQueue": "org", "resources": {"gpu": {"quota": teams, "overQuotaWeight": 1}}}
        )
        queues += [
            {
                "name": f"{department}-team-{t:03d}",
                "parentQueue": department,
                "resources": {"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 1 + t % 3}},
                "request": t % 5,
            }
            for t in range(teams)
        ]
    return {"capacity": departments * teams, "queues": queues}


def plan_process(scenario: Path) -> tuple[float, float]:
    """Seconds for the whole `python -m fairshare --scenario` process, and its peak memory in MB."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "fairshare", "--scenario", str(scenario)], check=True, stdout=subprocess.DEVNULL
    )
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss is the largest child so far (KB on Linux): sizes run smallest first, so it is this one's.
    return seconds, max(peak, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), metavar="DEPTSxTEAMS")
    sizes = [tuple(int(n) for n in size.split("x")) for size in parser.parse_args().sizes]
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}")
    print()
    print("| queues | departments x teams | whole process s | µs/queue | peak MB |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch:
        for departments, teams in sorted(sizes, key=lambda s: s[0] * s[1]):
            scenario = Path(scratch) / f"org-{departments}x{teams}.json"
            document = organisation(departments, teams)
            scenario.write_text(json.dumps(document))
            seconds, peak = plan_process(scenario)
            queues = len(document["queues"])
            print(
                f"| {queues:,} | {departments} x {teams} | {seconds:.2f} | {1e6 * seconds / queues:.1f} | {peak:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
