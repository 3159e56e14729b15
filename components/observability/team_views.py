"""TeamViews: each team's own Grafana login, which shows its GPU use and nothing of another team's.

Open-source Grafana lets a Viewer send any query to any data source of its organisation, and
data-source permissions are an Enterprise feature; so each team gets an organisation of its own
whose only data source goes through prom-label-proxy, which adds the team's namespace to every
selector. One proxy and one Grafana serve every team (docs/security.md, "Team views").
"""

import functools
import hashlib
import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random
import pulumi_tls as tls

from components.observability.member_passwords import member_password
from components.observability.team_objects import (
    GRAFANA_PORT,
    NAME,
    PROXY,
    PROXY_PORT,
    desired_state,
    grafana_ini,
    grafana_pod_spec,
    grafana_policy,
    member_login,
    program_files,
    proxy_pod_spec,
    proxy_policy,
    secret_state,
)
from components.observability.team_rules import prometheus_rule_spec
from components.observability.team_sign_in import CA_FILE, TeamViewsSignIn
from components.shared.labels import MANAGED_BY
from components.shared.ownership import owned

PROMETHEUS_RULE_API = ("monitoring.coreos.com/v1", "PrometheusRule")
CERTIFICATE_DAYS = 365
RENEW_DAYS = 30
"""A certificate within this many days of expiry is replaced by the next `up`."""


@dataclass(frozen=True)
class TeamViewsArgs:
    namespace: pulumi.Input[str]
    """The observability namespace (it exists)."""
    prometheus_url: str
    """The stack's Prometheus, as pods reach it."""
    teams: Mapping[str, str]
    """Team -> its host namespace, the value prom-label-proxy holds it to."""
    limits: Mapping[str, float]
    """Team -> its queue's GPU limit (-1: none)."""
    price_per_gpu_hour: float | None
    host_address: pulumi.Input[str]
    """What teams connect to; the certificate names it."""
    node_port: int
    """Where on the host teams connect (observability.teamViewsNodePort; no tenant takes it)."""
    grafana_version: str
    proxy_version: str
    rule_labels: Mapping[str, str]
    """Labels the stack's Prometheus selects rules by (those it selects ServiceMonitors by)."""
    members: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Team -> its members: each gets a Viewer login of their own, `<team>.<member>`, in the team's organisation."""
    member_tokens: Mapping[str, pulumi.Input[Mapping[str, str]]] = field(default_factory=dict)
    """Team -> member -> their vCluster token (secret): each member's password is derived from it
    (member_passwords.py), so a member registers nothing here."""
    sign_in: TeamViewsSignIn | None = None
    """Members sign in through the identity provider too (team_sign_in.py), a Viewer of their groups' teams."""
    rules_after: Sequence[pulumi.Resource] = ()
    """What serves the PrometheusRule kind (the stack's release, in install mode). A dependency of this component
    would not hold its children back: each child waits only for its own dependencies, and pulumi-kubernetes gives
    up on a kind not served after five retries, half a minute (provider/pkg/await/await.go Creation), while the
    stack's release can take minutes; the lab's apply found it."""


def subject_alt_names(host_address: str) -> tuple[list[str], list[str]]:
    """The certificate's (DNS names, IP addresses): `host.address` is an address or a name, and pulumi-tls refuses a
    name among the IP addresses ("Invalid IP address": net.ParseIP of each, hashicorp/terraform-provider-tls
    internal/provider/resource_self_signed_cert.go Create). The reconciler beside Grafana checks it at localhost."""
    try:
        return ["localhost"], [str(ipaddress.ip_address(host_address))]
    except ValueError:
        return ["localhost", host_address], []


def _password_of(member: str, login: str, tokens: Mapping[str, str]) -> str:
    return member_password(tokens[member], login)


class TeamViews(pulumi.ComponentResource):
    url: pulumi.Output[str]
    """Where team members log in (https, the Grafana's node port on the host's address)."""
    credentials: pulumi.Output[dict[str, dict[str, str]]]
    """Team -> its url, login and password (secret)."""
    member_credentials: pulumi.Output[dict[str, dict[str, dict[str, str]]]]
    """Team -> member -> their url, login and password (secret); only teams with members."""
    ca_certificate: pulumi.Output[str]
    """The self-signed certificate the team Grafana serves, for browsers and curl to trust."""

    def __init__(self, name: str, args: TeamViewsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-tenancy:index:TeamViews", name, None, owned(opts))
        child = pulumi.ResourceOptions(parent=self)
        namespace = args.namespace
        certificate = self._certificate(name, args, child)
        admin = random.RandomPassword(f"{name}-admin-password", length=32, special=False, opts=child)
        passwords: dict[str, pulumi.Output[str]] = {
            team: random.RandomPassword(f"{name}-{team}-password", length=24, special=False, opts=child).result
            for team in sorted(args.teams)
        }
        for team in sorted(args.teams):
            members = sorted(args.members.get(team, ()))
            if not members:
                continue
            tokens = pulumi.Output.from_input(args.member_tokens[team])
            for member in members:
                login = member_login(team, member)
                passwords[login] = tokens.apply(functools.partial(_password_of, member, login))
        proxy_url = f"http://{PROXY}:{PROXY_PORT}"
        state = json.dumps(
            desired_state(args.teams, args.limits, args.price_per_gpu_hour, proxy_url, args.members),
            indent=1,
            sort_keys=True,
        )
        sign_in = args.sign_in
        ini: pulumi.Input[str] = grafana_ini()
        config_data: dict[str, pulumi.Input[str]] = {"state.json": state, **program_files()}
        if sign_in is not None:
            root_url = pulumi.Output.concat("https://", args.host_address, f":{args.node_port}/")
            ini = root_url.apply(functools.partial(grafana_ini, sign_in))
            if sign_in.certificate_authority:
                config_data[CA_FILE] = sign_in.certificate_authority
        config_data["grafana.ini"] = ini
        meta = {"name": NAME, "namespace": namespace, "labels": MANAGED_BY}
        config_map = k8s.core.v1.ConfigMap(f"{name}-config", metadata=meta, data=config_data, opts=child)
        secrets = pulumi.Output.all(admin.result, *passwords.values()).apply(
            lambda values: secret_state(values[0], dict(zip(passwords, values[1:], strict=True)), args.teams)
        )
        # The passwords are Pulumi secrets already, so the JSON holding them is one too.
        secret = k8s.core.v1.Secret(
            f"{name}-secret",
            metadata=meta,
            string_data={
                "secrets.json": secrets,
                "admin-password": admin.result,
                "tls.crt": certificate.cert_pem,
                "tls.key": certificate.private_key_pem,
            },
            opts=child,
        )
        self._proxy(name, args, child)
        fingerprint = pulumi.Output.all(config_map.data, certificate.cert_pem).apply(
            lambda parts: hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
        )
        self._grafana(name, args, [config_map, secret], fingerprint, child)
        self.url = pulumi.Output.concat("https://", args.host_address, f":{args.node_port}")
        every = pulumi.Output.all(self.url, *passwords.values()).apply(
            lambda values: {
                login: {"url": values[0], "login": login, "password": password}
                for login, password in zip(passwords, values[1:], strict=True)
            }
        )
        self.credentials = pulumi.Output.secret(every.apply(lambda found: {team: found[team] for team in args.teams}))
        self.member_credentials = pulumi.Output.secret(
            every.apply(
                lambda found: {
                    team: {member: found[member_login(team, member)] for member in sorted(members)}
                    for team, members in args.members.items()
                    if members and team in args.teams
                }
            )
        )
        self.ca_certificate = certificate.cert_pem
        api_version, kind = PROMETHEUS_RULE_API
        k8s.apiextensions.CustomResource(
            f"{name}-rules",
            api_version=api_version,
            kind=kind,
            metadata={"name": NAME, "namespace": namespace, "labels": {**MANAGED_BY, **args.rule_labels}},
            spec=prometheus_rule_spec(),
            opts=child.merge(pulumi.ResourceOptions(depends_on=list(args.rules_after))),
        )
        self.register_outputs(
            {
                "url": self.url,
                "credentials": self.credentials,
                "member_credentials": self.member_credentials,
                "ca_certificate": self.ca_certificate,
            }
        )

    @staticmethod
    def _certificate(name: str, args: TeamViewsArgs, opts: pulumi.ResourceOptions) -> tls.SelfSignedCert:
        key = tls.PrivateKey(f"{name}-tls-key", algorithm="ECDSA", ecdsa_curve="P256", opts=opts)
        sans = pulumi.Output.from_input(args.host_address).apply(subject_alt_names)
        return tls.SelfSignedCert(
            f"{name}-tls",
            private_key_pem=key.private_key_pem,
            subject={"common_name": "gpu-tenancy team views"},
            ip_addresses=sans.apply(lambda names: names[1]),
            dns_names=sans.apply(lambda names: names[0]),
            validity_period_hours=CERTIFICATE_DAYS * 24,
            early_renewal_hours=RENEW_DAYS * 24,
            allowed_uses=["digital_signature", "key_encipherment", "server_auth"],
            opts=opts,
        )

    @staticmethod
    def _proxy(name: str, args: TeamViewsArgs, opts: pulumi.ResourceOptions) -> None:
        meta = {"name": PROXY, "namespace": args.namespace, "labels": MANAGED_BY}
        k8s.apps.v1.Deployment(
            f"{name}-proxy",
            metadata=meta,
            spec={
                "replicas": 1,
                "selector": {"matchLabels": {"app": PROXY}},
                "template": {
                    "metadata": {"labels": {**MANAGED_BY, "app": PROXY}},
                    "spec": proxy_pod_spec(args.prometheus_url, args.proxy_version),
                },
            },
            opts=opts,
        )
        k8s.core.v1.Service(
            f"{name}-proxy-service",
            metadata=meta,
            spec={"selector": {"app": PROXY}, "ports": [{"name": "http", "port": PROXY_PORT, "targetPort": "http"}]},
            opts=opts,
        )
        k8s.networking.v1.NetworkPolicy(f"{name}-proxy-policy", metadata=meta, spec=proxy_policy(), opts=opts)

    @staticmethod
    def _grafana(
        name: str,
        args: TeamViewsArgs,
        mounted: list[pulumi.Resource],
        fingerprint: pulumi.Output[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        """`fingerprint`: of the team list, program and certificate. Grafana keeps nothing (its database is an
        emptyDir), so a new one rolls the pod, which rebuilds every organisation; a removed team's login goes with
        the old pod."""
        meta = {"name": NAME, "namespace": args.namespace, "labels": MANAGED_BY}
        k8s.apps.v1.Deployment(
            f"{name}-grafana",
            metadata=meta,
            spec={
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {"app": NAME}},
                "template": {
                    "metadata": {
                        "labels": {**MANAGED_BY, "app": NAME},
                        "annotations": {"gpu-tenancy/state": fingerprint},
                    },
                    "spec": grafana_pod_spec(
                        args.grafana_version,
                        NAME,
                        NAME,
                        provider_ca=bool(args.sign_in and args.sign_in.certificate_authority),
                    ),
                },
            },
            opts=opts.merge(pulumi.ResourceOptions(depends_on=mounted)),
        )
        k8s.networking.v1.NetworkPolicy(
            f"{name}-grafana-policy", metadata=meta, spec=grafana_policy(args.sign_in), opts=opts
        )
        # The port is set, never left to the API server: a random one could be a port a team is promised later.
        k8s.core.v1.Service(
            f"{name}-grafana-service",
            metadata=meta,
            spec={
                "type": "NodePort",
                "selector": {"app": NAME},
                "ports": [{"name": "https", "port": GRAFANA_PORT, "targetPort": "https", "nodePort": args.node_port}],
            },
            opts=opts,
        )
