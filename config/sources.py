"""Where settings come from: a running Pulumi program, or a `Pulumi.<stack>.yaml` read offline.

Both paths hand the same dictionary to `parse_stack_config`, so offline tools
(tests, the planner CLI) see exactly the errors `pulumi up` would show.
"""

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from config.issues import PROJECT, ConfigError, key_path
from config.stack import StackConfig, parse_stack_config

SECRET_KEYS = frozenset({"kubeconfig", "sshPrivateKey"})
"""Keys that hold credentials: read only as Pulumi secrets, never into the plain model."""

_SECRET_HINTS = {
    "kubeconfig": "pulumi config set --secret gpu-tenancy:kubeconfig < ~/.kube/config",
    "sshPrivateKey": "pulumi config set --secret gpu-tenancy:sshPrivateKey < ~/.ssh/id_ed25519",
}


def required_secrets(settings: StackConfig) -> frozenset[str]:
    """The credentials a host mode reads; Brev's SSH key comes from the brev CLI, not from config."""
    return frozenset({"kubeconfig": {"kubeconfig"}, "ssh": {"sshPrivateKey"}}.get(settings.host.mode, set()))


SECRET_VALUE_KEYS = frozenset({"tenants", "kaiScheduler", "gpuOperator", "observability"})
"""Structured keys whose secret parts (`pulumi config set --path --secret`) can only be Helm values or add-on
manifests: those stay secret through to the release's inputs, its state and previews."""


def structured_secret_problems(secret_keys: Iterable[str]) -> list[str]:
    """Pulumi marks the whole top-level key secret when any path under it is; where no part of the key can carry a
    secret to a resource as one, the secret would be read as plain text: refused."""
    return [
        f"{key_path((key,))} holds a secret value (set with `pulumi config set --path --secret`): nothing under it "
        "is kept secret on its way to the cluster; set it without --secret, or put secrets in Helm values under "
        f"{', '.join(sorted(SECRET_VALUE_KEYS))}"
        for key in sorted(set(secret_keys) - SECRET_VALUE_KEYS - SECRET_KEYS)
    ]


def secret_problems(settings: StackConfig, present: Iterable[str]) -> list[str]:
    """A missing credential, or one the chosen mode would silently ignore, are both mistakes."""
    present = set(present)
    needed = required_secrets(settings)
    mode = settings.host.mode
    missing = [
        f"{key_path((key,))} is required when host.mode is {mode} but not set: run `{_SECRET_HINTS[key]}`"
        for key in sorted(needed - present)
    ]
    unused = [
        f"{key_path((key,))} is set but host.mode {mode} does not use it: "
        f"remove it with `pulumi config rm {PROJECT}:{key}`, or change host.mode"
        for key in sorted((present & SECRET_KEYS) - needed)
    ]
    return missing + unused


PLAIN_KEYS = frozenset(field.alias or name for name, field in StackConfig.model_fields.items())


def split_project_keys(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Keep `gpu-tenancy:<key>` entries, keyed by `<key>`; other namespaces are not ours."""
    prefix = f"{PROJECT}:"
    return {key[len(prefix) :]: value for key, value in raw.items() if key.startswith(prefix)}


def unknown_key_problems(keys: Iterable[str]) -> list[str]:
    known = PLAIN_KEYS | SECRET_KEYS
    return [
        f"{key_path((key,))} is not a known key (known: {', '.join(sorted(known))})"
        for key in sorted(set(keys) - known)
    ]


def load_settings(settings: Mapping[str, Any]) -> StackConfig:
    """Validate project settings, refusing unknown keys first so a typo is never silently ignored."""
    unknown = unknown_key_problems(settings)
    if unknown:
        raise ConfigError(unknown)
    return parse_stack_config({k: v for k, v in settings.items() if k in PLAIN_KEYS})


def decode_structured(raw: str | None) -> Any:
    """Pulumi hands structured config to programs as JSON text; plain strings stay strings."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def read_stack_file(path: Path) -> StackConfig:
    """Validate `Pulumi.<stack>.yaml` without Pulumi: secrets (`secure:` values) are skipped."""
    if not path.is_file():
        raise ConfigError([f"{path} does not exist: create the stack with `pulumi stack init` first"])
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError([f"{path} is not valid YAML: {error}"]) from None
    settings = split_project_keys(document.get("config") or {})
    secrets = SECRET_KEYS & settings.keys()
    for key in secrets:
        if not (isinstance(settings[key], Mapping) and "secure" in settings[key]):
            raise ConfigError(
                [
                    f"{key_path((key,))} is stored in plain text in {path.name}: "
                    f"remove it and run `pulumi config set --secret {PROJECT}:{key} ...`"
                ]
            )
        del settings[key]
    config = load_settings(settings)
    problems = secret_problems(config, secrets)
    if problems:
        raise ConfigError(problems)
    return config
