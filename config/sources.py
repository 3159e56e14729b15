"""Where settings come from: a running Pulumi program, or a `Pulumi.<stack>.yaml` read offline.

Both paths hand the same dictionary to `parse_stack_config`, so offline tools
(tests, the planner CLI) see exactly the errors `pulumi up` would show.
"""

import difflib
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from config import yaml12
from config.issues import PROJECT, ConfigError, key_path
from config.stack import StackConfig, parse_stack_config

SECRET_KEYS = frozenset({"kubeconfig", "sshPrivateKey"})
"""Keys that hold credentials: read only as Pulumi secrets, never into the plain model."""

_SECRET_HINTS = {
    "kubeconfig": "pulumi config set --secret gpu-tenancy:kubeconfig < ~/.kube/config",
    "sshPrivateKey": "pulumi config set --secret gpu-tenancy:sshPrivateKey < ~/.ssh/id_ed25519",
}


CREDENTIALS_OF_MODE = {"kubeconfig": frozenset({"kubeconfig"}), "ssh": frozenset({"sshPrivateKey"})}
"""The credentials each host mode reads; Brev's SSH key comes from the brev CLI, not from config."""


def required_secrets(settings: StackConfig) -> frozenset[str]:
    return CREDENTIALS_OF_MODE.get(settings.host.mode, frozenset())


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


def stray_key_warnings(raw: Mapping[str, Any]) -> list[str]:
    """Keys of another namespace named like ours: meant for this program, never read by it."""
    known = PLAIN_KEYS | SECRET_KEYS
    warnings = []
    for key in sorted(raw):
        namespace, _, name = key.partition(":")
        if namespace != PROJECT and name in known:
            warnings.append(
                f"config key {key!r} is not read: this program reads {PROJECT}:{name} "
                f"(`pulumi config set {PROJECT}:{name} ...`, or `{PROJECT}:{name}:` in the stack file)"
            )
    return warnings


STACK_FILE_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt", "config", "environment")
# ProjectStack's fields; Pulumi ignores any other top-level key: pulumi/pulumi sdk/go/common/workspace/project.go
# (type ProjectStack) @v3.259.0.


def namespaced_config(config: Mapping[str, Any], file_name: str) -> dict[str, Any]:
    """A stack file's `config:` as Pulumi reads it, every key as `<namespace>:<name>`.

    A key without a namespace is the project's (stackConfigNamespacedWithProject,
    sdk/go/common/workspace/loaders.go @v3.259.0); `<namespace>:config:<name>` is `<namespace>:<name>` and
    any other key with two colons is refused (ParseKey, sdk/go/common/resource/config/key.go @v3.259.0).
    """
    result: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in config.items():
        name = str(key)
        parts = name.split(":")
        if len(parts) == 1:
            full = f"{PROJECT}:{name}"
        elif len(parts) == 2:
            full = name
        elif len(parts) == 3 and parts[1] == "config":
            full = f"{parts[0]}:{parts[2]}"
        else:
            raise ConfigError(
                [f"{name!r} in {file_name} is not a config key Pulumi can read: write it as {PROJECT}:<key>"]
            )
        if full in result:
            raise ConfigError(
                [f"{full} is set twice in {file_name}, as {given_as[full]!r} and {name!r}: Pulumi keeps one at random"]
            )
        result[full] = value
        given_as[full] = name
    return result


def document_warnings(document: Mapping[str, Any], file_name: str) -> list[str]:
    """Top-level keys of a stack file Pulumi ignores, above all our settings written outside `config:`."""
    known = PLAIN_KEYS | SECRET_KEYS
    warnings = []
    for key in sorted(set(map(str, document)) - set(STACK_FILE_KEYS)):
        name = key.removeprefix(f"{PROJECT}:")
        fix = (
            f"indent it under `config:` as {PROJECT}:{name}"
            if name in known
            else f"{file_name} holds only {', '.join(STACK_FILE_KEYS)}"
        )
        warnings.append(f"{key!r} at the top level of {file_name} is ignored by Pulumi: {fix}")
    return warnings


def unknown_key_problems(keys: Iterable[str]) -> list[str]:
    """A top-level key the program does not read: the nearest one to a typo, or every key there is."""
    known = sorted(PLAIN_KEYS | SECRET_KEYS)
    problems = []
    for key in sorted(set(keys) - set(known)):
        nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"did you mean {PROJECT}:{nearest[0]}?" if nearest else f"known: {', '.join(known)}"
        problems.append(f"{key_path((key,))} is not a known key: {hint} (docs/configuration.md)")
    return problems


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


@dataclass(frozen=True)
class StackFile:
    """A `Pulumi.<stack>.yaml` as Pulumi reads it, before validation."""

    settings: dict[str, Any]
    """The project's plain settings, keyed without the `gpu-tenancy:` prefix."""
    secrets: frozenset[str]
    """The credential keys set, encrypted, in the file (their values cannot be read without Pulumi)."""
    warnings: tuple[str, ...]


def _leading_zero_problem(path: tuple[str | int, ...], number: yaml12.LeadingZero) -> str:
    octal = number.octal()
    pulumi_reads = f"as the octal {octal}" if octal is not None else f"as the float {float(number)}"
    decimal = number.lstrip("+").lstrip("-").lstrip("0") or "0"
    sign = "-" if number.startswith("-") else ""
    return (
        f"{key_path(path)} = {number}: a number with a leading zero, which Pulumi reads {pulumi_reads}; "
        f'write {sign}{decimal}, or quote it ("{number}") if it is meant as text'
    )


def read_stack_document(path: Path) -> StackFile:
    """Read a stack file with Pulumi's rules (YAML 1.2, namespaced keys), refusing a plain-text credential."""
    if not path.is_file():
        raise ConfigError([f"{path} does not exist: create the stack with `pulumi stack init` first"])
    try:
        document = yaml12.load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ConfigError([f"{path} is not valid YAML: {' '.join(str(error).split())}"]) from None
    if not isinstance(document, Mapping):
        raise ConfigError([f"{path} must be a mapping with a `config:` key"])
    config = document.get("config") or {}
    if not isinstance(config, Mapping):
        raise ConfigError([f"`config:` in {path.name} must be a mapping of keys to values"])
    raw = namespaced_config(config, path.name)
    warnings = document_warnings(document, path.name) + stray_key_warnings(raw)
    settings = split_project_keys(raw)
    zeros = yaml12.leading_zeros(settings)
    if zeros:
        raise ConfigError([_leading_zero_problem(where, number) for where, number in zeros])
    secrets = SECRET_KEYS & settings.keys()
    for key in sorted(secrets):
        if not (isinstance(settings[key], Mapping) and "secure" in settings[key]):
            raise ConfigError(
                [
                    f"{key_path((key,))} is stored in plain text in {path.name}: "
                    f"remove it and run `pulumi config set --secret {PROJECT}:{key} ...`"
                ]
            )
        del settings[key]
    return StackFile(settings=settings, secrets=frozenset(secrets), warnings=tuple(warnings))


def read_stack_file(path: Path) -> StackConfig:
    """Validate `Pulumi.<stack>.yaml` without Pulumi: secrets (`secure:` values) are checked for presence only.

    Warnings (keys Pulumi ignores) go to stderr, as `pulumi up` shows them.
    """
    stack_file = read_stack_document(path)
    for warning in stack_file.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    config = load_settings(stack_file.settings)
    problems = secret_problems(config, stack_file.secrets)
    if problems:
        raise ConfigError(problems)
    return config
