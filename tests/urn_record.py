"""The URNs live stacks hold, recorded, so a refactor cannot replace a live resource unnoticed.

Three stacks cover every kind of resource the program makes: the reference stack
(`Pulumi.dev.yaml`: Brev, observability), an SSH host with a worker, observability and
tenant add-ons, and an existing cluster whose tenants are reached by SNI. Each one's
URNs are kept in `tests/urns/<stack>.txt`, one per line; tests/test_urns.py proves that
the program still takes over every one of them, by its URN or by an alias.

A change that adds, removes or renames a resource on purpose re-records in the same commit:

    venv/bin/python -m tests.urn_record

A URN the program still takes over by an alias stays as recorded (stacks that have not
run an `up` since still hold it), so the diff shows only what is new and which live
resources the next `up` will delete.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import FAKE_HOST_KEY, PROJECT, ROOT, ProgramRun, dev_settings, run_main
from tests.conftest import FAKE_KUBECONFIG
from tests.engine_aliases import Registered, match_old_state

RECORD_DIR = Path(__file__).parent / "urns"

Config = dict[str, Any]


def _ssh_worker(config: Config) -> Config:
    config["host"] = {"mode": "ssh", "address": "203.0.113.20", "workers": [{"address": "203.0.113.21"}]}
    config["tenants"][0]["addons"] = [
        {"name": "kuberay", "chart": {"repo": "https://example.com/charts", "chart": "kuberay", "version": "1.4.2"}}
    ]
    config["tenants"][1]["addons"] = [
        {
            "name": "settings",
            "manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}],
        }
    ]
    return config


def _kubeconfig_sni(config: Config) -> Config:
    config["host"] = {"mode": "kubeconfig"}
    config["vcluster"] = {"expose": "sni", "domain": "gpu.example.com"}
    return config


@dataclass(frozen=True)
class RecordedStack:
    name: str
    shape: Callable[[Config], Config]
    secrets: dict[str, str]

    def run(self) -> ProgramRun:
        return run_main(self.shape(dev_settings()), self.secrets, stack=self.name)

    @property
    def record(self) -> Path:
        return RECORD_DIR / f"{self.name}.txt"

    def recorded(self) -> list[str]:
        return [line for line in self.record.read_text().splitlines() if line]


STACKS = (
    RecordedStack("dev", lambda config: config, {}),
    RecordedStack("ssh-worker", _ssh_worker, {"sshPrivateKey": FAKE_HOST_KEY}),
    RecordedStack("kubeconfig-sni", _kubeconfig_sni, {"kubeconfig": FAKE_KUBECONFIG}),
)


def registered(run: ProgramRun) -> list[Registered]:
    """What the engine needs of each registration, in the order the program made them."""
    return [Registered(r.urn, r.name, r.type, r.parent, r.aliases) for r in run.registrations]


def main() -> None:
    RECORD_DIR.mkdir(exist_ok=True)
    for stack in STACKS:
        run = stack.run()
        recorded = stack.recorded() if stack.record.exists() else []
        match = match_old_state(registered(run), recorded, project=PROJECT, stack=stack.name)
        takes_over = {new: old for old, new in match.claimed.items()}
        urns = sorted(takes_over.get(r.urn, r.urn) for r in run.registrations)
        stack.record.write_text("".join(f"{urn}\n" for urn in urns))
        deleted = sorted(set(recorded) - set(urns))
        print(f"{stack.record.relative_to(ROOT)}: {len(urns)} URNs; the next `up` deletes {deleted or 'nothing'}")


if __name__ == "__main__":
    main()
