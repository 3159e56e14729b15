"""The pull-request workflow: it tests like the README, previews only after review, and keeps secrets in jobs
that a reviewer has approved."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "preview.yml"
SECRET = re.compile(r"\$\{\{\s*secrets\.(\w+)")


def _workflow() -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return document


def _readme_test_command() -> str:
    match = re.search(r"\*\*Test\*\*.*?```bash\n(.+?)\n```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert match, "the README gives its test command in a bash block after **Test**"
    return match.group(1).strip()


def _action(job: dict[str, Any]) -> dict[str, Any]:
    (step,) = [s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@")]
    found: dict[str, Any] = step
    return found


def _secrets(node: Any) -> set[str]:
    """The secrets a part of the workflow reads; GITHUB_TOKEN is the job's own scoped token."""
    return set(SECRET.findall(yaml.safe_dump(node))) - {"GITHUB_TOKEN"}


def test_the_workflow_runs_ci_itself_so_lint_types_and_contracts_gate_a_merge() -> None:
    steps = _workflow()["jobs"]["test"]["steps"]
    (ci,) = [step for step in steps if "run" in step]
    assert ci["run"].endswith(" bash .ci/run")
    assert ci["run"].startswith("sudo "), "the lab's tests need root"
    assert ci["env"]["CI"] == "true", "CI=true makes the render and lab tests required"
    uses = [step.get("uses", "") for step in steps]
    assert any(u.startswith("actions/setup-go@") for u in uses), "the lab is built with Go"


def test_concurrency_is_scoped_to_the_jobs_that_take_the_state_lock() -> None:
    """A workflow-wide group would hold a pull request's plan and tests behind another run's `up`."""
    workflow = _workflow()
    assert "concurrency" not in workflow
    assert [name for name, job in workflow["jobs"].items() if "concurrency" in job] == ["up"]
    assert workflow["jobs"]["up"]["concurrency"] == {
        "group": "pulumi-up-${{ matrix.stack }}",
        "cancel-in-progress": False,
    }


def test_no_secret_is_given_to_the_whole_workflow() -> None:
    workflow = _workflow()
    assert not _secrets(workflow.get("env", {}))
    assert workflow["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("job", ["test", "stacks"])
def test_jobs_that_run_pull_request_code_unreviewed_see_no_secret(job: str) -> None:
    definition = _workflow()["jobs"][job]
    assert "environment" not in definition
    assert not _secrets(definition)


def test_every_job_that_reads_a_secret_waits_for_an_environment() -> None:
    """Environment secrets reach a job only after that environment's required reviewers approve it."""
    for name, job in _workflow()["jobs"].items():
        if _secrets(job):
            assert "environment" in job, name


def test_pull_requests_get_a_reviewed_preview_with_read_only_state_access() -> None:
    workflow = _workflow()
    preview = workflow["jobs"]["preview"]
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as True
    assert preview["environment"] == "preview-${{ matrix.stack }}"
    assert "github.event.pull_request.head.repo.full_name == github.repository" in preview["if"]
    assert "test" in preview["needs"]
    assert preview["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.names) }}"
    # Brev's token too: a brev stack resolves its instances' addresses in a preview (brev-ssh.sh on every run).
    assert _secrets(preview) == {
        "PULUMI_CONFIG_PASSPHRASE",
        "STATE_READER_ACCESS_KEY_ID",
        "STATE_READER_SECRET_ACCESS_KEY",
        "BREV_API_TOKEN",
    }
    action = _action(preview)["with"]
    assert (action["command"], action["comment-on-pr"], action["diff"]) == ("preview", True, True)
    assert action["suppress-outputs"] is True
    assert action["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}"
    assert preview["permissions"]["pull-requests"] == "write"


def test_up_runs_only_on_main_behind_its_stacks_environment() -> None:
    up = _workflow()["jobs"]["up"]
    assert up["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert up["environment"] == "${{ matrix.stack }}"
    assert _action(up)["with"]["command"] == "up"
    assert "PULUMI_CONFIG_PASSPHRASE" in _secrets(up)


COMMENTER = ROOT / ".github" / "workflows" / "plan-comment.yml"
PLAN = ROOT / ".github" / "workflows" / "plan.yml"


def _plan_workflow() -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load(PLAN.read_text())
    return document


def _commenter() -> dict[Any, Any]:
    document: dict[Any, Any] = yaml.safe_load(COMMENTER.read_text())
    return document


def test_the_plan_is_rendered_in_a_workflow_of_its_own_without_secrets_or_review() -> None:
    """Inside `preview`, the plan would be posted only when the whole run completes: after a reviewer's approval."""
    workflow = _plan_workflow()
    assert workflow[True] == {"pull_request": None}
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["cancel-in-progress"] is True, "a newer push supersedes an older plan"
    assert "plan" not in _workflow()["jobs"]
    (plan,) = workflow["jobs"].values()
    assert "needs" not in plan, "it waits for nothing"
    assert "environment" not in plan
    assert not _secrets(workflow)
    assert "permissions" not in plan, "the workflow's read-only token"
    run = next(step["run"] for step in plan["steps"] if "fairshare" in step.get("run", ""))
    assert "for file in Pulumi.*.yaml" in run
    assert 'venv/bin/python -m fairshare --stack "$stack" $usage $base $price --format markdown' in run
    assert 'if [ -f "usage/$stack.json" ]; then usage="--usage usage/$stack.json"; fi' in run
    upload = next(step for step in plan["steps"] if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["name"] == "fair-share-plan"


def test_the_plan_is_posted_by_a_workflow_that_never_runs_pull_request_code() -> None:
    workflow = _commenter()
    assert workflow[True] == {"workflow_run": {"workflows": ["plan"], "types": ["completed"]}}
    assert _plan_workflow()["name"] == "plan"
    assert workflow["permissions"] == {}
    job = workflow["jobs"]["comment"]
    assert job["permissions"] == {"actions": "read", "issues": "write", "pull-requests": "write"}
    assert not [step for step in job["steps"] if step.get("uses", "").startswith("actions/checkout")]
    assert not [step for step in job["steps"] if "run" in step], "no shell over the artifact's contents"
    assert not _secrets(job)
    download = job["steps"][0]["with"]
    assert download["run-id"] == "${{ github.event.workflow_run.id }}"
    script = job["steps"][1]["with"]["script"]
    assert "pr.head.sha !== process.env.HEAD_SHA" in script, "only on the pull request the run was for"
    assert "updateComment" in script, "one comment per stack, updated in place"
    assert "gpu-tenancy:fair-share-plan:${stack}" in script


def test_ci_runs_the_readmes_test_command() -> None:
    assert _readme_test_command() in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_setup_steps_restrict_the_up_environments_to_main() -> None:
    """Environment secrets reach any job that names the environment: a same-repository pull request could edit a
    workflow to do so. Only the environment's deployment-branch policy stops it, and it is set by hand."""
    setup = (ROOT / "docs" / "operations.md").read_text().split("Setting it up, once per repository:")[1]
    assert "Deployment branches and tags" in setup
    assert "`main` only" in setup
    assert "deployment-branch policy" in WORKFLOW.read_text()


def _plan_script() -> str:
    """The plan workflow's loop over the stacks, as it runs after the install."""
    plan = next(iter(_plan_workflow()["jobs"].values()))
    run: str = next(step["run"] for step in plan["steps"] if "fairshare" in step.get("run", ""))
    return run[run.index("mkdir -p plan") : run.index('echo "$PR_NUMBER"')]


def _fetch_script() -> str:
    """The plan workflow's step that writes the base's stack files to base/."""
    plan = next(iter(_plan_workflow()["jobs"].values()))
    return str(next(step["run"] for step in plan["steps"] if step.get("name") == "Fetch the base's stack files"))


def _project(root: Path) -> None:
    """What the plan workflow runs: a copy of the project, with this interpreter as its venv."""
    for part in ("fairshare", "config", "harness", "components", "examples"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", ".cache"))
    for part in ("__main__.py", "Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / part, root / part)
    (root / "venv").symlink_to(Path(sys.executable).parent.parent)


def test_an_invalid_stacks_comment_shows_the_checks_own_lines(tmp_path: Path) -> None:
    """The workflow's own script, on a copy of the project with a valid stack and an invalid one."""
    _project(tmp_path)
    bad = (ROOT / "Pulumi.dev.yaml").read_text().replace("mode: brev", "mode: brev\n    workers: two", 1)
    (tmp_path / "Pulumi.bad.yaml").write_text(bad)
    subprocess.run(["bash", "-euo", "pipefail", "-c", _plan_script()], cwd=tmp_path, check=True, timeout=600)
    comment = (tmp_path / "plan" / "bad.md").read_text()
    assert "The stack config is invalid; `python -m harness.check bad` says:" in comment
    assert "gpu-tenancy:host.workers = 'two': must be a whole number" in comment
    assert comment.count("```") == 2, "one fence, closed"
    assert "| `team-nlp` |" in (tmp_path / "plan" / "dev.md").read_text(), "a valid stack's plan as before"


def _git(root: Path, *args: str) -> str:
    identity = ["-c", "user.name=reviewer", "-c", "user.email=reviewer@example.com"]
    done = subprocess.run(["git", *identity, *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def test_a_pull_requests_comment_shows_what_the_change_moves_against_its_base(tmp_path: Path) -> None:
    """Both of the workflow's steps, on a repository whose pull request changes quotas, drops a member, adds a
    stack and deletes one: the base is fetched by its SHA, as from GitHub, and each comment says what moves."""
    _project(tmp_path)
    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    with_members = dev.replace("queue: team-vision\n", "queue: team-vision\n      members: [alice, bob]\n", 1)
    assert with_members != dev
    (tmp_path / "Pulumi.dev.yaml").write_text(with_members)
    (tmp_path / "Pulumi.gone.yaml").write_text(dev)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "Pulumi.dev.yaml", "Pulumi.gone.yaml")
    _git(tmp_path, "commit", "-q", "-m", "base")
    base_sha = _git(tmp_path, "rev-parse", "HEAD")
    head = dev.replace(
        "gpu: {quota: 0.33, limit: 1, overQuotaWeight: 1}", "gpu: {quota: 0.5, limit: 1, overQuotaWeight: 1}", 1
    )
    head = head.replace(
        "gpu: {quota: 0.33, limit: 1, overQuotaWeight: 1}\n  gpu-tenancy:tenants",
        "gpu: {quota: 0.16, limit: 1, overQuotaWeight: 1}\n  gpu-tenancy:tenants",
    )
    (tmp_path / "Pulumi.dev.yaml").write_text(
        head.replace("queue: team-vision\n", "queue: team-vision\n      members: [alice]\n", 1)
    )
    (tmp_path / "Pulumi.new.yaml").write_text(dev)
    _git(tmp_path, "rm", "-q", "Pulumi.gone.yaml")
    _git(tmp_path, "add", "Pulumi.dev.yaml", "Pulumi.new.yaml")
    _git(tmp_path, "commit", "-q", "-m", "head")
    _git(tmp_path, "remote", "add", "origin", str(tmp_path))
    (tmp_path / "prices").mkdir()
    (tmp_path / "prices" / "dev").write_text("2.5\n")
    (tmp_path / "prices" / "new").write_text("lots\n")
    env = {**os.environ, "BASE_SHA": base_sha}
    for script in (_fetch_script(), _plan_script()):
        subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, check=True, timeout=600)

    comment = (tmp_path / "plan" / "dev.md").read_text()
    order = [
        "> [!CAUTION]",
        "> - **`gpu-tenancy:tenants[1].members`**: tenant team-vision loses member bob",
        "#### What this change moves",
        "| team | guaranteed | all busy | alone | cost/month |",
        "| `team-recommender` | 0.33 -> 0.16 (-0.17) | 0.33 -> 0.16 (-0.17) | 1.00 | 602.25 -> 292.00 (-310.25) |",
        "| `team-nlp` | 0.33 -> 0.50 (+0.17) |",
        "```mermaid",
        "#### The plan after this change",
    ]
    positions = [comment.index(part) for part in order]
    assert positions == sorted(positions), comment
    # A price that is no number: the planner's own refusal, since the stack itself is valid.
    new = (tmp_path / "plan" / "new.md").read_text()
    assert "`python -m fairshare` refused what it was given:" in new
    assert "argument --price-per-gpu-hour: invalid float value: 'lots'" in new
    assert "This change deletes `Pulumi.gone.yaml`" in (tmp_path / "plan" / "gone.md").read_text()


def test_a_new_stack_has_no_base_to_compare_with(tmp_path: Path) -> None:
    _project(tmp_path)
    (tmp_path / "base").mkdir()
    subprocess.run(["bash", "-euo", "pipefail", "-c", _plan_script()], cwd=tmp_path, check=True, timeout=600)
    comment = (tmp_path / "plan" / "dev.md").read_text()
    assert "What this change moves" not in comment
    assert "| `team-nlp` |" in comment
