"""The running program's view of its config: validated settings plus secret credentials.

This is the only module that reads `pulumi.Config`; components receive what it returns.
It registers no resource: config/ validates, it never creates.
"""

from dataclasses import dataclass

import pulumi
import pulumi.runtime

from config.credentials import credential_problems
from config.issues import PROJECT, ConfigError
from config.sources import (
    SECRET_KEYS,
    SECRET_VALUE_KEYS,
    decode_structured,
    load_settings,
    required_secrets,
    secret_problems,
    split_project_keys,
    stray_key_warnings,
    structured_secret_problems,
)
from config.stack import StackConfig


@dataclass(frozen=True)
class StackInputs:
    settings: StackConfig
    secrets: dict[str, pulumi.Output[str]]
    """Credentials the host mode needs (`kubeconfig`, `sshPrivateKey`), secret from the moment they are read."""
    secret_values: frozenset[str]
    """Structured keys with a secret inside (SECRET_VALUE_KEYS): the Helm values and manifests made from them are
    Pulumi secrets."""


def _project_keys() -> dict[str, str | None]:
    # Pulumi has no public "list my config keys" call; the two places it keeps
    # them are the explicit map (set by tests and the exec host) and PULUMI_CONFIG.
    keys = set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.get_config_env())
    for warning in stray_key_warnings(dict.fromkeys(keys)):
        pulumi.log.warn(warning)
    return split_project_keys({key: pulumi.runtime.get_config(key) for key in keys})


def load_stack_inputs() -> StackInputs:
    """Validate everything before any resource exists; any problem ends the run as one RunError."""
    keys = _project_keys()
    plain = {key: decode_structured(value) for key, value in keys.items() if key not in SECRET_KEYS}
    # `--path --secret` marks the whole top-level key secret; its value is read here as plain text.
    secret_structured = {key for key in plain if pulumi.runtime.is_config_secret(f"{PROJECT}:{key}")}
    try:
        settings = load_settings({**plain, **dict.fromkeys(SECRET_KEYS & keys.keys())})
        problems = structured_secret_problems(secret_structured) + secret_problems(settings, keys.keys())
        # What a mode needs must be a secret, and of the right shape, before anything is registered.
        credentials = {key: keys[key] or "" for key in required_secrets(settings) & keys.keys()}
        secret = {key: pulumi.runtime.is_config_secret(f"{PROJECT}:{key}") for key in credentials}
        problems += credential_problems(credentials, secret)
        if problems:
            raise ConfigError(problems)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    for warning in settings.warnings():
        pulumi.log.warn(warning)
    config = pulumi.Config(PROJECT)
    secrets = {key: config.require_secret(key) for key in SECRET_KEYS & keys.keys()}
    return StackInputs(
        settings=settings, secrets=secrets, secret_values=frozenset(secret_structured & SECRET_VALUE_KEYS)
    )
