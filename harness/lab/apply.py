"""`apply STACK --state DIR`: the stack's program applied to the lab, as the interim stand-in for `pulumi up`.

The stack file is read as Pulumi reads it, rewritten to kubeconfig mode against the lab
(the lab's kubeconfig as the secret), and the real program runs under the harness's mocks,
whose reads answer from the lab itself (the `kubernetes` EndpointSlice, the node-port
memory, Secrets that exist) and whose random passwords and TLS keys are real and kept in
DIR/apply/values.json, so a second apply finds the same. What it registers is applied
in dependency order: a Helm release with real Helm over the pinned chart (hooks run; it
waits as Helm 3's --wait does unless the release skips waiting), a Patch and every other
Kubernetes object by server-side apply.

Waits honoured: every release's hooks and, unless `skipAwait`, its resources; a Job until it
completes or fails (as pulumi-kubernetes awaits it); a Deployment until it is available.
Each tenant's vCluster runs for real (the lab's kubelet runs its pod: tenants.py), writes its
kubeconfig Secret, and its gate awaits it. The program reads that Secret while it runs, before
anything is applied, as `pulumi preview` would on a fresh stack: a first apply stands in for it
(and says so), a second reads the real one. What cannot be applied yet (a tenant's add-ons,
which go to the tenant's own API) is printed as SKIPPED; every object the API server refuses
is printed as REFUSED and makes the exit status 1. Each tenant's kubeconfig ends in
DIR/tenants/<team>/kubeconfig.
"""

import concurrent.futures
import copy
import datetime
import hashlib
import ipaddress
import json
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pulumi.runtime.mocks import MockResourceArgs

from config.issues import ConfigError
from config.sources import read_stack_document
from harness.check import stack_file_of
from harness.lab.cluster import LabPaths, admin_client, read_lab, write_lab
from harness.lab.images import runs_as_processes
from harness.lab.kube import ApiError, Kube
from harness.lab.tenants import tenants
from harness.mocks import CONFIG_MAP, ENDPOINT_SLICE, NODE, SECRET, RealisticMocks
from harness.monitor import Registration, unwrap_secrets
from harness.program import ProgramRun, main_program, run_pulumi
from harness.tools import chart_path, helm_path

Json = dict[str, Any]
RELEASE = "kubernetes:helm.sh/v3:Release"
NOT_AWAITED = {
    ("Job", "kai-gate"): "waits for kai-config to turn Ready, which only KAI's operator makes it; the lab fakes "
    "the operator (the module proxy serves no github.com/NVIDIA/KAI-scheduler): what waits for this gate is "
    "applied anyway",
}
"""Waits the lab cannot honour yet, by (kind, name): applied, never awaited, and what depends on them goes on."""
DEFAULT_WAIT_SECONDS = 600


def lab_settings(settings: Mapping[str, Any], gateway: str) -> dict[str, Any]:
    """The stack's settings in kubeconfig mode against the lab: no machine to bootstrap, the lab's address for
    node ports, and the GPU Operator left alone (`skip`): it needs GPUs and NVML, and the lab's GPU nodes come as
    it leaves them (labelled, GPUs allocatable)."""
    derived: dict[str, Any] = json.loads(json.dumps(dict(settings)))
    derived["host"] = {"mode": "kubeconfig", "address": gateway, "clusterId": "gpu-tenancy-lab"}
    versions = derived.get("versions") or {}
    versions.pop("microk8s", None)
    versions.pop("gpuOperator", None)
    derived["gpuOperator"] = {"mode": "skip"}
    return derived


class LabMocks(RealisticMocks):
    """Reads answer from the lab; random and TLS providers compute real values, kept across applies."""

    def __init__(self, admin: Kube, kept: Path) -> None:
        super().__init__()
        self.admin = admin
        self.kept_path = kept
        self.kept: dict[str, Any] = json.loads(kept.read_text()) if kept.is_file() else {}
        self.stood_in: list[str] = []

    def save(self) -> None:
        self.kept_path.parent.mkdir(parents=True, exist_ok=True)
        self.kept_path.write_text(json.dumps(self.kept, indent=1, sort_keys=True))
        self.kept_path.chmod(0o600)

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.resource_id and args.typ in {CONFIG_MAP, SECRET, NODE, ENDPOINT_SLICE}:
            found = self._find(args.typ, args.resource_id)
            if found is not None:
                return args.resource_id, found
            if args.typ == SECRET:
                self.stood_in.append(f"Secret {args.resource_id}")
        if args.typ == "random:index/randomPassword:RandomPassword":
            length = int(args.inputs.get("length", 16))
            value = self.kept.setdefault(f"password/{args.name}", secrets.token_hex(length)[:length])
            return f"{args.name}-id", {**args.inputs, "result": value}
        if args.typ == "tls:index/privateKey:PrivateKey":
            return f"{args.name}-id", {**args.inputs, "privateKeyPem": self._key(args.name)}
        if args.typ == "tls:index/selfSignedCert:SelfSignedCert":
            return f"{args.name}-id", {**args.inputs, "certPem": self._certificate(args.name, args.inputs)}
        return super().new_resource(args)

    def _find(self, typ: str, resource_id: str) -> Json | None:
        api_version, kind = {
            CONFIG_MAP: ("v1", "ConfigMap"),
            SECRET: ("v1", "Secret"),
            NODE: ("v1", "Node"),
            ENDPOINT_SLICE: ("discovery.k8s.io/v1", "EndpointSlice"),
        }[typ]
        namespace, _, name = resource_id.rpartition("/")
        return self.admin.find(api_version, kind, name, namespace or None)

    def _key(self, name: str) -> str:

        if f"key/{name}" not in self.kept:
            key = ec.generate_private_key(ec.SECP256R1())
            self.kept[f"key/{name}"] = key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ).decode()
        return str(self.kept[f"key/{name}"])

    def _certificate(self, name: str, inputs: Mapping[str, Any]) -> str:
        """A real self-signed certificate for these inputs, as pulumi-tls makes one (new inputs, new certificate)."""
        plain, _ = unwrap_secrets(dict(inputs))
        digest = hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()
        entry = self.kept.get(f"cert/{name}")
        if entry and entry["digest"] == digest:
            return str(entry["pem"])
        key = serialization.load_pem_private_key(str(plain["privateKeyPem"]).encode(), None)
        now = datetime.datetime.now(datetime.UTC)
        common_name = (plain.get("subject") or {}).get("commonName", name)
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in plain.get("dnsNames") or []]
        names += [x509.IPAddress(ipaddress.ip_address(a)) for a in plain.get("ipAddresses") or []]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .public_key(key.public_key())  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(hours=int(plain.get("validityPeriodHours", 24))))
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        pem = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()  # type: ignore[arg-type]
        self.kept[f"cert/{name}"] = {"digest": digest, "pem": pem}
        return pem


def manifest(registration: Registration) -> Json | None:
    """The object a `kubernetes:` registration stands for, or None for a release, a provider or a component. A
    copy to change at will: the registration may be a cached run's, which other tests read after this one."""
    package, _, kind = registration.type.partition(":")[2].rpartition(":")
    if not registration.type.startswith("kubernetes:") or registration.type == RELEASE:
        return None
    inputs = copy.deepcopy(registration.inputs)
    if kind.endswith("Patch"):
        kind = kind.removesuffix("Patch")
    if "apiVersion" in inputs and "kind" in inputs and registration.type.startswith("kubernetes:apiextensions"):
        api_version = inputs["apiVersion"]
    else:
        group = package.rsplit("/", 1)
        api_version = group[1] if group[0] == "core" else package
    inputs.pop("apiVersion", None)
    inputs.pop("kind", None)
    metadata = dict(inputs.pop("metadata", None) or {})
    metadata.setdefault("name", f"{registration.name}-0a1b2c3")
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **inputs}


def field_manager(registration: Registration) -> str:
    """Who applies it: `pulumi-kubernetes`, or for a Patch a field manager of its own ("a random FieldManager name
    will be used for each Patch resource": pulumi_kubernetes core/v1/NamespacePatch.py @4.34.2), so that a patch of
    an object the stack also manages never takes the object's other fields away (one manager's apply owns exactly
    what it sends). Stable per resource here, as the provider keeps its generated name in the state."""
    if registration.type.endswith("Patch"):
        return f"pulumi-kubernetes-{hashlib.sha256(registration.urn.encode()).hexdigest()[:8]}"
    return "pulumi-kubernetes"


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta.get("name", "?")
    return f"{obj.get('kind')} {where}"


@dataclass
class Outcome:
    refused: list[str]
    skipped: list[str]
    not_awaited: list[str]


class Applier:
    def __init__(self, state: Path, run: ProgramRun, admin: Kube, lab_provider: set[str]) -> None:
        self.state = state
        self.run = run
        self.admin = admin
        self.lab_provider = lab_provider
        self.by_urn = {r.urn: r for r in run.registrations}
        self.children: dict[str, list[str]] = {}
        for registration in run.registrations:
            self.children.setdefault(registration.parent, []).append(registration.urn)
        self.done: set[str] = set()
        self.failed: dict[str, str] = {}
        self.lock = threading.Lock()
        self.outcome = Outcome([], [], [])

    def _expanded(self, urns: set[str]) -> set[str]:
        """A dependency on a component is one on everything under it."""
        expanded: set[str] = set()
        stack = list(urns)
        while stack:
            urn = stack.pop()
            if urn in expanded:
                continue
            expanded.add(urn)
            stack += self.children.get(urn, [])
        return expanded

    def order(self) -> list[Registration]:
        pending = [r for r in self.run.registrations if not r.read]
        waits = {r.urn: self._expanded(r.dependencies) - {r.urn} for r in pending}
        ordered, placed = [], set()
        known = {r.urn for r in pending}
        while pending:
            ready = [r for r in pending if all(d in placed or d not in known for d in waits[r.urn])]
            if not ready:
                raise SystemExit("lab: the program's dependencies have a cycle: " + ", ".join(r.name for r in pending))
            for registration in ready:
                ordered.append(registration)
                placed.add(registration.urn)
            pending = [r for r in pending if r.urn not in placed]
        self.waits = waits
        return ordered

    def apply(self) -> Outcome:
        """Each registration once everything it depends on is done, as many at once as are ready: the engine
        runs independent steps in parallel (pulumi/pulumi pkg/resource/deploy step_executor.go)."""
        pending = {r.urn: r for r in self.order()}
        running: dict[concurrent.futures.Future[None], str] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            while pending or running:
                ready = [
                    r
                    for r in pending.values()
                    if all(d in self.done or d in self.failed or d not in self.waits for d in self.waits[r.urn])
                ]
                for registration in ready:
                    del pending[registration.urn]
                    running[pool.submit(self._step, registration)] = registration.urn
                if not running:
                    break
                finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    urn = running.pop(future)
                    future.result()
                    if urn not in self.failed:
                        self.done.add(urn)
        return self.outcome

    def _step(self, registration: Registration) -> None:
        blocked = [d for d in self.waits[registration.urn] if d in self.failed]
        if blocked and registration.type.startswith("kubernetes:"):
            what = self.by_urn[blocked[0]].name
            self.outcome.skipped.append(
                f"SKIPPED {registration.type} {registration.name}: waits for {what}, which failed"
            )
            self.failed[registration.urn] = "blocked"
            return
        if registration.type.startswith("kubernetes:") and registration.provider:
            provider = registration.provider.rsplit("::", 1)[0]
            if provider not in self.lab_provider:
                self.outcome.skipped.append(
                    f"SKIPPED {registration.type} {registration.name}: goes to the tenant's own API server "
                    "(its vCluster), which the lab's apply does not reach yet"
                )
                return
        if registration.type == RELEASE:
            self._release(registration)
        elif (obj := manifest(registration)) is not None:
            self._object(registration, obj)

    # The two kinds of step.

    def _object(self, registration: Registration, obj: Json) -> None:
        """Server-side apply, retried as pulumi-kubernetes retries a create on NotFound (a namespace not there
        yet) and NoMatch (a CRD not served yet): 5 retries, the wait doubling from 1 s (provider/pkg/await/
        await.go Creation, `retrier.Do(apierrors.IsNotFound, meta.IsNoMatchError)`)."""
        for attempt in range(6):
            try:
                applied = self.admin.apply(obj, manager=field_manager(registration))
                break
            except ApiError as error:
                if error.code != 404 or attempt == 5:
                    return self._refuse(registration, obj, error.message)
                self.admin.forget_discovery()
                time.sleep(2**attempt)
        print(f"applied {_describe(obj)}", flush=True)
        self._await(registration, applied)

    def _refuse(self, registration: Registration, obj: Json, reason: str) -> None:
        line = f"REFUSED {_describe(obj)}: {reason}"
        print(line, flush=True)
        self.outcome.refused.append(line)
        self.failed[registration.urn] = reason

    def _await(self, registration: Registration, obj: Json) -> None:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if (kind, name) in NOT_AWAITED:
            self.outcome.not_awaited.append(f"NOT AWAITED {_describe(obj)}: {NOT_AWAITED[(kind, name)]}")
            return
        if kind not in ("Job", "Deployment"):
            return
        timeout = _seconds(registration.custom_timeouts.get("create")) or DEFAULT_WAIT_SECONDS
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.admin.get(obj["apiVersion"], kind, name, obj["metadata"].get("namespace"))
            status = current.get("status") or {}
            conditions = {c["type"]: c for c in status.get("conditions") or [] if c.get("status") == "True"}
            if kind == "Job" and "Complete" in conditions:
                print(f"awaited {_describe(obj)}: complete", flush=True)
                return
            if kind == "Job" and "Failed" in conditions:
                reason = conditions["Failed"].get("message") or conditions["Failed"].get("reason", "failed")
                return self._refuse(registration, obj, f"the Job failed: {reason}{self._pod_logs(obj)}")
            if (
                kind == "Deployment"
                and "Available" in conditions
                and status.get("updatedReplicas", 0) >= (current["spec"].get("replicas", 1))
            ):
                print(f"awaited {_describe(obj)}: available", flush=True)
                return
            time.sleep(1)
        self._refuse(registration, obj, f"not ready after {timeout} s{self._pod_logs(obj)}")

    def _pod_logs(self, obj: Json) -> str:
        """The end of each of the object's pods' container logs, when the lab ran them."""
        folder = LabPaths(self.state).logs / "pods"
        prefix = f"{obj['metadata'].get('namespace')}_{obj['metadata']['name']}-"
        tails = []
        for log in sorted(folder.glob(f"{prefix}*.log")) if folder.is_dir() else []:
            lines = log.read_text(errors="replace").splitlines()[-5:]
            tails.append(f"\n  {log.name}:\n    " + "\n    ".join(lines))
        return "".join(tails)

    def _release(self, registration: Registration) -> None:
        """`helm upgrade --install`, unless the release's inputs are those the last apply installed: the engine
        runs no update for a resource whose inputs did not change (pulumi-kubernetes' Release Diff), and an
        upgrade would roll pods whose chart renders something random (Grafana's generated password)."""
        inputs = registration.inputs
        name, namespace = inputs["name"], inputs["namespace"]
        digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
        installed = self.state / "apply" / "releases.json"
        known: dict[str, str] = json.loads(installed.read_text()) if installed.is_file() else {}
        if known.get(registration.urn) == digest and self._installed(name, namespace):
            print(f"unchanged Release {namespace}/{name}", flush=True)
            return
        self._install(registration)
        if registration.urn not in self.failed:
            with self.lock:
                known = json.loads(installed.read_text()) if installed.is_file() else {}
                known[registration.urn] = digest
                installed.parent.mkdir(parents=True, exist_ok=True)
                installed.write_text(json.dumps(known, indent=1, sort_keys=True))

    def _installed(self, name: str, namespace: str) -> bool:
        """Helm keeps a release as Secrets labelled owner=helm,name=<release> in its namespace."""
        return bool(self.admin.list("v1", "Secret", namespace, selector=f"owner=helm,name={name}"))

    def _install(self, registration: Registration) -> None:
        inputs = registration.inputs
        name, namespace = inputs["name"], inputs["namespace"]
        chart_name = str(inputs["chart"]).rstrip("/").rsplit("/", 1)[-1]
        chart = chart_path(f"{chart_name}-{inputs['version']}.tgz")
        description = f"Release {namespace}/{name}"
        if chart is None:
            missing = f"the chart {chart_name} {inputs['version']} is missing (python -m harness.tools pull-charts)"
            line = f"REFUSED {description}: {missing}"
            print(line, flush=True)
            self.outcome.refused.append(line)
            self.failed[registration.urn] = "no chart"
            return
        helm = helm_path()
        if helm is None:
            raise SystemExit("lab: no Helm: python -m harness.tools install-helm")
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.state, delete=False) as values:
            json.dump(inputs.get("values") or {}, values)
        wait = [] if inputs.get("skipAwait") else ["--wait=legacy"]
        command = [
            str(helm),
            "upgrade",
            "--install",
            name,
            str(chart),
            "--namespace",
            namespace,
            "--kubeconfig",
            str(LabPaths(self.state).kubeconfig),
            "--values",
            values.name,
            "--timeout",
            f"{int(inputs.get('timeout') or DEFAULT_WAIT_SECONDS)}s",
            "--server-side=false",
            *wait,
        ]
        if inputs.get("maxHistory"):
            command += ["--history-max", str(int(inputs["maxHistory"]))]
        if inputs.get("createNamespace"):
            command.append("--create-namespace")
        if inputs.get("skipCrds"):
            command.append("--skip-crds")
        print(f"installing {description} ({chart.name}) with Helm", flush=True)
        began = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        Path(values.name).unlink()
        self.admin.forget_discovery()
        if result.returncode != 0:
            line = f"REFUSED {description}: {result.stderr.strip() or result.stdout.strip()}"
            print(line, flush=True)
            self.outcome.refused.append(line)
            self.failed[registration.urn] = result.stderr
            return
        print(f"installed {description} in {time.monotonic() - began:.0f} s", flush=True)


def _seconds(duration: str | None) -> int | None:
    if not duration:
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    return int(float(duration[:-1]) * units[duration[-1]]) if duration[-1] in units else int(duration)


def _record_pods(state: Path, admin: Kube) -> None:
    """lab.json: each pod the lab runs, as processes, and every pod KWOK fakes."""
    lab = read_lab(state)
    assert lab is not None
    running = json.loads((state / "run" / "pods.json").read_text()) if (state / "run" / "pods.json").is_file() else {}
    processes = {k: v for k, v in lab["processes"].items() if not k.startswith("pod/")}
    faked = []
    for pod in admin.list("v1", "Pod"):
        meta = pod["metadata"]
        where = f"{meta['namespace']}/{meta['name']}"
        if runs_as_processes(pod):
            for container, entry in (running.get(meta["uid"]) or {}).get("containers", {}).items():
                processes[f"pod/{where}/{container}"] = entry
        else:
            images = sorted({c["image"] for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]})
            faked.append(f"{where} ({', '.join(images)})")
    lab["processes"], lab["faked"] = processes, sorted(faked)
    write_lab(state, lab)


def apply_stack(argument: str, state: Path) -> int:
    state = state.resolve()
    lab = read_lab(state)
    if lab is None:
        print(f"lab: no lab in {state}: python -m harness.lab up --state {state}", file=sys.stderr)
        return 2
    path, stack = stack_file_of(argument)
    try:
        stack_file = read_stack_document(path)
    except ConfigError as invalid:
        print(invalid, file=sys.stderr)
        return 1
    settings = lab_settings(stack_file.settings, lab["network"]["gateway"])
    print(f"# {path.name}, in kubeconfig mode against the lab ({lab['apiServer']['url']}):")
    print(yaml.safe_dump({"config": {f"gpu-tenancy:{k}": v for k, v in settings.items()}}, sort_keys=False))
    admin = admin_client(state)
    mocks = LabMocks(admin, state / "apply" / "values.json")
    kubeconfig = LabPaths(state).kubeconfig.read_text()
    try:
        run = run_pulumi(main_program, config=settings, secrets={"kubeconfig": kubeconfig}, stack=stack, mocks=mocks)
    except Exception as error:
        print(f"lab: the program failed: {error}", file=sys.stderr)
        return 1
    mocks.save()
    providers = {
        r.urn for r in run.registrations if r.type == "pulumi:providers:kubernetes" and r.name == "host-cluster"
    }
    applier = Applier(state, run, admin, providers)
    applier.apply()
    outcome = applier.outcome
    _record_pods(state, admin)
    for line in [*outcome.skipped, *outcome.not_awaited]:
        print(line)
    if mocks.stood_in:
        print(f"stood in for what the lab cannot make yet: {', '.join(sorted(set(mocks.stood_in)))}")
    for tenant in tenants(admin, state):
        print(
            f"tenant {tenant.name}: KUBECONFIG={tenant.kubeconfig}"
            if tenant.kubeconfig
            else f"tenant {tenant.name}: its vCluster has written no kubeconfig"
        )
    if outcome.refused:
        print(f"lab: {len(outcome.refused)} refused; the first: {outcome.refused[0]}", file=sys.stderr)
        return 1
    print("lab: applied; every object accepted")
    return 0
