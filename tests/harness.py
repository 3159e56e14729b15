"""Runs the real program (or a component) under Pulumi's mocks and records what it registers.

The mock monitor is extended to keep the whole registration request, so tests
can assert on dependencies, providers, secrecy and resource options, which the
plain `Mocks.new_resource` hook never sees.
"""

import asyncio
import base64
import functools
import json
import logging
import runpy
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pulumi
import pulumi.runtime
from pulumi.output import Unknown
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs, Mocks

ROOT = Path(__file__).resolve().parent.parent
MAIN = ROOT / "__main__.py"
PROJECT = "gpu-tenancy"


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    provider: str
    inputs: dict[str, Any]
    """Inputs with secrets unwrapped; see `secret_inputs` for which were secret."""
    secret_inputs: set[str]
    dependencies: set[str]
    delete_before_replace: bool
    additional_secret_outputs: list[str]
    custom_timeouts: dict[str, str]
    import_id: str = ""
    """For a read (`Resource.get`) or an import, the id of the existing object."""
    read: bool = False
    retain_on_delete: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    aliases: list[dict[str, Any]] = field(default_factory=list)
    """What the program says this resource was once: `{"urn": ...}`, or a spec (name, type, stack, project,
    parentUrn, noParent) with empty fields meaning "as now", which the engine turns into URNs."""

    def depends_on(self, other: "Registration") -> bool:
        return other.urn in self.dependencies


def _unwrap(value: Any) -> tuple[Any, bool]:
    """Strip secret markers at any depth, reporting whether any was present."""
    if rpc.is_rpc_secret(value):
        inner, _ = _unwrap(value["value"])
        return inner, True
    if isinstance(value, dict):
        pairs = {k: _unwrap(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_unwrap(v) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


AUTO_NAME_SUFFIX = "-0a1b2c3"
"""pulumi-kubernetes auto-names an object `<resource name>-<7 random characters>`."""


def _with_name(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Kubernetes objects without a fixed name get an auto-name, as pulumi-kubernetes does (in Check, so
    also in a preview)."""
    metadata = dict(inputs.get("metadata") or {})
    metadata.setdefault("name", f"{name}{AUTO_NAME_SUFFIX}")
    return {**inputs, "metadata": metadata}


FAKE_HOST_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n-----END OPENSSH PRIVATE KEY-----\n"
FAKE_HOST_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: microk8s-cluster
  cluster: {server: "https://198.51.100.7:16443", certificate-authority-data: Y2E=}
users:
- name: admin
  user: {client-certificate-data: Y2VydA==, client-key-data: a2V5}
contexts:
- name: microk8s
  context: {cluster: microk8s-cluster, user: admin}
current-context: microk8s
"""
GPU_NODE_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-L40S",
    "nvidia.com/gpu.memory": "46068",
    "nvidia.com/cuda.driver-version.full": "580.95.05",
}
COMMAND_STDOUT = {
    "brev-instance": "created=true\n",
    "brev-ssh": "address=198.51.100.7\nuser=ubuntu\nport=22\nprivateKey="
    + base64.b64encode(FAKE_HOST_KEY.encode()).decode()
    + "\n",
    "preflight": "hostname=gpu-node-1\nubuntu=24.04\ngpu=NVIDIA L40S|46068|580.95.05\n",
    "kubeconfig": FAKE_HOST_KUBECONFIG,
}
"""What each host step prints on the reference machine, keyed by the step's name suffix."""


GRAFANA_PASSWORD = "generated-by-the-grafana-chart"
"""What the Grafana chart put in its admin Secret, as the mocks hand it back."""
JOIN_TOKEN = "0123456789abcdef0123456789abcdef/fedcba987654"
"""The single-use token every worker is handed under the mocks (the shape `microk8s add-node` prints)."""


def script_input(create: str, key: str) -> str:
    """An input a rendered host script assigns at its top, from the command line that runs it."""
    _shell, _flag, script = shlex.split(create)
    for line in script.splitlines():
        if line.startswith(f"{key}="):
            return " ".join(shlex.split(line.removeprefix(f"{key}=")))
    raise KeyError(key)


def command_stdout(name: str, inputs: Mapping[str, Any]) -> str:
    """What a host step prints on the reference machine; each worker (`host-<key>-...`) has its own hostname."""
    if name.endswith("-join-tokens"):
        tickets = [
            f'join.{node}={{"token":"{JOIN_TOKEN}","urls":["10.0.0.5:25000/{JOIN_TOKEN}"]}}'
            for node in script_input(inputs["create"], "WORKERS").split()
        ]
        return "".join(f"{line}\n" for line in tickets)
    step = next((key for key in COMMAND_STDOUT if name.endswith(f"-{key}")), "")
    worker = name.removeprefix("host-").removesuffix(f"-{step}")
    if step == "preflight" and worker != "preflight":
        return COMMAND_STDOUT[step].replace("gpu-node-1", f"gpu-node-{worker.replace('.', '-')}")
    return COMMAND_STDOUT.get(step, "")


def tenant_kubeconfig(tenant: str) -> str:
    """What a tenant's vCluster publishes in vc-<tenant>, as the mocks hand it back."""
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: {tenant}\n  cluster: {{server: https://198.51.100.7:31000}}\n"
        f"contexts:\n- name: {tenant}\n  context: {{cluster: {tenant}, user: {tenant}}}\n"
        f"current-context: {tenant}\n"
        f"users:\n- name: {tenant}\n  user: {{client-key-data: a2V5}}\n"
    )


STACK_REFERENCE = "pulumi:pulumi:StackReference"


class RealisticMocks(Mocks):
    """Outputs shaped like the real providers', so code that reads outputs is exercised.

    `previous` is what the stack exported on its previous `up` ({} for a fresh stack), which
    a StackReference to the stack itself reads.
    """

    def __init__(self, previous: Mapping[str, Any] | None = None) -> None:
        self.previous = dict(previous or {})

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        inputs = dict(args.inputs)
        if args.typ.startswith("pulumi:providers:"):
            return f"{args.name}-provider-id", inputs
        if args.typ.startswith("command:"):
            return f"{args.name}-id", {**inputs, "stdout": command_stdout(args.name, inputs), "stderr": ""}
        if args.resource_id and args.typ in {STACK_REFERENCE, "kubernetes:core/v1:Secret", "kubernetes:core/v1:Node"}:
            return args.resource_id, self._read(args.typ, args.resource_id)
        if args.typ == "kubernetes:helm.sh/v3:Release":
            plain, _ = _unwrap(inputs)
            status = {
                "name": plain.get("name"),
                "namespace": plain.get("namespace"),
                "version": plain.get("version"),
                "chart": plain.get("chart"),
                "revision": 1,
                "status": "deployed",
            }
            return f"{plain.get('namespace')}/{plain.get('name')}", {**inputs, "status": status}
        if args.typ.startswith("kubernetes:"):
            state = _with_name(args.name, inputs)
            meta = state["metadata"]
            namespace = meta.get("namespace")
            return (f"{namespace}/{meta['name']}" if namespace else meta["name"]), state
        return f"{args.name}-id", inputs

    def _read(self, typ: str, resource_id: str) -> dict[str, Any]:
        """What a read finds once the gates have passed: a tenant's kubeconfig, a GPU node, the last `up`'s outputs."""
        if typ == STACK_REFERENCE:
            return {"name": resource_id, "outputs": self.previous, "secretOutputNames": []}
        if typ == "kubernetes:core/v1:Node":
            return {
                "metadata": {"name": resource_id, "labels": GPU_NODE_LABELS},
                "status": {"allocatable": {"cpu": "16", "nvidia.com/gpu": "1"}},
            }
        namespace, name = resource_id.split("/")
        if name.endswith("grafana"):
            data = {"admin-user": "admin", "admin-password": GRAFANA_PASSWORD}
        else:
            data = {"config": tenant_kubeconfig(name.removeprefix("vc-"))}
        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
        return {"metadata": {"namespace": namespace, "name": name}, "data": encoded}

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class FreshPreviewMocks(RealisticMocks):
    """`pulumi preview` of a stack that does not exist yet: every id and computed output is unknown.

    Providers echo their inputs in a preview (pulumi-kubernetes also fills in the
    auto-name in Check), so inputs stay known; anything only the create step
    produces (command stdout, Helm status, an id, what a read would return) is absent,
    which the SDK resolves as unknown during a dry run.
    """

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == STACK_REFERENCE:
            # Read in a preview too, and a fresh stack has exported nothing yet.
            return args.resource_id, self._read(args.typ, str(args.resource_id))
        if args.resource_id:
            # A read whose id is still unknown is skipped by the engine in a preview.
            return "", {}
        inputs = dict(args.inputs)
        if args.typ.startswith("kubernetes:") and args.typ != "kubernetes:helm.sh/v3:Release":
            return "", _with_name(args.name, inputs)
        return "", inputs


def _alias(alias: Any) -> dict[str, Any]:
    if alias.HasField("spec"):
        spec = alias.spec
        return {
            "name": spec.name,
            "type": spec.type,
            "stack": spec.stack,
            "project": spec.project,
            "parentUrn": spec.parentUrn,
            "noParent": spec.noParent,
        }
    return {"urn": alias.urn}


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine gives: the parent's whole qualified type, and no prefix under the root stack.

        Pulumi's mock monitor keeps only the parent's own type and prefixes top-level resources with
        the stack's (pulumi/runtime/mocks.py make_urn, SDK 3.272.0), so its URNs are not the ones in a
        stack's state (pulumi/pulumi pkg/resource/deploy/deployment.go generateURN @v3.259.0).
        """
        parent_type = parent.split("::")[2] if parent else ""
        if parent_type and parent_type != ROOT_STACK_TYPE:
            type_ = f"{parent_type}${type_}"
        return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_}::{name}"

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self._record(request, response.urn, request.object, read=False)
        return response

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().ReadResource(request)
        self._record(request, response.urn, request.properties, read=True)
        return response

    def _record(self, request: Any, urn: str, properties: Any, *, read: bool) -> None:
        raw = rpc.deserialize_properties(properties)
        unwrapped = {key: _unwrap(value) for key, value in raw.items()}
        timeouts = getattr(request, "customTimeouts", None)
        self.registrations.append(
            Registration(
                type=request.type,
                name=request.name,
                urn=urn,
                parent=request.parent,
                provider=request.provider,
                inputs={key: value for key, (value, _) in unwrapped.items()},
                secret_inputs={key for key, (_, secret) in unwrapped.items() if secret},
                dependencies=set(request.dependencies),
                delete_before_replace=getattr(request, "deleteBeforeReplace", False),
                additional_secret_outputs=list(request.additionalSecretOutputs),
                custom_timeouts={
                    "create": timeouts.create if timeouts else "",
                    "update": timeouts.update if timeouts else "",
                    "delete": timeouts.delete if timeouts else "",
                },
                import_id=request.id if read else getattr(request, "importId", ""),
                read=read,
                retain_on_delete=getattr(request, "retainOnDelete", False),
                ignore_changes=list(getattr(request, "ignoreChanges", [])),
                aliases=[_alias(alias) for alias in getattr(request, "aliases", [])],
            )
        )


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
) -> ProgramRun:
    """Run `build` under mocks; whatever it returns (or exports) is resolved with its secrecy.

    With `preview`, the run is a dry run of a fresh stack (see FreshPreviewMocks).
    """
    attempt = attempt or Attempt()
    monitor = RecordingMonitor(FreshPreviewMocks(previous) if preview else RealisticMocks(previous))
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
    all_config = {f"{PROJECT}:{k}": json.dumps(v) for k, v in (config or {}).items()}
    all_config.update({f"{PROJECT}:{k}": v for k, v in (secrets or {}).items()})
    pulumi.runtime.set_all_config(all_config, secret_keys=[f"{PROJECT}:{k}" for k in secrets or {}])

    run = ProgramRun(registrations=monitor.registrations)
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


def _main() -> None:
    runpy.run_path(str(MAIN), run_name="__main__")


def run_main(
    config: Mapping[str, Any],
    secrets: Mapping[str, str] | None = None,
    stack: str = "dev",
    *,
    preview: bool = False,
    shared: bool = True,
    previous: Mapping[str, Any] | None = None,
) -> ProgramRun:
    """Run `__main__.py` exactly as `pulumi up` (or, with `preview`, a fresh stack's `pulumi preview`) would.

    The program is deterministic (a test runs it twice with `shared=False` to check), so a run is
    shared by every test that asks for the same inputs; tests treat it as read-only.
    """
    key = json.dumps([config, secrets or {}, stack, preview, previous or {}], sort_keys=True)
    return _cached_run(key) if shared else _cached_run.__wrapped__(key)


@functools.cache
def _cached_run(key: str) -> ProgramRun:
    config, secrets, stack, preview, previous = json.loads(key)
    return run_pulumi(_main, config=config, secrets=secrets, stack=stack, preview=preview, previous=previous)


def attempt_main(
    config: Mapping[str, Any], secrets: Mapping[str, str] | None = None
) -> tuple[BaseException | None, ProgramRun]:
    """Like run_main, but hands back the error together with whatever was registered before it."""
    attempt = Attempt()
    try:
        run = run_pulumi(_main, config=config, secrets=secrets, attempt=attempt)
    except Exception as error:
        assert attempt.run is not None
        return error, attempt.run
    return None, run
