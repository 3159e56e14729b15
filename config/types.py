"""Reusable constrained types for the stack config.

Each type carries its own error text, so a bad value is explained where it is
checked, and the loader only has to prefix the config key path.
"""

import ipaddress
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic import BaseModel as _BaseModel
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from config.names import DNS_LABEL_MAX, HELM_RELEASE_NAME_MAX, TENANT_NAME_MAX, TENANT_NAME_USES, tightest_use

UNLIMITED = -1
"""KAI's spelling of "no guarantee cap" for quota and "no cap" for limit."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PINNED_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")


class ConfigModel(_BaseModel):
    """Base for every config model: camelCase keys as in the stack file, no unknown keys.

    Forbidding extra keys is what turns a typo such as `overQuotaWieght` into an
    error instead of a silently ignored setting.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        strict=True,
    )


def unquoted_number(value: Any) -> str | None:
    """What to say of a number given where a string belongs, or None if `value` is not a number.

    Strict string fields refuse numbers by themselves; config/messages.py says this in their place, so the
    check costs nothing on a valid value (a tree of 100,000 queues has 200,000 names)."""
    if isinstance(value, float):
        # The number is not what was written: 24.10 and 1.360 are read as 24.1 and 1.36.
        return (
            f"must be a string: quote it in YAML exactly as you mean it (unquoted, it is read as the number {value}, "
            "without trailing zeros)"
        )
    if isinstance(value, int) and not isinstance(value, bool):
        return f'must be a string: quote it in YAML, e.g. "{value}"'
    return None


def require_str(value: Any) -> Any:
    """For a string read before a validator of its own, which would otherwise see the number."""
    said = unquoted_number(value)
    if said is not None:
        raise PydanticCustomError("quoted_string", said.replace("{", "{{").replace("}", "}}"), {})
    return value


def quoted_like(example: str) -> Any:
    """require_str for a field with a form of its own: the fix shows that form (a MicroK8s channel is 1.36/stable,
    which the number 1.36 quoted is not)."""

    def check(value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            raise PydanticCustomError(
                "quoted_string",
                'must be a string: quote it in YAML, e.g. "{example}" (unquoted, it is read as the number {value})',
                {"example": example, "value": value},
            )
        return value

    return BeforeValidator(check)


@dataclass(frozen=True)
class Refusal(StringConstraints):
    """A string's own constraints (a pattern, a length), and what the field says when they refuse a value.

    Pydantic's core checks the constraints, with no Python per value (a tree of 100,000 queues has 200,000
    names); config/messages.py finds the Refusal on the field and says its message instead of pydantic's.
    """

    message: str = ""


REFUSED_BY_CONSTRAINT = frozenset({"string_pattern_mismatch", "string_too_long"})
"""Pydantic's failures of a string's own constraints, which a Refusal rewords."""


def dns_label(max_length: int, what: str, *, limited_by: str = "", starts_with_letter: bool = False) -> Refusal:
    """A DNS label of at most `max_length` characters; `what` names its use, `limited_by` why that long.

    `starts_with_letter` asks for a DNS-1035 label, as Service names are.
    """
    pattern = _DNS_1035_LABEL if starts_with_letter else _DNS_LABEL
    start = "a letter" if starts_with_letter else "a letter or digit"
    reason = f" ({limited_by})" if limited_by else ""
    return Refusal(
        max_length=max_length,
        pattern=pattern.pattern,
        message=f"is not a valid {what}: use at most {max_length} lowercase letters, digits and '-'{reason}, "
        f"starting with {start} and ending with a letter or digit (e.g. team-nlp)",
    )


QueueName = Annotated[str, dns_label(DNS_LABEL_MAX, "queue name")]
"""Queue names become pod label values (`kai.scheduler/queue`), hence DNS-1123 labels."""

TenantName = Annotated[
    str,
    dns_label(
        TENANT_NAME_MAX,
        "tenant name",
        limited_by=f"the longest name {tightest_use(TENANT_NAME_USES)} accepts",
        starts_with_letter=True,
    ),
]
"""A tenant's name is its vCluster's release, StatefulSet and Service names and its namespace's suffix."""

KubernetesName = Annotated[str, dns_label(DNS_LABEL_MAX, "Kubernetes name")]

HelmReleaseName = Annotated[str, dns_label(HELM_RELEASE_NAME_MAX, "Helm release name", limited_by="Helm's limit")]


def _unlimited_or_non_negative(value: float) -> float:
    if value < 0 and value != UNLIMITED:
        raise PydanticCustomError("quota_amount", "must be -1 (unlimited) or a number >= 0", {})
    return value


# A strict float takes an int and refuses a bool or a string by itself, and allow_inf_nan=False a non-finite one:
# no Python runs for a valid amount but the one check pydantic cannot say.
Amount = Annotated[float, Field(allow_inf_nan=False), AfterValidator(_unlimited_or_non_negative)]
"""A quota or limit: -1 for unlimited, otherwise a non-negative amount (fractions allowed)."""

Weight = Annotated[float, Field(ge=0, allow_inf_nan=False)]

Priority = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
"""KAI stores priority as an int32."""


def _pinned(value: str) -> str:
    if not _PINNED_VERSION.match(value):
        raise PydanticCustomError(
            "pinned_version",
            "is not a pinned release: give an exact version such as v0.16.8 "
            "('latest', ranges and partial versions are refused so every `pulumi up` "
            "installs the same bits)",
            {},
        )
    return value


PinnedVersion = Annotated[str, quoted_like("1.2.3"), AfterValidator(_pinned)]


def _with_v(value: str) -> str:
    return value if value.startswith("v") else f"v{value}"


def _without_v(value: str) -> str:
    return value.removeprefix("v")


# Helm looks a chart's version up as a semver constraint (IndexFile.Get, helm.sh/helm/v3 pkg/repo/index.go
# @v3.18.6, the Helm of pulumi-kubernetes' Release), whose grammar takes an optional leading v (semVerRegex,
# Masterminds/semver/v3 version.go @v3.3.0), so 0.35.1 and v0.35.1 install the same chart. Each chart's
# versions are kept as its repository spells them (the packaged charts in ../shared/reference/charts:
# kai-scheduler-v0.16.8, gpu-operator-v26.3.3, vcluster-0.35.1, kube-prometheus-stack-88.5.3), so one
# spelling is compared, warned about and shown everywhere.
ChartVersionWithV = Annotated[PinnedVersion, AfterValidator(_with_v)]
"""A chart whose versions start with v (KAI, the GPU Operator)."""
ChartVersionWithoutV = Annotated[PinnedVersion, AfterValidator(_without_v)]
"""A chart whose versions do not (vCluster, kube-prometheus-stack)."""


def _go_duration(value: str) -> str:
    if not _GO_DURATION.match(value):
        raise PydanticCustomError(
            "go_duration",
            "is not a Go duration: use a number with a unit, e.g. 30s, 10m or 1h30m",
            {},
        )
    return value


GoDuration = Annotated[str, StringConstraints(min_length=1), AfterValidator(_go_duration)]


def plain_number(value: float) -> int | float:
    """Render 1.0 as 1, so numbers in previews, messages and manifests read as the user wrote them."""
    return int(value) if float(value).is_integer() else value


PROMETHEUS_URL_PATTERN = r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/\S*)?$"
PrometheusUrl = Annotated[str, Field(pattern=PROMETHEUS_URL_PATTERN)]
"""A Prometheus API base URL, as the cluster's own pods reach it (no trailing /api/v1)."""

NODE_PORT_RANGE = range(30000, 32768)
"""The API server's default --service-node-port-range, which MicroK8s keeps (canonical/microk8s
microk8s-resources/default-args/kube-apiserver sets none @v1.36; kubernetes/kubernetes
pkg/kubeapiserver/options/options.go DefaultServiceNodePortRange: 30000-32767)."""


def _ipv4_cidr(value: str) -> str:
    try:
        return str(ipaddress.IPv4Network(value))
    except ValueError:
        raise PydanticCustomError(
            "cidr", "is not an IPv4 address range: use e.g. 203.0.113.0/24 or 203.0.113.7/32", {}
        ) from None


IPv4Cidr = Annotated[str, BeforeValidator(require_str), AfterValidator(_ipv4_cidr)]
