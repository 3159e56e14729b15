"""How the program scales with teams: the real `__main__.py` under the test harness's mocks.

For 3, 30, 100, 300 and 1,000 teams (each with its own leaf queue under one parent),
prints one Markdown table row per size: resources registered, resources each team
adds, evaluation time, milliseconds per resource, the longest dependency chain, and
the chain that ends at the first team's kubeconfig gate (how long a team waits, in
steps). A row for the smallest size with MEMBERS members in each team follows, and the
registrations a member adds. The last rows register bare ConfigMaps under the same mocks: what the Pulumi SDK
and the harness cost per resource on this machine, whatever the program does, with
Python's default collector thresholds and with those `__main__.py` sets. The last row
registers the largest size's resources again, bare, with their recorded inputs
(replay.py): what the SDK costs for exactly those resources, so the program's own share is
the difference. Then the largest size's cost per resource over each.

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

from benchmarks.replay import replay
from harness import ProgramRun, Registration, run_main, run_pulumi, stack_with_teams

SIZES = (3, 30, 100, 300, 1000)
MEMBERS = 5
"""Members of each team in the row that shows what members cost."""
KUBECONFIG_GATE = "kubernetes:batch/v1:Job"
DEFAULT_THRESHOLDS = gc.get_threshold()
"""Python's own, read before `__main__.py` sets the program's."""


def measure(teams: int, members: int = 0) -> tuple[ProgramRun, float]:
    """The reference stack with `teams` teams, each with `members` members."""
    config = stack_with_teams(teams)
    for tenant in config["tenants"]:
        tenant["members"] = [f"member-{index}" for index in range(members)]
    started = time.perf_counter()
    run = run_main(config, shared=False)
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


def replayed(registrations: list[Registration]) -> tuple[int, float]:
    """Resources registered, and milliseconds per resource, for these registrations replayed bare (replay.py)."""
    started = time.perf_counter()
    run = run_pulumi(replay(registrations))
    return len(run.registrations), 1000 * (time.perf_counter() - started) / len(run.registrations)


def row(label: str, run: ProgramRun, seconds: float, per_team: float) -> str:
    # The kubeconfig is read once this gate has seen the control plane write it.
    first = run.one(KUBECONFIG_GATE, "team-0000-ready")
    resources = len(run.registrations)
    return (
        f"| {label} | {resources:,} | {per_team:.1f} | {seconds:.1f} | {1000 * seconds / resources:.2f} "
        f"| {len(run.longest_chain())} | {len(run.longest_chain(first))} |"
    )


def member_costs(teams: int) -> tuple[ProgramRun, float, float, float]:
    """The stack with `teams` teams of MEMBERS members each, its time, and from runs with none and one member
    each: the registrations a member adds, and those a team adds for having members at all."""
    plain = len(measure(teams)[0].registrations)
    one = len(measure(teams, 1)[0].registrations)
    run, seconds = measure(teams, MEMBERS)
    per_member = (len(run.registrations) - one) / (teams * (MEMBERS - 1))
    return run, seconds, per_member, (one - plain) / teams - per_member


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
        last = 1000 * seconds / len(run.registrations)
        per_team = (len(run.registrations) - len(baseline.registrations)) / teams
        print(row(f"{teams:,}", run, seconds, per_team), flush=True)
    # Right after the largest size, on the heap it leaves and with the program's collector, as it ran.
    again = replayed(run.registrations)
    del run
    few = sizes[0]
    with_members, seconds, per_member, per_team_with_members = member_costs(few)
    per_team = (len(with_members.registrations) - len(baseline.registrations)) / few
    print(row(f"{few:,}, {MEMBERS} members each", with_members, seconds, per_team))
    for label, (resources, per_resource) in floors.items():
        print(f"| bare ConfigMaps, {label} | {resources:,} | | | {per_resource:.2f} | 1 | |")
    print(f"| the {sizes[-1]:,} teams' resources replayed bare | {again[0]:,} | | | {again[1]:.2f} | 1 | |")
    print()
    ratios = ", ".join(
        f"{last / per_resource:.2f}x the floor with the {label}" for label, (_, per_resource) in floors.items()
    )
    print(f"At {sizes[-1]:,} teams, the program's cost per resource is {ratios}.")
    print(f"Its resources replayed bare cost {again[1]:.2f} ms each: the program adds {last / again[1]:.2f}x to them.")
    print(
        f"Each member adds {per_member:.1f} registrations; a team with members adds {per_team_with_members:.1f} more "
        "(the provider inside its vCluster and the release of its members' accounts)."
    )


if __name__ == "__main__":
    main()
