"""The team views' sign-in through the identity provider: Grafana's generic OAuth, a member a Viewer of their teams.

Grafana's `[auth.generic_oauth]` keys are OAuthInfo's (grafana/grafana pkg/login/social/social.go). A member's
groups claim picks their organisations through `org_mapping`, `<group>:<organisation name>:Viewer`, with
`org_attribute_path` the claim (pkg/login/social/connectors/org_role_mapper.go ParseOrgMappingSettings: an
organisation by id or name; Viewer as the role). `allowed_groups` refuses a login in none of the teams' groups,
which would otherwise land in the main organisation (getDefaultOrgMapping). It is a public client with PKCE
(`client_authentication = none`, `use_pkce`), so no client secret is kept. Read in the newest Grafana stored
(v12.x), not at v13.2.0, the stack's; docs/observability.md "On a real host" checks it there.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from config.observability.settings import TeamViewsSignInConfig
from config.vcluster_tenant.oidc import OidcConfig

CA_FILE = "oidc-ca.crt"
"""The provider's CA, beside grafana.ini in the team views' ConfigMap."""
HTTPS_PORT = 443


@dataclass(frozen=True)
class TeamViewsSignIn:
    """What the team views' Grafana needs to sign members in: the provider's endpoints and claims, each team's
    groups, and where the provider is (its addresses), for the Grafana pod's egress."""

    auth_url: str
    token_url: str
    client_id: str
    scopes: tuple[str, ...]
    username_claim: str
    groups_claim: str
    certificate_authority: str | None
    team_groups: Mapping[str, tuple[str, ...]]
    addresses: tuple[str, ...]

    @classmethod
    def of(
        cls, sign_in: TeamViewsSignInConfig, oidc: OidcConfig, team_groups: Mapping[str, Sequence[str]]
    ) -> "TeamViewsSignIn":
        return cls(
            auth_url=sign_in.auth_url,
            token_url=sign_in.token_url,
            client_id=sign_in.client_id or oidc.client_id,
            scopes=("openid", *oidc.scopes),
            username_claim=oidc.username_claim,
            groups_claim=oidc.groups_claim,
            certificate_authority=oidc.certificate_authority,
            team_groups={team: tuple(sorted(groups)) for team, groups in sorted(team_groups.items()) if groups},
            addresses=tuple(oidc.reachable_ranges()),
        )

    def token_port(self) -> int:
        """Grafana calls only the token endpoint; the browser goes to the authorization endpoint."""
        return urlsplit(self.token_url).port or HTTPS_PORT


def generic_oauth(sign_in: TeamViewsSignIn, ca_directory: str) -> dict[str, str]:
    """The `[auth.generic_oauth]` section; a group listed by several teams makes its members Viewers of each."""
    mapping = [f"{group}:{team}:Viewer" for team, groups in sign_in.team_groups.items() for group in groups]
    allowed = sorted({group for groups in sign_in.team_groups.values() for group in groups})
    section = {
        "enabled": "true",
        "name": "your organisation",
        "client_id": sign_in.client_id,
        "client_authentication": "none",
        "use_pkce": "true",
        "scopes": " ".join(sign_in.scopes),
        "auth_url": sign_in.auth_url,
        "token_url": sign_in.token_url,
        "login_attribute_path": sign_in.username_claim,
        "groups_attribute_path": sign_in.groups_claim,
        "org_attribute_path": sign_in.groups_claim,
        "org_mapping": " ".join(mapping),
        # Nobody outside the teams' groups signs in, not even into Grafana's main organisation (config makes sure
        # some team has groups: an empty list would allow everyone).
        "allowed_groups": " ".join(allowed),
        "allow_sign_up": "true",
        "skip_org_role_sync": "false",
    }
    if sign_in.certificate_authority:
        section["tls_client_ca"] = f"{ca_directory}/{CA_FILE}"
    return section


def egress_to_provider(sign_in: TeamViewsSignIn) -> dict[str, Any]:
    """The Grafana pod's one way out: the provider's addresses, on its token endpoint's port."""
    return {
        "to": [{"ipBlock": {"cidr": cidr}} for cidr in sign_in.addresses],
        "ports": [{"port": sign_in.token_port(), "protocol": "TCP"}],
    }
