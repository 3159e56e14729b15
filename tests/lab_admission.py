"""Admission by the lab's real API server: a test's request, decided by the program's policies as registered.

Every run of the program (a stack's config) installs its policies once, under its own key:
each policy and binding is named `<name>-<key>`, and each binding also requires the
namespace label `lab.gpu-tenancy.dev/run: <key>`, so the runs of every test share one API
server without meeting. Nothing else of a policy changes. A request goes to a copy of its
namespace (same labels and annotations, plus the run's) as a dry run, impersonating its user
(plus system:masters: RBAC is not what these tests check), and the API server answers with
the object as it would store it, after every mutating policy and KAI's webhook stand-in
(tests/kai_webhook.py), or with its refusal, of which it gives the first only
(apiserver pkg/admission/plugin/policy/validating/dispatcher.go Dispatch @v0.36.3).

`kai_serves=False` is a cluster where KAI is not installed yet: no webhook of KAI's, and, as the
program orders it, no gang-consistency policy (it waits for KAI's gate). An UPDATE needs the
old object to exist: it is created first in a scratch namespace the run's policies do not
bind yet, then the namespace gets the run's label, and the update is a dry run there.
"""

import copy
import hashlib
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from components.gang_controller import GANG_CONTROLLER_USER
from harness import ProgramRun
from harness.lab.cluster import wait_for
from harness.lab.kube import ApiError
from tests.kai_webhook import KAI_SERVING_LABEL
from tests.lab import Lab, delete_namespace, ensure_namespace

Json = dict[str, Any]
RUN_LABEL = "lab.gpu-tenancy.dev/run"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAPB = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
MAP = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicy"
MAPB = "kubernetes:admissionregistration.k8s.io/v1:MutatingAdmissionPolicyBinding"
NEEDS_KAI = {"gpu-tenancy-gang-consistency"}
"""Policies the program creates only once KAI's gate has passed."""
PROBE = "lab-probe"
PARAM_PROBE = "lab-param-probe"


@dataclass(frozen=True)
class Request:
    """What the API server is asked: the object, its namespace as the API server holds it, who asks."""

    object: Json
    namespace: Json
    operation: str = "CREATE"
    old_object: Json | None = None
    sub_resource: str = ""
    resource: str = "pods"
    api_group: str = ""
    api_version: str = "v1"
    user: str = "system:serviceaccount:vcluster-team-nlp:vc-team-nlp"


def denial(error: ApiError) -> str:
    """The policy's own message, without the API server's `... denied request: ` preamble."""
    message = error.message
    marker = "denied request: "
    return message.split(marker, 1)[1] if marker in message else message


def _run_key(run: ProgramRun) -> str:
    specs = sorted(
        json.dumps(r.inputs, sort_keys=True, default=str) for r in run.registrations if r.type in (VAP, VAPB, MAP, MAPB)
    )
    return hashlib.sha256("\n".join(specs).encode()).hexdigest()[:8]


@dataclass
class RunPolicies:
    lab: Lab
    run: ProgramRun
    key: str
    namespaces: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> None:
        """The run's policies and bindings under its key, plus the two probes that tell when they see a
        namespace's labels or a param."""
        admin = self.lab.admin
        for policy_type, binding_type, kind in (
            (VAP, VAPB, "ValidatingAdmissionPolicy"),
            (MAP, MAPB, "MutatingAdmissionPolicy"),
        ):
            for policy in self.run.of_type(policy_type):
                name = policy.inputs["metadata"]["name"]
                admin.apply(
                    {
                        "apiVersion": "admissionregistration.k8s.io/v1",
                        "kind": kind,
                        "metadata": {"name": f"{name}-{self.key}"},
                        "spec": policy.inputs["spec"],
                    }
                )
            for binding in self.run.of_type(binding_type):
                spec = copy.deepcopy(binding.inputs["spec"])
                original = spec["policyName"]
                spec["policyName"] = f"{original}-{self.key}"
                selector = spec.setdefault("matchResources", {}).setdefault("namespaceSelector", {})
                extra = [{"key": RUN_LABEL, "operator": "In", "values": [self.key]}]
                if original in NEEDS_KAI:
                    extra.append({"key": KAI_SERVING_LABEL, "operator": "In", "values": ["serving"]})
                selector["matchExpressions"] = [*selector.get("matchExpressions", []), *extra]
                if "name" in spec.get("paramRef", {}):
                    spec["paramRef"]["name"] = self._params(spec["paramRef"])
                admin.apply(
                    {
                        "apiVersion": "admissionregistration.k8s.io/v1",
                        "kind": f"{kind}Binding",
                        "metadata": {"name": f"{binding.inputs['metadata']['name']}-{self.key}"},
                        "spec": spec,
                    }
                )
        self._probes()

    def _params(self, ref: Json) -> str:
        """A binding's named params as the run leaves them (its ConfigMap, then its patch's data), copied under the
        run's key; returns the copy's name."""
        data: dict[str, str] = {}
        found = False
        for kind in ("kubernetes:core/v1:ConfigMap", "kubernetes:core/v1:ConfigMapPatch"):
            for registered in self.run.of_type(kind):
                metadata = registered.inputs.get("metadata") or {}
                if (metadata.get("name"), metadata.get("namespace")) == (ref["name"], ref["namespace"]):
                    data.update(registered.inputs.get("data") or {})
                    found = True
        name = f"{ref['name']}-{self.key}"
        if found:  # params the run does not make stay missing
            metadata = {"name": name, "namespace": ref["namespace"]}
            self.lab.admin.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})
        return name

    def _probes(self) -> None:
        """`lab-probe` pods are refused once the run's bindings see the namespace; `lab-param-probe` once the
        PodGroup its annotation names is among the params (the gang-consistency binding's paramRef)."""
        admin = self.lab.admin
        selector = {"matchExpressions": [{"key": RUN_LABEL, "operator": "In", "values": [self.key]}]}
        rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]
        probe = {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "matchConditions": [{"name": "probe", "expression": f"object.metadata.name == '{PROBE}'"}],
            "validations": [{"expression": "false", "message": "probe"}],
        }
        consistency = next(
            b.inputs["spec"] for b in self.run.of_type(VAPB) if b.inputs["spec"]["policyName"] in NEEDS_KAI
        )
        param_probe = {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup"},
            "matchConstraints": {"resourceRules": rules},
            "matchConditions": [{"name": "probe", "expression": f"object.metadata.name == '{PARAM_PROBE}'"}],
            "validations": [
                {
                    "expression": f"params.metadata.name != object.metadata.annotations['{PARAM_PROBE}']",
                    "message": "param seen",
                }
            ],
        }
        for name, spec, param_ref in ((PROBE, probe, None), (PARAM_PROBE, param_probe, consistency["paramRef"])):
            admin.apply(
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingAdmissionPolicy",
                    "metadata": {"name": f"{name}-{self.key}"},
                    "spec": spec,
                }
            )
            binding: Json = {
                "policyName": f"{name}-{self.key}",
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": selector},
            }
            if param_ref:
                binding["paramRef"] = param_ref
            admin.apply(
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": f"{name}-{self.key}"},
                    "spec": binding,
                }
            )

    def _labels(self, namespace: Json, *, kai_serves: bool, bound: bool = True) -> dict[str, str]:
        labels = {
            k: v for k, v in (namespace["metadata"].get("labels") or {}).items() if k != "kubernetes.io/metadata.name"
        }
        if bound:
            labels[RUN_LABEL] = self.key
        if kai_serves:
            labels[KAI_SERVING_LABEL] = "serving"
        return labels

    def _wait_bound(self, name: str) -> None:
        """Until the run's bindings see the namespace's labels (the API server reads them from an informer)."""
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": PROBE, "namespace": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }

        def refused() -> bool:
            try:
                self.lab.admin.create(probe, dry_run=True)
            except ApiError as error:
                return "probe" in error.message
            return False

        assert wait_for(refused, 60, 0.05), f"the run's policies never saw namespace {name}"

    def namespace(self, namespace: Json, *, kai_serves: bool) -> str:
        """A copy of `namespace` bound by this run's policies, made once."""
        labels = self._labels(namespace, kai_serves=kai_serves)
        annotations = namespace["metadata"].get("annotations") or {}
        digest = hashlib.sha256(json.dumps([labels, annotations], sort_keys=True).encode()).hexdigest()[:6]
        original = namespace["metadata"]["name"]
        name = f"{original[:40]}-{self.key}-{digest}"
        with self.lock:
            if name not in self.namespaces:
                ensure_namespace(self.lab, name, labels, annotations)
                self._wait_bound(name)
                self.namespaces[name] = original
        return name

    def scratch(self, namespace: Json) -> str:
        """A namespace of one request's own, bound by nothing yet, KAI's webhook included (see `bind`): its
        old object is stored as it stands, not admitted again."""
        name = f"lab-u-{uuid.uuid4().hex[:10]}"
        ensure_namespace(
            self.lab,
            name,
            self._labels(namespace, kai_serves=False, bound=False),
            namespace["metadata"].get("annotations"),
        )
        return name

    def bind(self, name: str, namespace: Json, *, kai_serves: bool) -> None:
        self.lab.admin.patch(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            {"metadata": {"labels": self._labels(namespace, kai_serves=kai_serves)}},
        )
        self._wait_bound(name)


_INSTALLED: dict[str, RunPolicies] = {}
_INSTALLING = threading.Lock()


def policies_of(lab: Lab, run: ProgramRun) -> RunPolicies:
    key = _run_key(run)
    with _INSTALLING:
        if key not in _INSTALLED:
            policies = RunPolicies(lab, run, key)
            policies.install()
            _INSTALLED[key] = policies
        return _INSTALLED[key]


def _path(lab: Lab, request: Request, namespace: str, name: str | None = None) -> str:
    base = (
        f"/api/{request.api_version}" if not request.api_group else f"/apis/{request.api_group}/{request.api_version}"
    )
    path = f"{base}/namespaces/{namespace}/{request.resource}"
    return f"{path}/{name}" if name else path


def _plain(obj: Json, namespace: str) -> Json:
    """The object as a client sends it, in `namespace`: nothing the server owns."""
    sent = copy.deepcopy(obj)
    metadata = sent.setdefault("metadata", {})
    metadata["namespace"] = namespace
    for owned in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        metadata.pop(owned, None)
    return sent


def _same_uid(sent: Json, old: Json | None, existing: Json) -> Json:
    """The new object as it refers to the old one's copy: the copy has a uid of the server's, and a pod's own
    PodGroup name (pg-<pod>-<uid>) carries it."""
    old_uid = ((old or {}).get("metadata") or {}).get("uid")
    if not old_uid:
        return sent
    same: Json = json.loads(json.dumps(sent).replace(old_uid, existing["metadata"]["uid"]))
    return same


def _refer_to_copy(lab: Lab, request: Request, namespace: str, existing: Json) -> Json:
    """The old object's copy, its references to its own uid (a pod's pg-<pod>-<uid>) made to the copy's."""
    old = _plain(request.old_object or {}, namespace)
    fixed = _same_uid(old, request.old_object, existing)
    if fixed["metadata"] == old["metadata"]:
        return existing
    fixed["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
    return lab.admin.request("PUT", _path(lab, request, namespace, existing["metadata"]["name"]), fixed)


def _restore(obj: Json, namespace: str) -> Json:
    obj.setdefault("metadata", {})["namespace"] = namespace
    return obj


def decide(
    lab: Lab, run: ProgramRun, request: Request, *, kai_serves: bool = True, pod_groups: list[Json] | None = None
) -> tuple[Json | None, list[str]]:
    """The object as the API server would store it (None when refused) and its refusal (at most one)."""
    policies = policies_of(lab, run)
    scratch = None
    try:
        if request.old_object is not None or pod_groups:
            scratch = policies.scratch(request.namespace)
            existing = _prepare(lab, policies, request, scratch, kai_serves=kai_serves, pod_groups=pod_groups or [])
            namespace = scratch
        else:
            namespace, existing = policies.namespace(request.namespace, kai_serves=kai_serves), None
        return _send(lab, request, namespace, existing)
    finally:
        if scratch is not None:
            delete_namespace(lab, scratch)


def _prepare(
    lab: Lab, policies: RunPolicies, request: Request, namespace: str, *, kai_serves: bool, pod_groups: list[Json]
) -> Json | None:
    """In a scratch namespace: the old object as it stands, then the run's policies bound, then the gang
    controller's PodGroups, each awaited until the consistency policy sees it."""
    existing = None
    if request.old_object is not None:
        if request.resource == "pods":
            _account_exists(lab, namespace, request.old_object)
        existing = lab.admin.request("POST", _path(lab, request, namespace), _plain(request.old_object, namespace))
        existing = _refer_to_copy(lab, request, namespace, existing)
        if request.old_object.get("status") and request.resource in ("pods", "services"):
            status = {**existing, "status": request.old_object["status"]}
            path = _path(lab, request, namespace, existing["metadata"]["name"]) + "/status"
            existing = lab.admin.request("PUT", path, status)
    policies.bind(namespace, request.namespace, kai_serves=kai_serves)
    controller = lab.as_user(GANG_CONTROLLER_USER)
    for group in pod_groups:
        controller.create(_plain(group, namespace))
        _wait_param(lab, namespace, group["metadata"]["name"])
    return existing


def _send(lab: Lab, request: Request, namespace: str, existing: Json | None) -> tuple[Json | None, list[str]]:
    """The request itself, as a dry run by its user."""
    asker = lab.as_user(request.user)
    sent = _plain(request.object, namespace)
    if request.resource == "pods":
        _account_exists(lab, namespace, sent)
    try:
        if request.operation == "CREATE":
            stored = asker.request("POST", _path(lab, request, namespace), sent, query={"dryRun": "All"})
        elif request.operation == "DELETE":
            assert existing is not None, "a DELETE needs the object it deletes (old_object)"
            path = _path(lab, request, namespace, existing["metadata"]["name"])
            asker.request("DELETE", path, query={"dryRun": "All"})
            return None, []
        else:
            assert existing is not None, "an UPDATE needs its old object"
            sent = _same_uid(sent, request.old_object, existing)
            name = existing["metadata"]["name"]
            sent["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            path = _path(lab, request, namespace, name) + (f"/{request.sub_resource}" if request.sub_resource else "")
            stored = asker.request("PUT", path, sent, query={"dryRun": "All"})
    except ApiError as error:
        if error.code in (400, 403, 409, 422):
            return None, [denial(error)]
        raise
    return _restore(stored, request.namespace["metadata"]["name"]), []


_ACCOUNTS: set[tuple[str, str]] = set()


def _account_exists(lab: Lab, namespace: str, pod: Json) -> None:
    """The pod's ServiceAccount, as the host namespace has it (a synced pod's vc-workload-<tenant> is the vCluster
    chart's): the ServiceAccount admission plugin refuses a pod whose account does not exist."""
    account = (pod.get("spec") or {}).get("serviceAccountName")
    if account and (namespace, account) not in _ACCOUNTS:
        lab.admin.apply(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}}
        )
        _ACCOUNTS.add((namespace, account))


def _wait_param(lab: Lab, namespace: str, group: str) -> None:
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": PARAM_PROBE, "namespace": namespace, "annotations": {PARAM_PROBE: group}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }

    def seen() -> bool:
        try:
            lab.admin.create(probe, dry_run=True)
        except ApiError as error:
            return "param seen" in error.message
        return False

    assert wait_for(seen, 60, 0.05), f"PodGroup {group} never reached the gang-consistency params"
