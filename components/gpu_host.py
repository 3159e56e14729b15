"""GpuHost: a Kubernetes cluster whose GPUs are proven to work, from a Brev instance, an SSH host or a kubeconfig.

In `brev` and `ssh` modes the machine is bootstrapped step by step (preflight,
MicroK8s, add-ons, kubeconfig), each step a remote command that re-runs only when
its rendered script changes. In every mode the GPU Operator is installed, adopted
or left alone, and a gate Job proves a pod can use a GPU before anything that
schedules on GPUs is allowed to start.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_kubernetes as k8s

from components.gate_job import GateAccess, fingerprint, gate_job
from components.gpu_gate import (
    INVENTORY_CONFIG_MAP,
    INVENTORY_KEY,
    INVENTORY_RULES,
    NODE_RULES,
    gate_files,
    gpu_gate_pod_spec,
)
from components.gpu_operator_values import GPU_OPERATOR_CHART, GPU_OPERATOR_REPO, gpu_operator_values
from components.host_facts import kubeconfig_server_host, parse_brev_ssh, parse_inventory, parse_preflight
from components.host_scripts import MARKER_DIR, remote_command, render_script
from components.labels import MANAGED_BY, object_name
from config.host import BrevHost, GpuGateConfig, GpuOperatorConfig, HostConfig, KubeconfigHost, SshHost
from config.platform import VersionsConfig

GATE_NAMESPACE = "gpu-tenancy-system"
MICROK8S_ADDONS = ("dns", "hostpath-storage")
"""CoreDNS, and the default StorageClass every vCluster's PVC binds to."""

KUBECTL_IMAGE = "registry.k8s.io/kubectl"
OPERATOR_TIMEOUT_SECONDS = 900
PRIVILEGED_NAMESPACE = {
    # The operator's node components are privileged; clusters enforcing Pod Security would refuse them.
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


@dataclass(frozen=True)
class _Cluster:
    kubeconfig: pulumi.Output[str]
    address: pulumi.Output[str]
    identifier: str
    ready: Sequence[pulumi.Resource]
    """What must finish before anything is installed in the cluster."""


class GpuHost(pulumi.ComponentResource):
    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig of the host cluster (secret)."""
    address: pulumi.Output[str]
    """Address at which clients reach the host: API server and node ports."""
    gpu: pulumi.Output[dict[str, Any]]
    """Per GPU node: name, memoryMiB, driverVersion and count, as the cluster advertises them."""
    preflight: pulumi.Output[dict[str, Any] | None]
    """What preflight found on the machine (gpuName, gpuMemoryMiB, driverVersion, ...); None in kubeconfig mode."""
    provider: k8s.Provider
    """Kubernetes provider for the host cluster."""
    ready: pulumi.Resource
    """Depend on this to run only after a pod has used a GPU."""

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

        self.provider = k8s.Provider(
            f"{name}-cluster",
            kubeconfig=cluster.kubeconfig,
            # A regenerated kubeconfig must not look like a new cluster: that would replace every resource.
            cluster_identifier=cluster.identifier,
            opts=pulumi.ResourceOptions(parent=self),
        )
        operator = self._gpu_operator(cluster)
        self.ready, self.gpu = self._gate(operator)
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig)
        self.address = cluster.address
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "address": self.address,
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
        return _Cluster(kubeconfig, pulumi.Output.from_input(address), f"kubeconfig/{host.cluster_id}", ())

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
        brev_inputs = {
            "BREV_NAME": host.name,
            "BREV_GPU_NAME": host.gpu_name,
            "BREV_CLOUD": host.cloud,
            "BREV_INSTANCE_TYPE": host.instance_type or "",
        }
        instance = command.local.Command(
            f"{self._name}-brev-instance",
            create=render_script("brev-instance.sh", brev_inputs),
            delete=render_script(
                "brev-delete.sh",
                {"BREV_NAME": host.name, "DELETE_ON_DESTROY": str(host.delete_on_destroy).lower()},
            ),
            interpreter=["/bin/bash", "-c"],
            add_previous_output_in_env=True,
            opts=local,
        )
        ssh = command.local.Command(
            f"{self._name}-brev-ssh",
            create=render_script("brev-ssh.sh", {"BREV_NAME": host.name}),
            interpreter=["/bin/bash", "-c"],
            triggers=[instance.id],
            # The output carries the instance's private key.
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
            the MicroK8s step would run its teardown.
            """
            rendered = pulumi.Output.all(**inputs).apply(lambda values: remote_command(script, values))
            created = command.remote.Command(
                f"{self._name}-{suffix}",
                connection=connection,
                create=rendered,
                delete=delete,
                triggers=list(triggers) or None,
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
        self.preflight = preflight.stdout.apply(parse_preflight)
        step(
            "microk8s",
            "microk8s-install.sh",
            {"MICROK8S_CHANNEL": channel, "MARKER_DIR": MARKER_DIR},
            delete=remote_command("microk8s-remove.sh", {"MARKER_DIR": MARKER_DIR}),
        )
        # After a MicroK8s upgrade, the add-ons, kubeconfig and operator check run again.
        step("addons", "microk8s-addons.sh", {"ADDONS": " ".join(MICROK8S_ADDONS)}, triggers=[channel])
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
            ready = [
                step(
                    "gpu-operator-check",
                    "gpu-operator-check.sh",
                    {"NAMESPACE": operator.namespace, "PART_OF": MANAGED_BY["app.kubernetes.io/part-of"]},
                    triggers=[channel, self._args.versions.gpu_operator or ""],
                )
            ]
        return _Cluster(pulumi.Output.secret(kubeconfig.stdout), address, identifier, ready)

    def _gpu_operator(self, cluster: _Cluster) -> k8s.helm.v3.Release | None:
        settings = self._args.gpu_operator
        if settings.mode == "skip":
            return None
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        values = gpu_operator_values(settings, microk8s=not isinstance(self._args.host, KubeconfigHost))
        release_args: dict[str, Any] = {
            "name": settings.release_name,
            "chart": GPU_OPERATOR_CHART,
            "repository_opts": {"repo": GPU_OPERATOR_REPO},
            "values": values,
            "timeout": OPERATOR_TIMEOUT_SECONDS,
        }
        if settings.mode == "adopt":
            # Track the release as it is: an import must match what is deployed, so everything it
            # was installed with is ignored for good, and destroy leaves it in place.
            return k8s.helm.v3.Release(
                f"{self._name}-gpu-operator",
                namespace=settings.namespace,
                version=self._args.versions.gpu_operator,
                **release_args,
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
        return k8s.helm.v3.Release(
            f"{self._name}-gpu-operator",
            namespace=object_name(namespace),
            version=self._args.versions.gpu_operator,
            **release_args,
            opts=child,
        )

    def _gate(self, operator: k8s.helm.v3.Release | None) -> tuple[k8s.batch.v1.Job, pulumi.Output[dict[str, Any]]]:
        """The Job that proves a GPU works, and the GPU inventory it leaves behind."""
        name = f"{self._name}-gpu-gate"
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)
        settings = self._args.gpu_gate
        namespace = object_name(
            k8s.core.v1.Namespace(name, metadata={"name": GATE_NAMESPACE, "labels": MANAGED_BY}, opts=child)
        )
        access = GateAccess(
            name,
            namespace=namespace,
            files=gate_files(),
            cluster_rules=NODE_RULES,
            namespace_rules=INVENTORY_RULES,
            opts=child,
        )
        operator_settings = self._args.gpu_operator
        gpu_stack = fingerprint(
            operator_settings.mode,
            self._args.versions.gpu_operator,
            operator_settings.values,
            settings.image,
        )
        job = gate_job(
            name,
            namespace=namespace,
            pod=gpu_gate_pod_spec(
                gpu_image=settings.image,
                kubectl_image=f"{KUBECTL_IMAGE}:{self._args.versions.kubectl}",
                namespace=namespace,
                service_account=access.service_account,
                config_map=access.config_map,
            ),
            # A changed operator replaces the Job, so the gate runs again.
            fingerprint_annotation=("gpu-tenancy/gpu-stack", gpu_stack),
            timeout_seconds=settings.timeout_seconds,
            backoff_limit=2,
            opts=child.merge(pulumi.ResourceOptions(depends_on=[*access.bindings, *([operator] if operator else [])])),
        )
        # Read only once the Job has completed: its id is unknown until then, so preview never reads early.
        inventory = k8s.core.v1.ConfigMap.get(
            f"{name}-inventory",
            pulumi.Output.all(namespace, job.id).apply(lambda parts: f"{parts[0]}/{INVENTORY_CONFIG_MAP}"),
            opts=child,
        )
        gpu = inventory.data.apply(lambda data: parse_inventory((data or {}).get(INVENTORY_KEY, "")))
        return job, gpu
