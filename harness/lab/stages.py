"""KWOK's stages for the lab: how faked nodes stay Ready and what faked pods do.

Modelled on the stages KWOK ships (kustomize/stage/node/fast, node/heartbeat, pod/fast and
pod/general @v0.8.0), with the lab's own rules for pods:
- a pod whose every image the lab runs (images.py) is never touched: the lab's kubelet runs it;
- every other pod starts and turns Ready at once (its containers "run", each reporting its resources,
  as a 1.36 kubelet does: the API server allows a resize only of a pod whose running containers report
  them, kubernetes pkg/apis/core/validation/validation.go isPodResizeRequestSupported @v1.36.3, and
  vCluster's syncer resizes every host pod whose resources differ from the team's pod's,
  pkg/controllers/resources/pods/syncer.go resizeHostPodContainerResourcesInPlace @v0.35.1);
- a Job's pod, or a test's pod annotated `lab.gpu-tenancy.dev/complete-after: <duration>`, completes
  after that long (1 s for a Job's by default), with exit code 0 or the one in
  `lab.gpu-tenancy.dev/exit-code`; a Deployment's pod never completes;
- a deleted pod goes once its grace period is over (`deletionTimestamp`), as a kubelet whose
  container ignores SIGTERM would let it go;
- a claim of MicroK8s' hostpath class gets a volume once the scheduler picks its node, and the
  volume goes with the claim (modelled on kustomize/stage/volume/fast @v0.8.0; the hostpath
  provisioner itself writes a folder on the node, which a faked node has not).
Selector keys are gojq programs over the object (pkg/utils/expression/query.go @v0.8.0); a
program that errs or yields nothing makes `In` false.
"""

import json

from harness.lab.images import IMAGES

STORAGE_CLASS = "microk8s-hostpath"
"""MicroK8s' hostpath-storage add-on class (canonical/microk8s-core-addons addons/hostpath-storage/storage.yaml
@f689811, the 1.36 release): default, WaitForFirstConsumer, reclaimPolicy Delete."""
COMPLETE_AFTER = "lab.gpu-tenancy.dev/complete-after"
EXIT_CODE = "lab.gpu-tenancy.dev/exit-code"
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def _faked_pod_key() -> str:
    """ "kwok" for a pod the lab does not run itself: the rule of images.runs_as_processes, in jq."""
    repositories = ", ".join(json.dumps(image.repository) for image in IMAGES)
    return (
        'def repo: sub("@.*$"; "") | (if (split("/") | last | test(":")) then sub(":[^:/]*$"; "") else . end); '
        'def full: if (test("/") | not) then "docker.io/library/" + . '
        'elif (split("/") | first | test("[.:]")) or (split("/") | first) == "localhost" then . '
        'else "docker.io/" + . end; '
        "[((.spec.initContainers // []) + (.spec.containers // []))[] | .image | repo | full] as $images | "
        f'if ($images | length) > 0 and ($images | all(IN({repositories}))) then "process" else "kwok" end'
    )


def _completes_key() -> str:
    return (
        '((.metadata.ownerReferences // []) | any(.kind == "Job")) as $job | '
        '((.metadata.ownerReferences // []) | any(.kind == "ReplicaSet")) as $deployment | '
        f'(((.metadata.annotations // {{}}) | has("{COMPLETE_AFTER}")) or $job) and ($deployment | not) '
        '| if . then "yes" else "no" end'
    )


def _expression(key: str, operator: str, *values: str) -> str:
    listed = "".join(f"\n      - {json.dumps(v)}" for v in values)
    return f"\n    - key: {json.dumps(key)}\n      operator: {operator}" + (
        f"\n      values:{listed}" if values else ""
    )


_NODE_CONDITIONS = """
      {{ $now := Now }}
      {{ $since := or .metadata.creationTimestamp $now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $since | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}"""

_NOT_DELETED = _expression(".metadata.deletionTimestamp", "DoesNotExist")
_POD_IP_ARGUMENTS = (
    '( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" )'
)
_SELECTED = _expression('.metadata.annotations["volume.kubernetes.io/selected-node"]', "Exists")


def _pod_selector(*expressions: str) -> str:
    return "  selector:\n    matchExpressions:" + _expression(_faked_pod_key(), "In", "kwok") + "".join(expressions)


def stages_yaml() -> str:
    """The stages document KWOK reads with --config."""
    ready = '.status.conditions.[] | select(.type == "Ready") | .status'
    container_done = """
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: %s
            finishedAt: {{ Now | Quote }}
            reason: %s
            startedAt: {{ Now | Quote }}
      {{ end }}
      phase: %s"""
    code = f'{{{{ index $.metadata.annotations "{EXIT_CODE}" }}}}'
    documents = [
        f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:{_expression(ready, "NotIn", "True")}
  next:
    statusTemplate: |{_NODE_CONDITIONS}
      {{{{ with .status.allocatable }}}}
      allocatable:
      {{{{ YAML . 1 }}}}
      {{{{ end }}}}
      {{{{ with .status.capacity }}}}
      capacity:
      {{{{ YAML . 1 }}}}
      {{{{ end }}}}
      phase: Running""",
        f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:{_expression(".status.phase", "In", "Running")}{_expression(ready, "In", "True")}
  delay: {{durationMilliseconds: 10000, jitterDurationMilliseconds: 15000}}
  next:
    statusTemplate: |{_NODE_CONDITIONS}
  immediateNextStage: true""",
        f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
{_pod_selector(_NOT_DELETED, _expression(".status.phase", "In", "Pending"), _expression(ready, "NotIn", "True"))}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Initialized}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: Ready}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: ContainersReady}}
      {{{{ range .spec.readinessGates }}}}
      - {{lastTransitionTime: {{{{ $now | Quote }}}}, status: "True", type: {{{{ .conditionType | Quote }}}}}}
      {{{{ end }}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        started: true
        state: {{running: {{startedAt: {{{{ $now | Quote }}}}}}}}
        resources: {{{{ with .resources }}}}{{{{ toJson . }}}}{{{{ else }}}}{{}}{{{{ end }}}}
      {{{{ end }}}}
      initContainerStatuses:
      {{{{ range .spec.initContainers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
            finishedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      {{{{ with NodeIPsWith .spec.nodeName }}}}
      hostIP: {{{{ index . 0 | Quote }}}}
      hostIPs:
      {{{{ range . }}}}
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      {{{{ end }}}}
      {{{{ with PodIPsWith .spec.nodeName {_POD_IP_ARGUMENTS} }}}}
      podIP: {{{{ index . 0 | Quote }}}}
      podIPs:
      {{{{ range . }}}}
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}""",
    ]
    for name, exit_code, expressions in (
        (
            "pod-complete",
            ("0", "Completed", "Succeeded"),
            (_expression(f'.metadata.annotations["{EXIT_CODE}"]', "DoesNotExist"),),
        ),
        ("pod-fail", (code, "Error", "Failed"), (_expression(f'.metadata.annotations["{EXIT_CODE}"]', "Exists"),)),
    ):
        selector = _pod_selector(
            _NOT_DELETED,
            _expression(".status.phase", "In", "Running"),
            _expression(_completes_key(), "In", "yes"),
            *expressions,
        )
        documents.append(
            f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: {name}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
{selector}
  delay:
    durationMilliseconds: 1000
    durationFrom: {{expressionFrom: '.metadata.annotations["{COMPLETE_AFTER}"]'}}
  next:
    statusTemplate: |{container_done % exit_code}"""
        )
    documents += _volume_stages()
    documents.append(
        f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
{_pod_selector(_expression(".metadata.deletionTimestamp", "Exists"))}
  delay:
    durationMilliseconds: 0
    durationFrom: {{expressionFrom: '.metadata.deletionTimestamp'}}
  next:
    delete: true"""
    )
    return "\n---\n".join(documents) + "\n"


def storage_class() -> dict[str, object]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "microk8s.io/hostpath",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def _volume_stages() -> list[str]:
    """jq keys, not KWOK's own `cel` ones: KWOK v0.8.0 dies of concurrent map writes in easycel (types.go
    getTrait) when stage controllers for several kinds build CEL environments at once."""
    of_class = _expression(".spec.storageClassName", "In", STORAGE_CLASS)
    alive = _expression(".metadata.deletionTimestamp", "DoesNotExist")
    provision = f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pvc-provision
spec:
  resourceRef: {{apiGroup: v1, kind: PersistentVolumeClaim}}
  selector:
    matchExpressions:{of_class}{alive}{_SELECTED}{_expression(".spec.volumeName", "DoesNotExist")}
  steps:
  - apply:
      template: |
        apiVersion: v1
        kind: PersistentVolume
        metadata:
          name: pvc-{{{{ .metadata.uid }}}}
          annotations: {{pv.kubernetes.io/provisioned-by: microk8s.io/hostpath}}
        spec:
          accessModes:
          {{{{ YAML .spec.accessModes 2 }}}}
          capacity:
          {{{{ YAML .spec.resources.requests 2 }}}}
          persistentVolumeReclaimPolicy: Delete
          storageClassName: {STORAGE_CLASS}
          volumeMode: {{{{ default "Filesystem" .spec.volumeMode | Quote }}}}
          claimRef:
            apiVersion: v1
            kind: PersistentVolumeClaim
            name: {{{{ .metadata.name | Quote }}}}
            namespace: {{{{ .metadata.namespace | Quote }}}}
            uid: {{{{ .metadata.uid | Quote }}}}
          hostPath:
            path: /var/snap/microk8s/common/default-storage/pvc-{{{{ .metadata.uid }}}}
            type: DirectoryOrCreate
  - patch:
      root: spec
      template: |
        volumeName: pvc-{{{{ .metadata.uid }}}}"""
    claimed = _expression(".spec.claimRef.name", "Exists")
    unbound = _expression(".status.phase", "NotIn", "Bound", "Released", "Failed")
    bind = f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pv-bind
spec:
  resourceRef: {{apiGroup: v1, kind: PersistentVolume}}
  selector:
    matchExpressions:{of_class}{alive}{claimed}{unbound}
  steps:
  - patch:
      root: status
      subresource: status
      template: |
        phase: Bound"""
    deleted = _expression(".metadata.deletionTimestamp", "Exists")
    release = f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pvc-delete
spec:
  resourceRef: {{apiGroup: v1, kind: PersistentVolumeClaim}}
  selector:
    matchExpressions:{of_class}{deleted}{_expression(".spec.volumeName", "Exists")}
  steps:
  - apply:
      subresource: status
      template: |
        apiVersion: v1
        kind: PersistentVolume
        metadata:
          name: {{{{ .spec.volumeName | Quote }}}}
        status:
          phase: Released
      type: merge"""
    delete = f"""apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pv-delete
spec:
  resourceRef: {{apiGroup: v1, kind: PersistentVolume}}
  selector:
    matchExpressions:{of_class}{alive}{_expression(".status.phase", "In", "Released")}
  steps:
  - delete: true"""
    return [provision, bind, release, delete]
