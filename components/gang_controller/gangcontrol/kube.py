"""The few Kubernetes API calls the program makes, with the standard library alone.

In the cluster it speaks HTTPS to the API server with its ServiceAccount's token and
CA (re-reading the token, which the kubelet rotates); GANGS_API_URL points it
elsewhere (the tests' stand-in API server on 127.0.0.1).
"""

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
JSON = "application/json"
METADATA_LIST = f"{JSON};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,{JSON}"
METADATA = f"{JSON};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,{JSON}"
"""Objects' metadata alone, as client-go's metadata informers ask for it (k8s.io/client-go metadata/metadata.go
@v0.36.3): a pod's spec, however large, never reaches this program; a server without it sends whole objects."""


class ApiError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass(frozen=True)
class Api:
    base_url: str
    token_file: str | None = None
    ca_file: str | None = None
    timeout_seconds: float = 30.0

    @classmethod
    def from_environment(cls) -> "Api":
        url = os.environ.get("GANGS_API_URL")
        if url:
            return cls(url.rstrip("/"), os.environ.get("GANGS_TOKEN_FILE"), os.environ.get("GANGS_CA_FILE"))
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        host = f"[{host}]" if ":" in host else host
        return cls(f"https://{host}:{port}", f"{SERVICE_ACCOUNT}/token", f"{SERVICE_ACCOUNT}/ca.crt")

    def _open(
        self, method: str, path: str, query: Mapping[str, str], body: Any, timeout: float, *, accept: str = JSON
    ) -> Any:
        url = f"{self.base_url}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", accept)
        if data is not None:
            # This program's only PATCH is a JSON merge patch (RFC 7386), which a custom resource accepts.
            kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
            request.add_header("Content-Type", kind)
        if self.token_file:
            with open(self.token_file) as token:
                request.add_header("Authorization", f"Bearer {token.read().strip()}")
        context = ssl.create_default_context(cafile=self.ca_file) if url.startswith("https") else None
        try:
            return urllib.request.urlopen(request, timeout=timeout, context=context)
        except urllib.error.HTTPError as error:
            if error.code == 410:
                raise Expired(path) from None
            raise ApiError(error.code, error.reason) from None

    def request(self, method: str, path: str, body: Any = None, *, accept: str = JSON, **query: str) -> dict[str, Any]:
        with self._open(method, path, query, body, self.timeout_seconds, accept=accept) as response:
            text = response.read()
        result: dict[str, Any] = json.loads(text) if text else {}
        return result

    def watch(
        self, path: str, resource_version: str, timeout_seconds: int, *, accept: str = JSON, **query: str
    ) -> Iterator[dict[str, Any]]:
        """Events after `resource_version` until the server ends the watch; Expired when it is too old."""
        query = {
            **query,
            "watch": "1",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
            "allowWatchBookmarks": "true",
        }
        with self._open("GET", path, query, None, timeout_seconds + self.timeout_seconds, accept=accept) as response:
            for line in response:
                if not line.strip():
                    continue
                event: dict[str, Any] = json.loads(line)
                if event.get("type") == "ERROR":
                    if (event.get("object") or {}).get("code") == 410:
                        raise Expired(path)
                    raise ApiError(int((event.get("object") or {}).get("code", 500)), "watch error")
                yield event
