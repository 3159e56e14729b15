"""The lab's certificates and keys: one CA for the API server, its clients and the service-account issuer.

The lab needs what a kubeadm or MicroK8s control plane needs (MicroK8s 1.36 keeps the same
set under $SNAP_DATA/certs: canonical/microk8s microk8s-resources/default-args/kube-apiserver
@v1.36): a serving certificate whose names cover every way the API server is reached
(its address, the `kubernetes` Service's ClusterIP 10.152.183.1 and DNS names), client
certificates whose subject is the identity RBAC sees (CN the user, O the groups), and a
key that signs and verifies service-account tokens. ECDSA P-256 keeps generation fast.
"""

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
CLUSTER_DOMAIN_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "localhost",
)


@dataclass(frozen=True)
class Identity:
    """A client certificate's subject: the user and groups the API server's RBAC sees."""

    user: str
    groups: tuple[str, ...] = ()


ADMIN = Identity("lab-admin", ("system:masters",))
CONTROLLER_MANAGER = Identity("system:kube-controller-manager")
SCHEDULER = Identity("system:kube-scheduler")
KWOK = Identity("system:kwok-controller", ("system:masters",))
KUBELET = Identity("system:lab-kubelet", ("system:masters",))
"""The pods-as-processes runner writes pod status for every node, as no single node's kubelet could."""


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    """SEC 1 (`EC PRIVATE KEY`): what the API server reads as a service-account key (client-go util/keyutil)."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )


def subject(common_name: str, organisations: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organisations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class Authority:
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @classmethod
    def load(cls, pki: "Pki") -> "Authority":
        """The lab's own authority, from the files create_pki wrote."""
        key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return cls(key, x509.load_pem_x509_certificate(pki.ca.read_bytes()))

    @classmethod
    def create(cls) -> "Authority":
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        name = subject("gpu-tenancy-lab-ca")
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate)

    def issue(
        self, subject: x509.Name, *, server_names: tuple[str, ...] = (), client: bool = False
    ) -> tuple[bytes, bytes]:
        """A certificate and its key (PEM) for a server (its DNS names and IPs) or a client."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server_names:
            entries: list[x509.GeneralName] = []
            for name in server_names:
                try:
                    entries.append(x509.IPAddress(ipaddress.ip_address(name)))
                except ValueError:
                    entries.append(x509.DNSName(name))
            builder = builder.add_extension(x509.SubjectAlternativeName(entries), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        return certificate.public_bytes(serialization.Encoding.PEM), _pem_key(key)

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class Pki:
    """Paths of the files the control plane's flags name, under one directory."""

    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def server_certificate(self) -> Path:
        return self.folder / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.folder / "server.key"

    @property
    def service_account_key(self) -> Path:
        """Signs tokens (API server) and verifies them (API server, controller manager), as MicroK8s' one
        serviceaccount.key does."""
        return self.folder / "serviceaccount.key"

    def client(self, identity: Identity) -> tuple[Path, Path]:
        stem = identity.user.replace(":", "-")
        return self.folder / f"{stem}.crt", self.folder / f"{stem}.key"


CLIENTS = (ADMIN, CONTROLLER_MANAGER, SCHEDULER, KWOK, KUBELET)


def create_pki(folder: Path, server_names: tuple[str, ...]) -> Pki:
    """Every file the lab's control plane reads, written once; the key files are readable by root only."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(folder)
    authority = Authority.create()
    _write(pki.ca, authority.certificate_pem)
    _write(pki.ca_key, _pem_key(authority.key), secret=True)
    certificate, key = authority.issue(subject("kube-apiserver"), server_names=(*server_names, *CLUSTER_DOMAIN_NAMES))
    _write(pki.server_certificate, certificate)
    _write(pki.server_key, key, secret=True)
    _write(pki.service_account_key, _pem_key(_key()), secret=True)
    for identity in CLIENTS:
        certificate, key = authority.issue(subject(identity.user, identity.groups), client=True)
        certificate_path, key_path = pki.client(identity)
        _write(certificate_path, certificate)
        _write(key_path, key, secret=True)
    return pki


def _write(path: Path, content: bytes, *, secret: bool = False) -> None:
    path.write_bytes(content)
    path.chmod(0o600 if secret else 0o644)
