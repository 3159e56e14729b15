"""Reading and adjusting kubeconfig documents."""

from typing import Any
from urllib.parse import SplitResult, urlsplit

import yaml

# libyaml's parser and emitter where PyYAML was built with it: one kubeconfig per team is rewritten.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _current_cluster(document: dict[str, Any]) -> dict[str, Any]:
    contexts = {c["name"]: c["context"] for c in document.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in document.get("clusters") or []}
    current = contexts.get(document.get("current-context"), {})
    cluster: dict[str, Any] = clusters.get(current.get("cluster"), {})
    return cluster


def _server(kubeconfig: str) -> SplitResult:
    server = _current_cluster(yaml.load(kubeconfig, Loader=_Loader)).get("server")
    if not server:
        raise ValueError("the kubeconfig has no server for its current context")
    return urlsplit(str(server))


def kubeconfig_server_host(kubeconfig: str) -> str:
    """The host part of the current context's API server URL."""
    server = _server(kubeconfig)
    if not server.hostname:
        raise ValueError(f"the kubeconfig's server {server.geturl()!r} has no host")
    return server.hostname


def kubeconfig_server_port(kubeconfig: str) -> int:
    """The port of the current context's API server URL (443 when it names none)."""
    return _server(kubeconfig).port or 443


def with_server(kubeconfig: str, server: str) -> str:
    """The kubeconfig with every cluster's server set to `server`, as vCluster's exportKubeConfig.server does.

    vCluster writes its kubeconfig Secret once per start, after it is Ready; until a
    restarted control plane has rewritten it, the Secret can name the old endpoint. The
    credentials in it stay valid (they live on the control plane's volume), so the
    endpoint the platform knows is put in directly (loft-sh/vcluster pkg/setup/controllers.go
    CreateVClusterKubeConfigForExport @v0.35.1).
    """
    document = yaml.load(kubeconfig, Loader=_Loader)
    clusters = document.get("clusters") or []
    if not clusters:
        raise ValueError("the kubeconfig names no cluster")
    for entry in clusters:
        entry["cluster"]["server"] = server
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False)


def with_token(kubeconfig: str, user: str, token: str) -> str:
    """The kubeconfig's current cluster, reached as `user` with a bearer token instead of its own credentials."""
    return with_credentials(kubeconfig, user, {"token": token})


def with_credentials(kubeconfig: str, name: str, credentials: dict[str, Any]) -> str:
    """The kubeconfig's current cluster (its server and CA) alone, reached with `credentials`, under `name`."""
    document = yaml.load(kubeconfig, Loader=_Loader)
    cluster = _current_cluster(document)
    if not cluster:
        raise ValueError("the kubeconfig has no cluster for its current context")
    member = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": credentials}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return yaml.dump(member, Dumper=_Dumper, sort_keys=False)
