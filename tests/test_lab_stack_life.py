"""The life of the reference stack on the real engine, against a lab: from a fresh preview to destroy.

`python -m harness.lab pulumi --stack STACK -- ARGS` is the lab's CLI (v3.274.0) with its Kubernetes provider
(v4.25.0) on a lab copy of Pulumi.dev.yaml (harness/lab/engine_stack.py says what the copy changes, and why).
Each stage runs once, in order, as an operator would run it, and the tests read what each one did:

- a fresh preview, by the program's own URNs (as the mocks record them, which the URN test keeps);
- a first `up` that fails half-way (a GPU node that offers no GPU stops the GPU gate), and the retry;
- a second `up` that plans no change;
- a change of each setting, previewed: the exact steps the engine plans are the suite's model's
  (tests/engine_rules.py), and nothing that holds a team's data is replaced or deleted;
- a team added, then removed, refused until `vcluster.removeTenants` names it; a member added to another team
  with it (their accounts' release from the program's own chart, their token, their kubeconfig from the outputs),
  and refused once an `up` of its own has dropped them;
- `refresh` after a change by hand, and the preview that puts it back;
- `stack export`, with no credential in plain text, and `destroy`, leaving none of the stack in the lab.
"""

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.vcluster_tenant.members import member_user
from harness import ROOT, ProgramRun, run_pulumi
from harness.lab.engine_stack import lab_program
from tests.engine_rules import Step, plan
from tests.lab import Lab, private_lab

Json = dict[str, Any]
STACK = "dev"
TEAMS = ("team-nlp", "team-vision", "team-recommender")
TENANT_NAMESPACES = tuple(f"vcluster-{team}" for team in TEAMS)
ADDED = "team-speech"
BAD_NODE = "lab-gpu-without-gpus"
MEMBER = "alice"
"""Added to team-nlp with team-speech, kept while team-speech is removed, then dropped by an `up` of its own."""


@dataclass(frozen=True)
class Stage:
    """One CLI command's exit status and what it printed."""

    code: int
    stdout: str
    stderr: str
    settings: Json
    """The lab copy's settings as the command ran with them."""

    def json(self) -> Any:
        return json.loads(self.stdout)

    def events(self) -> list[Json]:
        """`up --json` and `refresh --json` print one engine event a line (a failed one ends with its summary, a
        document over several lines, which is no event)."""
        events = []
        for line in self.stdout.splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and "sequence" in event:
                events.append(event)
        return events


@dataclass(frozen=True)
class Life:
    lab: Lab
    copy: Path
    stages: dict[str, Stage]


def _stack_document() -> Json:
    document: Json = yaml.safe_load((ROOT / f"Pulumi.{STACK}.yaml").read_text())
    return document


Edit = Callable[[Json], None]


def _queue(config: Json, name: str) -> Json:
    queue: Json = next(q for q in config["gpu-tenancy:queues"] if q["name"] == name)
    return queue


def _quota(config: Json) -> None:
    _queue(config, "team-nlp")["resources"]["gpu"]["quota"] = 0.25


def _vcluster_version(config: Json) -> None:
    config["gpu-tenancy:tenants"][0]["vclusterVersion"] = "0.36.1"


def _floor(config: Json) -> None:
    config.setdefault("gpu-tenancy:vcluster", {})["minGpuFraction"] = 0.1


def _kai_version(config: Json) -> None:
    config.setdefault("gpu-tenancy:versions", {})["kaiScheduler"] = "v0.17.0"


def _with_a_team(config: Json) -> None:
    for team in TEAMS:
        _queue(config, team)["resources"]["gpu"]["quota"] = 0.25
    quota = {"gpu": {"quota": 0.25, "limit": 1, "overQuotaWeight": 1}}
    config["gpu-tenancy:queues"].append({"name": ADDED, "parentQueue": "ml-org", "priority": 100, "resources": quota})
    config["gpu-tenancy:tenants"].append({"name": ADDED, "queue": ADDED})


def _with_a_member(config: Json) -> None:
    config["gpu-tenancy:tenants"][0]["members"] = [MEMBER]


def _named_for_removal(config: Json) -> None:
    config.setdefault("gpu-tenancy:vcluster", {})["removeTenants"] = [ADDED]


def _failing_gate(config: Json) -> None:
    config["gpu-tenancy:gpuGate"] = {"timeoutSeconds": 60}


CHANGES: dict[str, Edit] = {
    "a-quota": _quota,
    "a-teams-vcluster-version": _vcluster_version,
    "a-floor": _floor,
    "the-kai-version": _kai_version,
}
"""The settings changed one at a time on the running stack, each previewed and not applied."""


def _stack_file(lab: Lab, name: str, *edits: Edit) -> Path:
    """The reference stack with `edits`, in a folder of its own: the same stack (dev), other settings."""
    document = _stack_document()
    for edit in edits:
        edit(document["config"])
    folder = lab.state / "stack-files" / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"Pulumi.{STACK}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _pulumi(lab: Lab, stack_file: Path, *args: str) -> Stage:
    command = [sys.executable, "-m", "harness.lab", "pulumi", "--state", str(lab.state), "--stack", str(stack_file)]
    started = time.monotonic()
    done = subprocess.run([*command, "--", *args], cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    # Kept beside the lab's logs, for whoever reads a failure: what each command printed, and how long it took.
    with (lab.state / "logs" / "stack-life.log").open("a") as log:
        log.write(f"== pulumi {' '.join(args)} ({stack_file.parent.name}): exit {done.returncode}, ")
        log.write(f"{time.monotonic() - started:.0f} s\n{done.stdout}\n{done.stderr}\n")
    copy = lab.state / "engine" / "stacks" / STACK / f"Pulumi.{STACK}.yaml"
    config = yaml.safe_load(copy.read_text())["config"] if copy.is_file() else {}
    settings = {key.removeprefix("gpu-tenancy:"): value for key, value in config.items()}
    return Stage(done.returncode, done.stdout, done.stderr, settings)


def _who(lab: Lab, kubeconfig: Path, *, until_refused: bool = False) -> Stage:
    """`kubectl auth whoami` with a member's kubeconfig; `until_refused`: again for up to 30 s until it is refused
    (the API server remembers a token it accepted for 10 s: components/vcluster_tenant/members.py)."""
    command = [
        str(lab.kubectl()),
        f"--kubeconfig={kubeconfig}",
        "--request-timeout=20s",
        "auth",
        "whoami",
        "-o",
        "json",
    ]
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if not until_refused or done.returncode != 0 or time.monotonic() > deadline:
            return Stage(done.returncode, done.stdout, done.stderr, {})
        time.sleep(2)


def _namespaces(lab: Lab) -> list[str]:
    return sorted(n["metadata"]["name"] for n in lab.admin.list("v1", "Namespace"))


def _gpu_node_without_gpus(lab: Lab) -> Json:
    """A node labelled as the GPU Operator labels a GPU node, whose GPUs its device plugin never advertised."""
    node = next(n for n in lab.admin.list("v1", "Node") if "nvidia.com/gpu" in n["status"]["allocatable"])
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        node["metadata"].pop(key, None)
    node.update({"apiVersion": "v1", "kind": "Node"})
    node["metadata"]["name"] = BAD_NODE
    node["metadata"]["labels"]["kubernetes.io/hostname"] = BAD_NODE
    for part in ("capacity", "allocatable"):
        node["status"][part].pop("nvidia.com/gpu")
    return node


@pytest.fixture(scope="module")
def life() -> Iterator[Life]:
    with private_lab("stack-life", kai_crds=False) as lab:
        shutil.rmtree(lab.state / "engine", ignore_errors=True)  # a new cluster: a new stack
        reference = _stack_file(lab, "reference")
        stages: dict[str, Stage] = {}
        stages["preview"] = _pulumi(lab, reference, "preview", "--json")
        lab.admin.create(_gpu_node_without_gpus(lab))
        stages["up-fails"] = _pulumi(lab, _stack_file(lab, "failing-gate", _failing_gate), "up", "--yes", "--json")
        lab.admin.delete("v1", "Node", BAD_NODE)
        stages["up-retried"] = _pulumi(lab, reference, "up", "--yes", "--json", "--skip-preview")
        stages["namespaces-after-up"] = Stage(0, json.dumps(_namespaces(lab)), "", {})
        stages["preview-again"] = _pulumi(lab, reference, "preview", "--json", "--expect-no-changes")
        for name, edit in CHANGES.items():
            stages[f"change/{name}"] = _pulumi(lab, _stack_file(lab, name, edit), "preview", "--json")
        added = _stack_file(lab, "added", _with_a_team, _with_a_member)
        stages["team-added"] = _pulumi(lab, added, "up", "--yes", "--json", "--skip-preview")
        stages["member-kubeconfigs"] = _pulumi(
            lab, added, "stack", "output", "memberKubeconfigs", "--show-secrets", "--json"
        )
        member = lab.state / "member.kubeconfig"
        if stages["member-kubeconfigs"].code == 0:
            member.write_text(stages["member-kubeconfigs"].json()[TEAMS[0]][MEMBER])
            stages["member-signed-in"] = _who(lab, member)
        stages["team-dropped"] = _pulumi(lab, reference, "preview", "--json")
        removed = _stack_file(lab, "removed", _named_for_removal, _with_a_member)
        stages["team-removed"] = _pulumi(lab, removed, "up", "--yes", "--json", "--skip-preview")
        named = _stack_file(lab, "member-removed", _named_for_removal)
        stages["member-dropped"] = _pulumi(lab, named, "up", "--yes", "--json", "--skip-preview")
        if member.is_file():
            stages["member-refused"] = _who(lab, member, until_refused=True)
        queue = lab.admin.get("scheduling.run.ai/v2", "Queue", "team-vision")
        lab.admin.patch(queue, {"spec": {"resources": {"gpu": {"limit": 2}}}})
        stages["refresh"] = _pulumi(lab, named, "refresh", "--yes", "--json", "--skip-preview")
        stages["up-after-refresh"] = _pulumi(lab, named, "up", "--yes", "--json", "--skip-preview")
        limit = lab.admin.get("scheduling.run.ai/v2", "Queue", "team-vision")["spec"]["resources"]["gpu"]["limit"]
        stages["limit-after-up"] = Stage(0, json.dumps(limit), "", {})
        stages["export"] = _pulumi(lab, named, "stack", "export")
        stages["destroy"] = _pulumi(lab, named, "destroy", "--yes", "--skip-preview")
        stages["namespaces-after-destroy"] = Stage(0, json.dumps(_namespaces(lab)), "", {})
        yield Life(lab, lab.state / "engine" / "stacks" / STACK, stages)


def _ran(life: Life, stage: str) -> Stage:
    done = life.stages[stage]
    assert done.code == 0, f"`pulumi {stage}` exited {done.code}:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    return done


PREVIEW_OPS = {
    "create": "create",
    "update": "update",
    "delete": "delete",
    "replace": "replace",
    "create-replacement": "replace",
    "delete-replaced": "replace",
}
"""The engine's steps as the model names them: a replacement's three steps are one `replace`."""


def _previewed(stage: Stage) -> dict[str, str]:
    """URN -> what the preview plans for it, `same` and reads left out."""
    steps = stage.json().get("steps") or []
    return {s["urn"]: PREVIEW_OPS[s["op"]] for s in steps if s["op"] in PREVIEW_OPS and "pulumi:pulumi" not in s["urn"]}


def _done(stage: Stage) -> dict[str, str]:
    """URN -> what an `up --json` did to it (its resources' pre-events), `same` and reads left out."""
    done = {}
    for event in stage.events():
        metadata = (event.get("resourcePreEvent") or {}).get("metadata") or {}
        # Providers aside, as the model plans the program's resources only (a provider comes and goes with them).
        urn = metadata.get("urn", "")
        if metadata.get("op") in PREVIEW_OPS and "pulumi:pulumi" not in urn and "pulumi:providers:" not in urn:
            done[urn] = PREVIEW_OPS[metadata["op"]]
    return done


def _refreshed(stage: Stage) -> dict[str, str]:
    """URN -> what `refresh --json` found changed on the cluster (its resources' outputs events), reads left out."""
    found = {}
    for event in stage.events():
        metadata = (event.get("resOutputsEvent") or {}).get("metadata") or {}
        external = (metadata.get("old") or {}).get("external")
        if metadata.get("op") in PREVIEW_OPS and not external and "pulumi:pulumi" not in metadata["urn"]:
            found[metadata["urn"]] = PREVIEW_OPS[metadata["op"]]
    return found


def _model_run(life: Life, settings: Json) -> ProgramRun:
    """The program under Pulumi's mocks with the lab copy's settings, as the suite's fast tests run it."""
    kubeconfig = (life.lab.state / "kubeconfig").read_text()
    config = {key: value for key, value in settings.items() if key != "kubeconfig"}
    return run_pulumi(lab_program, config=config, secrets={"kubeconfig": kubeconfig}, stack=STACK)


def _modelled(life: Life, before: Stage, after: Stage) -> dict[str, str]:
    """URN -> the step the model plans from `before`'s settings to `after`'s."""
    new = _model_run(life, after.settings)
    urns = {(r.name, r.type): r.urn for r in (*_model_run(life, before.settings).registrations, *new.registrations)}
    steps: list[Step] = plan(_model_run(life, before.settings), new)
    return {urns[(s.name, s.type)]: s.op for s in steps if not s.type.startswith("pulumi:")}


def test_a_fresh_preview_plans_to_create_every_resource_the_program_registers_by_its_own_urn(life: Life) -> None:
    preview = _ran(life, "preview")
    steps = {s["urn"]: s["op"] for s in preview.json().get("steps") or []}
    kubeconfig = (life.lab.state / "kubeconfig").read_text()
    config = {key: value for key, value in preview.settings.items() if key != "kubeconfig"}
    modelled = run_pulumi(lab_program, config=config, secrets={"kubeconfig": kubeconfig}, stack=STACK, preview=True)
    expected = {r.urn for r in modelled.registrations if not r.read}
    planned = {urn for urn, op in steps.items() if op != "read" and "pulumi:pulumi:Stack" not in urn}
    assert planned == expected, {"only planned": planned - expected, "only registered": expected - planned}
    assert {op for urn, op in steps.items() if urn in expected} == {"create"}, steps


def test_a_failed_gate_stops_the_first_up_half_way_and_the_retry_finishes_it(life: Life) -> None:
    """A GPU node that advertises no GPU fails the GPU gate (after gpuGate.timeoutSeconds): what does not wait for
    the gate is created, KAI and the queues are not. The retry replaces the failed gate's Job (it is annotated
    pulumi.com/replaceUnready) and creates the rest, and touches nothing the failed run made."""
    failed = life.stages["up-fails"]
    assert failed.code != 0, "the gate failed"
    text = failed.stdout + failed.stderr
    assert "gpu-gate" in text, text[-3000:]
    made = _done(failed)
    assert any(urn.endswith("::team-nlp-vcluster") for urn in made), "the tenants do not wait for the GPU gate"
    assert not [urn for urn in made if urn.endswith(("::kai-release", "::queues-team-nlp"))]
    retried = _done(_ran(life, "up-retried"))
    assert not set(retried) & {urn for urn, op in made.items() if op == "create" and not urn.endswith("gpu-gate")}
    gate = [urn for urn in retried if urn.endswith("::host-gpu-gate")]
    assert [retried[urn] for urn in gate] == ["replace"], retried
    assert {"kai-release", "queues-team-nlp"} <= {urn.rsplit("::", 1)[-1] for urn in retried}
    namespaces = set(json.loads(life.stages["namespaces-after-up"].stdout))
    assert {"kai-scheduler", *TENANT_NAMESPACES} <= namespaces, namespaces


def test_a_second_up_plans_no_change(life: Life) -> None:
    again = _ran(life, "preview-again")
    changed = {urn: op for urn, op in _previewed(again).items()}
    assert changed == {}, changed


TEAM_DATA = ("-namespace", "-vcluster", "-kubeconfig")
"""What holds a team's data or access: its host namespace, its vCluster (and so its volume), its kubeconfig."""


@pytest.mark.parametrize("name", CHANGES)
def test_a_change_of_each_setting_plans_the_models_steps_and_keeps_every_teams_data(life: Life, name: str) -> None:
    """The engine's own plan for the change, against the model's (tests/engine_rules.py) on the same settings:
    the same resources, each with the same step."""
    preview = _ran(life, f"change/{name}")
    real = _previewed(preview)
    assert real, "the change changes something"
    assert real == _modelled(life, life.stages["preview-again"], preview)
    for urn, op in real.items():
        if urn.endswith(tuple(f"{team}{part}" for team in TEAMS for part in TEAM_DATA)):
            assert op == "update", (urn, op)


def test_a_team_added_is_created_and_the_rest_updated_as_the_model_plans(life: Life) -> None:
    added = _ran(life, "team-added")
    done = _done(added)
    assert done == _modelled(life, life.stages["preview-again"], added)
    created = {urn for urn, op in done.items() if op == "create"}
    assert any(urn.endswith(f"::{ADDED}-vcluster") for urn in created)
    assert not [urn for urn, op in done.items() if op in ("replace", "delete")], done


def test_a_member_added_acts_as_themselves_inside_their_teams_vcluster_until_removed(life: Life) -> None:
    """The real engine and provider: the team's release of members' accounts from the program's own chart (by its
    path from the project's root), the token the vCluster's token controller fills, awaited, and the member's
    kubeconfig in the stack's outputs; the `up` that drops the member takes the token away."""
    done = _done(_ran(life, "team-added"))
    created = {urn.rsplit("::", 1)[1] for urn, op in done.items() if op == "create"}
    assert {f"{TEAMS[0]}-members", f"{TEAMS[0]}-member-{MEMBER}-token"} <= created
    signed_in = _ran(life, "member-signed-in").json()["status"]["userInfo"]
    assert signed_in["username"] == member_user(MEMBER)
    dropped = _ran(life, "member-dropped")
    done = _done(dropped)
    assert done == _modelled(life, life.stages["team-removed"], dropped)
    assert {urn.rsplit("::", 1)[1]: op for urn, op in done.items() if op == "delete"} == {
        f"{TEAMS[0]}-members": "delete",
        f"{TEAMS[0]}-member-{MEMBER}-token": "delete",
    }
    refused = life.stages["member-refused"]
    assert refused.code != 0, f"{MEMBER}'s token still works after the `up` that removed them: {refused.stdout}"
    assert "Unauthorized" in refused.stderr or "must be logged in" in refused.stderr, refused.stderr


def test_a_team_dropped_from_the_stack_is_refused_until_remove_tenants_names_it(life: Life) -> None:
    dropped = life.stages["team-dropped"]
    assert dropped.code != 0
    assert "vcluster.removeTenants" in dropped.stdout + dropped.stderr
    removed = _ran(life, "team-removed")
    done = _done(removed)
    assert done == _modelled(life, life.stages["team-added"], removed)
    deleted = {urn for urn, op in done.items() if op == "delete"}
    assert any(urn.endswith(f"::{ADDED}-vcluster") for urn in deleted)
    assert not [urn for urn in deleted if any(team in urn for team in TEAMS)], "no other team loses anything"


def test_refresh_takes_a_change_made_by_hand_and_the_next_up_puts_it_back(life: Life) -> None:
    """A Queue's limit raised by hand: `refresh` records it, and the next `up` writes the stack's back, forcing the
    field the hand edit took (components/shared/ownership.py: without it that `up` fails on the conflict)."""
    refreshed = _refreshed(_ran(life, "refresh"))
    assert list(refreshed.values()) == ["update"], refreshed
    (queue,) = refreshed
    assert queue.endswith("::queues-team-vision")
    assert _done(_ran(life, "up-after-refresh")) == {queue: "update"}
    assert json.loads(life.stages["limit-after-up"].stdout) == 1


def test_destroy_leaves_nothing_of_the_stack_in_the_lab(life: Life) -> None:
    _ran(life, "destroy")
    left = set(json.loads(life.stages["namespaces-after-destroy"].stdout))
    before = set(json.loads(life.stages["namespaces-after-up"].stdout))
    assert not (left & ({"kai-scheduler", *TENANT_NAMESPACES, f"vcluster-{ADDED}"})), left
    assert left < before


def test_the_exported_state_holds_no_credential_in_plain_text(life: Life) -> None:
    """`pulumi stack export` is what an operator attaches to a ticket: the host's kubeconfig and every tenant's
    stay ciphertext in it."""
    exported = _ran(life, "export").stdout
    kubeconfig = yaml.safe_load((life.lab.state / "kubeconfig").read_text())
    user = kubeconfig["users"][0]["user"]
    plain = [value for key, value in user.items() if key.endswith("-data") and "key" in key]
    assert plain, "the lab's kubeconfig carries its client key inline"
    assert not [value for value in plain if value in exported]
    state = json.loads(exported)
    secrets = json.dumps(state).count("4dabf18193072939515e22adb298388d")  # Pulumi's secret signature
    assert secrets > 0, "the credentials are there, as secrets"
