"""The pinned charts served on loopback as an HTTPS chart repository, for the real engine's Helm releases.

The Kubernetes provider's Helm fetches a release's chart while it previews and applies it, and here it can
reach nothing outside. So the lab serves the charts the stack pins (../shared/reference/charts, or what
`pull-charts` fetched) as a chart repository: an `index.yaml` made by the real Helm (`helm repo index`), over
HTTPS with a certificate of the lab's own authority, on a port the lab copy of the stack keeps (its URL is
in the copy's config, and a new URL would be a change of every release). The provider trusts the lab's
authority through SSL_CERT_FILE, which Go reads for the system roots on Linux (crypto/x509 root_unix.go) and
Helm's getter uses when a repository names no CA (helm/helm pkg/getter/httpgetter.go @v3.17.0).
"""

import functools
import http.server
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.lab.pki import Authority, Pki, subject
from harness.tools import chart_path, helm_path


def free_loopback_port() -> int:
    """A port free now; the copy keeps it, so it is chosen once per copy."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def url(port: int) -> str:
    return f"https://127.0.0.1:{port}"


def prepare(folder: Path, charts: Iterable[str], port: int, pki: Pki) -> Path:
    """`folder/charts` as a chart repository of the pinned `charts` (file names), indexed for `url(port)`, and
    beside it (never served) a server certificate for 127.0.0.1 from the lab's authority. Missing charts fail
    here, saying how to get them."""
    served = folder / "charts"
    served.mkdir(parents=True, exist_ok=True)
    for file_name in charts:
        source = chart_path(file_name)
        if source is None:
            raise FileNotFoundError(
                f"chart {file_name} is in neither ../shared/reference/charts nor .cache/charts: "
                "venv/bin/python -m harness.tools pull-charts"
            )
        if not (served / file_name).is_file():
            shutil.copyfile(source, served / file_name)
    helm = helm_path()
    if helm is None:
        raise FileNotFoundError("no Helm: venv/bin/python -m harness.tools install-helm")
    subprocess.run([str(helm), "repo", "index", str(served), "--url", url(port)], check=True, capture_output=True)
    certificate, key = Authority.load(pki).issue(subject("gpu-tenancy-lab-charts"), server_names=("127.0.0.1",))
    (folder / "server.crt").write_bytes(certificate)
    (folder / "server.key").write_bytes(key)
    (folder / "server.key").chmod(0o600)
    return folder


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """The provider's fetches are not news."""


@contextmanager
def serving(folder: Path, port: int) -> Iterator[str]:
    """The repository `prepare` made, served until the block ends; its URL. Only the charts and the index."""
    handler = functools.partial(_Quiet, directory=str(folder / "charts"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "server.crt", folder / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="chart-repository", daemon=True)
    thread.start()
    try:
        yield url(port)
    finally:
        server.shutdown()
        server.server_close()
