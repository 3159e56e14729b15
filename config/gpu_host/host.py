"""`gpu-tenancy:host`: where the GPU cluster comes from, and what that machine must prove it has.

Three modes, told apart by `mode`: `brev` provisions a machine with the brev CLI,
`ssh` bootstraps an existing Ubuntu host, `kubeconfig` uses a cluster as it is.
"""

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from config.gpu_host.kubelet import KubeletSettings
from config.issues import ConfigIssue
from config.names import DNS_LABEL_MAX
from config.types import ConfigModel, KubernetesName, dns_label, quoted_like, require_str

HOST_MODES = ("brev", "ssh", "kubeconfig")
BOOTSTRAP_MODES = frozenset({"brev", "ssh"})
"""Modes in which this stack installs MicroK8s on the machine itself."""

_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$"
)
_IPV4 = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
_MICROK8S_CHANNEL = re.compile(r"^\d+\.\d+/(stable|candidate|beta|edge)$")
# Classic confinement only: the scripts add the user to the group microk8s, which the strict snap names
# snap_microk8s (canonical/microk8s microk8s-resources/actions/common/utils.sh get_microk8s_group @v1.36).


def _address(value: str) -> str:
    ipv4 = _IPV4.match(value)
    if ipv4 and all(int(part) <= 255 for part in ipv4.groups()):
        return value
    if ipv4 or not _HOSTNAME.match(value) or value.replace(".", "").isdigit():
        raise PydanticCustomError(
            "address",
            "is not an IPv4 address or DNS name: give the address clients use to reach the host, "
            "e.g. 203.0.113.10 or gpu-1.example.com (no scheme, no port)",
            {},
        )
    return value


def _microk8s_channel(value: str) -> str:
    if not _MICROK8S_CHANNEL.match(value):
        raise PydanticCustomError(
            "microk8s_channel",
            "is not a classic MicroK8s snap channel pinned to a Kubernetes minor: use e.g. 1.36/stable "
            "('latest/...' would move the control plane under running teams; '-strict' channels are not supported)",
            {},
        )
    return value


HostAddress = Annotated[str, BeforeValidator(require_str), AfterValidator(_address)]
Microk8sChannel = Annotated[str, quoted_like("1.36/stable"), AfterValidator(_microk8s_channel)]
UbuntuRelease = Annotated[str, quoted_like("24.04"), Field(pattern=r"^\d{2}\.\d{2}$")]
UnixUser = Annotated[str, BeforeValidator(require_str), Field(min_length=1, pattern=r"^[a-z_][a-z0-9_-]*$")]
BrevName = Annotated[str, dns_label(63, "Brev instance name")]
ClusterIdentity = Annotated[
    str,
    BeforeValidator(require_str),
    Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9./:_-]{0,252}$", description="e.g. ssh/203.0.113.10 or gpu-prod"),
]


class HostExpectations(ConfigModel):
    """What the preflight step checks on the machine before anything is installed on it."""

    gpu_name: str | None = Field(
        default=None, min_length=1, description="Text every `nvidia-smi` GPU name must contain, e.g. L40S."
    )
    min_gpu_memory_mib: int | None = Field(
        default=None, gt=0, alias="minGpuMemoryMiB", description="Smallest acceptable memory per GPU."
    )
    ubuntu_release: UbuntuRelease = Field(default="24.04", description="A different release is a warning only.")


class _BootstrapHost(ConfigModel):
    expect: HostExpectations = Field(default_factory=HostExpectations)
    api_port: int = Field(default=16443, ge=1, le=65535, description="MicroK8s' API server port.")
    kubelet: KubeletSettings = Field(default_factory=KubeletSettings)


MAX_WORKERS = 32
"""More GPU machines than this want a cluster with more than one control plane."""


class BrevHost(_BootstrapHost):
    """A Brev instance, created by this stack unless one of that name already exists."""

    mode: Literal["brev"]
    name: BrevName
    gpu_name: str = Field(min_length=1, description="Brev's --gpu-name filter, e.g. L40S.")
    cloud: str = Field(min_length=1, description="Brev's --provider, e.g. nebius.")
    instance_type: str | None = Field(
        default=None, min_length=1, description="Brev's --type, when a filter is not enough."
    )
    delete_on_destroy: bool = Field(
        default=False, description="Delete the instance on `pulumi destroy` (only if this stack created it)."
    )
    workers: int = Field(
        default=0,
        ge=0,
        le=MAX_WORKERS,
        description="Extra GPU instances, named <name>-w1, <name>-w2, ..., with the same GPU filter, "
        "that join the cluster as MicroK8s workers.",
    )
    retired_workers: list[int] = Field(
        default_factory=list,
        description="Numbers of workers among 1..workers that are removed (e.g. a dead w2 of three): the others keep "
        "their names; lowering workers removes the highest-numbered instead.",
    )

    @property
    def expected_gpu(self) -> str:
        return self.expect.gpu_name or self.gpu_name

    @property
    def identity(self) -> str:
        """The cluster's identity (the Kubernetes provider's clusterIdentifier): another name is another machine."""
        return f"brev/{self.name}"

    @property
    def worker_instances(self) -> list[tuple[int, str]]:
        """(number, Brev instance) of each worker: 1..workers but the retired ones, so removing any one moves none
        of the others."""
        retired = set(self.retired_workers)
        return [(i, f"{self.name}-w{i}") for i in range(1, self.workers + 1) if i not in retired]

    @model_validator(mode="after")
    def _retired_workers_exist(self) -> "BrevHost":
        for position, number in enumerate(self.retired_workers):
            if not 1 <= number <= self.workers or self.retired_workers.index(number) != position:
                raise ConfigIssue(
                    ("retiredWorkers", position),
                    number,
                    f"names no worker, or one named twice: give numbers of workers 1 to {self.workers} (host.workers)",
                )
        return self

    @model_validator(mode="after")
    def _worker_names_fit(self) -> "BrevHost":
        longest = f"{self.name}-w{self.workers}"
        if self.workers and len(longest) > DNS_LABEL_MAX:
            raise ConfigIssue(
                ("workers",),
                self.workers,
                f"would name a worker instance {longest!r}, longer than {DNS_LABEL_MAX} characters: shorten host.name",
            )
        return self


class SshWorker(ConfigModel):
    """Another GPU machine that joins the cluster as a MicroK8s worker, reached with the same SSH key."""

    address: HostAddress
    user: UnixUser | None = Field(default=None, description="Defaults to host.user.")
    port: int = Field(default=22, ge=1, le=65535)


class SshHost(_BootstrapHost):
    """An existing Ubuntu machine with an NVIDIA driver, reached over SSH with `gpu-tenancy:sshPrivateKey`."""

    mode: Literal["ssh"]
    address: HostAddress
    user: UnixUser = "ubuntu"
    port: int = Field(default=22, ge=1, le=65535)
    workers: list[SshWorker] = Field(
        default_factory=list,
        max_length=MAX_WORKERS,
        description="GPU machines that join the cluster as MicroK8s workers; the host runs the control plane.",
    )
    cluster_id: ClusterIdentity | None = Field(
        default=None,
        description="Stable identity of the cluster (the Kubernetes provider's clusterIdentifier); changing it "
        "replaces every Kubernetes resource. Default: ssh/<address>, as before it could be set: set it to that "
        "value before changing the address, and the address may then change freely.",
    )

    @property
    def expected_gpu(self) -> str | None:
        return self.expect.gpu_name

    @property
    def identity(self) -> str:
        return self.cluster_id or f"ssh/{self.address}"

    @model_validator(mode="after")
    def _workers_are_other_machines(self) -> "SshHost":
        seen = {self.address: "host.address"}
        for index, worker in enumerate(self.workers):
            if worker.address in seen:
                raise ConfigIssue(
                    ("workers", index, "address"),
                    worker.address,
                    f"is already {seen[worker.address]}: each worker is another machine, listed once",
                )
            seen[worker.address] = f"workers[{index}].address"
        return self


class KubeconfigHost(ConfigModel):
    """An existing cluster with GPU nodes, reached with `gpu-tenancy:kubeconfig`; nothing is bootstrapped."""

    mode: Literal["kubeconfig"]
    address: HostAddress | None = Field(
        default=None,
        description="Address of a node (or a load balancer in front of the nodes) where teams reach node ports; "
        "required once there are tenants exposed by node port. Otherwise it defaults to the kubeconfig's API "
        "server host.",
    )
    cluster_id: KubernetesName = Field(
        default="existing-cluster",
        description="Stable identity of the cluster: changing it replaces every Kubernetes resource.",
    )

    @property
    def identity(self) -> str:
        return f"kubeconfig/{self.cluster_id}"


HostConfig = Annotated[BrevHost | SshHost | KubeconfigHost, Field(discriminator="mode")]
