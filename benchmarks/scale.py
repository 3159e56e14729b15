"""How the program scales with teams: the real `__main__.py` under the test harness's mocks.

For 3, 30, 100, 300 and 1,000 teams (each with its own leaf queue under one parent),
prints one Markdown table row per size: resources registered, resources each team
adds, evaluation time, milliseconds per resource, the longest dependency chain, and
the chain that ends at the first team's kubeconfig gate (how long a team waits, in
steps). The last rows register bare ConfigMaps under the same mocks: what the Pulumi SDK
and the harness cost per resource on this machine, whatever the program does, with
Python's default collector thresholds and with those `__main__.py` sets; then the
largest size's cost per resource over each.

Figures only: nothing here passes or fails. Run it from the repository root:

    venv/bin/python -m benchmarks.scale [--teams 3 30 ...]
"""

import argparse
import gc
import os
import platform
import time

import pulumi
import pulumi_kubernetes as k8s

from harness import ProgramRun, run_main, run_pulumi, stack_with_teams

SIZES = (3, 30, 100, 300, 1000)
KUBECONFIG_GATE = "kubernetes:batch/v1:Job"
DEFAULT_THRESHOLDS = gc.get_threshold()
"""Python's own, read before `__main__.py` sets the program's."""


def measure(teams: int) -> tuple[ProgramRun, float]:
    started = time.perf_counter()
    run = run_main(stack_with_teams(teams), shared=False)
    return run, time.perf_counter() - started


def sdk_floor(count: int = 2000, thresholds: tuple[int, int, int] | None = None) -> tuple[int, float]:
    """Resources registered, and milliseconds per resource, for `count` bare ConfigMaps under the same mocks,
    with these collector thresholds (None: Python's defaults), restored afterwards."""

    def build() -> None:
        provider = k8s.Provider("floor", kubeconfig="unused")
        for index in range(count):
            k8s.core.v1.ConfigMap(
                f"floor-{index}", data={"key": "value"}, opts=pulumi.ResourceOptions(provider=provider)
            )

    before = gc.get_threshold()
    gc.set_threshold(*(thresholds or DEFAULT_THRESHOLDS))
    try:
        started = time.perf_counter()
        run = run_pulumi(build)
        return len(run.registrations), 1000 * (time.perf_counter() - started) / len(run.registrations)
    finally:
        gc.set_threshold(*before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, nargs="+", default=list(SIZES))
    sizes = parser.parse_args().teams
    baseline, _ = measure(0)
    # Before the sizes, on a heap that holds no large run yet; the program has set its thresholds by now.
    program = gc.get_threshold()
    floors = {"default collector": sdk_floor(), "program's collector": sdk_floor(thresholds=program)}
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}")
    print()
    print("| teams | resources | per team | eval s | ms/resource | longest chain | chain to first kubeconfig |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    last = 0.0
    for teams in sizes:
        run, seconds = measure(teams)
        resources = len(run.registrations)
        per_team = (resources - len(baseline.registrations)) / teams
        last = 1000 * seconds / resources
        # The kubeconfig is read once this gate has seen the control plane write it.
        first = run.one(KUBECONFIG_GATE, "team-0000-ready")
        print(
            f"| {teams:,} | {resources:,} | {per_team:.1f} | {seconds:.1f} | {last:.2f} "
            f"| {len(run.longest_chain())} | {len(run.longest_chain(first))} |",
            flush=True,
        )
    for label, (resources, per_resource) in floors.items():
        print(f"| bare ConfigMaps, {label} | {resources:,} | | | {per_resource:.2f} | 1 | |")
    print()
    ratios = ", ".join(
        f"{last / per_resource:.2f}x the floor with the {label}" for label, (_, per_resource) in floors.items()
    )
    print(f"At {sizes[-1]:,} teams, the program's cost per resource is {ratios}.")


if __name__ == "__main__":
    main()
