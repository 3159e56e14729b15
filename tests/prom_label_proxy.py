"""A stand-in for prom-label-proxy, modelled on prometheus-community/prom-label-proxy @v0.14.0.

No registry here ships it (no Debian, PyPI or npm package; its image is Go on busybox), so the
tests run this model of it between the team views and a real Prometheus. What it copies, with the
upstream source it comes from:

- the tenant's value comes from every line of one header (`r.Header[name]`), or a 400
  "Missing HTTP header" when there is none (injectproxy/routes.go: the header extractor);
- one value is an `=` matcher, several an `=~` of their quoted union (routes.go newLabelMatcher);
- `/api/v1/query` and `/api/v1/query_range` enforce the query in the URL and in a POST body
  alike (routes.go query, enforceQueryValues); every vector and matrix selector is rewritten,
  in calls, aggregations, subqueries and both sides of binary operators (enforce.go EnforceNode);
- an `=` enforced matcher drops the query's own matchers on that label; with `-error-on-replace`
  a matcher that cannot hold together with the enforced one is a 400 "conflicting label
  matcher" (enforce.go EnforceMatchers);
- `/api/v1/series`, `/api/v1/labels` and `/api/v1/label/<name>/values` append the matcher to
  every `match[]`, or add one when there is none; the last two only with `-enable-label-apis`
  (routes.go matcher, injectMatcher, NewRoutes);
- any other path is a 404 (NewRoutes registers no catch-all).

What it does not model: Alertmanager routes, `-regex-match`, `-query-param`, rules and alerts
filtering (the team views use none of them).

The PromQL is parsed by promql-parser (Rust's promql-parser, a port of Prometheus' parser); since
its tree cannot be rebuilt from Python, each selector's canonical text is replaced in the
canonical text of the whole query, and the result is parsed again.
"""

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

import promql_parser as promql

from tests.local_server import serve

QUERY_PATHS = ("/api/v1/query", "/api/v1/query_range", "/api/v1/query_exemplars")
MATCHER_PATHS = ("/api/v1/series", "/federate")
LABEL_PATHS = ("/api/v1/labels",)
LABEL_VALUES_PREFIX = "/api/v1/label/"


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ProxyFlags:
    """The flags of prom-label-proxy's main.go that the team views set."""

    label: str
    header_name: str
    upstream: str
    error_on_replace: bool = False
    enable_label_apis: bool = False

    @classmethod
    def from_args(cls, args: Sequence[str], *, upstream: str) -> "ProxyFlags":
        """The flags a rendered container's args give, with the upstream replaced by the test's Prometheus."""
        values: dict[str, str] = {}
        for arg in args:
            name, _, value = arg.lstrip("-").partition("=")
            values[name] = value if "=" in arg else "true"
        return cls(
            label=values["label"],
            header_name=values["header-name"],
            upstream=upstream,
            error_on_replace=values.get("error-on-replace") == "true",
            enable_label_apis=values.get("enable-label-apis") == "true",
        )


@dataclass(frozen=True)
class _Matcher:
    name: str
    op: str
    value: str

    def text(self) -> str:
        return f"{self.name}{self.op}{json.dumps(self.value)}"

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        hit = re.fullmatch(self.value, value) is not None
        return hit if self.op == "=~" else not hit


_OPS = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}


def _matchers(selector: promql.VectorSelector) -> list[_Matcher]:
    return [_Matcher(m.name, _OPS[str(m.op)], m.value) for m in selector.matchers.matchers]


def _compatible(enforced: _Matcher, target: _Matcher) -> bool:
    """enforce.go EnforceMatchers' -error-on-replace table, for an `=` enforced matcher (one tenant value)."""
    if target.op == "=":
        return enforced.value == target.value
    if target.op == "!=":
        return enforced.value != target.value
    return _Matcher(target.name, "=~", target.value).matches(enforced.value)


def _enforced_matchers(own: list[_Matcher], enforced: _Matcher, error_on_replace: bool) -> list[_Matcher]:
    kept = []
    for target in own:
        if target.name != enforced.name:
            kept.append(target)
            continue
        if error_on_replace and enforced.op == "=" and not _compatible(enforced, target):
            raise Refused(
                400,
                f"conflicting label matcher: label matcher {json.dumps(target.text())} "
                f"conflicts with injected matcher {json.dumps(enforced.text())}",
            )
        if enforced.op == "=" or target == enforced:
            continue
        kept.append(target)
    return [*kept, enforced]


def _selector_text(name: str | None, matchers: list[_Matcher]) -> str:
    inner = ",".join(m.text() for m in matchers if not (name and m.name == "__name__"))
    return f"{name or ''}{{{inner}}}"


def enforce_query(query: str, enforced: _Matcher, *, error_on_replace: bool) -> str:
    """The query with the enforced matcher in every selector, as prom-label-proxy's Enforce returns it."""
    try:
        tree = promql.parse(query)
    except ValueError as error:
        raise Refused(400, f"failed to parse query string: {error}") from error
    text = str(tree)
    replacements: dict[str, str] = {}

    def visit(node: object) -> None:
        if isinstance(node, promql.VectorSelector):
            own = _matchers(node)
            replacements[str(node)] = _selector_text(node.name, _enforced_matchers(own, enforced, error_on_replace))

    promql.walk(tree, visit)
    for original in sorted(replacements, key=len, reverse=True):
        # A selector's text, not the same text inside a longer metric name.
        pattern = rf"(?<![A-Za-z0-9_:]){re.escape(original)}"
        text = re.sub(pattern, replacements[original].replace("\\", "\\\\"), text)
    promql.parse(text)
    return text


def enforce_match_params(params: list[str], enforced: _Matcher) -> list[str]:
    """routes.go injectMatcher: append the matcher to every match[], or add one when there is none."""
    if not params:
        return [f"{{{enforced.text()}}}"]
    enforced_params = []
    for param in params:
        try:
            selector = promql.parse(param)
        except ValueError as error:
            raise Refused(400, str(error)) from error
        if not isinstance(selector, promql.VectorSelector):
            raise Refused(400, f"not a series selector: {param}")
        enforced_params.append(_selector_text(selector.name, [*_matchers(selector), enforced]))
    return enforced_params


class _Handler(BaseHTTPRequestHandler):
    flags: ProxyFlags

    def log_message(self, format: str, *args: object) -> None:
        del format, args

    def do_GET(self) -> None:
        self._serve(b"")

    def do_POST(self) -> None:
        self._serve(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _serve(self, body: bytes) -> None:
        try:
            status, payload = self._forward(body)
        except Refused as refused:
            status = refused.status
            payload = json.dumps({"status": "error", "errorType": "prom-label-proxy", "error": str(refused)}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _enforced(self) -> _Matcher:
        values = [v for v in self.headers.get_all(self.flags.header_name) or [] if v]
        if not values:
            raise Refused(400, f"Missing HTTP header {json.dumps(self.flags.header_name)}.")
        if len(values) == 1:
            return _Matcher(self.flags.label, "=", values[0])
        return _Matcher(self.flags.label, "=~", "|".join(re.escape(v) for v in values))

    def _route(self, path: str) -> str | None:
        if path in QUERY_PATHS:
            return "query"
        if path in MATCHER_PATHS:
            return "matcher"
        if self.flags.enable_label_apis and (path in LABEL_PATHS or path.startswith(LABEL_VALUES_PREFIX)):
            return "matcher"
        if path == "/healthz":
            return "health"
        return None

    def _forward(self, body: bytes) -> tuple[int, bytes]:
        url = urllib.parse.urlsplit(self.path)
        route = self._route(url.path)
        if route is None:
            return 404, b"404 page not found\n"
        if route == "health":
            return 200, b'{"ok":true}'
        enforced = self._enforced()
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True)
        for values in (query, form):
            if route == "query" and values.get("query", [""])[0]:
                values["query"] = [
                    enforce_query(values["query"][0], enforced, error_on_replace=self.flags.error_on_replace)
                ]
            elif route == "matcher" and (values is query or form):
                values["match[]"] = enforce_match_params(values.get("match[]", []), enforced)
        if route == "query" and not query.get("query") and not form.get("query"):
            return 200, b""
        target = f"{self.flags.upstream}{url.path}?{urllib.parse.urlencode(query, doseq=True)}"
        data = urllib.parse.urlencode(form, doseq=True).encode() if self.command == "POST" else None
        request = urllib.request.Request(target, data=data, method=self.command)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()


@contextmanager
def prom_label_proxy(flags: ProxyFlags) -> Iterator[str]:
    """The stand-in listening on 127.0.0.1, at the URL yielded."""
    with serve(type("Handler", (_Handler,), {"flags": flags})) as url:
        yield url
