"""Reading range series from Prometheus' HTTP API, with the failures a user can act on as one line each."""

import base64
import itertools
import json
import math
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.issues import ConfigError

MAX_POINTS = 11_000
"""Prometheus refuses a range query with more intervals per series than this: prometheus/prometheus
web/api/v1/api.go (queryRange, "exceeded maximum resolution of 11,000 points per timeseries")."""
MIN_STEP_SECONDS = 60
"""Finer than a minute adds nothing: scrapes come every 30 s by default."""
TIMEOUT_SECONDS = 30

_WINDOW = re.compile(r"^(\d+)([mhdw])$")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def window_seconds(window: str) -> int:
    """`30d`, `12h`, `2w`, `90m` as seconds; anything else is refused with the forms that work."""
    match = _WINDOW.match(window)
    if not match or int(match.group(1)) == 0:
        raise ConfigError([f"--window {window!r}: use a whole number of minutes, hours, days or weeks, e.g. 30d"])
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def step_for(window: int) -> int:
    """The finest step that keeps every series within Prometheus' limit of points."""
    return max(MIN_STEP_SECONDS, math.ceil(window / MAX_POINTS))


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    samples: list[tuple[float, float]]
    """(unix seconds, value), in time order."""


CREDENTIAL_VARIABLES = (
    "PROMETHEUS_BEARER_TOKEN",
    "PROMETHEUS_BEARER_TOKEN_FILE",
    "PROMETHEUS_USERNAME",
    "PROMETHEUS_PASSWORD",
    "PROMETHEUS_PASSWORD_FILE",
)
"""Where credentials come from: the environment (a token, or a user and password) or a file it names, never the
command line (`ps` shows it to every user, and shells keep it in their history)."""


def authorization(environment: Mapping[str, str]) -> str | None:
    """The Authorization header the environment asks for, or None; a file's trailing newline is not the secret's."""

    def secret(name: str) -> str | None:
        if environment.get(f"{name}_FILE"):
            path = Path(environment[f"{name}_FILE"])
            try:
                return path.read_text().strip()
            except OSError as error:
                raise ConfigError([f"{name}_FILE names {path}, which cannot be read: {error.strerror}"]) from None
        return environment.get(name) or None

    token = secret("PROMETHEUS_BEARER_TOKEN")
    if token:
        return f"Bearer {token}"
    user, password = environment.get("PROMETHEUS_USERNAME"), secret("PROMETHEUS_PASSWORD")
    if user or password:
        if not (user and password):
            raise ConfigError(["set both PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD (or PROMETHEUS_PASSWORD_FILE)"])
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return None


class Prometheus:
    def __init__(self, url: str, environment: Mapping[str, str] | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.username is not None or parts.password is not None:
            # The URL is not repeated: it holds the credential.
            raise ConfigError(
                [
                    "--prometheus: the URL carries a user and password, which the command line shows to anyone "
                    "on this machine: give the URL without them, and the credentials in PROMETHEUS_USERNAME and "
                    "PROMETHEUS_PASSWORD (or PROMETHEUS_BEARER_TOKEN)"
                ]
            )
        if not re.match(r"^https?://[^/\s]+", url):
            raise ConfigError([f"--prometheus {url!r}: give Prometheus' base URL, e.g. http://localhost:9090"])
        self.url = url.rstrip("/")
        self._authorization = authorization(os.environ if environment is None else environment)

    def query_range(self, query: str, start: float, end: float, step: int) -> list[Series]:
        parameters = urllib.parse.urlencode({"query": query, "start": start, "end": end, "step": step})
        body = self._get(f"/api/v1/query_range?{parameters}")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise ConfigError([f"{self.url} did not answer like Prometheus' query_range API"])
        return [
            Series(
                labels={str(k): str(v) for k, v in entry.get("metric", {}).items()},
                samples=[(float(t), float(v)) for t, v in entry.get("values", [])],
            )
            for entry in data.get("result", [])
        ]

    def query(self, query: str, at: float) -> list[tuple[dict[str, str], float]]:
        """An instant query's vector: each series' labels and value."""
        body = self._get(f"/api/v1/query?{urllib.parse.urlencode({'query': query, 'time': at})}")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise ConfigError([f"{self.url} did not answer like Prometheus' query API"])
        return [
            ({str(k): str(v) for k, v in entry.get("metric", {}).items()}, float(entry["value"][1]))
            for entry in data.get("result", [])
        ]

    def _get(self, path: str) -> Any:
        request = urllib.request.Request(self.url + path)
        if self._authorization is not None:
            request.add_header("Authorization", self._authorization)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            raise ConfigError([_refusal(self.url, error, authorized=self._authorization is not None)]) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise ConfigError([f"cannot reach Prometheus at {self.url}: {reason}"]) from None
        except json.JSONDecodeError:
            raise ConfigError([f"{self.url} did not answer with JSON: is it Prometheus?"]) from None


def _refusal(url: str, error: urllib.error.HTTPError, *, authorized: bool) -> str:
    if error.code == 404:
        return (
            f"{url} has no Prometheus API (HTTP 404 for /api/v1/query): give Prometheus' base URL, the one "
            "its web UI opens at (e.g. http://prometheus:9090, or http://host/prometheus behind a path prefix)"
        )
    if error.code in (401, 403):
        wanted = "were refused" if authorized else "are needed"
        return (
            f"Prometheus at {url} answered HTTP {error.code}: credentials {wanted}; set PROMETHEUS_BEARER_TOKEN "
            "(or PROMETHEUS_BEARER_TOKEN_FILE), or PROMETHEUS_USERNAME and PROMETHEUS_PASSWORD"
        )
    return f"Prometheus at {url} refused the query: {_reason(error)}"


def _reason(error: urllib.error.HTTPError) -> str:
    try:
        detail = json.load(error)
    except (json.JSONDecodeError, OSError):
        return f"HTTP {error.code}"
    return str(detail.get("error") or f"HTTP {error.code}") if isinstance(detail, dict) else f"HTTP {error.code}"


def integral_hours(samples: list[tuple[float, float]], step: int) -> float:
    """The area under a gauge, in value-hours: trapezoids between samples one step apart.

    A range query returns a sample per step while the series exists; a longer gap is a
    time the series did not exist (no queue, no scrape), which counts as nothing.
    """
    area = 0.0
    for (t0, v0), (t1, v1) in itertools.pairwise(samples):
        if t1 - t0 <= step * 1.5:
            area += (v0 + v1) / 2 * (t1 - t0)
    return area / 3600


def mean(samples: list[tuple[float, float]]) -> float | None:
    return sum(v for _, v in samples) / len(samples) if samples else None
