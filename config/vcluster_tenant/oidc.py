"""`gpu-tenancy:vcluster.oidc`: members sign in to their team's vCluster through the organisation's identity provider.

Each tenant's virtual API server checks the provider's ID tokens itself (kube-apiserver's --oidc-* flags), so
nothing per member is stored: a member is whoever the provider says, in the groups the provider gives, and leaving
a group in the provider is leaving the team.
"""

import ipaddress
from typing import Annotated
from urllib.parse import urlsplit

from cryptography import x509
from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from config.issues import ConfigIssue
from config.types import ConfigModel, IPv4Cidr, require_str

HTTPS_PORT = 443


def _issuer_url(value: str) -> str:
    """kube-apiserver refuses an issuer that is not https, or has a user, a query or a fragment (k8s.io/apiserver
    pkg/apis/apiserver/validation/validation.go validateURL @v0.36.3), and compares it with each token's `iss`."""
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment or parts.username:
        raise PydanticCustomError(
            "issuer_url",
            "is not an https issuer URL: give it exactly as the provider's tokens carry it in `iss`, "
            "e.g. https://login.example.com/realms/ml (no query, no fragment)",
        )
    return value


IssuerUrl = Annotated[str, BeforeValidator(require_str), AfterValidator(_issuer_url)]


def _certificates(value: str) -> str:
    try:
        x509.load_pem_x509_certificates(value.encode())
    except ValueError:
        raise PydanticCustomError(
            "certificate_authority",
            "is not PEM certificates: paste the provider's CA as it starts, -----BEGIN CERTIFICATE-----",
        ) from None
    return value


PemCertificates = Annotated[str, BeforeValidator(require_str), AfterValidator(_certificates)]


class OidcConfig(ConfigModel):
    """The identity provider every tenant's API server trusts for its members."""

    issuer_url: IssuerUrl = Field(description="The provider's issuer, exactly as its tokens' `iss` claim says it.")
    client_id: str = Field(min_length=1, description="The client registered at the provider for the members' login.")
    username_claim: str = Field(
        default="email", min_length=1, description="The claim that names a member (the API server's user)."
    )
    groups_claim: str = Field(
        default="groups", min_length=1, description="The claim that lists a member's groups (tenants[].groups)."
    )
    scopes: list[str] = Field(
        default_factory=lambda: ["email", "groups"],
        description="Scopes the members' login asks for besides openid, so the token carries both claims.",
    )
    certificate_authority: PemCertificates | None = Field(
        default=None,
        description="PEM CA of the provider's HTTPS endpoint, when a public CA did not issue it.",
    )
    addresses: list[IPv4Cidr] = Field(
        default_factory=list,
        description="The provider's address ranges (its issuer and its keys' host): each control plane may reach "
        "only these of the outside, on the issuer's port. Needed unless the issuer URL is an IP address.",
    )

    @model_validator(mode="after")
    def _reachable(self) -> "OidcConfig":
        if not self.addresses and self.issuer_ip() is None:
            raise ConfigIssue(
                ("addresses",),
                [],
                "is empty, and a control plane's NetworkPolicy can only let it reach addresses: list the "
                f"addresses of {urlsplit(self.issuer_url).hostname} and of its keys' host, e.g. [203.0.113.0/24]",
            )
        return self

    def issuer_ip(self) -> str | None:
        host = urlsplit(self.issuer_url).hostname or ""
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            return None

    def issuer_port(self) -> int:
        return urlsplit(self.issuer_url).port or HTTPS_PORT

    def reachable_ranges(self) -> list[str]:
        """What each control plane may reach of the provider: the listed ranges, or the issuer's own address."""
        return list(self.addresses) or [f"{self.issuer_ip()}/32"]
