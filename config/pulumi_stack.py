"""The running program's view of its config: validated settings plus secret credentials.

This is the only module that reads `pulumi.Config`; components receive what it returns.
"""

from dataclasses import dataclass

import pulumi
import pulumi.runtime

from config.issues import PROJECT, ConfigError, key_path
from config.sources import SECRET_KEYS, decode_structured, load_settings, split_project_keys
from config.stack import StackConfig


@dataclass(frozen=True)
class StackInputs:
    settings: StackConfig
    kubeconfig: pulumi.Output[str]
    """The host cluster's kubeconfig, secret from the moment it is read."""


def _project_settings() -> dict[str, object]:
    # Pulumi has no public "list my config keys" call; the two places it keeps
    # them are the explicit map (set by tests and the exec host) and PULUMI_CONFIG.
    keys = set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.get_config_env())
    raw = {key: pulumi.runtime.get_config(key) for key in keys}
    settings = split_project_keys(raw)
    return {key: decode_structured(value) for key, value in settings.items() if key not in SECRET_KEYS}


def _kubeconfig() -> pulumi.Output[str]:
    value = pulumi.Config(PROJECT).get_secret("kubeconfig")
    if value is None:
        raise ConfigError(
            [
                f"{key_path(('kubeconfig',))} is required but not set: run "
                f"`pulumi config set --secret {PROJECT}:kubeconfig < ~/.kube/config`"
            ]
        )
    return value


def load_stack_inputs() -> StackInputs:
    """Validate everything before any resource exists; any problem ends the run as one RunError."""
    try:
        settings = load_settings(_project_settings())
        kubeconfig = _kubeconfig()
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None
    for warning in settings.warnings():
        pulumi.log.warn(warning)
    return StackInputs(settings=settings, kubeconfig=kubeconfig)
