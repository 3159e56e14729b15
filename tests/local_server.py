"""Serving a test double's HTTP handler on 127.0.0.1 for the length of a block."""

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler], *, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """The handler's URL while the block runs, on a free port; `tls` (certificate, key) serves HTTPS at localhost."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    scheme, host = "http", "127.0.0.1"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme, host = "https", "localhost"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{scheme}://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
