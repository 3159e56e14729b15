"""What a team's pod becomes on the host: stored by the tenant's own API server, then written by vCluster's syncer.

A stand-in for the fast admission tests, which decide host pods on the lab's shared API server without a vCluster.
tests/test_lab_tenants.py holds it equal to the real programs, field by field, on every pod the suite gives it
(tests/syncer_cases.py): what the tenant's API server stores, against the pod read back from a real tenant, and what
the syncer sends, against the request the lab's audit log recorded from the real syncer.

`stored` is the tenant's kube-apiserver 1.36 on the fields these pods use (kubernetes pkg/apis/core/v1/defaults.go,
plugin/pkg/admission/serviceaccount/admission.go, plugin/pkg/admission/defaulttolerationseconds and
plugin/pkg/admission/priority @v1.36.3). `Syncer.host_pod` is loft-sh/vcluster @v0.35.1 with the platform's values
(components/vcluster_tenant/values.py: no PriorityClass sync, setOwner false, the default single-namespace mode),
from pkg/controllers/resources/pods/translate/translator.go Translate and pkg/util/translate (HostMetadata,
HostLabelsMap, SafeConcatName):

- metadata: the host name is SafeConcatName(<name>, x, <namespace>, x, <vcluster>); labels are copied, but
  release, vcluster.loft.sh/namespace, managed-by and controlled-by, which become
  vcluster.loft.sh/label-<vcluster>-x-<sha256(key)[:10]>; the syncer adds managed-by and namespace, and one
  vcluster.loft.sh/ns-label-... per label of the virtual namespace; annotations are copied, with the syncer's
  object-*, name, namespace, uid, service-account-name, labels, managed-annotations, owner references, the pod's
  ServiceAccount token (ten years, for the team's own cluster) and cluster-autoscaler.kubernetes.io/safe-to-evict;
  no owner reference.
- spec: the service account is vc-workload-<vcluster>, its token automount off; the projection reads the token
  from its annotation; ConfigMap, Secret and claim names become their host copies', field references to metadata
  become the syncer's annotations; every container gets the KUBERNETES_* variables
  (and links to its namespace's Services) first; DNS points at the tenant's CoreDNS; priorityClassName and priority
  are cleared; the rest (schedulerName, runtimeClassName, nodeName, volumes, securityContext, resources) is copied.
- diff.go Diff: a later edit of labels or annotations reaches the host as what the team added, changed or removed;
  host-only keys (KAI's) stay, and vcluster.loft.sh/labels is written again.

What no test pod uses is refused with NotImplementedError rather than guessed (a subdomain, affinity terms, topology
spread, host paths under /var/log), so the model never silently serves a case it was not held against.
"""

import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]

TRANSLATED_LABELS = (
    "release",
    "vcluster.loft.sh/namespace",
    "vcluster.loft.sh/managed-by",
    "vcluster.loft.sh/controlled-by",
)
VIRTUAL_UID = "8c2d4e6f-1a3b-4c5d-9e7f-0a1b2c3d4e5f"
ACCESS_VOLUME = "kube-api-access-model"
"""The ServiceAccount admission plugin names it kube-api-access-<5 random letters>; the model picks one name."""
ACCESS_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_MODE = 420
"""0644, every volume's default mode (SetDefaults_ConfigMapVolumeSource and the rest)."""
TOKEN_PREFIX = "vcluster.loft.sh/token-"
TOKEN_ANNOTATION = f"{TOKEN_PREFIX}modelled"
"""translator.go names it with 8 random letters; the model picks 8."""
TOKEN = "e" * 1105
"""A pod's ServiceAccount token is about this long (the real syncer's, in the lab): it counts against the annotation
bound."""
SYNCER_ANNOTATIONS = (
    "vcluster.loft.sh/name",
    "vcluster.loft.sh/namespace",
    "vcluster.loft.sh/uid",
    "vcluster.loft.sh/service-account-name",
    "vcluster.loft.sh/labels",
    "vcluster.loft.sh/owner-references",
    "vcluster.loft.sh/owner-set-kind",
    "cluster-autoscaler.kubernetes.io/safe-to-evict",
    "cluster-autoscaler.kubernetes.io/daemonset-pod",
)
"""diff.go GetExcludedAnnotations: the syncer's own, never copied from a team's edit."""
OBJECT_ANNOTATIONS = ("vcluster.loft.sh/object-", "vcluster.loft.sh/managed-")
"""pkg/util/translate AnnotationsBidirectionalUpdateFunction excludes these too."""
OWNER_SET_KINDS = ("DaemonSet", "Job", "ReplicaSet", "StatefulSet")
"""translator.go canAnnotateOwnerSetKind (an apps/v1 owner only, so never a Job)."""
UNMODELLED_SPEC = ("subdomain", "affinity", "topologySpreadConstraints", "resourceClaims", "hostNetwork")


def safe_concat_name(*parts: str) -> str:
    full = "-".join(parts)
    if len(full) > 63:
        digest = hashlib.sha256(full.encode()).hexdigest()[:10]
        return (full[:52] + "-" + digest).replace(".-", "-")
    return full


def host_label(key: str, vcluster: str) -> str:
    if key in TRANSLATED_LABELS:
        return safe_concat_name("vcluster.loft.sh/label", vcluster, "x", hashlib.sha256(key.encode()).hexdigest()[:10])
    return key


def _pull_policy(image: str) -> str:
    """SetDefaults_Container: Always for a :latest or untagged image, IfNotPresent for any other tag or a digest."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _default_field_ref(selector: Json | None) -> None:
    if selector is not None:
        selector.setdefault("apiVersion", "v1")


def _quantities(resources: Json) -> Json:
    return {name: str(amount) for name, amount in resources.items()}


def _default_container(container: Json, *, mount_token: bool, requests_from_limits: bool) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("imagePullPolicy", _pull_policy(container["image"]))
    resources = container.setdefault("resources", {})
    for kind in ("limits", "requests"):
        if kind in resources:
            resources[kind] = _quantities(resources[kind])
    if requests_from_limits and "limits" in resources:
        # SetDefaults_Pod: a container's requests default to its limits, resource by resource.
        resources["requests"] = {**resources["limits"], **resources.get("requests", {})}
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for variable in container.get("env") or []:
        _default_field_ref((variable.get("valueFrom") or {}).get("fieldRef"))
    mounts = container.get("volumeMounts") or []
    if mount_token and not any(m["mountPath"] == ACCESS_MOUNT for m in mounts):
        # serviceaccount/admission.go: every container and init container (not an ephemeral one) mounts it.
        container["volumeMounts"] = [*mounts, {"name": ACCESS_VOLUME, "readOnly": True, "mountPath": ACCESS_MOUNT}]


def _default_volume(volume: Json) -> None:
    for kind in ("configMap", "secret", "projected", "downwardAPI"):
        if kind in volume:
            volume[kind].setdefault("defaultMode", DEFAULT_MODE)
    for item in (volume.get("downwardAPI") or {}).get("items") or []:
        _default_field_ref(item.get("fieldRef"))
    if "hostPath" in volume:
        volume["hostPath"].setdefault("type", "")
    if "iscsi" in volume:
        volume["iscsi"].setdefault("iscsiInterface", "default")
    if "rbd" in volume:
        for key, value in (("pool", "rbd"), ("user", "admin"), ("keyring", "/etc/ceph/keyring")):
            volume["rbd"].setdefault(key, value)
    template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
    if template is not None:
        template.setdefault("metadata", {})
        template["spec"].setdefault("volumeMode", "Filesystem")  # SetDefaults_PersistentVolumeClaimSpec


ACCESS_SOURCES = [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {
        "downwardAPI": {
            "items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]
        }
    },
]
"""serviceaccount/admission.go TokenVolumeSource: a bound token (an hour and 7 s), the root CA and the namespace."""
NOT_READY_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for taint in ("not-ready", "unreachable")
]
"""defaulttolerationseconds/admission.go: five minutes on a node that is not ready or unreachable."""


def stored(manifest: Json) -> Json:
    """The pod as the tenant's API server stores it (its uid: VIRTUAL_UID unless the manifest has one)."""
    pod = copy.deepcopy(manifest)
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    meta = pod["metadata"]
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", VIRTUAL_UID)
    spec = pod["spec"]
    for key, value in (
        ("restartPolicy", "Always"),
        ("terminationGracePeriodSeconds", 30),
        ("dnsPolicy", "ClusterFirst"),
        ("securityContext", {}),
        ("schedulerName", "default-scheduler"),
        ("enableServiceLinks", True),
        ("preemptionPolicy", "PreemptLowerPriority"),
    ):
        spec.setdefault(key, value)
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec["serviceAccount"] = spec["serviceAccountName"]
    if "priority" not in spec and not spec.get("priorityClassName"):
        spec["priority"] = 0  # priority/admission.go: no class, no global default in a new cluster
    tolerations = spec.get("tolerations") or []
    for toleration in NOT_READY_TOLERATIONS:
        if not any(t.get("key") == toleration["key"] and t.get("effect") == "NoExecute" for t in tolerations):
            tolerations.append(toleration)
    spec["tolerations"] = tolerations
    mount_token = spec.get("automountServiceAccountToken", True) and not any(
        m["mountPath"] == ACCESS_MOUNT for c in spec["containers"] for m in c.get("volumeMounts") or []
    )
    for volume in spec.get("volumes") or []:
        _default_volume(volume)
    if mount_token and not any(v["name"].startswith("kube-api-access-") for v in spec.get("volumes") or []):
        access = {"name": ACCESS_VOLUME, "projected": {"sources": copy.deepcopy(ACCESS_SOURCES)}}
        _default_volume(access)
        spec["volumes"] = [*(spec.get("volumes") or []), access]
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            _default_container(container, mount_token=bool(mount_token), requests_from_limits=True)
    for container in spec.get("ephemeralContainers") or []:
        _default_container(container, mount_token=False, requests_from_limits=False)
    for key in ("labels", "annotations"):
        if not meta.get(key):
            meta.pop(key, None)  # an empty map is not stored (omitempty)
    return pod


def pod_security_labels(level: str, namespace: str) -> Json:
    """A virtual namespace's labels: vCluster's podsecurity controller enforces and warns the tenant's level on every
    namespace (pkg/controllers/podsecurity/podsecurity.go @v0.35.1), with the metadata.name the API server adds."""
    return {
        "kubernetes.io/metadata.name": namespace,
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": level,
        "pod-security.kubernetes.io/warn-version": "latest",
    }


@dataclass(frozen=True)
class Syncer:
    """One tenant's syncer, with what it reads from its own cluster and from the host to write a pod."""

    vcluster: str
    kube_ip: str = "10.152.183.10"
    """The ClusterIP of the host Service <vcluster>: the tenant's API, as its pods reach it."""
    dns_ip: str = "10.152.183.20"
    """The ClusterIP of the host Service kube-dns-x-kube-system-x-<vcluster>: the tenant's CoreDNS."""
    pod_security: str = "baseline"
    services: Mapping[str, Sequence[Json]] = field(default_factory=dict)
    """A virtual namespace's Services besides `kubernetes`, for the service links of its pods."""
    namespace_labels: Mapping[str, Json] = field(default_factory=dict)
    """A virtual namespace's labels, where they are not pod_security_labels()."""

    @property
    def host_namespace(self) -> str:
        return f"vcluster-{self.vcluster}"

    def host_name(self, name: str, namespace: str) -> str:
        return safe_concat_name(name, "x", namespace, "x", self.vcluster)

    def host_pod(self, pod: Json) -> Json:
        """What the syncer sends the host for `pod` as the tenant stores it (stored())."""
        virtual = stored(pod)
        meta, vspec = virtual["metadata"], virtual["spec"]
        namespace, name = meta["namespace"], meta["name"]
        for key in UNMODELLED_SPEC:
            if vspec.get(key):
                raise NotImplementedError(f"tests/vcluster_syncer.py does not model spec.{key}")
        host_name = self.host_name(name, namespace)
        labels = self._labels(meta.get("labels") or {}, namespace)
        annotations = dict(meta.get("annotations") or {})
        if annotations:
            annotations["vcluster.loft.sh/managed-annotations"] = "\n".join(sorted(annotations))
        annotations.update(
            {
                "vcluster.loft.sh/object-name": name,
                "vcluster.loft.sh/object-namespace": namespace,
                "vcluster.loft.sh/object-kind": "/v1, Kind=Pod",
                "vcluster.loft.sh/object-uid": meta["uid"],
                "vcluster.loft.sh/object-host-name": host_name,
                "vcluster.loft.sh/object-host-namespace": self.host_namespace,
            }
        )
        # translator.go: a team's own value of these keys is kept, so its pod reads what it wrote.
        own = meta.get("annotations") or {}
        for key, value in (
            ("vcluster.loft.sh/namespace", namespace),
            ("vcluster.loft.sh/name", name),
            ("vcluster.loft.sh/uid", meta["uid"]),
            ("vcluster.loft.sh/service-account-name", vspec["serviceAccountName"]),
        ):
            annotations[key] = own.get(key) or value
        annotations.setdefault("vcluster.loft.sh/labels", labels_annotation(meta.get("labels") or {}))
        owners = meta.get("ownerReferences") or []
        if "cluster-autoscaler.kubernetes.io/safe-to-evict" not in annotations:
            controller = next((o for o in owners if o.get("controller")), None)
            annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] = "true" if controller else "false"
            if controller and controller["kind"] == "DaemonSet":
                annotations["cluster-autoscaler.kubernetes.io/daemonset-pod"] = "true"
        if owners and "vcluster.loft.sh/owner-references" not in annotations:
            annotations["vcluster.loft.sh/owner-references"] = json.dumps(owners, separators=(",", ":"))
            for owner in owners:
                if owner["apiVersion"] == "apps/v1" and owner["kind"] in (
                    "DaemonSet",
                    "Job",
                    "ReplicaSet",
                    "StatefulSet",
                ):
                    annotations["vcluster.loft.sh/owner-set-kind"] = owner["kind"]
                    break
        spec = self._spec(virtual)
        if TOKEN_ANNOTATION in json.dumps(spec.get("volumes") or []):
            annotations[TOKEN_ANNOTATION] = TOKEN
        return {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": host_name,
                "namespace": self.host_namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }

    def _labels(self, labels: Json, namespace: str) -> Json:
        host = {host_label(k, self.vcluster): v for k, v in labels.items() if not _is_translated(k, self.vcluster)}
        host.update({"vcluster.loft.sh/managed-by": self.vcluster, "vcluster.loft.sh/namespace": namespace})
        virtual_namespace = self.namespace_labels.get(namespace) or pod_security_labels(self.pod_security, namespace)
        for key, value in virtual_namespace.items():
            digest = hashlib.sha256(key.encode()).hexdigest()[:10]
            host[safe_concat_name("vcluster.loft.sh/ns-label", self.vcluster, "x", digest)] = value
        return host

    def _spec(self, virtual: Json) -> Json:
        meta, spec = virtual["metadata"], copy.deepcopy(virtual["spec"])
        namespace, name = meta["namespace"], meta["name"]
        spec.pop("serviceAccount", None)
        spec["serviceAccountName"] = f"vc-workload-{self.vcluster}"
        spec["serviceAccount"] = spec["serviceAccountName"]
        spec["automountServiceAccountToken"] = False
        spec["enableServiceLinks"] = False
        spec["priorityClassName"], spec["priority"] = "", None
        spec["hostAliases"] = [
            *(spec.get("hostAliases") or []),
            {
                "ip": self.kube_ip,
                "hostnames": [
                    "kubernetes.default.svc.cluster.local",
                    "kubernetes",
                    "kubernetes.default",
                    "kubernetes.default.svc",
                ],
            },
        ]
        if spec["dnsPolicy"] in ("ClusterFirst", "ClusterFirstWithHostNet"):
            existing = spec.get("dnsConfig") or {}
            searches = [f"{namespace}.svc.cluster.local", "svc.cluster.local", "cluster.local"]
            spec["dnsPolicy"] = "None"
            spec["dnsConfig"] = {
                "nameservers": _unique([self.dns_ip, *existing.get("nameservers", [])]),
                "searches": _unique([*searches, *existing.get("searches", [])]),
                "options": [{"name": "ndots", "value": "5"}],
            }
        if not spec.get("hostname"):
            spec["hostname"] = name[:63].replace(".", "-").removesuffix("-")
        links = self._service_links(namespace) if virtual["spec"]["enableServiceLinks"] else {}
        links.update(self._kubernetes_links())
        for kind in ("containers", "initContainers", "ephemeralContainers"):
            for container in spec.get(kind) or []:
                self._container(container, namespace, links)
        for secret in spec.get("imagePullSecrets") or []:
            secret["name"] = self.host_name(secret["name"], namespace)
        for volume in spec.get("volumes") or []:
            self._volume(volume, namespace, name)
        return {k: v for k, v in spec.items() if v is not None and v != ""}

    def _kubernetes_links(self) -> dict[str, str]:
        address = f"tcp://{self.kube_ip}:443"
        return {
            "KUBERNETES_PORT": address,
            "KUBERNETES_PORT_443_TCP": address,
            "KUBERNETES_PORT_443_TCP_ADDR": self.kube_ip,
            "KUBERNETES_PORT_443_TCP_PORT": "443",
            "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
            "KUBERNETES_SERVICE_HOST": self.kube_ip,
            "KUBERNETES_SERVICE_PORT": "443",
            "KUBERNETES_SERVICE_PORT_HTTPS": "443",
        }

    def _service_links(self, namespace: str) -> dict[str, str]:
        """envvars.go buildEnvironmentVariables, for each Service of the namespace with a cluster IP."""
        links: dict[str, str] = {}
        for service in self.services.get(namespace, ()):
            ip = service["spec"].get("clusterIP") or "None"
            if ip == "None":
                continue
            prefix = service["metadata"]["name"].upper().replace("-", "_")
            ports = service["spec"]["ports"]
            links[f"{prefix}_SERVICE_HOST"] = ip
            links[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
            for port in ports:
                if port.get("name"):
                    links[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(port["port"])
            for index, port in enumerate(ports):
                protocol = port.get("protocol") or "TCP"
                address = f"{protocol.lower()}://{ip}:{port['port']}"
                if index == 0:
                    links[f"{prefix}_PORT"] = address
                base = f"{prefix}_PORT_{port['port']}_{protocol.upper()}"
                links.update(
                    {
                        base: address,
                        f"{base}_PROTO": protocol.lower(),
                        f"{base}_PORT": str(port["port"]),
                        f"{base}_ADDR": ip,
                    }
                )
        return links

    def _container(self, container: Json, namespace: str, links: Mapping[str, str]) -> None:
        """TranslateContainerEnv: references renamed, the links first, sorted, unless the container sets that name."""
        own = container.get("env") or []
        for variable in own:
            source = variable.get("valueFrom") or {}
            _field_ref(source.get("fieldRef"), self.vcluster)
            for kind in ("configMapKeyRef", "secretKeyRef"):
                if source.get(kind, {}).get("name"):
                    source[kind]["name"] = self.host_name(source[kind]["name"], namespace)
        for source in container.get("envFrom") or []:
            for kind in ("configMapRef", "secretRef"):
                if source.get(kind, {}).get("name"):
                    source[kind]["name"] = self.host_name(source[kind]["name"], namespace)
        names = {variable["name"] for variable in own}
        added = [{"name": k, "value": v} for k, v in sorted(links.items()) if k not in names]
        container["env"] = [*added, *own]

    def _volume(self, volume: Json, namespace: str, pod: str) -> None:
        if "configMap" in volume:
            volume["configMap"]["name"] = self.host_name(volume["configMap"]["name"], namespace)
        if "secret" in volume:
            volume["secret"]["secretName"] = self.host_name(volume["secret"]["secretName"], namespace)
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]
            claim["claimName"] = self.host_name(claim["claimName"], namespace)
        if "ephemeral" in volume:
            # k8s.io/component-helpers/storage/ephemeral VolumeClaimName: <pod>-<volume>, its host copy's name.
            volume.pop("ephemeral")
            volume["persistentVolumeClaim"] = {"claimName": self.host_name(f"{pod}-{volume['name']}", namespace)}
        if "hostPath" in volume and volume["hostPath"]["path"].startswith(("/var/log", "/var/lib/kubelet/pods")):
            raise NotImplementedError("tests/vcluster_syncer.py does not model hostpath.go's log paths")
        for item in (volume.get("downwardAPI") or {}).get("items") or []:
            _field_ref(item.get("fieldRef"), self.vcluster)
        for kind in ("iscsi", "rbd", "flexVolume", "cinder", "cephfs", "scaleIO", "storageos"):
            reference = (volume.get(kind) or {}).get("secretRef")
            if reference and reference.get("name"):
                reference["name"] = self.host_name(reference["name"], namespace)
        if volume.get("csi", {}).get("nodePublishSecretRef"):
            reference = volume["csi"]["nodePublishSecretRef"]
            reference["name"] = self.host_name(reference["name"], namespace)
        if volume.get("glusterfs", {}).get("endpoints"):
            volume["glusterfs"]["endpoints"] = self.host_name(volume["glusterfs"]["endpoints"], namespace)
        for source in (volume.get("projected") or {}).get("sources") or []:
            self._projection(source, volume["name"], namespace, pod)

    def _projection(self, source: Json, volume: str, namespace: str, pod: str) -> None:
        if "secret" in source:
            source["secret"]["name"] = self.host_name(source["secret"]["name"], namespace)
        if "configMap" in source:
            source["configMap"]["name"] = self.host_name(source["configMap"]["name"], namespace)
        for item in (source.get("downwardAPI") or {}).get("items") or []:
            _field_ref(item.get("fieldRef"), self.vcluster)
        if "serviceAccountToken" in source:
            # translateProjectedVolume: the token the syncer asks the tenant's API for goes in an annotation of the
            # host pod (vcluster.loft.sh/token-<8 random letters>), which the projection reads.
            token = source.pop("serviceAccountToken")
            reference = {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{TOKEN_ANNOTATION}']"}
            source["downwardAPI"] = {"items": [{"path": token["path"], "fieldRef": reference, "mode": DEFAULT_MODE}]}

    def _metadata(self, obj: Json, kind: str, uid: str) -> Json:
        """pkg/util/translate HostMetadata: labels as for a pod, without the namespace's; annotations copied, with
        the object-* keys."""
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", "default"), meta["name"]
        labels = {host_label(k, self.vcluster): v for k, v in (meta.get("labels") or {}).items()}
        labels.update({"vcluster.loft.sh/managed-by": self.vcluster, "vcluster.loft.sh/namespace": namespace})
        annotations = dict(meta.get("annotations") or {})
        if annotations:
            annotations["vcluster.loft.sh/managed-annotations"] = "\n".join(sorted(annotations))
        host_name = self.host_name(name, namespace)
        annotations.update(
            {
                "vcluster.loft.sh/object-name": name,
                "vcluster.loft.sh/object-namespace": namespace,
                "vcluster.loft.sh/object-kind": f"/v1, Kind={kind}",
                "vcluster.loft.sh/object-uid": uid,
                "vcluster.loft.sh/object-host-name": host_name,
                "vcluster.loft.sh/object-host-namespace": self.host_namespace,
            }
        )
        return {"name": host_name, "namespace": self.host_namespace, "labels": labels, "annotations": annotations}

    def host_config(self, obj: Json) -> Json:
        """A ConfigMap or Secret a pod uses, as the syncer writes it (configmaps and secrets syncers): `obj` as the
        tenant stored it, its data as it is."""
        host: Json = {"kind": obj["kind"], "apiVersion": "v1"}
        host["metadata"] = self._metadata(obj, obj["kind"], obj["metadata"]["uid"])
        host.update({key: copy.deepcopy(obj[key]) for key in ("data", "binaryData") if key in obj})
        if obj["kind"] == "Secret":
            kind = obj.get("type", "Opaque")
            host["type"] = "Opaque" if kind == "kubernetes.io/service-account-token" else kind
        return host

    def host_service(self, service: Json) -> Json:
        """A Service as vCluster writes its host copy, before the team's own exists (pkg/server/filters/service.go
        createService: the spec as the team wrote it, defaulted, its selector translated)."""
        metadata = self._metadata(service, "Service", "")
        metadata["annotations"]["vcluster.loft.sh/block-deletion"] = "true"
        spec = copy.deepcopy(service["spec"])
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port["port"])
        # kubernetes pkg/apis/core/v1/defaults.go SetDefaults_Service @v1.36.3, as the tenant's API decodes it.
        for key, value in (("type", "ClusterIP"), ("sessionAffinity", "None"), ("internalTrafficPolicy", "Cluster")):
            spec.setdefault(key, value)
        if spec.get("externalIPs") or spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec.get("selector") is not None:
            namespace = service["metadata"].get("namespace", "default")
            spec["selector"] = {
                **{host_label(k, self.vcluster): v for k, v in spec["selector"].items()},
                "vcluster.loft.sh/managed-by": self.vcluster,
                "vcluster.loft.sh/namespace": namespace,
            }
        return {"kind": "Service", "apiVersion": "v1", "metadata": metadata, "spec": spec}

    def edit(self, host: Json, before: Json, after: Json) -> Json:
        """The host pod once the syncer carries a team's edit of its pod's labels and annotations over (diff.go
        Diff): `before` and `after` are the team's pod as stored, with what the syncer copied back from the host."""
        updated = copy.deepcopy(host)
        old, new = before["metadata"], after["metadata"]
        updated["metadata"]["labels"] = _merged(
            updated["metadata"].get("labels") or {},
            old.get("labels") or {},
            new.get("labels") or {},
            lambda key: None if key.startswith("vcluster.loft.sh/ns-label") else host_label(key, self.vcluster),
        )
        changed = _merged(
            updated["metadata"].get("annotations") or {},
            old.get("annotations") or {},
            new.get("annotations") or {},
            lambda key: None if key in SYNCER_ANNOTATIONS or key.startswith(OBJECT_ANNOTATIONS) else key,
        )
        changed["vcluster.loft.sh/labels"] = labels_annotation(new.get("labels") or {})
        updated["metadata"]["annotations"] = changed
        return updated


def _is_translated(key: str, vcluster: str) -> bool:
    """labels.go IsTranslatedLabel: a team's label shaped like a renamed one is dropped."""
    return key.startswith(f"vcluster.loft.sh/label-{vcluster}-x-")


def _field_ref(selector: Json | None, vcluster: str) -> None:
    """translateFieldRef: metadata the host pod does not share with the team's is read from the syncer's copy."""
    if selector is None:
        return
    path = selector["fieldPath"]
    if path.startswith("metadata.labels['") and path.endswith("']"):
        selector["fieldPath"] = f"metadata.labels['{host_label(path[17:-2], vcluster)}']"
        return
    renamed = {
        "metadata.labels": "vcluster.loft.sh/labels",
        "metadata.name": "vcluster.loft.sh/name",
        "metadata.namespace": "vcluster.loft.sh/namespace",
        "metadata.uid": "vcluster.loft.sh/uid",
        "spec.serviceAccountName": "vcluster.loft.sh/service-account-name",
    }
    if path in renamed:
        selector["fieldPath"] = f"metadata.annotations['{renamed[path]}']"


def _unique(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _without(values: Json, keys: Sequence[str]) -> Json:
    return {k: v for k, v in values.items() if k not in keys}


def labels_annotation(labels: Json) -> str:
    """translator.go LabelsAnnotation: one key="<JSON value>" line a label, sorted."""
    return "\n".join(sorted(f"{k}={json.dumps(v)}" for k, v in labels.items()))


def _merged(host: Json, old: Json, new: Json, host_key: Callable[[str], str | None]) -> Json:
    """labels.go mergeMaps: the team's additions, changes and removals since the last sync, each under its host key
    (None: not carried), over the host's map."""
    merged = dict(host)
    for key in old.keys() | new.keys():
        if old.get(key) == new.get(key) or (target := host_key(key)) is None:
            continue
        if key in new:
            merged[target] = new[key]
        else:
            merged.pop(target, None)
    return merged


def to_host(pod: Json, *, vcluster: str) -> Json:
    """The host pod a team's `pod` (as it writes it, or as its API server stored it) becomes, with the model's
    default addresses for the tenant's API and DNS."""
    return Syncer(vcluster).host_pod(pod)


def edit_to_host(host: Json, before: Json, after: Json, *, vcluster: str) -> Json:
    return Syncer(vcluster).edit(host, stored(before), stored(after))


def virtual_gang_pod(name: str, gang: str, size: int, image: str = "busybox", **labels: str) -> Json:
    """A pod of a gang as a team writes it inside its vCluster's default namespace (docs/teams.md)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"gpu-tenancy/gang": gang, **labels},
            "annotations": {"gpu-tenancy/gang-size": str(size)},
        },
        "spec": {"containers": [{"name": "main", "image": image}]},
    }
