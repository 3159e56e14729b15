"""A Python program of this repository, run in the official python image from a ConfigMap.

The program is a package of standard-library modules, mounted read-only and imported by
name: nothing is built or pushed, and the image holds Python alone (config/upstream.py
PYTHON_IMAGE_REF).
"""

from pathlib import Path
from typing import Any

LOCKED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
"""Nothing to escalate to, nothing to write but the volumes the pod mounts."""


def program_files(package: Path) -> dict[str, str]:
    """The package's modules, as ConfigMap data (keys are file names)."""
    return {path.name: path.read_text() for path in sorted(package.glob("*.py"))}


def python_env(mount: str) -> list[dict[str, Any]]:
    """The package importable from its mount; no bytecode written beside it (the root is read-only); logs at once."""
    return [
        {"name": "PYTHONPATH", "value": mount},
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]


def fresh_file_check(path: str, seconds: int, *, alive_before_first: bool = False) -> str:
    """Python for a liveness probe (the python image has no `test` or `find`): exits 0 while `path` was written
    within `seconds`; with `alive_before_first`, also while it was never written (a first pass may take long)."""
    stale = f"time.time() - os.path.getmtime('{path}') > {seconds}"
    if alive_before_first:
        stale = f"os.path.exists('{path}') and {stale}"
    return f"import os, sys, time; sys.exit({stale})"
