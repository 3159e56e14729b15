"""A planner scenario (`python -m fairshare --scenario FILE`): a capacity and queues, each leaf with its request.

A scenario follows KAI's rules, not the stack config's: KAI accepts a limit below the
quota and children guaranteed more than their parent, and divides such trees anyway,
so the planner does too (and says on stderr what stack config would refuse).
"""

import json
from functools import cached_property
from pathlib import Path

from pydantic import Field, ValidationError, model_validator

from config.issues import ConfigError, ConfigIssue, ConfigIssues, problem
from config.messages import house_problems
from config.queue_hierarchy.hierarchy import QueueTree, overcommit_issues, structural_issues
from config.queue_hierarchy.queues import KAI_RULES_ONLY, RESOURCES, QueueConfig
from config.types import UNLIMITED, ConfigModel, plain_number


class ScenarioQueue(QueueConfig):
    """A queue entry exactly as in `gpu-tenancy:queues`, where a leaf may carry its GPU request."""

    request: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class Scenario(ConfigModel):
    capacity: float = Field(gt=0, allow_inf_nan=False)
    queues: list[ScenarioQueue] = Field(min_length=1)

    @cached_property
    def tree(self) -> QueueTree:
        """The queues' index, built once for the checks and the plan."""
        return QueueTree(list(self.queues))

    @model_validator(mode="after")
    def _tree_is_sound(self) -> "Scenario":
        issues = structural_issues(self.queues)
        if not issues:
            leaves = self.tree.leaf_set
            issues = [
                ConfigIssue(
                    (i, "request"), q.request, "is set on a parent queue: a parent's request is its children's sum"
                )
                for i, q in enumerate(self.queues)
                if q.request is not None and q.name not in leaves
            ]
        if issues:
            raise ConfigIssues([ConfigIssue(("queues", *i.path), i.value, i.message) for i in issues])
        return self

    def stricter_than_kai(self) -> list[str]:
        """What `gpu-tenancy:queues` would refuse in this tree, though KAI accepts and divides it."""
        issues = overcommit_issues(self.queues, self.tree)
        for index, queue in enumerate(self.queues):
            resources = queue.resources
            for resource, share in zip(RESOURCES, (resources.gpu, resources.cpu, resources.memory), strict=True):
                if share.limit != UNLIMITED and share.limit_below_quota:
                    issues.append(
                        ConfigIssue(
                            (index, "resources", resource, "limit"),
                            share.limit,
                            f"is below the quota ({plain_number(share.quota)}): KAI gives at most the limit",
                        )
                    )
        return [problem(("queues", *issue.path), issue.value, issue.message) for issue in issues]


def read_scenario(path: Path) -> Scenario:
    try:
        text = path.read_bytes()
    except OSError as error:
        raise ConfigError([f"{path}: cannot be read ({error.strerror})"]) from None
    try:
        # Parsed by pydantic's own JSON reader: no Python objects for the document, which at 100,000 queues is a
        # tenth of the run.
        return Scenario.model_validate_json(text, context={KAI_RULES_ONLY: True})
    except ValidationError as error:
        invalid = [detail["msg"] for detail in error.errors() if detail["type"] == "json_invalid"]
        if invalid:
            raise ConfigError([f"{path} is not valid JSON: {_json_error(text, invalid[0])}"]) from None
        raise ConfigError(house_problems(error, Scenario, prefix=f"{path.name}:")) from None


def _json_error(text: bytes, said: str) -> str:
    """Python's account of what is wrong with the JSON (line and column, as the CLI always said it), or pydantic's
    where only pydantic's reader refuses it."""
    try:
        json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return str(error)
    return said
