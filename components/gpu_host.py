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

from components.gate_job import Gate
from components.gpu_gate import gpu_gate_grants, gpu_gate_steps, gpu_node_facts
from components.gpu_operator_values import operator_release_spec
from components.helm import ReleaseSpec, helm_release
from components.host_facts import parse_brev_ssh, parse_preflight
from components.host_scripts import MARKER_DIR, remote_command, render_script
from components.kubeconfigs import kubeconfig_server_host, kubeconfig_server_port
from components.labels import MANAGED_BY, object_name
from config.host import BrevHost, GpuGateConfig, GpuOperatorConfig, HostConfig, KubeconfigHost, SshHost
from config.platform import VersionsConfig
from config.upstream import GPU_OPERATOR_COMPONENT_LABEL

GATE_NAMESPACE = "gpu-tenancy-system"
MICROK8S_ADDONS = ("dns", "hostpath-storage")
"""CoreDNS, and the default StorageClass `microk8s-hostpath` (reclaim policy Delete) every vCluster's PVC
binds to: canonical/microk8s-core-addons addons.yaml, addons/hostpath-storage/enable @f689811 (the add-ons
MicroK8s 1.36 bundles)."""

OPERATOR_TIMEOUT_SECONDS = 900
BREV_READY_TIMEOUT_SECONDS = 900
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


@dataclass(frozen=True)
class _Cluster:
    kubeconfig: pulumi.Output[str]
    address: pulumi.Output[str]
    api_port: pulumi.Output[int]
    identifier: str
    ready: Sequence[pulumi.Resource]
    """What must finish before anything is installed in the cluster."""
    gpu_node: pulumi.Output[str] | None
    """The Kubernetes node of the GPU machine this stack built; None for a cluster it did not build."""


class GpuHost(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig of the host cluster (secret)."""
    address: pulumi.Output[str]
    """Address at which clients reach the host: API server and node ports."""
    api_port: pulumi.Output[int]
    """Port of the API server; pods reach it there, behind the `kubernetes` Service."""
    gpu: pulumi.Output[dict[str, Any] | None]
    """Per GPU node this stack built: name, memoryMiB, driverVersion and count, as the cluster advertises them.

    None in kubeconfig mode, where the stack does not know the cluster's nodes."""
    preflight: pulumi.Output[dict[str, Any] | None]
    """What preflight found on the machine (gpuName, gpuMemoryMiB, driverVersion, ...); None in kubeconfig mode."""
    provider: k8s.Provider
    """Kubernetes provider for the host cluster."""
    cluster_identifier: str
    """The provider's stable identity, from config alone (e.g. brev/<name>); tenant providers derive theirs."""
    ready: k8s.batch.v1.Job
    """Depend on this to run only once every GPU node offers its GPUs."""

    def __init__(self, name: str, args: GpuHostArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:GpuHost", name, None, opts)
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
        )
        operator = self._gpu_operator(cluster)
        self.ready = self._gate(operator, cluster)
        self.gpu = self._gpu_node(cluster.gpu_node)
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        self.address = cluster.address
        self.api_port = cluster.api_port
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "address": self.address,
                "api_port": self.api_port,
                "gpu": self.gpu,
                "preflight": self.preflight,
            }
        )

    def _existing_cluster(self, host: KubeconfigHost) -> _Cluster:
        if self._args.kubeconfig is None:
            raise ValueError("kubeconfig mode needs the kubeconfig secret")
        kubeconfig = self._args.kubeconfig
        # The server address is not a credential, though it comes out of one.
        address = host.address or pulumi.Output.unsecret(kubeconfig.apply(kubeconfig_server_host))
        api_port = pulumi.Output.unsecret(kubeconfig.apply(kubeconfig_server_port))
        return _Cluster(
            kubeconfig, pulumi.Output.from_input(address), api_port, f"kubeconfig/{host.cluster_id}", (), None
        )

    def _connection(self, host: BrevHost | SshHost) -> tuple[pulumi.Output[Any], pulumi.Output[str], str]:
        """SSH connection (secret), the host's address, and a stable cluster identity."""
        if isinstance(host, SshHost):
            if self._args.ssh_private_key is None:
                raise ValueError("ssh mode needs the sshPrivateKey secret")
            connection = self._args.ssh_private_key.apply(
                lambda key: {"host": host.address, "user": host.user, "port": host.port, "privateKey": key}
            )
            return pulumi.Output.secret(connection), pulumi.Output.from_input(host.address), f"ssh/{host.address}"

        local = pulumi.ResourceOptions(parent=self)
        spec = {
            "BREV_NAME": host.name,
            "BREV_GPU_NAME": host.gpu_name,
            "BREV_CLOUD": host.cloud,
            "BREV_INSTANCE_TYPE": host.instance_type or "",
        }
        ensure = render_script(
            "brev-instance.sh", {**spec, "ACTION": "ensure", "READY_TIMEOUT_SECONDS": str(BREV_READY_TIMEOUT_SECONDS)}
        )
        instance = command.local.Command(
            f"{self._name}-brev-instance",
            create=ensure,
            # An update (e.g. a new deleteOnDestroy) must carry the created=true marker on: pulumi-command
            # runs `update` (else `create`) on an input change, with the last output in PULUMI_COMMAND_STDOUT.
            update=ensure,
            delete=render_script(
                "brev-instance.sh",
                {"ACTION": "delete", "BREV_NAME": host.name, "DELETE_ON_DESTROY": str(host.delete_on_destroy).lower()},
            ),
            # Another instance (a new name, GPU or cloud) is a new resource: the old one's delete step runs
            # once the new one exists (pulumi/pulumi-command provider/pkg/provider/common/inputs.go @v1.2.1).
            triggers=list(spec.values()),
            interpreter=["/bin/bash", "-c"],
            add_previous_output_in_env=True,
            opts=local,
        )
        ssh = command.local.Command(
            f"{self._name}-brev-ssh",
            create=render_script("brev-ssh.sh", {"BREV_NAME": host.name}),
            interpreter=["/bin/bash", "-c"],
            triggers=[instance.id],
            # The output carries the instance's private key: secret in state and never logged.
            logging=command.local.Logging.STDERR,
            opts=local.merge(pulumi.ResourceOptions(additional_secret_outputs=["stdout"], depends_on=[instance])),
        )
        endpoint = ssh.stdout.apply(parse_brev_ssh)
        connection = endpoint.apply(
            lambda e: {"host": e.address, "user": e.user, "port": e.port, "privateKey": e.private_key}
        )
        address = pulumi.Output.unsecret(endpoint.apply(lambda e: e.address))
        return pulumi.Output.secret(connection), address, f"brev/{host.name}"

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
            """One bootstrap step, after the previous one.

            A changed script (new inputs) re-runs it in place; a changed trigger replaces it,
            which also re-runs it. Only steps without a delete command take triggers: replacing
            the MicroK8s step would run its teardown. A step whose output is a credential keeps
            it out of the logs (pulumi-command streams stdout by default, and secretness applies
            only to state: provider/pkg/provider/local/commandOutputs.go @v1.2.1).
            """
            rendered = pulumi.Output.all(**inputs).apply(lambda values: remote_command(script, values))
            created = command.remote.Command(
                f"{self._name}-{suffix}",
                connection=connection,
                create=rendered,
                delete=delete,
                triggers=list(triggers) or None,
                logging=command.remote.Logging.STDERR if secret_output else None,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=list(previous),
                    additional_secret_outputs=["stdout"] if secret_output else None,
                ),
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
        api_port = pulumi.Output.from_input(host.api_port)
        return _Cluster(pulumi.Output.secret(kubeconfig.stdout), address, api_port, identifier, ready, node)

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
                        ignore_changes=["chart", "version", "values", "repositoryOpts", "timeout"],
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
            "gpu-gate",
            resource_name=f"{self._name}-gpu-gate",
            namespace=object_name(namespace),
            steps=gpu_gate_steps(operator_namespace, self._args.gpu_gate.timeout_seconds),
            grants=gpu_gate_grants(operator_namespace),
            kubectl_version=self._args.versions.kubectl,
            timeout_seconds=self._args.gpu_gate.timeout_seconds,
            # Another operator (or its values) or another MicroK8s re-runs the gate.
            vouches_for={
                "operator": self._operator_spec() if settings.mode == "install" else settings.mode,
                "microk8s": self._args.versions.microk8s if cluster.gpu_node is not None else None,
            },
            depends_on=[operator] if operator else [],
            opts=child,
        )
        return gate.job

    def _gpu_node(self, name: pulumi.Output[str] | None) -> pulumi.Output[dict[str, Any] | None]:
        """The GPU node this stack built, read once the gate passed (its id is unknown until then)."""
        if name is None:
            return pulumi.Output.from_input(None)
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        node_name = pulumi.Output.all(name, self.ready.id).apply(lambda parts: parts[0])
        node = k8s.core.v1.Node.get(f"{self._name}-gpu-node", node_name, opts=child)
        # Output types are dicts too, so the same lookups read a node in a real run and under mocks.
        facts = pulumi.Output.all(node.metadata, node.status).apply(
            lambda parts: gpu_node_facts(parts[0].get("labels"), (parts[1] or {}).get("allocatable"))
        )
        return pulumi.Output.all(node_name, facts).apply(lambda parts: {parts[0]: parts[1]})
