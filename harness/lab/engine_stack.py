"""`pulumi --state DIR --stack STACK -- ARGS`: the real CLI on a lab copy of a stack, the program served in-process.

The copy (DIR/engine/stacks/<STACK>) is the stack's settings as `apply` rewrites them for the lab (kubeconfig
mode, the lab's admin kubeconfig as the secret, the GPU Operator left alone), and what the lab's engine cannot
run yet, each said once, in `ENGINE_CHANGES`. It is made on first use and kept: its stack lives in the lab's own
backend, so a second command continues the same stack. The stack file is written again from the stack's own
on every command (its chart repository's port kept), so a change to the user's stack file reaches the copy.

The CLI runs the program through `--client`: the Python SDK serves the language runtime in this process
(pulumi/automation/_server.py LanguageServer), as the Automation API does for an inline program, since the
module proxy serves no Go language host (docs/lab.md). The program is the repository's `__main__.py`, with the
Kubernetes SDK's default plugin version set to the lab's provider build (its resources ask for the SDK's own,
4.34.2, which the lab cannot build). While the CLI runs, the lab serves the pinned charts (chart_repository.py)
and stands in for KAI's operator (kai_operator.py), which the lab cannot build.
"""

import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import grpc
import pulumi_kubernetes
import yaml
from pulumi.automation._server import LanguageServer
from pulumi.runtime.proto import language_pb2_grpc

from components.vcluster_tenant.members import OBJECTS_CHART
from config.issues import PROJECT, ConfigError
from config.sources import load_settings, read_stack_document
from harness.check import stack_file_of
from harness.lab import chart_repository, kai_operator
from harness.lab.apply import lab_settings
from harness.lab.build import PULUMI_KUBERNETES_RELEASE
from harness.lab.cluster import LabPaths, admin_client, read_lab
from harness.lab.engine import Engine
from harness.lab.pki import Pki
from harness.program import ROOT, main_program

Json = dict[str, Any]
PROVIDER_VERSION = PULUMI_KUBERNETES_RELEASE.removeprefix("v")
ENGINE_CHANGES = (
    "vcluster.admission: validate (the lab's Kubernetes provider, v4.25.0, has no MutatingAdmissionPolicy)",
    "observability.mode: off (it needs pulumi-random and pulumi-tls, which the module proxy refuses)",
    "vcluster.repo and kaiScheduler.chart: the lab's chart repository on loopback (the pinned charts)",
)
"""What the copy changes beyond `apply`'s rewrite, because the lab's engine lacks a part: printed on every run."""
LOCAL_CHARTS = (OBJECTS_CHART,)
"""Charts the program names by their path from the project's root, where the engine starts every provider: the
copy's folder is the project's root here, so each is linked into it at the same path."""
PROGRAM_COMMANDS = frozenset({"preview", "up", "update", "refresh", "destroy"})
"""The CLI's commands that run the program, and so take `--client` (each Automation API call passes it)."""


@dataclass(frozen=True)
class LabStack:
    """The lab copy of one stack: its folder (the project and stack file) and its chart repository's port."""

    folder: Path
    name: str
    port: int

    @property
    def stack_file(self) -> Path:
        return self.folder / f"Pulumi.{self.name}.yaml"

    @property
    def repository(self) -> Path:
        return self.folder / "chart-repository"


def lab_engine(state: Path) -> Engine:
    """The lab's engine in DIR/engine, its Kubernetes provider installed from the lab's build."""
    lab = read_lab(state)
    if lab is None:
        raise ConfigError([f"no lab in {state}: python -m harness.lab up --state {state}"])
    binaries = Path(lab["binaries"])
    engine = Engine(state / "engine", binaries / "pulumi").prepare()
    engine.install_plugin("resource", "kubernetes", PROVIDER_VERSION, binaries / "pulumi-resource-kubernetes")
    return engine


def engine_settings(settings: Mapping[str, Any], gateway: str, repository: str) -> Json:
    """The stack's settings on the lab's engine: `apply`'s rewrite, then ENGINE_CHANGES."""
    derived = lab_settings(settings, gateway)
    version = load_settings(derived).versions.kai_scheduler
    vcluster = derived.setdefault("vcluster", {})
    vcluster["admission"] = "validate"
    vcluster["repo"] = repository
    derived["observability"] = {"mode": "off"}
    # A chart's URL is a chart reference Helm fetches as it is (helm/helm pkg/downloader/chart_downloader.go
    # ResolveChartVersion @v3.17.0); KAI's chart has no repository setting, only this one.
    derived.setdefault("kaiScheduler", {})["chart"] = f"{repository}/kai-scheduler-{version}.tgz"
    return derived


def charts_of(settings: Mapping[str, Any]) -> list[str]:
    """The chart files the settings install: KAI's and each tenant's vCluster."""
    validated = load_settings(settings)
    files = {f"kai-scheduler-{validated.versions.kai_scheduler}.tgz"}
    files |= {f"vcluster-{validated.vcluster_version(tenant)}.tgz" for tenant in validated.tenants}
    return sorted(files)


def _stack_settings(argument: str) -> tuple[str, Mapping[str, Any]]:
    path, name = stack_file_of(argument)
    return name, read_stack_document(path).settings


def prepare(engine: Engine, state: Path, argument: str) -> tuple[LabStack, Json]:
    """The copy of stack `argument` (made, or found and refreshed) and the settings written into it."""
    lab = read_lab(state)
    if lab is None:
        raise ConfigError([f"no lab in {state}: python -m harness.lab up --state {state}"])
    name, own = _stack_settings(argument)
    folder = engine.folder / "stacks" / name
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / "lab-stack.json"
    port = json.loads(kept.read_text())["port"] if kept.is_file() else chart_repository.free_loopback_port()
    kept.write_text(json.dumps({"port": port}))
    copy = LabStack(folder, name, port)
    settings = engine_settings(own, lab["network"]["gateway"], chart_repository.url(port))
    chart_repository.prepare(copy.repository, charts_of(settings), port, Pki(LabPaths(state).pki))
    (folder / "Pulumi.yaml").write_text(
        yaml.safe_dump({"name": PROJECT, "runtime": "python", "description": "the lab copy of a gpu-tenancy stack"})
    )
    for chart in LOCAL_CHARTS:
        link = folder / chart
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(ROOT / chart)
    if not copy.stack_file.is_file():
        _cli(engine, copy, "stack", "init", name, "--secrets-provider", "passphrase")
    _cli(engine, copy, "stack", "select", name)
    document = yaml.safe_load(copy.stack_file.read_text()) or {}
    document["config"] = {f"{PROJECT}:{key}": value for key, value in settings.items()}
    copy.stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    # Set on every command: a lab started again listens on a new port, so its kubeconfig is new (the same one
    # again is no change to the provider). From stdin: a secret never rides in a command line (`pulumi config
    # set` reads a missing value from it).
    kubeconfig = LabPaths(state).kubeconfig.read_text()
    _cli(engine, copy, "config", "set", "--secret", "kubeconfig", stdin=kubeconfig)
    return copy, settings


def _cli(engine: Engine, copy: LabStack, *args: str, stdin: str | None = None) -> None:
    environment = {**engine.environment(), "PATH": "/usr/bin:/bin"}
    subprocess.run(
        [str(engine.cli), *args],
        cwd=copy.folder,
        env=environment,
        input=stdin,
        text=True,
        check=True,
        capture_output=True,
    )


def lab_program() -> None:
    """The repository's program, its Kubernetes resources asking for the lab's provider build."""
    with mock.patch.object(pulumi_kubernetes._utilities, "_version_str", PROVIDER_VERSION):
        main_program()


@contextmanager
def language_runtime(program: Callable[[], None]) -> Iterator[str]:
    """`program` served as a language runtime on loopback until the block ends; its address, for `--client`."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(program), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def run_cli(state: Path, argument: str, args: Sequence[str]) -> int:
    """The CLI with `args` on the copy of stack `argument`; the CLI's exit status."""
    try:
        engine = lab_engine(state)
        copy, _ = prepare(engine, state, argument)
    except ConfigError as invalid:
        print(invalid, file=sys.stderr)
        return 2
    for change in ENGINE_CHANGES:
        print(f"lab: {change}", file=sys.stderr)
    extra = {"SSL_CERT_FILE": str(Pki(LabPaths(state).pki).ca)}
    command = list(args)
    with (
        chart_repository.serving(copy.repository, copy.port),
        kai_operator.standing_in(admin_client(state)),
        language_runtime(lab_program) as address,
    ):
        if command and command[0] in PROGRAM_COMMANDS:
            command += [f"--client={address}", "--exec-kind=auto.inline"]
        return engine.run(*command, cwd=copy.folder, extra=extra)
