"""The real Pulumi engine against the lab: the lab's CLI, a PULUMI_HOME and a backend of the lab's own, offline.

The CLI is the lab's build of github.com/pulumi/pulumi/pkg/v3 (build.py, `go-pulumi`). Nothing
reaches out: a local file backend under the lab's folder, a passphrase secrets provider, no update
check, no plugin downloads and no registry lookups; a plugin is there only if the lab installed it
from its own build (`pulumi plugin install --file`), never into the user's own ~/.pulumi.

A program runs inline, through the Python SDK's Automation API: the SDK serves the language
runtime itself (pulumi/automation/_server.py LanguageServer, as `--client`), since the module
proxy serves no version of the Go language host (github.com/pulumi/pulumi/sdk/python/cmd/
pulumi-language-python/v3: 403 for every version and for its list, docs/lab.md).
"""

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pulumi import automation as auto

PASSPHRASE = "gpu-tenancy-lab"
"""Not a secret: it guards the lab's own throwaway state, and is the same on every machine so a test can read it."""
OFFLINE = {
    "PULUMI_SKIP_UPDATE_CHECK": "true",
    "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    "PULUMI_DISABLE_REGISTRY_RESOLVE": "true",
    "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
}


@dataclass(frozen=True)
class Engine:
    """The lab's Pulumi: `folder` holds its home, its backend and the CLI's root; `cli` is the built binary."""

    folder: Path
    cli: Path

    @property
    def home(self) -> Path:
        return self.folder / "home"

    @property
    def backend(self) -> Path:
        return self.folder / "backend"

    @property
    def root(self) -> Path:
        """What the Automation API calls the CLI's root: it runs `<root>/bin/pulumi`."""
        return self.folder / "cli"

    def prepare(self) -> "Engine":
        for folder in (self.home, self.backend, self.root / "bin"):
            folder.mkdir(parents=True, exist_ok=True)
        link = self.root / "bin" / "pulumi"
        if not link.exists() or link.resolve() != self.cli.resolve():
            link.unlink(missing_ok=True)
            link.symlink_to(self.cli)
        return self

    def environment(self) -> dict[str, str]:
        return {
            **OFFLINE,
            "PULUMI_HOME": str(self.home),
            "PULUMI_BACKEND_URL": f"file://{self.backend}",
            "PATH": f"{self.root / 'bin'}:/usr/bin:/bin",
            "HOME": str(self.home),
        }

    def run(self, *args: str, cwd: Path | None = None, extra: Mapping[str, str] | None = None) -> int:
        """The CLI with `args`; its exit status."""
        environment = {**os.environ, **self.environment(), **(extra or {})}
        return subprocess.run([str(self.cli), *args], cwd=cwd, env=environment, check=False).returncode

    def install_plugin(self, kind: str, name: str, version: str, binary: Path) -> None:
        """A plugin from the lab's own build, into the lab's home (a second call finds it there)."""
        installed = self.home / "plugins" / f"{kind}-{name}-v{version.removeprefix('v')}"
        if installed.is_dir():
            return
        command = [str(self.cli), "plugin", "install", kind, name, version, "--file", str(binary)]
        subprocess.run(command, env={**os.environ, **self.environment()}, check=True, capture_output=True)

    def stack(self, project: str, name: str, program: Callable[[], None]) -> auto.Stack:
        """An inline program's stack in the lab's backend, created on first use."""
        command = auto.PulumiCommand(root=str(self.root), skip_version_check=True)
        options = auto.LocalWorkspaceOptions(
            pulumi_home=str(self.home), env_vars=self.environment(), pulumi_command=command
        )
        return auto.create_or_select_stack(name, project_name=project, program=program, opts=options)
