"""Reading range series from Prometheus' HTTP API, with the failures a user can act on as one line each."""

import itertools
import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
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


class Prometheus:
    def __init__(self, url: str) -> None:
        if not re.match(r"^https?://[^/\s]+", url):
            raise ConfigError([f"--prometheus {url!r}: give Prometheus' base URL, e.g. http://localhost:9090"])
        self.url = url.rstrip("/")

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

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.url + path, timeout=TIMEOUT_SECONDS) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            raise ConfigError([f"Prometheus at {self.url} refused the query: {_reason(error)}"]) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise ConfigError([f"cannot reach Prometheus at {self.url}: {reason}"]) from None
        except json.JSONDecodeError:
            raise ConfigError([f"{self.url} did not answer with JSON: is it Prometheus?"]) from None


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
