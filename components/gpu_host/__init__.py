"""GpuHost: a Kubernetes cluster whose GPU nodes are proven to offer their GPUs.

Owns how the cluster comes to be in each host mode (a Brev instance or an SSH host
bootstrapped with MicroK8s, or an existing cluster's kubeconfig), the worker machines
joined to it, the host scripts and the remote steps that run them, the GPU Operator
release and its values, the host's Kubernetes provider, and the GPU gate that opens
only once every GPU node offers allocatable GPUs.
"""

from components.gpu_host.component import GpuHost, GpuHostArgs
from components.gpu_host.operator_values import installed_operator_runs_cdi

__all__ = ["GpuHost", "GpuHostArgs", "installed_operator_runs_cdi"]
