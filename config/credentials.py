"""The credentials a host mode reads, checked for shape before anything is registered.

A kubeconfig that is empty, not YAML, or names a context without a server would otherwise fail
deep inside the Kubernetes provider, after dozens of resources were registered; an SSH key that is
not a private key would fail at the first SSH step. No message repeats a credential's content.
"""

from collections.abc import Mapping
from typing import Any

import yaml

from config.issues import key_path

PRIVATE_KEY_HEADERS = (
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----",
)
"""The PEM headers of the private keys ssh-keygen writes (OpenSSH's own format, and PEM for RSA, EC, PKCS#8)."""
FIX = {
    "kubeconfig": "pulumi config set --secret gpu-tenancy:kubeconfig < ~/.kube/config",
    "sshPrivateKey": "pulumi config set --secret gpu-tenancy:sshPrivateKey < ~/.ssh/id_ed25519",
}


def _named(entries: Any, name: str) -> Mapping[str, Any] | None:
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


class _Invalid(ValueError):
    """What is wrong, as the rest of a problem line."""


def _document(text: str) -> Mapping[str, Any]:
    if not text.strip():
        raise _Invalid("is empty")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        raise _Invalid("is not YAML") from None
    if not isinstance(document, Mapping):
        raise _Invalid("is not a kubeconfig (a YAML mapping with clusters, contexts and users)")
    return document


def _current_server(document: Mapping[str, Any]) -> None:
    current = document.get("current-context")
    if not current:
        raise _Invalid("has no current-context")
    context = _named(document.get("contexts"), str(current))
    if context is None or not isinstance(context.get("context"), Mapping):
        raise _Invalid(f"names current-context {current!r}, which its contexts do not define")
    cluster_name = context["context"].get("cluster")
    cluster = _named(document.get("clusters"), str(cluster_name))
    if cluster is None or not isinstance(cluster.get("cluster"), Mapping):
        raise _Invalid(f"context {current!r} names cluster {cluster_name!r}, which its clusters do not define")
    if not cluster["cluster"].get("server"):
        raise _Invalid(f"cluster {cluster_name!r} has no server")


def kubeconfig_problem(text: str) -> str | None:
    """What is wrong with a kubeconfig, as the Kubernetes provider would need it: its current context's server."""
    try:
        _current_server(_document(text))
    except _Invalid as invalid:
        return str(invalid)
    return None


def ssh_key_problem(text: str) -> str | None:
    if not text.strip():
        return "is empty"
    if not text.lstrip().startswith(PRIVATE_KEY_HEADERS):
        if text.lstrip().startswith(("ssh-", "ecdsa-")):
            return "is a public key: give the private key (the file without .pub)"
        return "is not a private key in OpenSSH or PEM form (-----BEGIN ... PRIVATE KEY-----)"
    return None


CHECKS = {"kubeconfig": kubeconfig_problem, "sshPrivateKey": ssh_key_problem}


def credential_problems(values: Mapping[str, str], secret: Mapping[str, bool]) -> list[str]:
    """One line per credential that is stored in plain text or malformed; the line never shows its value."""
    problems = []
    for key, text in sorted(values.items()):
        if not secret.get(key, False):
            problems.append(
                f"{key_path((key,))} is stored in plain text: remove it (`pulumi config rm gpu-tenancy:{key}`) and "
                f"run `{FIX[key]}`"
            )
            continue
        found = CHECKS[key](text)
        if found is not None:
            problems.append(f"{key_path((key,))} {found}: set it again with `{FIX[key]}`")
    return problems
