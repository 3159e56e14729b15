"""Facts about software this program does not contain, each with where it was read.

Everything here was read in the upstream source at the version the stack pins
(or the tag named), not assumed. When a pinned version moves, re-read the cited
file; the tests check what the program registers against these facts (for
example, that no container runs a program its image does not ship).
"""

# --- Kubernetes and kubectl ----------------------------------------------------------------------

KUBECTL_IMAGE = "registry.k8s.io/kubectl"
KUBECTL = "/bin/kubectl"
# The image is kubectl alone on distroless static: no shell, date, sleep or base64.
# kubernetes/kubernetes build/server-image/kubectl/Dockerfile (ENTRYPOINT ["/bin/kubectl"]) and
# build/common.sh (KUBECTL_BASE_IMAGE -> gcr.io/distroless/static-debian13) @v1.36.0.

MIN_KUBECTL_MINOR = 31
# The gates wait with `kubectl wait --for=create`, new in kubectl 1.31: kubernetes/kubectl
# pkg/cmd/wait/wait.go @v0.31.0.

IMAGE_PROGRAMS: dict[str, frozenset[str]] = {KUBECTL_IMAGE: frozenset({KUBECTL})}
"""Every image a container of this program runs, with the only programs it ships."""

# Name and label length limits are in config/names.py.

METADATA_NAME_LABEL = "kubernetes.io/metadata.name"
# Set by the API server on every namespace: kubernetes/api core/v1/well_known_labels.go @v0.36.0.

# --- MicroK8s ------------------------------------------------------------------------------------
# A MicroK8s node is named after its hostname, lowercased: canonical/microk8s
# microk8s-resources/default-args/kubelet has no --hostname-override @v1.36, and the kubelet lowercases
# os.Hostname(): kubernetes/component-helpers node/util/hostname.go GetHostname @v0.36.0.

# --- NVIDIA GPU Operator (chart v26.3.3) ---------------------------------------------------------

GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_NODE_LABEL = "nvidia.com/gpu.present"
# The operator labels a node nvidia.com/gpu.present=true when NFD reports an NVIDIA PCI device:
# NVIDIA/gpu-operator controllers/state_manager.go labelGPUNodes @v26.3.3.
GPU_OPERATOR_DAEMONSETS = (
    "nvidia-container-toolkit-daemonset",
    "nvidia-device-plugin-daemonset",
    "nvidia-operator-validator",
)
# Fixed names, in the operator's namespace, RollingUpdate by default (values.yaml daemonsets.updateStrategy):
# NVIDIA/gpu-operator assets/state-container-toolkit, state-device-plugin, state-operator-validation
# 0500_daemonset.yaml @v26.3.3. The validator's pod is Ready once its init containers checked the driver,
# the toolkit, a CUDA workload and the node's nvidia.com/gpu capacity, without requesting a GPU
# (WITH_WORKLOAD=false for the plugin check): cmd/nvidia-validator @v26.3.3.
GPU_OPERATOR_COMPONENT_LABEL = ("app.kubernetes.io/component", "gpu-operator")
# On the operator Deployment: NVIDIA/gpu-operator deployments/gpu-operator/templates/operator.yaml @v26.3.3.
GFD_LABELS = {
    "name": "nvidia.com/gpu.product",
    "memoryMiB": "nvidia.com/gpu.memory",
    "driverVersion": "nvidia.com/cuda.driver-version.full",
}
# GPU feature discovery's node labels (memory in MiB; the driver's version, not CUDA's):
# NVIDIA/k8s-device-plugin internal/lm/nvml.go, resource.go @v0.19.3, the device plugin v26.3.3 ships.
NVIDIA_DEFAULT_RUNTIME_ENV = "NVIDIA_RUNTIME_SET_AS_DEFAULT"
SET_AS_DEFAULT_ENVS = frozenset({NVIDIA_DEFAULT_RUNTIME_ENV, "CONTAINERD_SET_AS_DEFAULT", "DOCKER_SET_AS_DEFAULT"})
# The toolkit reads set-as-default from these, first found wins, default true:
# NVIDIA/nvidia-container-toolkit cmd/nvidia-ctk-installer/container/runtime/runtime.go @v1.19.1.
# Under cdi.enabled the operator sets NVIDIA_RUNTIME_SET_AS_DEFAULT=false, then applies toolkit.env over it:
# NVIDIA/gpu-operator controllers/object_controls.go transformToolkitCtrForCDI, TransformToolkit @v26.3.3.

# --- KAI Scheduler (chart v0.16.4) ---------------------------------------------------------------

KAI_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
# Pushed there with the git tag, v included, as its version: kai-scheduler/KAI-Scheduler
# .github/workflows/push-artifacts.yaml @v0.16.4.
SCHEDULER_NAME = "kai-scheduler"
# Hard-coded default; no chart value sets it: kai-scheduler/KAI-Scheduler pkg/common/constants/constants.go
# (DefaultSchedulerName) @v0.16.4.
QUEUE_LABEL = "kai.scheduler/queue"
# podgrouper.queueLabelKey's default: deployments/kai-scheduler/values.yaml and constants.go (DefaultQueueLabel)
# @v0.16.4.
KAI_CONFIG = "kai-config"
# The cluster-scoped kai.scheduler/v1 Config the operator reconciles; it sets condition Ready (copied from
# Available, all operands up): pkg/operator/controller/status_reconciler/status_reconciler.go @v0.16.4.
# The queue webhook (kai-queue-validation-v2) has failurePolicy Fail and sideEffects None, so a
# server-side dry run reaches it: pkg/operator/operands/queue_controller/resources.go @v0.16.4.

# --- vCluster (chart 0.35.1) ---------------------------------------------------------------------

VCLUSTER_CHART = "vcluster"
SYNCED_POD_LABEL = "vcluster.loft.sh/managed-by"
# Set to the vCluster's name on every object its syncer creates on the host:
# loft-sh/vcluster pkg/util/translate/types.go (MarkerLabel), labels.go @v0.35.1.
KUBECONFIG_SECRET_PREFIX = "vc-"
KUBECONFIG_SECRET_KEY = "config"
# The control plane writes vc-<name> (key config) with CreateOrPatch in a goroutine after it is Ready, so
# Helm's wait does not cover it; exportKubeConfig.server replaces every cluster's server:
# pkg/util/kubeconfig/kubeconfig.go, pkg/setup/controllers.go (StartControllers,
# CreateVClusterKubeConfigForExport) @v0.35.1.
