"""Facts about software this program does not contain, each with where it was read.

Everything here was read in the upstream source at the version the stack pins
(or the tag named), not assumed. When a pinned version moves, re-read the cited
file; the tests check what the program registers against these facts (for
example, that no container runs a program its image does not ship).
"""

from typing import Any, Literal, NamedTuple

# --- Kubernetes and kubectl ----------------------------------------------------------------------

KUBECTL_IMAGE = "registry.k8s.io/kubectl"
KUBECTL = "/bin/kubectl"
# The image is kubectl alone on distroless static: no shell, date, sleep or base64.
# kubernetes/kubernetes build/server-image/kubectl/Dockerfile (ENTRYPOINT ["/bin/kubectl"]) and
# build/common.sh (KUBECTL_BASE_IMAGE -> gcr.io/distroless/static-debian13) @v1.36.0.

MIN_KUBECTL_MINOR = 31
# The gates wait with `kubectl wait --for=create`, new in kubectl 1.31: kubernetes/kubectl
# pkg/cmd/wait/wait.go @v0.31.0.

PYTHON_IMAGE = "docker.io/library/python"
PYTHON_IMAGE_REF = f"{PYTHON_IMAGE}:3.13-slim@sha256:9662417aace5ae7b8e2609cce472b72a8958e134ba372808abe9cc1a0c0125e6"
PYTHON = "/usr/local/bin/python3"
# The official image, Python 3.13.14 on debian:trixie-slim, pinned by its multi-platform index (amd64, arm64 and
# six more), built 2026-08-05: docker-library/repo-info repos/python/remote/3.13-slim.md @2986dca3. Python is
# built into /usr/local (python3 links python3.13), nothing else is installed, and no USER is set: it runs as
# root unless the pod says otherwise; Debian's `nobody` is 65534: docker-library/python 3.13/slim-trixie/Dockerfile.

IMAGE_PROGRAMS: dict[str, frozenset[str]] = {KUBECTL_IMAGE: frozenset({KUBECTL}), PYTHON_IMAGE: frozenset({PYTHON})}
"""Every image a container of this program runs, with the only programs it ships."""

# Name and label length limits are in config/names.py.

POD_SECURITY_RESTRICTED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
# The volume sources Pod Security `restricted` allows: kubernetes/pod-security-admission
# policy/check_restrictedVolumes.go @v0.36.0 (`image` since v1.33, kubernetes/kubernetes#130394: it is no more
# than a container image). Every other source (nfs, iscsi, rbd, cephfs, glusterfs, ...) is mounted by the
# kubelet from the node's network, outside any NetworkPolicy.

METADATA_NAME_LABEL = "kubernetes.io/metadata.name"
# Set by the API server on every namespace: kubernetes/api core/v1/well_known_labels.go @v0.36.0.

# --- MicroK8s ------------------------------------------------------------------------------------
# A MicroK8s node is named after its hostname, lowercased: canonical/microk8s
# microk8s-resources/default-args/kubelet has no --hostname-override @v1.36, and the kubelet lowercases
# os.Hostname(): kubernetes/component-helpers node/util/hostname.go GetHostname @v0.36.0.

HOSTNAME_LABEL = "kubernetes.io/hostname"
# The kubelet labels its node with its (lowercased) hostname: kubernetes/api core/v1/well_known_labels.go
# @v0.36.0; kubernetes/kubernetes pkg/kubelet/kubelet_node_status.go initialNode.

CLUSTER_AGENT_PORT = 25000
# The cluster agent that `microk8s join` talks to listens on 0.0.0.0:25000 (canonical/microk8s
# microk8s-resources/default-args/cluster-agent @v1.36); a join URL is <ip>:25000/<token>/<check>, and its
# host must be an IP literal (scripts/wrappers/common/cluster/utils.py get_valid_connection_parts @v1.36).

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

DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_MEMORY_USED = "DCGM_FI_DEV_FB_USED"
DCGM_MEMORY_FREE = "DCGM_FI_DEV_FB_FREE"
# In dcgm-exporter's default metrics file (etc/dcp-metrics-included.csv; framebuffer in MiB), with labels gpu,
# UUID, modelName, Hostname (the node) and, for a GPU a pod holds as nvidia.com/gpu, pod, namespace and
# container (kubelet pod-resources): NVIDIA/dcgm-exporter internal/pkg/transformation/kubernetes.go, const.go
# @4.5.3-4.8.2, the exporter GPU Operator v26.3.3 runs (deployments/gpu-operator/values.yaml dcgmExporter.version).
DCGM_SERVICE = ("nvidia-dcgm-exporter", "gpu-metrics")
# The Service the operator creates in its namespace, labelled app=nvidia-dcgm-exporter, and its port's name
# (9400): NVIDIA/gpu-operator assets/state-dcgm-exporter/0400_service.yaml @v26.3.3.

# --- KAI Scheduler (chart v0.16.8) ---------------------------------------------------------------
# First read at v0.16.4 and re-read at v0.16.8: the code and chart values these facts rest on are unchanged
# between the two (git diff v0.16.4 v0.16.8; values.yaml is byte-identical).

KAI_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
# Pushed there with the git tag, v included, as its version: kai-scheduler/KAI-Scheduler
# .github/workflows/push-artifacts.yaml @v0.16.8.
SCHEDULER_NAME = "kai-scheduler"
SCHEDULING_SHARD_API = ("kai.scheduler/v1", "SchedulingShard")
# Cluster-scoped; the operator runs one scheduler per shard: pkg/apis/kai/v1/schedulingshard_types.go @v0.16.8.
# Hard-coded default; no chart value sets it: kai-scheduler/KAI-Scheduler pkg/common/constants/constants.go
# (DefaultSchedulerName) @v0.16.8.
QUEUE_LABEL = "kai.scheduler/queue"
# podgrouper.queueLabelKey's default: deployments/kai-scheduler/values.yaml and constants.go (DefaultQueueLabel)
# @v0.16.8.
KAI_CONFIG = "kai-config"
# The cluster-scoped kai.scheduler/v1 Config the operator reconciles; it sets condition Ready (copied from
# Available, all operands up): pkg/operator/controller/status_reconciler/status_reconciler.go @v0.16.8.
# The queue webhook (kai-queue-validation-v2) has failurePolicy Fail and sideEffects None, so a
# server-side dry run reaches it: pkg/operator/operands/queue_controller/resources.go @v0.16.8.

KAI_QUEUE_ALLOCATED_GPUS = "kai_queue_allocated_gpus"
KAI_QUEUE_DESERVED_GPUS = "kai_queue_deserved_gpus"
KAI_QUEUE_INFO = "kai_queue_info"
# Queue-controller gauges (prefix: --metrics-namespace, default kai, which the chart does not expose), labels
# queue_name, queue_metadata_name, queue_display_name; allocated includes fractions and a parent's includes its
# children; deserved is spec.resources.gpu.quota as-is: pkg/queuecontroller/metrics/metrics.go,
# pkg/common/constants/constants.go @v0.16.8. No metric carries a queue's limit or weight.
KAI_QUEUE_FAIR_SHARE_GPU = "kai_queue_fair_share_gpu"
# The scheduler's gauge, rewritten every session by the proportion plugin; its queue_name is the display name
# when one is set, so it joins the queue-controller's on queue_metadata_name:
# pkg/scheduler/metrics/metrics.go, pkg/scheduler/plugins/proportion/resource_division/resource_division.go @v0.16.8.
KAI_QUEUE_LABEL = "queue_metadata_name"
KAI_METRICS_SERVICES = {
    "queue-controller": ("queue-controller", "metrics"),
    "scheduler": ("kai-scheduler-default", "http-metrics"),
}
# Component -> (the Service the KAI operator creates in KAI's namespace, labelled app=<name>; its metrics
# port's name), /metrics over HTTP on 8080: pkg/operator/operands/queue_controller/resources.go,
# pkg/operator/operands/scheduler/resources_for_shard.go (shard default), pkg/operator/operands/common/common.go
# @v0.16.8. With more than one scheduler replica the Service loses its selector (leader EndpointSlice).

KAI_SCHEDULER_METRICS_PORT = 8080
# The scheduler Service's port unless the Config sets another: pkg/apis/kai/v1/scheduler/scheduler.go
# (SchedulerService.Port default) @v0.16.8.

KAI_RETRACTED_VERSIONS = frozenset({"v0.20.0", "v0.20.1"})
# Tagged by mistake on v0.10 code and retracted: kai-scheduler/KAI-Scheduler go.mod `retract (v0.20.1 v0.20.0)`
# (commit 5922dc7d, #702); the v0.20.1 tag's CHANGELOG.md ends at v0.10.2.

KAI_PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
# The PriorityClasses KAI's chart creates (defaultPriorityClasses.enabled, default true); none is globalDefault:
# deployments/kai-scheduler/templates/priorityclasses/*.yaml @v0.16.8.
NON_PREEMPTIBLE_PRIORITY = 100
# A PodGroup whose class has at least this value is non-preemptible unless labelled otherwise:
# pkg/common/podgroup/preemptible.go (nonPreemptiblePriorityThreshold) @v0.16.8.
DEFAULT_PRIORITY_CLASS = "train"
PRIORITY_LABEL = "priorityClassName"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible")
# For a pod without owners (every pod a vCluster syncs with setOwner false) the pod-grouper takes the class from
# the pod's label priorityClassName, then spec.priorityClassName (which the syncer clears), if that class exists,
# else train; preemptibility from the label, else by the class's value: pkg/podgrouper/podgrouper/plugins/
# defaultgrouper/default_grouper.go, plugins/constants/constants.go, pkg/apis/scheduling/v2alpha2/
# podgroup_types.go (ParsePreemptibility: exact values; "" decides by priority) @v0.16.8. KAI honours any
# PriorityClass that exists, system-node-critical included: docs/priority/README.md @v0.16.8.
KAI_POD_GROUPER_USER = "system:serviceaccount:{namespace}:pod-grouper"
KAI_BINDER_USER = "system:serviceaccount:{namespace}:binder"
KAI_NUMA_EXPORTER_USER = "system:serviceaccount:{namespace}:numa-placement-exporter"
# The numa-placement-exporter DaemonSet's ServiceAccount (pkg/operator/operands/numa_placement_exporter/resources.go
# defaultResourceName @v0.16.8), which merge-patches kai.scheduler/numa-placement-observed onto pods
# (pkg/npe/exporter.go, consts/consts.go @v0.16.8).
# Each operand runs as a ServiceAccount named after it in KAI's namespace; the pod-grouper merge-patches
# pod-group-name and kai.scheduler/subgroup-name onto pods, the binder the GPU-group labels, received-resource-type
# and a fraction's ConfigMaps: pkg/operator/operands/{pod_grouper,binder}/resources.go,
# pkg/podgrouper/pod_controller.go, pkg/binder/binding/binder.go, resourcereservation @v0.16.8.
POD_GROUP_ANNOTATION = "pod-group-name"


class KaiPodKey(NamedTuple):
    kind: Literal["labels", "annotations"]
    key: str
    prefix: bool
    """Every key that starts with `key`."""
    writer: Literal["pod-grouper", "binder", "numa-placement-exporter"] | None
    """The KAI component that writes it on a tenant's pod; None: none does."""


KAI_POD_KEYS = (
    KaiPodKey("annotations", POD_GROUP_ANNOTATION, prefix=False, writer="pod-grouper"),
    KaiPodKey("annotations", "kai.scheduler/skip-podgrouper", prefix=False, writer=None),
    KaiPodKey("labels", "kai.scheduler/subgroup-name", prefix=False, writer="pod-grouper"),
    KaiPodKey("labels", "runai-gpu-group", prefix=True, writer="binder"),
    KaiPodKey("annotations", "received-resource-type", prefix=False, writer="binder"),
    KaiPodKey("annotations", "kai.scheduler/numa-placement-predicted", prefix=False, writer="binder"),
    KaiPodKey("annotations", "kai.scheduler/numa-placement-observed", prefix=False, writer="numa-placement-exporter"),
)
# KAI's bookkeeping on a pod, none of it a tenant's to write: pod-group-name joins a PodGroup by bare name across
# namespaces (and an ownerless pod that has it is skipped by the pod-grouper: pod_controller.go
# isOrphanPodWithPodGroup); skip-podgrouper leaves a pod ungrouped; the subgroup label picks the gang's subgroup
# (pkg/scheduler/api/pod_info/pod_info.go); runai-gpu-group and runai-gpu-group/<group> tie a fraction to the
# reservation of its GPU, which the binder deletes once no running pod carries the label; received-resource-type
# (Fraction, Regular, MigInstance) is how the scheduler reads a bound pod's share when no BindRequest is left:
# pkg/common/constants/constants.go, pkg/binder/binding/resourcereservation/resource_reservation.go @v0.16.8.
# The NUMA placements the scheduler seeds its topology bookkeeping from (plugins/numa/seed_placements.go): the
# predicted one the binder writes when it binds (pkg/binder/binding/binder.go), the observed one the
# numa-placement-exporter writes (pkg/npe/exporter.go) @v0.16.8.
KAI_UTILITY_APP_LABELS = ("kai-resource-reservation", "scaling-pod")
# A pod labelled app=<one of these>, in any namespace, is taken for KAI's own reservation or scaling pod: its GPU
# stops counting on the node and against the proportion plugin: pkg/scheduler/api/pod_info/utility_pods.go,
# node_info/node_info.go, pkg/scheduler/conf/global_config.go @v0.16.8. The first is the chart's
# global.resourceReservation.appLabel, which the platform therefore owns.

# --- kube-prometheus-stack (chart 88.5.3) ---------------------------------------------------------

KUBE_PROMETHEUS_STACK_REPO = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = "kube-prometheus-stack"
# prometheus-community/helm-charts charts/kube-prometheus-stack/README.md @kube-prometheus-stack-88.5.3. The
# chart installs the Prometheus Operator CRDs (a crds subchart) before its templates, and never upgrades them.
SERVICE_MONITOR_API = ("monitoring.coreos.com/v1", "ServiceMonitor")
KSM_NAMESPACE_LABELS = "kube_namespace_labels"
# kube-state-metrics exports a namespace's labels only when allowed (--metric-labels-allowlist, the chart's
# metricLabelsAllowlist), as label_<key with every character outside [a-zA-Z0-9_] as _>:
# kubernetes/kube-state-metrics internal/store/namespace.go, utils.go @v2.20.0 (chart 8.4.0, which 88.5.3 uses).
GRAFANA_DASHBOARD_LABEL = ("grafana_dashboard", "1")
# The kube-prometheus-stack Grafana's dashboard sidecar loads ConfigMaps with this label from every namespace
# (grafana.sidecar.dashboards: label, labelValue, searchNamespace ALL): values.yaml @kube-prometheus-stack-88.5.3.
# Its Grafana Service and admin Secret (admin-user, admin-password; random unless set) are both named
# <release>-grafana, port 80: grafana-community/helm-charts charts/grafana templates @grafana-12.11.1.
GRAFANA_SIDECAR_LABELS = (
    "grafana_dashboard",
    "grafana_datasource",
    "grafana_alert",
    "grafana_plugin",
    "grafana_notifier",
)
# What each of Grafana's sidecars (dashboards, datasources, alerts, plugins, notifiers) loads, from ConfigMaps and
# Secrets alike (`resource: both`), in the namespaces it searches: charts/grafana/values.yaml sidecar.*.label,
# resource, searchNamespace @kube-prometheus-stack-88.5.3 (grafana chart inside it).
MICROK8S_OBSERVABILITY_RELEASE = "kube-prom-stack"
# MicroK8s' observability add-on installs kube-prometheus-stack as kube-prom-stack in namespace observability,
# whose Prometheus selects ServiceMonitors labelled release=kube-prom-stack (serviceMonitorSelectorNilUsesHelmValues):
# canonical/microk8s-core-addons addons/observability/enable @f689811.

POD_GROUP_API = ("scheduling.run.ai/v2alpha2", "PodGroup")
# KAI's gang: a namespaced PodGroup whose spec.minMember pods start together or not at all, in spec.queue, at
# spec.priorityClassName and spec.preemptibility (the scheduler reads these, not labels); no spec field is
# required, and minMember is at least 1: pkg/apis/scheduling/v2alpha2/podgroup_types.go,
# deployments/kai-scheduler/crds/scheduling.run.ai_podgroups.yaml, pkg/scheduler/api/podgroup_info/job_info.go
# @v0.16.8. A pod with pod-group-name and no owner is left to whoever makes that PodGroup: the pod-grouper skips
# it and the scheduler ignores it, with no event, until the PodGroup exists (docs/batch/README.md "External
# PodGroups", docs/developer/designs/external-podgroups). KAI deletes no PodGroup itself; it writes only a
# PodGroup's status (the scheduler's schedulingConditions[].reasons[], per node pool, transitionID counting up)
# and the scheduler's annotations: pkg/scheduler/cache/status_updater @v0.16.8.
# The scheduler joins pods to a PodGroup by the annotation's value alone, across namespaces
# (pkg/scheduler/cache/cluster_info/cluster_info.go, indexers.go @v0.16.8, fixed upstream after v0.17.0 by #2095),
# so a PodGroup name must be unique in the cluster. KAI writes the name into no label, so a name may be as long
# as an object name (253). The pod-grouper names a pod's own group pg-<pod>-<uid>, except for a pod labelled
# spark-app-name and spark-app-selector, whose group it names after the latter:
# pkg/podgrouper/podgrouper/plugins/podjob/podjob.go, plugins/spark/spark.go @v0.16.8.
SPARK_GROUPER_LABELS = ("spark-app-name", "spark-app-selector")
KAI_SCHEDULER_USER = "system:serviceaccount:{namespace}:scheduler"
# The scheduler annotates any PodGroup (stale and last-start timestamps) as ServiceAccount scheduler:
# pkg/scheduler/cache/status_updater/concurrency.go, pkg/operator/operands/scheduler @v0.16.8.

GANG_KEY_LABELS = (
    "gpu-tenancy/gang",
    "jobset.sigs.k8s.io/jobset-uid",
    "leaderworkerset.sigs.k8s.io/group-key",
    "training.kubeflow.org/job-name",
    "ray.io/cluster",
    "batch.kubernetes.io/controller-uid",
)
# The label every pod of one job shares, first found wins: ours, for anything else; JobSet's (TrainJob runs as a
# JobSet) on every pod it makes: kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go @v0.12.0,
# kubeflow/trainer @v2.3.0; LeaderWorkerSet's per group, sha1 of <namespace>/<leader pod>, with the group's size
# in the annotation below: kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go @v0.10.0;
# the training operator's (PyTorchJob): kubeflow/training-operator pkg/controller.v1/common @v1.9.0;
# KubeRay's: ray-project/kuberay ray-operator/controllers/ray/utils/constant.go @v1.7.0; the batch Job's,
# which the API server adds to every Job's template: kubernetes/api batch/v1/types.go @v0.36.3.
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"

# --- vCluster (chart 0.35.1) ---------------------------------------------------------------------

VCLUSTER_CHART = "vcluster"
VCLUSTER_VERIFIED_VERSION = "0.35.1"
"""The vCluster whose syncer the fence and the gangs were read against (every @v0.35.1 in this file): another
version is a warning until each of those behaviours is read again at it."""
VCLUSTER_OSS_REPOSITORY = "loft-sh/vcluster-oss"
"""The open-source build of the control plane (cmd/vcluster, Dockerfile; released as
ghcr.io/loft-sh/vcluster-oss:<version>, .goreleaser.yaml @v0.35.1): the chart's default is
loft-sh/vcluster-pro, "the pro repository that includes the optional pro modules" (chart/values.yaml
controlPlane.statefulSet.image), whose source is not public, so not what this file was read against."""
_NODES = {"apiGroups": [""], "resources": ["pods", "nodes", "nodes/status"], "verbs": ["get", "watch", "list"]}
_KUBELET = {"apiGroups": [""], "resources": ["nodes/metrics", "nodes/stats", "nodes/proxy"], "verbs": ["get"]}
_SNAPSHOTS = (
    {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list"]},
    {"apiGroups": ["snapshot.storage.k8s.io"], "resources": ["volumesnapshotclasses"], "verbs": ["get", "list"]},
    {
        "apiGroups": ["snapshot.storage.k8s.io"],
        "resources": ["volumesnapshotcontents"],
        "verbs": ["create", "delete", "patch", "update", "get", "list"],
    },
)
VCLUSTER_CHART_CLUSTER_RULES: dict[str, tuple[dict[str, Any], ...]] = {
    "0.35.1": (_NODES, _KUBELET, *_SNAPSHOTS),
    "0.35.3": (_NODES, _KUBELET, *_SNAPSHOTS),
    "0.36.1": (_NODES, _KUBELET),
}
"""The rules of the syncer's host ClusterRole as each chart renders them for the platform's own values, without
the queue view (chart/templates/clusterrole.yaml, _rbac.tpl: rbac.enableVolumeSnapshotRules `auto` is gone at
0.36.1). A test renders each chart in ../shared/reference and compares. The platform narrows them
(config/vcluster_tenant/syncer_role.py): node sync grants get, list and watch of pods in every namespace, which
only the virtual scheduler's cache of other pods reads (pkg/controllers/resources/nodes/syncer.go ModifyController,
`enableScheduler`, at v0.35.1, v0.35.3 and v0.36.1; the syncer's own host cache holds its namespace alone,
pkg/setup/controller_context.go getLocalCacheOptions), and which would let every team's syncer read every team's
pods, their env and their ServiceAccount tokens (translator.go translateProjectedVolume writes one into an
annotation). The queue view's `sync.fromHost.configMaps` mapping would add cluster-wide ConfigMap list and watch
(_rbac.tpl rulesForFromHostSyncerForGivenCoreResource), which the syncer never uses for its own namespace
(pkg/config/parse.go GetLocalCacheOptionsFromConfigMappings starts no cluster-wide cache then)."""
CLUSTER_WIDE_POD_READ = "pods"
"""What the platform takes out of the chart's node-sync rule (above)."""
VCLUSTER_CLUSTER_ROLE_INPUTS: tuple[tuple[str, ...], ...] = tuple(
    tuple(path.split("."))
    for path in (
        "controlPlane.advanced.globalMetadata.annotations",
        "controlPlane.advanced.virtualScheduler.enabled",
        "controlPlane.distro.k8s.scheduler.enabled",
        "integrations.certManager.enabled",
        "integrations.certManager.sync.fromHost.clusterIssuers.enabled",
        "integrations.externalSecrets.enabled",
        "integrations.externalSecrets.sync.fromHost.clusterStores.enabled",
        "integrations.externalSecrets.webhook.enabled",
        "integrations.istio.enabled",
        "integrations.kubeVirt.enabled",
        "integrations.kubeVirt.webhook.enabled",
        "integrations.metricsServer.enabled",
        "integrations.metricsServer.nodes",
        "networking.advanced.proxyKubelets.byHostname",
        "networking.advanced.proxyKubelets.byIP",
        "networking.replicateServices.fromHost",
        "platform",
        "plugin",
        "plugins",
        "privateNodes.enabled",
        "pro",
        "rbac.clusterRole.enabled",
        "rbac.clusterRole.extraRules",
        "rbac.clusterRole.overwriteRules",
        "rbac.enableVolumeSnapshotRules.enabled",
        "rbac.role.extraRules",
        "sync.fromHost.configMaps.enabled",
        "sync.fromHost.configMaps.mappings.byName",
        "sync.fromHost.csiDrivers.enabled",
        "sync.fromHost.csiNodes.enabled",
        "sync.fromHost.csiStorageCapacities.enabled",
        "sync.fromHost.customResources",
        "sync.fromHost.deviceClasses.enabled",
        "sync.fromHost.gatewayClasses.enabled",
        "sync.fromHost.gateways.enabled",
        "sync.fromHost.ingressClasses.enabled",
        "sync.fromHost.nodes.enabled",
        "sync.fromHost.nodes.syncBackChanges",
        "sync.fromHost.priorityClasses.enabled",
        "sync.fromHost.runtimeClasses.enabled",
        "sync.fromHost.secrets.enabled",
        "sync.fromHost.secrets.mappings.byName",
        "sync.fromHost.storageClasses.enabled",
        "sync.fromHost.volumeSnapshotClasses.enabled",
        "sync.toHost.customResources",
        "sync.toHost.gatewayApi.backendTLSPolicies.enabled",
        "sync.toHost.gatewayApi.enabled",
        "sync.toHost.gatewayApi.gateways.enabled",
        "sync.toHost.gatewayApi.httpRoutes.enabled",
        "sync.toHost.gatewayApi.tlsRoutes.enabled",
        "sync.toHost.namespaces.enabled",
        "sync.toHost.persistentVolumes.enabled",
        "sync.toHost.pods.hybridScheduling.enabled",
        "sync.toHost.priorityClasses.enabled",
        "sync.toHost.resourceClaimTemplates.enabled",
        "sync.toHost.resourceClaims.enabled",
        "sync.toHost.storageClasses.enabled",
        "sync.toHost.volumeSnapshotContents.enabled",
    )
)
"""Every value the charts' ClusterRole templates read, at each version in VCLUSTER_CHART_CLUSTER_RULES (a test
reads the templates): a tenant whose own values set one keeps the chart's ClusterRole, and no queue view."""
SYNCED_POD_LABEL = "vcluster.loft.sh/managed-by"
VIRTUAL_NAMESPACE_LABEL = "vcluster.loft.sh/namespace"
# Set to the vCluster's name, and to the object's virtual namespace, on every object its syncer creates on the
# host; a team's own label of either name is renamed to vcluster.loft.sh/label-<vcluster>-x-<hash>, so the
# host's values are the syncer's: loft-sh/vcluster pkg/util/translate/types.go (MarkerLabel, NamespaceLabel),
# labels.go HostLabelsMap, single_namespace.go LabelsToTranslate @v0.35.1.
KUBECONFIG_SECRET_PREFIX = "vc-"
KUBECONFIG_SECRET_KEY = "config"
# The control plane writes vc-<name> (key config) with CreateOrPatch in a goroutine after it is Ready, so
# Helm's wait does not cover it; exportKubeConfig.server replaces every cluster's server:
# pkg/util/kubeconfig/kubeconfig.go, pkg/setup/controllers.go (StartControllers,
# CreateVClusterKubeConfigForExport) @v0.35.1.
VCLUSTER_CONTROL_PLANE_RESOURCES = {
    "syncer": {
        "requests": {"cpu": "200m", "memory": "256Mi", "ephemeral-storage": "1Gi"},
        "limits": {"memory": "4Gi", "ephemeral-storage": "10Gi"},
    },
    "init": {"requests": {"cpu": "40m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "256Mi"}},
    "coredns": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"cpu": "1000m", "memory": "170Mi"}},
}
# What runs in a tenant's host namespace before the team starts anything: the control plane (its syncer
# container and the `kubernetes` init container) and the CoreDNS pod it syncs, with the chart's defaults:
# loft-sh/vcluster chart/values.yaml controlPlane.statefulSet.resources, controlPlane.distro.k8s.resources,
# controlPlane.coredns.deployment.resources @v0.35.1. Containers without a value get the LimitRange's defaults.
VCLUSTER_DEFAULT_PUBLIC_EGRESS_EXCEPT = (
    "100.64.0.0/10",
    "127.0.0.0/8",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
)
# policies.networkPolicy.workload.publicEgress.except's default; it leaves link-local (169.254.0.0/16, the
# cloud metadata address) reachable: loft-sh/vcluster chart/values.yaml @v0.35.1.
# --- the GPU sharing path a tenant pod may take (KAI v0.16.8, GPU Operator v26.3.3) ---------------

GPU_FRACTION_ANNOTATIONS = ("gpu-fraction", "gpu-memory")
GPU_FRACTION_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
GPU_SHARING_ANNOTATIONS = (
    *GPU_FRACTION_ANNOTATIONS,
    GPU_FRACTION_DEVICES_ANNOTATION,
    "gpu-fraction-container-name",
    SHARED_GPU_CONFIGMAP_ANNOTATION,
    "mps",
)
# kai-scheduler/KAI-Scheduler pkg/common/constants/constants.go @v0.16.8. KAI accepts any gpu-fraction in (0, 1)
# (0.001 too), any positive gpu-memory in MiB and any positive gpu-fraction-num-devices (with either):
# pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go @v0.16.8.
SHARED_GPU_CONFIGMAP_SUFFIX = "-shared-gpu"
# KAI's admission keeps a runai/shared-gpu-configmap the pod already has, unchecked; a prefix it makes itself is
# <owner or pod name>-<7 random>-shared-gpu. From prefix P, the fraction container (the first, or the one
# gpu-fraction-container-name names) reads NVIDIA_VISIBLE_DEVICES, RUNAI_NUM_OF_GPUS and GPU_PORTION with a
# configMapKeyRef to P-<index> (P-i<index> for an init container) and envFrom P-<index>-evar; the binder writes
# both at bind time: pkg/binder/common/gpusharingconfigmap/config_map.go,
# pkg/admission/webhook/v1alpha2/gpusharing @v0.16.8.
NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NO_GPU_VALUES = ("void", "none")
# Under an nvidia runtime the toolkit hands a container the devices NVIDIA_VISIBLE_DEVICES names, from an
# unprivileged container too, and `void`/`none` name none: NVIDIA/nvidia-container-toolkit
# internal/config/image/builder.go (acceptEnvvarUnprivileged: true) @v1.19.1.
# runc, the default runtime, ignores the variable. KAI's deviceaccess sets `void` on every container of a
# kai-scheduler pod that asks for no GPU, but does not look at envFrom or ephemeral containers; its pod
# webhooks (mutating-kai-admission on CREATE, validating-kai-admission on CREATE and UPDATE) see no
# pods/ephemeralcontainers request: pkg/admission/webhook/v1alpha2/deviceaccess,
# pkg/operator/operands/admission/resources.go @v0.16.8.
GPU_FRACTION_RUNTIME_CLASS = "nvidia"
# KAI's admission gives a fraction pod without one runtimeClassName admission.gpuFractionRuntimeClassName
# (default nvidia); a whole-GPU pod needs none under the operator's CDI mode (device plugin
# DEVICE_LIST_STRATEGY cdi-annotations,cdi-cri): runtimeenforcement @v0.16.8, NVIDIA/gpu-operator
# controllers/object_controls.go TransformDevicePlugin @v26.3.3.
CDI_ANNOTATION_PREFIXES = ("cdi.k8s.io/", "nvidia.cdi.k8s.io/")
# A CDI-enabled runtime injects the devices that pod annotations with these prefixes name: cdi.k8s.io/ is
# CDI's own (tags.cncf.io/container-device-interface pkg/cdi/annotations.go, the device plugin's default
# prefix: NVIDIA/k8s-device-plugin api/config/v1/consts.go @v0.19.3); the NVIDIA runtime can be set to read
# nvidia.cdi.k8s.io/ (demo/clusters/kind/scripts/create-kind-cluster.sh @v0.19.3).
GPU_SHARING_CONFIGMAP = r"-shared-gpu-i?[0-9]+(-evar)?$"
# The binder writes a fraction's ConfigMaps at bind time: pkg/binder/binding, gpusharingconfigmap @v0.16.8.

# --- Traefik, MicroK8s' ingress add-on (expose: sni) ------------------------------------------------

TRAEFIK_API_VERSION = "traefik.io/v1alpha1"
TRAEFIK_TLS_ENTRYPOINT = "websecure"
# MicroK8s 1.36's `ingress` add-on installs Traefik (chart 39.0.8, Traefik v3.6.13) in namespace ingress on
# every node, with its CRDs (IngressRouteTCP among them), the kubernetesCRD provider on, cross-namespace
# references off, and the entrypoint websecure on hostPort 443: canonical/microk8s-core-addons
# addons/ingress/enable, values.yaml @f689811 (which downloads the chart when enabled); traefik/traefik-helm-chart
# traefik/values.yaml (kubernetesCRD) @v39.0.8. A TCP router with HostSNI and tls.passthrough on websecure is
# tried before the HTTP routers there: traefik/traefik docs/content/reference/routing-configuration/kubernetes/
# crd/tcp/ingressroutetcp.md @v3.6.13. vCluster's own controlPlane.ingress wants ingress-nginx's
# annotations and controlPlane.tlsRoute a Gateway with a Passthrough listener, which the add-on does not
# set up: loft-sh/vcluster chart/templates/ingress.yaml, tlsroute.yaml @v0.35.1.
MICROK8S_INGRESS_ADDON = "ingress"

GRAFANA_IMAGE = "docker.io/grafana/grafana"
GRAFANA_RUN = "/run.sh"
GRAFANA_UID = 472
# The image's entrypoint is /run.sh, which starts grafana server with --config=$GF_PATHS_CONFIG and logs to the
# console only; it runs as uid 472 (group 0), writes only GF_PATHS_DATA (/var/lib/grafana) and needs nothing else
# writable: grafana/grafana Dockerfile (ENTRYPOINT, GF_UID), packaging/docker/run.sh, read at 78515af6 and 07754534
# (v12.x: no snapshot of the tag v13.2.0, the appVersion of the grafana chart 12.11.1 in kube-prometheus-stack
# 88.5.3, could be had; docs/observability.md "On a real host" checks it).
PROM_LABEL_PROXY_IMAGE = "quay.io/prometheuscommunity/prom-label-proxy"
PROM_LABEL_PROXY = "/bin/prom-label-proxy"
# Go on quay.io/prometheus/busybox, ENTRYPOINT /bin/prom-label-proxy, USER nobody; no default listen address:
# prometheus-community/prom-label-proxy Dockerfile, main.go @v0.14.0.
IMAGE_PROGRAMS[GRAFANA_IMAGE] = frozenset({GRAFANA_RUN})
IMAGE_PROGRAMS[PROM_LABEL_PROXY_IMAGE] = frozenset({PROM_LABEL_PROXY})
NOBODY = 65534

GRAFANA_ORG_HEADER = "X-Grafana-Org-Id"
# Grafana's data source custom headers (jsonData.httpHeaderName<n>, secureJsonData.httpHeaderValue<n>) replace
# any value a client sent under that name, on /api/ds/query and on the data source proxy alike: grafana/
# grafana-plugin-sdk-go backend/httpclient/custom_headers_middleware.go (req.Header.Del, then Add) @v0.296.3.
# A Viewer may query its organisation's data sources, never read their secureJsonData, and reaches no data
# source of another organisation (the lookup is by the user's org id): grafana/grafana pkg/api/accesscontrol.go,
# pkg/services/datasources/service/cache.go (v12.x, the newest stored; not read at v13.2.0).

KSM_POD_ANNOTATIONS = "kube_pod_annotations"
KSM_POD_PHASE = "kube_pod_status_phase"
# kube-state-metrics exports a pod's annotations only when allowed (--metric-annotations-allowlist, the chart's
# metricAnnotationsAllowList), as annotation_<key sanitised>: internal/store/pod.go @v2.20.0.
