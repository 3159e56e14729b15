"""A stand-in Prometheus on 127.0.0.1: the query_range API, answering the cost report's queries from functions.

Each series is a function of time (None while the series does not exist); the double
samples it at every step of the requested range, as Prometheus evaluates a range
query, and refuses more than 11,000 points per series as Prometheus does
(prometheus/prometheus web/api/v1/api.go).
"""

import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.local_server import serve

Curve = Callable[[float], float | None]


@dataclass
class Metric:
    """Series of one metric, keyed by the value of `label`."""

    label: str
    series: Mapping[str, Curve]


@dataclass
class Served:
    metrics: dict[str, Metric]
    queries: list[dict[str, str]] = field(default_factory=list)


def _answer(served: Served, query: str, start: float, end: float, step: float) -> list[dict[str, object]]:
    names = [name for name in served.metrics if name in query]
    if len(names) != 1:
        raise ValueError(f"the double does not know the query {query!r}")
    metric = served.metrics[names[0]]
    wanted = re.search(r'=~"([^"]*)"', query)
    pattern = re.compile(wanted.group(1)) if wanted else re.compile(".*")
    result: list[dict[str, object]] = []
    for key, curve in metric.series.items():
        if not pattern.fullmatch(key):
            continue
        values = []
        t = start
        while t <= end:
            value = curve(t)
            if value is not None:
                values.append([t, str(value)])
            t += step
        if values:
            result.append({"metric": {metric.label: key}, "values": values})
    return result


def _handler(served: Served) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path != "/api/v1/query_range":
                self._reply(404, {"status": "error", "error": "not found"})
                return
            form = {k: v[0] for k, v in parse_qs(url.query).items()}
            served.queries.append(form)
            start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
            if (end - start) / step > 11000:
                error = (
                    "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution"
                )
                self._reply(400, {"status": "error", "errorType": "bad_data", "error": error})
                return
            data = {"resultType": "matrix", "result": _answer(served, form["query"], start, end, step)}
            self._reply(200, {"status": "success", "data": data})

        def _reply(self, code: int, body: object) -> None:
            payload = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


@contextmanager
def prometheus(served: Served) -> Iterator[str]:
    """A running stand-in; yields its base URL."""
    with serve(_handler(served)) as url:
        yield url
