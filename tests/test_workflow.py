"""The pull-request workflow: it tests like the README, previews every stack on the PR, and gates `up`."""

import re
from typing import Any

import yaml

from tests.harness import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "preview.yml"


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


def test_the_workflow_runs_the_readmes_test_command() -> None:
    runs = [step.get("run", "") for step in _workflow()["jobs"]["test"]["steps"]]
    assert _readme_test_command() in runs


def test_pull_requests_get_a_preview_comment_with_the_diff_for_every_stack() -> None:
    workflow = _workflow()
    preview = workflow["jobs"]["preview"]
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "test" in preview["needs"]
    assert preview["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.names) }}"
    action = _action(preview)["with"]
    assert (action["command"], action["comment-on-pr"], action["diff"]) == ("preview", True, True)
    assert action["cloud-url"] == "${{ vars.PULUMI_BACKEND_URL }}"
    assert preview["permissions"]["pull-requests"] == "write"


def test_up_runs_only_on_main_behind_an_environment() -> None:
    up = _workflow()["jobs"]["up"]
    assert up["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert up["environment"] == "${{ matrix.stack }}"
    assert _action(up)["with"]["command"] == "up"
    assert _workflow()["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
