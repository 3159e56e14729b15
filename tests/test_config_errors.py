"""Bad config ends the run as one RunError naming the key, the value and the fix, before anything exists."""

import importlib
import inspect
import itertools
import pkgutil
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import config
from config.issues import ConfigError
from config.sources import load_settings
from harness import FAKE_HOST_KEY, ProgramRun, attempt_main, dev_settings
from tests.conftest import FAKE_KUBECONFIG

Config = dict[str, Any]


def _gpu(index: int, **share: Any) -> Callable[[Config], None]:
    def mutate(config: Config) -> None:
        config["queues"][index]["resources"]["gpu"].update(share)

    return mutate


def _queue(index: int, **fields: Any) -> Callable[[Config], None]:
    def mutate(config: Config) -> None:
        config["queues"][index].update(fields)

    return mutate


def _tenant(**fields: Any) -> Callable[[Config], None]:
    def mutate(config: Config) -> None:
        config["tenants"].append(fields)

    return mutate


def _cycle(config: Config) -> None:
    config["queues"][0]["parentQueue"] = "team-vision"
    config["queues"][2]["parentQueue"] = "ml-org"


def _duplicate_queue(config: Config) -> None:
    config["queues"].append(dict(config["queues"][1]))


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """`("a", "b"), 1` -> `{"a": {"b": 1}}`."""
    nested: Any = value
    for key in reversed(path):
        nested = {key: nested}
    result: dict[str, Any] = nested
    return result


def _versions(**fields: Any) -> Callable[[Config], None]:
    def mutate(config: Config) -> None:
        config["versions"].update(fields)

    return mutate


_VIEWS_SIGN_IN = {"authUrl": "https://203.0.113.9/auth", "tokenUrl": "https://203.0.113.9/token"}


def _oidc(**fields: Any) -> Callable[[Config], None]:
    """An identity provider at an address (no `addresses` needed), with `fields` over it."""
    provider = {"issuerUrl": "https://203.0.113.9", "clientId": "gpu-tenancy", **fields}
    return lambda config: config.setdefault("vcluster", {}).update(oidc=provider)


BAD_CONFIGS = [
    ("overcommitted-children", _gpu(1, quota=0.5), "gpu-tenancy:queues[0].resources.gpu.quota", "1.16"),
    (
        "unlimited-child-under-finite-parent",
        _gpu(2, quota=-1),
        "gpu-tenancy:queues[0].resources.gpu.quota",
        "unlimited",
    ),
    ("unknown-parent", _queue(1, parentQueue="ml-orgg"), "gpu-tenancy:queues[1].parentQueue", "names no queue"),
    ("self-parent", _queue(1, parentQueue="team-nlp"), "gpu-tenancy:queues[1].parentQueue", "own parent"),
    ("cycle", _cycle, "gpu-tenancy:queues[0].parentQueue", "ml-org -> team-vision -> ml-org"),
    ("uppercase-name", _queue(1, name="Team-NLP"), "gpu-tenancy:queues[1].name", "lowercase"),
    ("name-too-long", _queue(3, name="q" * 64), "gpu-tenancy:queues[3].name", "at most 63"),
    ("unquoted-numeric-name", _queue(1, name=7), "gpu-tenancy:queues[1].name", "quote it"),
    ("chart-owned-name", _queue(3, name="default-queue"), "gpu-tenancy:queues[3].name", "KAI chart"),
    ("duplicate-queue", _duplicate_queue, "gpu-tenancy:queues[4].name", "unique"),
    ("negative-quota", _gpu(1, quota=-0.5), "gpu-tenancy:queues[1].resources.gpu.quota", "-1 (unlimited)"),
    ("limit-below-quota", _gpu(1, limit=0.2), "gpu-tenancy:queues[1].resources.gpu.limit", "at least the quota"),
    ("negative-weight", _gpu(1, overQuotaWeight=-1), "gpu-tenancy:queues[1].resources.gpu.overQuotaWeight", "least 0"),
    ("quoted-number", _gpu(1, quota="0.33"), "gpu-tenancy:queues[1].resources.gpu.quota", "must be a number"),
    ("boolean-number", _gpu(1, limit=True), "gpu-tenancy:queues[1].resources.gpu.limit", "must be a number"),
    ("fractional-priority", _queue(1, priority=1.5), "gpu-tenancy:queues[1].priority", "whole number"),
    (
        "misspelled-key",
        _gpu(1, overQuotaWieght=1),
        "gpu-tenancy:queues[1].resources.gpu.overQuotaWieght",
        "did you mean overQuotaWeight?",
    ),
    (
        "misspelled-section",
        lambda c: c["observability"].update(retentionDay=40),
        "gpu-tenancy:observability.retentionDay",
        "did you mean retentionDays?",
    ),
    (
        "list-given-as-one-word",
        lambda c: c["tenants"][0].update(priorityClasses="train"),
        "gpu-tenancy:tenants[0].priorityClasses",
        "must be a list",
    ),
    (
        "mapping-given-as-a-word",
        lambda c: c.update(observability="on"),
        "gpu-tenancy:observability",
        "must be a mapping",
    ),
    (
        "bad-duration",
        _queue(1, reclaimMinRuntime="ten minutes"),
        "gpu-tenancy:queues[1].reclaimMinRuntime",
        "Go duration",
    ),
    ("tenant-on-parent-queue", _tenant(name="team-x", queue="ml-org"), "gpu-tenancy:tenants[3].queue", "parent queue"),
    (
        "tenant-on-unknown-queue",
        _tenant(name="team-x", queue="team-x"),
        "gpu-tenancy:tenants[3].queue",
        "names no queue",
    ),
    ("duplicate-tenant", _tenant(name="team-nlp", queue="team-nlp"), "gpu-tenancy:tenants[3].name", "unique"),
    (
        "tenant-name-too-long-for-vclusters-statefulset",
        _tenant(name="t" * 53, queue="team-nlp"),
        "gpu-tenancy:tenants[3].name",
        "at most 52 lowercase letters, digits and '-' (the longest name its vCluster's StatefulSet",
    ),
    (
        "tenant-name-starting-with-a-digit",
        _tenant(name="1-team", queue="team-nlp"),
        "gpu-tenancy:tenants[3].name",
        "starting with a letter",
    ),
    (
        "tenant-turns-off-the-control-planes-volume",
        lambda c: c["tenants"][0].update(
            values={"controlPlane": {"statefulSet": {"persistence": {"volumeClaim": {"enabled": False}}}}}
        ),
        "gpu-tenancy:tenants[0].values.controlPlane.statefulSet.persistence.volumeClaim.enabled",
        "lost at every restart",
    ),
    (
        "member-listed-twice",
        lambda c: c["tenants"][0].update(members=["alice", "alice"]),
        "gpu-tenancy:tenants[0].members[1]",
        "is listed twice",
    ),
    (
        "member-name-not-a-kubernetes-name",
        lambda c: c["tenants"][0].update(members=["Alice@example.com"]),
        "gpu-tenancy:tenants[0].members[0]",
        "lowercase letters",
    ),
    (
        "groups-without-an-identity-provider",
        lambda c: c["tenants"][0].update(groups=["ml-nlp"]),
        "gpu-tenancy:tenants[0].groups",
        "set gpu-tenancy:vcluster.oidc",
    ),
    (
        "group-listed-twice",
        lambda c: (_oidc()(c), c["tenants"][0].update(groups=["ml-nlp", "ml-nlp"])),
        "gpu-tenancy:tenants[0].groups[1]",
        "is listed twice",
    ),
    (
        "views-sign-in-without-a-provider",
        lambda c: c["observability"].update(teamViewsSignIn=_VIEWS_SIGN_IN),
        "gpu-tenancy:observability.teamViewsSignIn",
        "vcluster.oidc",
    ),
    (
        "views-sign-in-without-any-teams-groups",
        lambda c: (_oidc()(c), c["observability"].update(teamViewsSignIn=_VIEWS_SIGN_IN)),
        "gpu-tenancy:observability.teamViewsSignIn",
        "set tenants[].groups",
    ),
    (
        "views-sign-in-with-a-group-grafana-cannot-map",
        lambda c: (
            _oidc()(c),
            c["observability"].update(teamViewsSignIn=_VIEWS_SIGN_IN),
            c["tenants"][2].update(groups=["ML Vision"]),
        ),
        "gpu-tenancy:tenants[2].groups[0]",
        "Grafana's org mapping",
    ),
    (
        "views-sign-in-over-http",
        lambda c: c["observability"].update(teamViewsSignIn={**_VIEWS_SIGN_IN, "tokenUrl": "http://x/token"}),
        "gpu-tenancy:observability.teamViewsSignIn.tokenUrl",
        "https",
    ),
    ("issuer-over-http", _oidc(issuerUrl="http://203.0.113.9"), "gpu-tenancy:vcluster.oidc.issuerUrl", "https"),
    (
        "issuer-with-a-query",
        _oidc(issuerUrl="https://203.0.113.9/?realm=ml"),
        "gpu-tenancy:vcluster.oidc.issuerUrl",
        "no query",
    ),
    (
        "issuer-by-name-without-its-addresses",
        _oidc(issuerUrl="https://login.example.com/realms/ml"),
        "gpu-tenancy:vcluster.oidc.addresses",
        "addresses of login.example.com",
    ),
    (
        "issuer-ca-not-pem",
        _oidc(certificateAuthority="MIIB...not a certificate"),
        "gpu-tenancy:vcluster.oidc.certificateAuthority",
        "BEGIN CERTIFICATE",
    ),
    (
        "tenant-api-server-flag-decides-sign-in",
        lambda c: c["tenants"][1].update(
            values={"controlPlane": {"distro": {"k8s": {"apiServer": {"extraArgs": ["--oidc-issuer-url=https://x"]}}}}}
        ),
        "gpu-tenancy:tenants[1].values.controlPlane.distro.k8s.apiServer.extraArgs[0]",
        "use vcluster.oidc",
    ),
    (
        "addon-name-longer-than-helm-allows",
        lambda c: c["tenants"][0].update(addons=[{"name": "a" * 54, "manifests": [{"apiVersion": "v1"}]}]),
        "gpu-tenancy:tenants[0].addons[0].name",
        "at most 53",
    ),
    (
        "operator-release-name-longer-than-helm-allows",
        lambda c: c.update(gpuOperator={"releaseName": "g" * 54}),
        "gpu-tenancy:gpuOperator.releaseName",
        "Helm's limit",
    ),
    ("latest-version", _versions(kaiScheduler="latest"), "gpu-tenancy:versions.kaiScheduler", "exact version"),
    ("range-version", _versions(kaiScheduler="^0.16"), "gpu-tenancy:versions.kaiScheduler", "exact version"),
    ("partial-version", _versions(kaiScheduler="v0.16"), "gpu-tenancy:versions.kaiScheduler", "exact version"),
    ("unknown-top-level-key", lambda c: c.update(queue=[]), "gpu-tenancy:queue", "not a known key"),
    ("missing-queues", lambda c: c.pop("queues"), "gpu-tenancy:queues", "required"),
    ("missing-version", lambda c: c["versions"].pop("kaiScheduler"), "gpu-tenancy:versions.kaiScheduler", "required"),
    (
        "duplicate-node-port",
        lambda c: [t.update(nodePort=30100) for t in c["tenants"][:2]],
        "gpu-tenancy:tenants[1].nodePort",
        "already the API port of tenant 'team-nlp'",
    ),
    (
        "node-port-out-of-range",
        lambda c: c["tenants"][0].update(nodePort=8443),
        "gpu-tenancy:tenants[0].nodePort",
        "30000",
    ),
    (
        "tenant-overrides-set-owner",
        lambda c: c["tenants"][0].update(values={"experimental": {"syncSettings": {"setOwner": True}}}),
        "gpu-tenancy:tenants[0].values.experimental.syncSettings.setOwner",
        "pod-grouper",
    ),
    (
        "tenant-overrides-node-port-in-values",
        lambda c: c["tenants"][2].update(values={"controlPlane": {"service": {"httpsNodePort": 30001}}}),
        "gpu-tenancy:tenants[2].values.controlPlane.service.httpsNodePort",
        "nodePort instead",
    ),
    (
        "addon-chart-and-manifests",
        lambda c: c["tenants"][0].update(
            addons=[
                {
                    "name": "x",
                    "chart": {"repo": "https://example.com/charts", "chart": "x", "version": "1.0.0"},
                    "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
                }
            ]
        ),
        "gpu-tenancy:tenants[0].addons[0]",
        "exactly one of",
    ),
    (
        "addon-unpinned-chart",
        lambda c: c["tenants"][0].update(
            addons=[{"name": "x", "chart": {"repo": "https://example.com/charts", "chart": "x", "version": "latest"}}]
        ),
        "gpu-tenancy:tenants[0].addons[0].chart.version",
        "exact version",
    ),
    (
        "addon-manifest-without-name",
        lambda c: c["tenants"][0].update(
            addons=[{"name": "x", "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]}]
        ),
        "gpu-tenancy:tenants[0].addons[0].manifests[0]",
        "metadata.name",
    ),
    ("missing-vcluster-version", lambda c: c["versions"].pop("vcluster"), "gpu-tenancy:versions.vcluster", "tenants"),
    (
        "unknown-admission-mode",
        lambda c: c.update(vcluster={"admission": "audit"}),
        "gpu-tenancy:vcluster.admission",
        "'mutate' or 'validate'",
    ),
    ("latest-microk8s", _versions(microk8s="latest/stable"), "gpu-tenancy:versions.microk8s", "1.36/stable"),
    ("strict-microk8s", _versions(microk8s="1.36-strict/stable"), "gpu-tenancy:versions.microk8s", "-strict"),
    ("missing-microk8s", lambda c: c["versions"].pop("microk8s"), "gpu-tenancy:versions.microk8s", "host.mode is brev"),
    (
        "missing-operator-version",
        lambda c: c["versions"].pop("gpuOperator"),
        "gpu-tenancy:versions.gpuOperator",
        "gpuOperator.mode is install",
    ),
    (
        "unknown-operator-mode",
        lambda c: c.update(gpuOperator={"mode": "upgrade"}),
        "gpu-tenancy:gpuOperator.mode",
        "'install', 'adopt' or 'skip'",
    ),
    (
        "sni-without-a-domain",
        lambda c: c.update(vcluster={"expose": "sni"}),
        "gpu-tenancy:vcluster.domain",
        "https://<tenant>.<domain>",
    ),
    (
        "sni-with-a-node-port",
        lambda c: (
            c.update(vcluster={"expose": "sni", "domain": "gpu.example.com"}),
            c["tenants"][1].update(nodePort=30100),
        ),
        "gpu-tenancy:tenants[1].nodePort",
        "not used with vcluster.expose sni",
    ),
    (
        "domain-with-a-scheme",
        lambda c: c.update(vcluster={"expose": "sni", "domain": "https://gpu.example.com"}),
        "gpu-tenancy:vcluster.domain",
        "lowercase DNS domain",
    ),
    (
        "observability-without-its-chart-version",
        lambda c: c["versions"].pop("kubePrometheusStack"),
        "gpu-tenancy:versions.kubePrometheusStack",
        "observability.mode is install",
    ),
    (
        "observability-forgets-before-the-cost-window",
        lambda c: c["observability"].update(retentionDays=10),
        "gpu-tenancy:observability.retentionDays",
        "must be from 31 to 3650",
    ),
    (
        "observability-values-for-a-stack-it-does-not-install",
        lambda c: c.update(observability={"mode": "existing", "values": {"grafana": {}}}),
        "gpu-tenancy:observability.values",
        "only with mode install",
    ),
    (
        "observability-overrides-the-namespace-labels-it-needs",
        lambda c: c["observability"].update(values={"kube-state-metrics": {"metricLabelsAllowlist": []}}),
        "gpu-tenancy:observability.values.kube-state-metrics.metricLabelsAllowlist",
        "namespace labels",
    ),
    (
        "team-views-without-a-prometheus",
        lambda c: c.update(observability={"mode": "off", "teamViews": True}),
        "gpu-tenancy:observability.teamViews",
        "needs a Prometheus",
    ),
    (
        "team-views-on-an-existing-stack-without-its-address",
        lambda c: c.update(observability={"mode": "existing", "teamViews": True}),
        "gpu-tenancy:observability.prometheusUrl",
        "required by teamViews with mode existing",
    ),
    (
        "prometheus-address-for-the-stack-this-one-installs",
        lambda c: c["observability"].update(prometheusUrl="http://prometheus.monitoring.svc:9090"),
        "gpu-tenancy:observability.prometheusUrl",
        "is for mode existing",
    ),
    (
        "prometheus-address-that-is-not-a-url",
        lambda c: c.update(observability={"mode": "existing", "teamViews": True, "prometheusUrl": "prometheus:9090"}),
        "gpu-tenancy:observability.prometheusUrl",
        "in-cluster http(s) URL",
    ),
    (
        "tenant-takes-the-team-views-port",
        lambda c: c["tenants"][0].update(nodePort=30080),
        "gpu-tenancy:tenants[0].nodePort",
        "is observability.teamViewsNodePort",
    ),
    (
        "team-views-port-outside-the-range",
        lambda c: c["observability"].update(teamViewsNodePort=8443),
        "gpu-tenancy:observability.teamViewsNodePort",
        "30000",
    ),
    (
        "time-based-fairness-without-a-prometheus",
        lambda c: c.update(observability={"mode": "off"}, fairness={"timeBased": True}),
        "gpu-tenancy:fairness.timeBased",
        "needs a Prometheus",
    ),
    (
        "time-based-fairness-on-an-existing-stack-without-its-address",
        lambda c: c.update(observability={"mode": "existing"}, fairness={"timeBased": True}),
        "gpu-tenancy:observability.prometheusUrl",
        "required by fairness.timeBased",
    ),
    (
        "usage-window-longer-than-prometheus-keeps",
        lambda c: c.update(fairness={"timeBased": True, "windowSize": "6w"}),
        "gpu-tenancy:fairness.windowSize",
        "use at most 35d",
    ),
    (
        "usage-window-kai-cannot-query",
        lambda c: c.update(fairness={"timeBased": True, "windowType": "tumbling"}),
        "gpu-tenancy:fairness.windowType",
        "fails every usage fetch",
    ),
    (
        "cron-string-without-a-cron-window",
        lambda c: c.update(fairness={"cronString": "0 0 * * 1"}),
        "gpu-tenancy:fairness.cronString",
        "only for windowType cron",
    ),
    (
        "usage-window-shorter-than-a-sample",
        lambda c: c.update(fairness={"timeBased": True, "windowSize": "30s"}),
        "gpu-tenancy:fairness.windowSize",
        "one-minute usage sample",
    ),
    (
        "usage-window-in-words",
        lambda c: c.update(fairness={"windowSize": "1 week"}),
        "gpu-tenancy:fairness.windowSize",
        "Prometheus duration",
    ),
    (
        "half-life-in-days",
        lambda c: c.update(fairness={"halfLifePeriod": "1d"}),
        "gpu-tenancy:fairness.halfLifePeriod",
        "Go duration",
    ),
    (
        "negative-k-value",
        lambda c: c.update(fairness={"kValue": -1}),
        "gpu-tenancy:fairness.kValue",
        "must be from 0 to 100",
    ),
    (
        "chart-default-shard-turned-back-on",
        lambda c: c.update(kaiScheduler={"values": {"defaultShard": {"enabled": True}}}),
        "gpu-tenancy:kaiScheduler.values.defaultShard",
        "owns the default SchedulingShard",
    ),
    (
        "k-value-through-the-charts-plugin-arguments",
        lambda c: c.update(
            kaiScheduler={"values": {"scheduler": {"plugins": {"proportion": {"arguments": {"kValue": "2"}}}}}}
        ),
        "gpu-tenancy:kaiScheduler.values.scheduler.plugins.proportion.arguments",
        "fairness.kValue",
    ),
    (
        "negative-price-per-gpu-hour",
        lambda c: c["observability"].update(pricePerGpuHour=-1),
        "gpu-tenancy:observability.pricePerGpuHour",
        "at least 0",
    ),
    (
        "tenant-pins-its-control-plane-elsewhere",
        lambda c: c["tenants"][1].update(
            values={"controlPlane": {"statefulSet": {"scheduling": {"nodeSelector": {"gpu": "big"}}}}}
        ),
        "gpu-tenancy:tenants[1].values.controlPlane.statefulSet.scheduling.nodeSelector",
        "removing a worker strands no team",
    ),
    (
        "tenant-sets-its-kubelet-node-port",
        lambda c: c["tenants"][0].update(values={"controlPlane": {"service": {"kubeletNodePort": 31000}}}),
        "gpu-tenancy:tenants[0].values.controlPlane.service.kubeletNodePort",
        "assigns it once and keeps it",
    ),
    (
        "tenant-loosens-its-own-policies",
        lambda c: c["tenants"][0].update(values={"policies": {"networkPolicy": {"enabled": False}}}),
        "gpu-tenancy:tenants[0].values.policies",
        "tenants[].quota, limitRange or podSecurity",
    ),
    (
        "tenant-syncs-its-network-policies-to-the-host",
        lambda c: c["tenants"][0].update(values={"sync": {"toHost": {"networkPolicies": {"enabled": True}}}}),
        "gpu-tenancy:tenants[0].values.sync.toHost.networkPolicies",
        "add to what the platform's allow",
    ),
    (
        "privileged-pods",
        lambda c: c["tenants"][0].update(podSecurity="privileged"),
        "gpu-tenancy:tenants[0].podSecurity",
        "'baseline' or 'restricted'",
    ),
    (
        "gpu-quota",
        lambda c: c["tenants"][1].update(quota={"requests.nvidia.com/gpu": 1}),
        "gpu-tenancy:tenants[1].quota.requests.nvidia.com/gpu",
        "KAI alone governs GPUs",
    ),
    (
        "node-port-quota",
        lambda c: c.update(vcluster={"quota": {"services.nodeports": 5}}),
        "gpu-tenancy:vcluster.quota.services.nodeports",
        "no team takes another's",
    ),
    (
        "quota-below-the-control-plane",
        lambda c: c["tenants"][2].update(quota={"limits.memory": "2Gi"}),
        "gpu-tenancy:tenants[2].quota.limits.memory",
        "own control plane and CoreDNS take (4266Mi)",
    ),
    (
        "quota-not-a-quantity",
        lambda c: c.update(vcluster={"quota": {"requests.cpu": "lots"}}),
        "gpu-tenancy:vcluster.quota.requests.cpu",
        "Kubernetes quantity",
    ),
    (
        "limit-range-without-ephemeral-storage",
        lambda c: c.update(vcluster={"limitRange": {"default": {"cpu": "1", "memory": "1Gi"}}}),
        "gpu-tenancy:vcluster.limitRange.default",
        "needs ephemeral-storage",
    ),
    (
        "gate-image-from-before-the-gate-ran-no-gpu-pod",
        lambda c: c.update(gpuGate={"image": "nvcr.io/nvidia/cuda:13.0.1-base-ubuntu24.04"}),
        "gpu-tenancy:gpuGate.image",
        "no longer used",
    ),
    (
        "kubectl-without-wait-for-create",
        _versions(kubectl="v1.30.4"),
        "gpu-tenancy:versions.kubectl",
        "kubectl v1.31.0 or newer",
    ),
    *[
        (
            f"kai-value-{'-'.join(path)}",
            lambda c, path=path, value=value: c.update(kaiScheduler={"values": _nested(path, value)}),
            f"gpu-tenancy:kaiScheduler.values.{'.'.join(path)}",
            reason,
        )
        for path, value, reason in [
            (("global", "gpuSharing"), False, "gpu-fraction"),
            (("podgrouper", "queueLabelKey"), "team", "pinned to their queue"),
            (("global", "namespaceLabelSelector"), {"kai": "on"}, "would ignore tenant namespaces"),
            (("global", "podLabelSelector"), {"kai": "on"}, "would ignore tenant pods"),
            (("kaiConfigDeployer", "enabled"), False, "readiness gate"),
            (("binder", "cdiEnabled"), False, "gpuOperator.values.cdi.enabled"),
            (("global", "blockNvidiaVisibleDevices"), False, "tenant admission requires"),
            (("admission", "gpuFractionRuntimeClassName"), "nvidia-legacy", "exactly the nvidia class"),
            (("global", "resourceReservation", "appLabel"), "reserve", "reservation pods"),
        ]
    ],
    (
        "kai-retracted-version",
        _versions(kaiScheduler="v0.20.1"),
        "gpu-tenancy:versions.kaiScheduler",
        "retracted upstream",
    ),
    (
        "system-priority-class-for-every-team",
        lambda c: c.update(vcluster={"priorityClasses": ["train", "system-node-critical"]}),
        "gpu-tenancy:vcluster.priorityClasses[1]",
        "outrank the cluster's",
    ),
    (
        "priority-class-no-label-can-carry",
        lambda c: c["tenants"][0].update(priorityClasses=["Inference_High"]),
        "gpu-tenancy:tenants[0].priorityClasses[0]",
        "a pod label can carry",
    ),
    (
        "whole-gpu-as-a-fraction-floor",
        lambda c: c.update(vcluster={"minGpuFraction": 1}),
        "gpu-tenancy:vcluster.minGpuFraction",
        "less than 1",
    ),
    (
        "no-fraction-floor-for-a-team",
        lambda c: c["tenants"][1].update(minGpuFraction=0),
        "gpu-tenancy:tenants[1].minGpuFraction",
        "must be more than 0",
    ),
    (
        "zero-fraction-devices",
        lambda c: c["tenants"][2].update(maxFractionDevices=0),
        "gpu-tenancy:tenants[2].maxFractionDevices",
        "must be from 1 to 64",
    ),
    *[
        (
            f"toolkit-env-{name.lower()}",
            lambda c, name=name: c.update(
                gpuOperator={
                    "values": {"toolkit": {"env": [{"name": "FOO", "value": "1"}, {"name": name, "value": "1"}]}}
                }
            ),
            "gpu-tenancy:gpuOperator.values.toolkit.env[1].name",
            "default runtime",
        )
        for name in ("NVIDIA_RUNTIME_SET_AS_DEFAULT", "CONTAINERD_SET_AS_DEFAULT")
    ],
]


PYDANTIC_WORDING = ("Input should", "Extra inputs are not permitted", "Field required", "String should")
"""Pydantic's own phrasing: a message in it names no range and no fix."""


def _assert_one_problem(error: BaseException | None, run: ProgramRun, key: str, hint: str) -> None:
    assert isinstance(error, pulumi.RunError), f"expected a RunError, got {error!r}"
    assert run.registrations == [], [r.name for r in run.registrations]
    message = str(error)
    lines = [line for line in message.splitlines() if line.startswith("  - ")]
    assert len(lines) == 1, message
    assert lines[0].startswith(f"  - {key} "), message
    assert hint in lines[0], message
    assert not any(words in message for words in PYDANTIC_WORDING), (
        f"pydantic's wording, not the house style: {message}"
    )


@pytest.mark.parametrize(
    ("mutate", "key", "hint"),
    [pytest.param(m, k, h, id=i) for i, m, k, h in BAD_CONFIGS],
)
def test_bad_config_is_one_run_error_naming_the_key_and_nothing_is_registered(
    mutate: Callable[[Config], None], key: str, hint: str
) -> None:
    config = dev_settings()
    mutate(config)
    error, run = attempt_main(config, {})
    _assert_one_problem(error, run, key, hint)


SSH_HOST = {"mode": "ssh", "address": "203.0.113.10"}
KUBECONFIG_HOST = {"mode": "kubeconfig", "address": "203.0.113.10"}
KEY = {"sshPrivateKey": FAKE_HOST_KEY}
KUBECONFIG = {"kubeconfig": FAKE_KUBECONFIG}

BAD_HOSTS = [
    ("unknown-mode", {"mode": "vagrant"}, {}, "gpu-tenancy:host.mode", "brev, ssh, kubeconfig"),
    ("missing-mode", {"address": "203.0.113.10"}, {}, "gpu-tenancy:host.mode", "is required"),
    ("ssh-without-address", {"mode": "ssh"}, KEY, "gpu-tenancy:host.address", "required"),
    ("ssh-address-with-scheme", {**SSH_HOST, "address": "https://gpu-1"}, KEY, "gpu-tenancy:host.address", "no scheme"),
    ("ssh-address-bad-ip", {**SSH_HOST, "address": "203.0.113.300"}, KEY, "gpu-tenancy:host.address", "IPv4"),
    (
        "kubelet-unlimited-pids",
        {**SSH_HOST, "kubelet": {"podMaxPids": -1}},
        KEY,
        "gpu-tenancy:host.kubelet.podMaxPids",
        "256",
    ),
    (
        "kubelet-unknown-signal",
        {**SSH_HOST, "kubelet": {"evictionHard": {"disk.free": "10%"}}},
        KEY,
        "gpu-tenancy:host.kubelet.evictionHard",
        "nodefs.available",
    ),
    (
        "kubelet-bad-threshold",
        {**SSH_HOST, "kubelet": {"evictionHard": {"nodefs.available": "ten percent"}}},
        KEY,
        "gpu-tenancy:host.kubelet.evictionHard.nodefs.available",
        "10%",
    ),
    ("ssh-without-key", SSH_HOST, {}, "gpu-tenancy:sshPrivateKey", "pulumi config set --secret"),
    ("ssh-with-unused-kubeconfig", SSH_HOST, {**KEY, **KUBECONFIG}, "gpu-tenancy:kubeconfig", "does not use it"),
    ("ssh-port-out-of-range", {**SSH_HOST, "port": 70000}, KEY, "gpu-tenancy:host.port", "65535"),
    ("kubeconfig-without-kubeconfig", KUBECONFIG_HOST, {}, "gpu-tenancy:kubeconfig", "pulumi config set --secret"),
    ("kubeconfig-with-ssh-key", KUBECONFIG_HOST, {**KUBECONFIG, **KEY}, "gpu-tenancy:sshPrivateKey", "does not use"),
    (
        "kubeconfig-with-brev-key",
        {**KUBECONFIG_HOST, "cloud": "nebius"},
        KUBECONFIG,
        "gpu-tenancy:host.cloud",
        "belongs to host.mode brev",
    ),
    (
        "kubeconfig-without-the-address-teams-use",
        {"mode": "kubeconfig"},
        KUBECONFIG,
        "gpu-tenancy:host.address",
        "on EKS, GKE or AKS the kubeconfig's API server is not a node",
    ),
    (
        "brev-without-name",
        {"mode": "brev", "gpuName": "L40S", "cloud": "nebius"},
        {},
        "gpu-tenancy:host.name",
        "required",
    ),
    ("brev-with-unused-key", None, KEY, "gpu-tenancy:sshPrivateKey", "does not use it"),
    (
        "worker-that-is-the-host",
        {**SSH_HOST, "workers": [{"address": "203.0.113.11"}, {"address": "203.0.113.10"}]},
        KEY,
        "gpu-tenancy:host.workers[1].address",
        "is already host.address",
    ),
    (
        "worker-listed-twice",
        {**SSH_HOST, "workers": [{"address": "203.0.113.11"}, {"address": "203.0.113.11"}]},
        KEY,
        "gpu-tenancy:host.workers[1].address",
        "is already workers[0].address",
    ),
    (
        "worker-with-bad-user",
        {**SSH_HOST, "workers": [{"address": "203.0.113.11", "user": "Root Admin"}]},
        KEY,
        "gpu-tenancy:host.workers[0].user",
        "Linux user name",
    ),
    (
        "too-many-workers",
        {**SSH_HOST, "workers": [{"address": f"10.0.0.{i}"} for i in range(1, 34)]},
        KEY,
        "gpu-tenancy:host.workers",
        "32",
    ),
    (
        "brev-worker-names-too-long",
        {"mode": "brev", "name": "g" * 61, "gpuName": "L40S", "cloud": "nebius", "workers": 10},
        {},
        "gpu-tenancy:host.workers",
        "shorten host.name",
    ),
    (
        "brev-negative-workers",
        {"mode": "brev", "name": "gpu", "gpuName": "L40S", "cloud": "nebius", "workers": -1},
        {},
        "gpu-tenancy:host.workers",
        "must be from 0 to 32",
    ),
    (
        "brev-workers-in-words",
        {"mode": "brev", "name": "gpu", "gpuName": "L40S", "cloud": "nebius", "workers": "two"},
        {},
        "gpu-tenancy:host.workers",
        "whole number (at least 0 and at most 32)",
    ),
    (
        "brev-delete-on-destroy-in-words",
        {"mode": "brev", "name": "gpu", "gpuName": "L40S", "cloud": "nebius", "deleteOnDestroy": "please"},
        {},
        "gpu-tenancy:host.deleteOnDestroy",
        "true or false",
    ),
    (
        "ssh-port-quoted-words",
        {**SSH_HOST, "port": "ssh"},
        KEY,
        "gpu-tenancy:host.port",
        "whole number (at least 1 and at most 65535)",
    ),
    (
        "workers-in-kubeconfig-mode",
        {**KUBECONFIG_HOST, "workers": [{"address": "203.0.113.11"}]},
        KUBECONFIG,
        "gpu-tenancy:host.workers",
        "belongs to host.mode brev or ssh",
    ),
]


NO_SERVER = FAKE_KUBECONFIG.replace('server: "https://203.0.113.10:16443", ', "")
WRONG_CONTEXT = FAKE_KUBECONFIG.replace("current-context: host", "current-context: elsewhere")
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEQQ5 ops@laptop"
BAD_CREDENTIALS = [
    ("kubeconfig-empty", KUBECONFIG_HOST, {"kubeconfig": " "}, "gpu-tenancy:kubeconfig", "is empty"),
    ("kubeconfig-not-yaml", KUBECONFIG_HOST, {"kubeconfig": "{{[ nope"}, "gpu-tenancy:kubeconfig", "not YAML"),
    ("kubeconfig-not-a-mapping", KUBECONFIG_HOST, {"kubeconfig": "- a\n- b"}, "gpu-tenancy:kubeconfig", "mapping"),
    ("kubeconfig-no-server", KUBECONFIG_HOST, {"kubeconfig": NO_SERVER}, "gpu-tenancy:kubeconfig", "has no server"),
    ("kubeconfig-no-context", KUBECONFIG_HOST, {"kubeconfig": WRONG_CONTEXT}, "gpu-tenancy:kubeconfig", "elsewhere"),
    ("ssh-key-public", SSH_HOST, {"sshPrivateKey": PUBLIC_KEY}, "gpu-tenancy:sshPrivateKey", "public key"),
    ("ssh-key-garbage", SSH_HOST, {"sshPrivateKey": "hunter2"}, "gpu-tenancy:sshPrivateKey", "not a private key"),
]


@pytest.mark.parametrize(
    ("host", "secrets", "key", "hint"), [pytest.param(h, s, k, m, id=i) for i, h, s, k, m in BAD_CREDENTIALS]
)
def test_a_malformed_credential_is_one_error_before_anything_exists_and_never_shown(
    host: dict[str, Any], secrets: dict[str, str], key: str, hint: str
) -> None:
    config = {**dev_settings(), "host": host}
    error, run = attempt_main(config, secrets)
    _assert_one_problem(error, run, key, hint)
    (value,) = secrets.values()
    assert value.strip() not in str(error) or len(value.strip()) < 3, "the credential is not repeated"


@pytest.mark.parametrize(
    ("host", "key", "value"),
    [(KUBECONFIG_HOST, "kubeconfig", FAKE_KUBECONFIG), (SSH_HOST, "sshPrivateKey", FAKE_HOST_KEY)],
    ids=["kubeconfig", "ssh-key"],
)
def test_a_credential_stored_in_plain_text_is_refused(host: dict[str, Any], key: str, value: str) -> None:
    """`pulumi config set` without --secret: the value sits readable in the stack file and in state."""
    config = {**dev_settings(), "host": host, key: value}
    error, run = attempt_main(config)
    _assert_one_problem(error, run, f"gpu-tenancy:{key}", "stored in plain text")
    assert value.splitlines()[1] not in str(error)


@pytest.mark.parametrize(
    ("host", "secrets", "key", "hint"),
    [pytest.param(h, s, k, m, id=i) for i, h, s, k, m in BAD_HOSTS],
)
def test_bad_host_config_is_one_run_error_naming_the_key(
    host: dict[str, Any] | None, secrets: dict[str, str], key: str, hint: str
) -> None:
    config = dev_settings()
    if host is not None:
        config["host"] = host
    error, run = attempt_main(config, secrets)
    _assert_one_problem(error, run, key, hint)


def test_every_problem_is_reported_at_once(dev_config: Config) -> None:
    _queue(1, name="BAD")(dev_config)
    _gpu(2, limit=0.1)(dev_config)
    _versions(kaiScheduler="latest")(dev_config)
    with pytest.raises(ConfigError) as raised:
        load_settings(dev_config)
    assert len(raised.value.problems) == 3, raised.value


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=8))
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=10,
)


def _slots(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in a nested config: the places a corruption can land."""
    found: list[tuple[Any, Any]] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, value in items:
        found.append((node, key))
        found.extend(_slots(value))
    return found


@st.composite
def _malformed_configs(draw: st.DrawFn) -> Config:
    """The valid reference config with one to three values replaced by arbitrary JSON."""
    config = dev_settings()
    for _ in range(draw(st.integers(1, 3))):
        container, key = draw(st.sampled_from(_slots(config)))
        container[key] = draw(_json | st.floats(-3, 3))
    return config


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(config=_malformed_configs())
def test_malformed_config_never_crashes_and_never_registers_a_resource(config: Config) -> None:
    """Whatever is wrong, the outcome is a clean RunError with nothing created, or a valid run."""
    error, run = attempt_main(config, {})
    if error is None:
        assert run.registrations, "a config that validates must produce resources"
        return
    assert isinstance(error, pulumi.RunError), f"crashed instead of refusing: {error!r}"
    assert run.registrations == [], [r.name for r in run.registrations]
    assert str(error).startswith("Invalid stack config")
    assert not any(words in str(error) for words in PYDANTIC_WORDING), str(error)


def test_a_misspelled_top_level_key_suggests_the_nearest() -> None:
    config = dev_settings()
    config["observabilty"] = config.pop("observability")
    error, run = attempt_main(config, {})
    _assert_one_problem(error, run, "gpu-tenancy:observabilty", "did you mean gpu-tenancy:observability?")


def test_a_setting_in_another_namespace_is_warned_about_not_silently_ignored() -> None:
    """`pulumi config set kubernetes:observability ...` reaches the program, but it is not ours to read."""
    config = {**dev_settings(), "kubernetes:observability": {"retentionDays": 40}}
    error, run = attempt_main(config, {})
    assert error is None
    assert any(
        "'kubernetes:observability' is not read: this program reads gpu-tenancy:observability" in w
        for w in run.warnings
    ), run.warnings


def test_every_key_is_spelled_as_the_docs_spell_it() -> None:
    """An alias is what the user types and what a typo is pointed to: camelCase, never a capital after a digit."""
    models = _all_models()
    odd = [f"{m.__name__}.{n}: {f.alias}" for m in models for n, f in m.model_fields.items() if _odd(f.alias)]
    assert odd == []


def _odd(alias: str | None) -> bool:
    return alias is not None and any(a.isdigit() and b.isupper() for a, b in itertools.pairwise(alias))


def _all_models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    for module in pkgutil.walk_packages(config.__path__, "config."):
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if issubclass(cls, BaseModel) and cls.__module__.startswith("config") and cls not in found:
                found.append(cls)
    return found


def test_a_typo_of_microk8s_is_pointed_to_microk8s() -> None:
    error, run = attempt_main({**dev_settings(), "versions": {**dev_settings()["versions"], "microk8": "1.36/stable"}})
    _assert_one_problem(error, run, "gpu-tenancy:versions.microk8", "did you mean microk8s?")


@pytest.mark.parametrize(
    ("key", "given", "kept"),
    [
        ("kaiScheduler", "0.16.8", "v0.16.8"),
        ("kaiScheduler", "v0.16.8", "v0.16.8"),
        ("gpuOperator", "26.3.3", "v26.3.3"),
        ("vcluster", "v0.35.1", "0.35.1"),
        ("vcluster", "0.35.1", "0.35.1"),
        ("kubePrometheusStack", "v88.5.3", "88.5.3"),
    ],
)
def test_a_chart_version_is_kept_as_its_repository_spells_it(key: str, given: str, kept: str) -> None:
    """Helm installs the same chart for 0.35.1 and v0.35.1 (a semver constraint): one spelling, the chart's."""
    config = dev_settings()
    config["versions"][key] = given
    versions = load_settings(config).versions.model_dump(by_alias=True)
    assert versions[key] == kept


@pytest.mark.parametrize("given", ["0.20.0", "v0.20.0", "0.20.1", "v0.20.1"])
def test_a_retracted_kai_is_refused_however_it_is_spelled(given: str) -> None:
    config = dev_settings()
    config["versions"]["kaiScheduler"] = given
    with pytest.raises(ConfigError, match="retracted upstream"):
        load_settings(config)


def test_a_vcluster_pinned_with_a_v_is_the_version_that_was_read() -> None:
    """One thing said: no warning that v0.35.1 was not read while 0.35.1 was."""
    config = dev_settings()
    config["versions"]["vcluster"] = "v0.35.1"
    error, run = attempt_main(config)
    assert error is None
    assert not [w for w in run.warnings if "0.35.1" in w], run.warnings


@pytest.mark.parametrize(
    ("section", "key", "wrong", "line", "suggested"),
    [
        (
            "versions",
            "microk8s",
            1.36,
            'versions.microk8s = 1.36: must be a string: quote it in YAML, e.g. "1.36/stable"',
            "1.36/stable",
        ),
        (
            "expect",
            "ubuntuRelease",
            24.10,
            'expect.ubuntuRelease = 24.1: must be a string: quote it in YAML, e.g. "24.04"',
            "24.04",
        ),
        (
            "versions",
            "vcluster",
            0.351,
            'versions.vcluster = 0.351: must be a string: quote it in YAML, e.g. "1.2.3"',
            "1.2.3",
        ),
        ("tenant", "nodePort", 80, "tenants[0].nodePort = 80: must be from 30000 to 32767", 30000),
        ("tenant", "nodePort", 40000, "tenants[0].nodePort = 40000: must be from 30000 to 32767", 32767),
    ],
)
def test_the_fix_a_problem_suggests_is_one_config_accepts(
    section: str, key: str, wrong: Any, line: str, suggested: Any
) -> None:
    """24.10 unquoted is the number 24.1, and a MicroK8s channel is not the number quoted: the example is the
    field's own form, and a bound names the whole range."""

    def with_value(value: Any) -> dict[str, Any]:
        config = dev_settings()
        place = {
            "versions": config["versions"],
            "expect": config["host"].setdefault("expect", {}),
            "tenant": config["tenants"][0],
        }[section]
        place[key] = value
        return config

    with pytest.raises(ConfigError) as refused:
        load_settings(with_value(wrong))
    assert [p for p in refused.value.problems if line in p], refused.value.problems
    load_settings(with_value(suggested))


@pytest.mark.parametrize(
    ("host", "blocked", "named"),
    [
        ({"mode": "ssh", "address": "gpu.example.com"}, [], ["host.address = 'gpu.example.com'"]),
        (
            {"mode": "ssh", "address": "203.0.113.20", "workers": [{"address": "w1.example.com"}]},
            [],
            ["host.workers[0].address = 'w1.example.com'"],
        ),
        ({"mode": "ssh", "address": "203.0.113.20", "workers": [{"address": "203.0.113.21"}]}, [], []),
        ({"mode": "ssh", "address": "gpu.example.com"}, ["198.51.100.7/32"], []),
    ],
    ids=["host-by-name", "worker-by-name", "addresses", "names-with-their-addresses-blocked"],
)
def test_a_machine_given_by_name_is_a_warning_naming_its_key_and_the_fix(
    host: dict[str, Any], blocked: list[str], named: list[str]
) -> None:
    """The workloads' NetworkPolicy blocks each machine's address; a name has none offline (docs/security.md)."""
    config = dev_settings()
    config["host"] = host
    config["vcluster"] = {"blockedEgress": blocked}
    warnings = [w for w in load_settings(config).warnings() if "is a DNS name" in w]
    assert [w.split(" is a DNS name")[0] for w in warnings] == named
    assert all("vcluster.blockedEgress" in w and "dig +short" in w for w in warnings)
