"""GpuHost: a Kubernetes cluster whose GPUs are proven to work, from a Brev instance, an SSH host or a kubeconfig.

In `brev` and `ssh` modes the machine is bootstrapped step by step (preflight,
MicroK8s, add-ons, kubeconfig), each step a remote command that re-runs only when
its rendered script changes. In every mode the GPU Operator is installed, adopted
or left alone, and a gate proves every GPU node offers its GPUs before anything
that schedules on GPUs is allowed to start.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.gpu_host.api_endpoints import api_endpoints
from components.gpu_host.brev_machine import brev_machine
from components.gpu_host.gpu_gate import gpu_gate_grants, gpu_gate_steps, gpu_node_facts
from components.gpu_host.host_facts import parse_preflight
from components.gpu_host.host_scripts import MARKER_DIR, remote_command
from components.gpu_host.kubelet_args import kubelet_flags
from components.gpu_host.operator_values import operator_release_spec
from components.gpu_host.remote_steps import remote_step
from components.gpu_host.workers import ControlPlane, Worker, WorkerChecks, join_workers
from components.shared.gate import Gate, GateArgs
from components.shared.helm import ReleaseSpec, helm_release
from components.shared.kubeconfigs import kubeconfig_server_host, kubeconfig_server_port
from components.shared.labels import MANAGED_BY, object_name
from components.shared.ownership import owned
from components.shared.providers import MUTABLE_OBJECTS
from config.gpu_host.gpu_operator import GpuGateConfig, GpuOperatorConfig
from config.gpu_host.host import BrevHost, HostConfig, KubeconfigHost, SshHost
from config.upstream import GPU_OPERATOR_COMPONENT_LABEL
from config.versions import VersionsConfig

GATE_NAMESPACE = "gpu-tenancy-system"
MICROK8S_ADDONS = ("dns", "hostpath-storage")
"""CoreDNS, and the default StorageClass `microk8s-hostpath` (reclaim policy Delete) every vCluster's PVC
binds to: canonical/microk8s-core-addons addons.yaml, addons/hostpath-storage/enable @f689811 (the add-ons
MicroK8s 1.36 bundles)."""

OPERATOR_TIMEOUT_SECONDS = 900
PRIVILEGED_NAMESPACE = {
    # The operator's node components are privileged; clusters enforcing Pod Security would refuse them
    # (Pod Security admission reads this label: kubernetes/pod-security-admission api/constants.go EnforceLevelLabel).
    "pod-security.kubernetes.io/enforce": "privileged",
}


@dataclass(frozen=True)
class GpuHostArgs:
    host: HostConfig
    versions: VersionsConfig
    gpu_operator: GpuOperatorConfig
    gpu_gate: GpuGateConfig
    kubeconfig: pulumi.Output[str] | None = None
    """Secret; required in `kubeconfig` mode."""
    ssh_private_key: pulumi.Output[str] | None = None
    """Secret; required in `ssh` mode."""
    extra_addons: Sequence[str] = ()
    """MicroK8s add-ons beyond the platform's own, e.g. ingress for tenants exposed by SNI."""
    secret_operator_values: bool = False
    """`gpuOperator.values` holds a secret: the release's values are a Pulumi secret."""


@dataclass(frozen=True)
class _Cluster:
    kubeconfig: pulumi.Output[str]
    address: pulumi.Output[str]
    api_port: pulumi.Output[int]
    identifier: str
    ready: Sequence[pulumi.Resource]
    """What must finish before anything is installed in the cluster."""
    gpu_nodes: Sequence[pulumi.Output[str]] = ()
    """The Kubernetes nodes of the GPU machines this stack built, control plane first; none for a cluster
    it did not build."""
    workers_ready: Sequence[pulumi.Resource] = ()
    """One per worker: done once its node is Ready."""
    machine_addresses: Sequence[pulumi.Input[str]] = ()
    """Where each machine of the cluster this stack knows is reached, control plane first."""


class GpuHost(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig of the host cluster (secret)."""
    address: pulumi.Output[str]
    """Address at which clients reach the host: API server and node ports."""
    api_port: pulumi.Output[int]
    """Port of the API server; pods reach it there, behind the `kubernetes` Service."""
    gpu: pulumi.Output[dict[str, Any] | None]
    """Per GPU node this stack built (control plane and workers): name, memoryMiB, driverVersion and count,
    as the cluster advertises them.

    None in kubeconfig mode, where the stack does not know the cluster's nodes."""
    preflight: pulumi.Output[dict[str, Any] | None]
    """What preflight found on the machine (gpuName, gpuMemoryMiB, driverVersion, ...); None in kubeconfig mode."""
    provider: k8s.Provider
    """Kubernetes provider for the host cluster."""
    cluster_identifier: str
    """The provider's stable identity, from config alone (e.g. brev/<name>); tenant providers derive theirs."""
    control_plane_node: pulumi.Output[str] | None
    """The node running MicroK8s' control plane and holding the hostpath volumes; None in kubeconfig mode."""
    ready: k8s.batch.v1.Job
    """Depend on this to run only once every GPU node offers its GPUs."""
    machine_addresses: pulumi.Output[list[str]]
    """Every machine this stack knows (the host, and its workers): what a tenant may never reach."""
    api_endpoints: pulumi.Output[list[tuple[str, int]]]
    """(address, port) of each endpoint of the `kubernetes` Service: where pods really reach the API server."""

    def __init__(self, name: str, args: GpuHostArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:GpuHost", name, None, owned(opts))
        self._name = name
        self._args = args
        host = args.host

        if isinstance(host, KubeconfigHost):
            cluster = self._existing_cluster(host)
            self.preflight = pulumi.Output.from_input(None)
        else:
            cluster = self._bootstrap(host)

        self.cluster_identifier = cluster.identifier
        self.provider = k8s.Provider(
            f"{name}-cluster",
            kubeconfig=cluster.kubeconfig,
            # A regenerated (or, in a preview, unknown) kubeconfig must not look like a new cluster: that would
            # replace every resource (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go DiffConfig @v4.32.0).
            cluster_identifier=cluster.identifier,
            opts=pulumi.ResourceOptions(parent=self),
            **MUTABLE_OBJECTS,
        )
        operator = self._gpu_operator(cluster)
        self.ready = self._gate(operator, cluster)
        self.gpu = self._gpu_nodes(cluster.gpu_nodes)
        self.control_plane_node = cluster.gpu_nodes[0] if cluster.gpu_nodes else None
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        self.address = cluster.address
        self.api_port = cluster.api_port
        self.machine_addresses = pulumi.Output.all(*cluster.machine_addresses).apply(list)
        self.api_endpoints = self._api_endpoints()
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "address": self.address,
                "api_port": self.api_port,
                "machine_addresses": self.machine_addresses,
                "api_endpoints": self.api_endpoints,
                "gpu": self.gpu,
                "preflight": self.preflight,
                "control_plane_node": self.control_plane_node,
            }
        )

    def _existing_cluster(self, host: KubeconfigHost) -> _Cluster:
        if self._args.kubeconfig is None:
            raise ValueError("kubeconfig mode needs the kubeconfig secret")
        kubeconfig = self._args.kubeconfig
        # The server address is not a credential, though it comes out of one.
        address = host.address or pulumi.Output.unsecret(kubeconfig.apply(kubeconfig_server_host))
        api_port = pulumi.Output.unsecret(kubeconfig.apply(kubeconfig_server_port))
        known = pulumi.Output.from_input(address)
        return _Cluster(kubeconfig, known, api_port, host.identity, (), machine_addresses=[known])

    def _connection(self, host: BrevHost | SshHost) -> tuple[pulumi.Output[Any], pulumi.Output[str], str]:
        """SSH connection to the control plane (secret), the host's address, and a stable cluster identity."""
        if isinstance(host, SshHost):
            connection = self._ssh_connection(host.address, host.user, host.port)
            return connection, pulumi.Output.from_input(host.address), host.identity
        connection, address, _ = brev_machine(host, host.name, self._name, role="control-plane", parent=self)
        return connection, address, host.identity

    def _ssh_connection(self, address: str, user: str, port: int) -> pulumi.Output[Any]:
        """A connection with the stack's SSH key (secret)."""
        if self._args.ssh_private_key is None:
            raise ValueError("ssh mode needs the sshPrivateKey secret")
        connection = self._args.ssh_private_key.apply(
            lambda key: {"host": address, "user": user, "port": port, "privateKey": key}
        )
        return pulumi.Output.secret(connection)

    def _bootstrap(self, host: BrevHost | SshHost) -> _Cluster:
        connection, address, identifier = self._connection(host)
        channel = self._args.versions.microk8s
        if channel is None:
            raise ValueError("bootstrap modes need versions.microk8s")

        previous: list[pulumi.Resource] = []

        def step(
            suffix: str,
            script: str,
            inputs: dict[str, pulumi.Input[str]],
            *,
            triggers: Sequence[pulumi.Input[str]] = (),
            delete: str | None = None,
            secret_output: bool = False,
        ) -> command.remote.Command:
            """One bootstrap step on the control plane, after the previous one."""
            created = remote_step(
                f"{self._name}-{suffix}",
                connection=connection,
                script=script,
                inputs=inputs,
                parent=self,
                after=previous,
                triggers=triggers,
                delete=delete,
                secret_output=secret_output,
            )
            previous[:] = [created]
            return created

        expect = host.expect
        preflight = step(
            "preflight",
            "preflight.sh",
            {
                "EXPECT_GPU": host.expected_gpu or "",
                "MIN_GPU_MEMORY_MIB": str(expect.min_gpu_memory_mib or ""),
                "UBUNTU_RELEASE": expect.ubuntu_release,
            },
            triggers=[channel],
        )
        facts = preflight.stdout.apply(parse_preflight)
        self.preflight = facts
        step(
            "microk8s",
            "microk8s-install.sh",
            {"MICROK8S_CHANNEL": channel, "MARKER_DIR": MARKER_DIR},
            delete=remote_command("microk8s-remove.sh", {"MARKER_DIR": MARKER_DIR}),
        )
        kubelet = " ".join(kubelet_flags(host.kubelet))
        # A refresh may rewrite MicroK8s' arguments: after an upgrade the kubelet's are checked again.
        kubelet_step = step("kubelet", "kubelet-args.sh", {"KUBELET_FLAGS": kubelet}, triggers=[channel])
        # Outside the chain: nothing waits for it. `pulumi up --replace` on it checks the machine again.
        remote_step(
            f"{self._name}-drift-check",
            connection=connection,
            script="host-drift.sh",
            inputs={"MICROK8S_CHANNEL": channel, "KUBELET_FLAGS": kubelet},
            parent=self,
            after=[kubelet_step],
        )
        # After a MicroK8s upgrade, the add-ons, kubeconfig and operator check run again.
        addons = " ".join((*MICROK8S_ADDONS, *self._args.extra_addons))
        step("addons", "microk8s-addons.sh", {"ADDONS": addons}, triggers=[channel])
        kubeconfig = step(
            "kubeconfig",
            "kubeconfig.sh",
            {"ADDRESS": address, "API_PORT": str(host.api_port)},
            triggers=[channel],
            secret_output=True,
        )
        ready: list[pulumi.Resource] = [kubeconfig]
        operator = self._args.gpu_operator
        if operator.mode == "install":
            part_of = MANAGED_BY["app.kubernetes.io/part-of"]
            label, component = GPU_OPERATOR_COMPONENT_LABEL
            ready = [
                step(
                    "gpu-operator-check",
                    "gpu-operator-check.sh",
                    {"NAMESPACE": operator.namespace, "PART_OF": part_of, "OPERATOR_SELECTOR": f"{label}={component}"},
                    triggers=[channel, self._args.versions.gpu_operator or ""],
                )
            ]
        node = facts.apply(lambda found: str(found["nodeName"]))
        machines = self._workers(host)
        workers = join_workers(
            self._name,
            machines,
            control_plane=ControlPlane(connection, address, running=kubeconfig),
            checks=WorkerChecks(channel, expect, host.expected_gpu, kubelet),
            parent=self,
        )
        api_port = pulumi.Output.from_input(host.api_port)
        return _Cluster(
            pulumi.Output.secret(kubeconfig.stdout),
            address,
            api_port,
            identifier,
            ready,
            gpu_nodes=[node, *workers.nodes],
            workers_ready=workers.ready,
            machine_addresses=[address, *(machine.address for machine in machines)],
        )

    def _workers(self, host: BrevHost | SshHost) -> list[Worker]:
        if isinstance(host, BrevHost):
            workers = []
            for index, instance in host.worker_instances:
                connection, address, after = brev_machine(
                    host, instance, f"{self._name}-w{index}", role="worker", parent=self
                )
                workers.append(Worker(f"w{index}", connection, address, after))
        else:
            workers = [
                Worker(
                    worker.address,
                    self._ssh_connection(worker.address, worker.user or host.user, worker.port),
                    worker.address,
                )
                for worker in host.workers
            ]
        return workers

    def _gpu_operator(self, cluster: _Cluster) -> k8s.helm.v3.Release | None:
        settings = self._args.gpu_operator
        if settings.mode == "skip":
            return None
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        spec = self._operator_spec()
        if settings.mode == "adopt":
            # Track the release as it is: an import must match what is deployed, so everything it
            # was installed with is ignored for good, and destroy leaves it in place.
            return helm_release(
                f"{self._name}-gpu-operator",
                spec,
                namespace=settings.namespace,
                timeout_seconds=OPERATOR_TIMEOUT_SECONDS,
                opts=child.merge(
                    pulumi.ResourceOptions(
                        import_=f"{settings.namespace}/{settings.release_name}",
                        ignore_changes=["chart", "version", "values", "repositoryOpts", "timeout", "maxHistory"],
                        retain_on_delete=True,
                        depends_on=list(cluster.ready),
                    )
                ),
            )
        namespace = k8s.core.v1.Namespace(
            f"{self._name}-gpu-operator",
            metadata={"name": settings.namespace, "labels": {**MANAGED_BY, **PRIVILEGED_NAMESPACE}},
            opts=child.merge(pulumi.ResourceOptions(depends_on=list(cluster.ready))),
        )
        # Depending on the namespace, the release is uninstalled before its namespace is deleted.
        return helm_release(
            f"{self._name}-gpu-operator",
            spec,
            namespace=object_name(namespace),
            timeout_seconds=OPERATOR_TIMEOUT_SECONDS,
            secret_values=self._args.secret_operator_values,
            opts=child,
        )

    def _operator_spec(self) -> ReleaseSpec:
        microk8s = not isinstance(self._args.host, KubeconfigHost)
        return operator_release_spec(
            self._args.gpu_operator, version=self._args.versions.gpu_operator, microk8s=microk8s
        )

    def _gate(self, operator: k8s.helm.v3.Release | None, cluster: _Cluster) -> k8s.batch.v1.Job:
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        settings = self._args.gpu_operator
        namespace = k8s.core.v1.Namespace(
            f"{self._name}-gpu-gate", metadata={"name": GATE_NAMESPACE, "labels": MANAGED_BY}, opts=child
        )
        operator_namespace = None if settings.mode == "skip" else settings.namespace
        gate = Gate(
            f"{self._name}-gpu-gate",
            GateArgs(
                object_name="gpu-gate",
                namespace=object_name(namespace),
                steps=gpu_gate_steps(operator_namespace, self._args.gpu_gate.timeout_seconds, cluster.gpu_nodes),
                grants=gpu_gate_grants(operator_namespace),
                kubectl_version=self._args.versions.kubectl,
                timeout_seconds=self._args.gpu_gate.timeout_seconds,
                # Another operator (or its values) or another MicroK8s re-runs the gate.
                vouches_for={
                    "operator": self._operator_spec() if settings.mode == "install" else settings.mode,
                    "microk8s": self._args.versions.microk8s if cluster.gpu_nodes else None,
                },
                # Every worker is a GPU node the gate must see.
                after=[*([operator] if operator else []), *cluster.workers_ready],
            ),
            opts=child,
        )
        return gate.job

    def _api_endpoints(self) -> pulumi.Output[list[tuple[str, int]]]:
        """Read from the cluster: the API server keeps an EndpointSlice named `kubernetes` in `default` for its
        Service (kubernetes/kubernetes pkg/controlplane/reconcilers/endpointsadapter.go @v1.36.0)."""
        slice_ = k8s.discovery.v1.EndpointSlice.get(
            f"{self._name}-api-endpoints",
            # Unknown until the provider is: a fresh stack's preview has no cluster to read from yet.
            self.provider.id.apply(lambda _: "default/kubernetes"),
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider),
        )
        return pulumi.Output.all(slice_.endpoints, slice_.ports).apply(lambda parts: api_endpoints(*parts))

    def _gpu_nodes(self, names: Sequence[pulumi.Output[str]]) -> pulumi.Output[dict[str, Any] | None]:
        """The GPU nodes this stack built, read once the gate passed (their ids are unknown until then)."""
        if not names:
            return pulumi.Output.from_input(None)
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        found = []
        for index, name in enumerate(names):
            node_name = pulumi.Output.all(name, self.ready.id).apply(lambda parts: parts[0])
            # The control plane's read keeps the name it had before workers existed.
            suffix = "gpu-node" if index == 0 else f"gpu-node-{index}"
            node = k8s.core.v1.Node.get(f"{self._name}-{suffix}", node_name, opts=child)
            # Output types are dicts too, so the same lookups read a node in a real run and under mocks.
            facts = pulumi.Output.all(node.metadata, node.status).apply(
                lambda parts: gpu_node_facts(parts[0].get("labels"), (parts[1] or {}).get("allocatable"))
            )
            found.append(pulumi.Output.all(node_name, facts))
        return pulumi.Output.all(*found).apply(lambda pairs: {name: facts for name, facts in pairs})
