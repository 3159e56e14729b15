"""KAI's mutating pod webhook in the lab, served by its stand-in (tests/kai_admission.py): KAI cannot be built here.

The module proxy serves no github.com/NVIDIA/KAI-scheduler, so the lab's API server calls this
server instead, over HTTPS at the lab's bridge address, through a Service and EndpointSlice
as it would reach KAI's binder: mutating admission policies run first, then this webhook, then
the validating policies (kubernetes pkg/kubeapiserver/options/plugins.go AllOrderedPlugins
@v1.36.3). It mutates pods only in namespaces labelled `lab.gpu-tenancy.dev/kai: serving`.

    python -m tests.kai_webhook --state DIR   # started by tests/lab.py, stopped by `harness.lab down`
"""

import argparse
import base64
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.kai_admission import kai_mutate

KAI_SERVING_LABEL = "lab.gpu-tenancy.dev/kai"
NAMESPACE = "lab-kai-webhook"
NAME = "lab-kai-webhook"


def review_response(review: dict[str, Any]) -> dict[str, Any]:
    request = review["request"]
    pod = request["object"]
    mutated = kai_mutate(pod)
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    patch = [
        {"op": "add" if key not in pod else "replace", "path": f"/{key}", "value": mutated[key]}
        for key in ("metadata", "spec")
        if mutated.get(key) != pod.get(key)
    ]
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(review_response(review)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        print(format % args, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--certificate", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.address, args.port), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.certificate, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
