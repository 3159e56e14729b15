"""Mocks whose outputs are shaped like the real providers', so code that reads outputs is exercised."""

import base64
import hashlib
import json
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs, Mocks

from harness.monitor import unwrap_secrets

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
BREV_ADDRESS = "198.51.100.7"
"""Where the reference Brev instance answers SSH, until a test moves it."""
COMMAND_STDOUT = {
    "brev-instance": "created=true\nid=inst-0123456789\ngpuName=L40S\ncloud=nebius\ninstanceType=\n",
    "brev-ssh": f"address={BREV_ADDRESS}\nuser=ubuntu\nport=22\nprivateKey="
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
    if step == "kubeconfig":
        # kubeconfig.sh writes the address it was given as the server.
        return COMMAND_STDOUT[step].replace(BREV_ADDRESS, script_input(inputs["create"], "ADDRESS"))
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


CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
NODE = "kubernetes:core/v1:Node"
ENDPOINT_SLICE = "kubernetes:discovery.k8s.io/v1:EndpointSlice"
API_SERVER_ENDPOINT = ("10.0.0.10", 16443)
"""Where the host's API server is reached from pods: the control-plane node's own address and MicroK8s' port."""


SERVICE = "kubernetes:core/v1:Service"
STAND_IN_KEY = "-----BEGIN EC PRIVATE KEY-----\nstand-in\n-----END EC PRIVATE KEY-----\n"


def stand_in_certificate(inputs: Mapping[str, Any]) -> str:
    """pulumi-tls' certPem: a new certificate for new inputs (every one forces a new certificate), the same for the
    same inputs, so a second `up` changes nothing."""
    plain, _ = unwrap_secrets(dict(inputs))
    digest = hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return f"-----BEGIN CERTIFICATE-----\nstand-in {digest}\n-----END CERTIFICATE-----\n"


def _stand_in_password(name: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """pulumi-random's RandomPassword: `result`, `length` characters (here from the name, so runs repeat)."""
    length = int(inputs.get("length", 16))
    return {"result": hashlib.sha256(name.encode()).hexdigest()[:length]}


PROVIDER_OUTPUTS: dict[str, Callable[[str, Mapping[str, Any]], dict[str, Any]]] = {
    "random:index/randomPassword:RandomPassword": _stand_in_password,
    "tls:index/privateKey:PrivateKey": lambda name, inputs: {"privateKeyPem": STAND_IN_KEY},
    "tls:index/selfSignedCert:SelfSignedCert": lambda name, inputs: {"certPem": stand_in_certificate(inputs)},
}
"""What the random and tls providers compute, shaped as they return it."""


def _node_ports(name: str, ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kubernetes gives a NodePort Service's ports a node port from 30000-32767 when none is asked for."""
    base = 30000 + int(hashlib.sha256(name.encode()).hexdigest(), 16) % 2000
    return [{**port, "nodePort": port.get("nodePort") or base + i} for i, port in enumerate(ports)]


SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"


def _service_account_token(metadata: Mapping[str, Any]) -> dict[str, str]:
    """What the token controller fills in, and pulumi-kubernetes waits for before a create ends
    (provider/pkg/await/awaiters.go untilCoreV1SecretInitialized @v4.32.0): a token, the CA, the namespace."""
    account = metadata.get("annotations", {}).get("kubernetes.io/service-account.name", "")
    data = {"token": f"token-of-{account}", "ca.crt": "CA", "namespace": str(metadata.get("namespace", ""))}
    return {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}


class RealisticMocks(Mocks):
    """Outputs shaped like the real providers', so code that reads outputs is exercised.

    `previous` is what the world holds from earlier `up`s ({} for a fresh stack): `nodePorts` and `tenants`, the
    host's memory as the last `up` wrote it; `brevAddress`, where the Brev instance answers SSH now.
    """

    def __init__(self, previous: Mapping[str, Any] | None = None) -> None:
        self.previous = dict(previous or {})
        self.invokes: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        inputs = dict(args.inputs)
        if args.typ.startswith("pulumi:providers:"):
            return f"{args.name}-provider-id", inputs
        if args.typ.startswith("command:"):
            return f"{args.name}-id", {**inputs, "stdout": command_stdout(args.name, inputs), "stderr": ""}
        if args.resource_id and args.typ in {CONFIG_MAP, SECRET, NODE, ENDPOINT_SLICE}:
            return args.resource_id, self._read(args.typ, args.resource_id)
        if args.typ == "kubernetes:helm.sh/v3:Release":
            plain, _ = unwrap_secrets(inputs)
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
            if args.typ == SERVICE and state.get("spec", {}).get("type") == "NodePort":
                state["spec"] = {**state["spec"], "ports": _node_ports(args.name, state["spec"]["ports"])}
            if args.typ == SECRET and state.get("type") == SERVICE_ACCOUNT_TOKEN:
                state["data"] = _service_account_token(state["metadata"])
            meta = state["metadata"]
            namespace = meta.get("namespace")
            return (f"{namespace}/{meta['name']}" if namespace else meta["name"]), state
        computed = PROVIDER_OUTPUTS.get(args.typ)
        return f"{args.name}-id", {**inputs, **(computed(args.name, inputs) if computed else {})}

    def _read(self, typ: str, resource_id: str) -> dict[str, Any]:
        """What a read finds once the gates have passed: a tenant's kubeconfig, a GPU node, the last `up`'s outputs."""
        if typ == CONFIG_MAP:
            # The host's memory, as the previous `up` wrote it (nothing on a fresh cluster).
            namespace, name = resource_id.split("/")
            data = {
                key: json.dumps(self.previous[field])
                for field, key in (("nodePorts", "ports.json"), ("tenants", "tenants.json"))
                if field in self.previous
            }
            return {"metadata": {"namespace": namespace, "name": name}, "data": data}
        if typ == ENDPOINT_SLICE:
            address, port = API_SERVER_ENDPOINT
            return {
                "metadata": {"namespace": "default", "name": "kubernetes"},
                "addressType": "IPv4",
                "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            }
        if typ == NODE:
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

    def call(self, args: MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """`command:local:run` of brev-ssh.sh: how the instance is reached now (`previous["brevAddress"]`, once
        it moved)."""
        self.invokes.append((args.token, dict(args.args)))
        if args.token == "command:local:run":
            found = re.search(r"^BREV_NAME=(\S+)$", str(args.args.get("command", "")), re.MULTILINE)
            if found:
                address = str(self.previous.get("brevAddress", BREV_ADDRESS))
                stdout = COMMAND_STDOUT["brev-ssh"].replace(BREV_ADDRESS, address)
                return {**args.args, "stdout": stdout, "stderr": ""}, []
        return {}, []


class FreshPreviewMocks(RealisticMocks):
    """`pulumi preview` of a stack that does not exist yet: every id and computed output is unknown.

    Providers echo their inputs in a preview (pulumi-kubernetes also fills in the
    auto-name in Check), so inputs stay known; anything only the create step
    produces (command stdout, Helm status, an id, what a read would return) is absent,
    which the SDK resolves as unknown during a dry run.
    """

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.resource_id:
            # A read whose id is still unknown is skipped by the engine in a preview.
            return "", {}
        inputs = dict(args.inputs)
        if args.typ.startswith("kubernetes:") and args.typ != "kubernetes:helm.sh/v3:Release":
            return "", _with_name(args.name, inputs)
        return "", inputs
