"""A stand-in for an organisation's OpenID provider: what a tenant's API server asks of one, and ID tokens.

No identity provider runs here, and which one a customer has (Okta, Entra ID, Keycloak, Dex) is theirs, so the
stand-in is built on the contract alone: discovery at `<issuer>/.well-known/openid-configuration` naming the
issuer and its `jwks_uri` (OpenID Connect Discovery 1.0 section 4), an RSA key set there (RFC 7517), and RS256
ID tokens (RFC 7519, OpenID Connect Core 1.0 section 2). What accepts or refuses a token is the real
kube-apiserver inside the tenant's real vCluster; the stand-in only signs.
"""

import base64
import json
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from harness.lab.pki import Authority

KEY_ID = "gpu-tenancy-test"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _integer(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def signed(claims: dict[str, Any], key: rsa.RSAPrivateKey, key_id: str = KEY_ID) -> str:
    """A compact JWS over `claims`, RS256."""
    header = _b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": key_id}).encode())
    payload = _b64(json.dumps(claims).encode())
    signature = key.sign(f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{payload}.{_b64(signature)}"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class IdentityProvider:
    """Serves discovery and keys over HTTPS at `address`, with a certificate from its own CA."""

    def __init__(self, address: str) -> None:
        self.authority = Authority.create()
        self.key = new_key()
        certificate, private_key = self.authority.issue(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "identity-provider")]), server_names=(address,)
        )
        self._server = ThreadingHTTPServer((address, 0), self._handler())
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "tls.crt").write_bytes(certificate)
            (Path(folder) / "tls.key").write_bytes(private_key)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(Path(folder) / "tls.crt", Path(folder) / "tls.key")
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.issuer = f"https://{address}:{self._server.server_address[1]}"
        self.requests: list[str] = []
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def ca_pem(self) -> str:
        return self.authority.certificate_pem.decode()

    def documents(self) -> dict[str, dict[str, Any]]:
        numbers = self.key.public_key().public_numbers()
        jwk = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": KEY_ID, "n": _integer(numbers.n)}
        return {
            "/.well-known/openid-configuration": {
                "issuer": self.issuer,
                "jwks_uri": f"{self.issuer}/keys",
                "authorization_endpoint": f"{self.issuer}/auth",
                "token_endpoint": f"{self.issuer}/token",
                "response_types_supported": ["code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
            },
            "/keys": {"keys": [{**jwk, "e": _integer(numbers.e)}]},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider.requests.append(self.path)
                document = provider.documents().get(self.path)
                body = json.dumps(document).encode()
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler

    def token(self, audience: str, *, key: rsa.RSAPrivateKey | None = None, lifetime: int = 600, **claims: Any) -> str:
        """An ID token for `audience` (the client id), with `claims` over the registered ones."""
        now = int(time.time())
        registered = {"iss": self.issuer, "aud": audience, "iat": now - 5, "exp": now + lifetime}
        return signed({**registered, **claims}, key or self.key)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
