"""No live resource is replaced by a refactor: every recorded URN is still taken over, by itself or an alias.

The recorded URNs (tests/urn_record.py) stand for the state of a live stack; the
engine's own matching (tests/engine_aliases.py) decides which of them the program
still claims. An unclaimed URN is a resource the next `up` deletes, and whatever
replaced it is created anew: a Job re-run, a release reinstalled, a namespace emptied.
"""

import pulumi
import pulumi_kubernetes as k8s
import pytest

from harness import PROJECT, ProgramRun, run_pulumi
from tests.engine_aliases import Registered, create_urn, match_old_state
from tests.urn_record import STACKS, RecordedStack, registered

STACK = "dev"


@pytest.mark.parametrize("stack", STACKS, ids=[stack.name for stack in STACKS])
def test_every_recorded_urn_is_still_taken_over(stack: RecordedStack) -> None:
    recorded = stack.recorded()
    assert recorded, f"{stack.record} is empty: run `venv/bin/python -m tests.urn_record`"
    match = match_old_state(registered(stack.run()), recorded, project=PROJECT, stack=stack.name)
    assert not match.errors
    deleted = sorted(set(recorded) - match.claimed.keys())
    assert not deleted, (
        "an `up` would delete (and replace) these live resources; give each an alias to its old URN, "
        f"or, if removing it is the point, re-record with `venv/bin/python -m tests.urn_record`: {deleted}"
    )


# --- the stand-in engine, against the engine's own rules -------------------------------------------

ROOT = f"urn:pulumi:{STACK}::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-{STACK}"
COMPONENT = "gpu-tenancy:index:Thing"
JOB = "kubernetes:batch/v1:Job"


def _urn(name: str, type_: str, parent: str = "") -> str:
    return create_urn(name, type_, parent, PROJECT, STACK)


OLD_PARENT = _urn("host", COMPONENT)
NEW_PARENT = _urn("host-gate", COMPONENT, OLD_PARENT)


@pytest.mark.parametrize(
    ("old", "registered", "claimed"),
    [
        pytest.param(
            _urn("host-gate", JOB, OLD_PARENT),
            Registered(_urn("host-gate", JOB, NEW_PARENT), "host-gate", JOB, NEW_PARENT),
            False,
            id="moved-under-a-new-parent-without-an-alias",
        ),
        pytest.param(
            _urn("host-gate", JOB, OLD_PARENT),
            Registered(
                _urn("host-gate", JOB, NEW_PARENT),
                "host-gate",
                JOB,
                NEW_PARENT,
                [{"parentUrn": OLD_PARENT}],
            ),
            True,
            id="moved-with-an-alias-to-its-old-parent",
        ),
        pytest.param(
            _urn("gate", JOB),
            Registered(_urn("gate", JOB, OLD_PARENT), "gate", JOB, OLD_PARENT, [{"noParent": True}]),
            True,
            id="was-at-the-root",
        ),
        pytest.param(
            _urn("old-name", JOB, OLD_PARENT),
            Registered(_urn("new-name", JOB, OLD_PARENT), "new-name", JOB, OLD_PARENT, [{"name": "old-name"}]),
            True,
            id="renamed-with-an-alias",
        ),
    ],
)
def test_the_stand_in_engine_matches_as_the_engine_does(old: str, registered: Registered, claimed: bool) -> None:
    match = match_old_state([registered], [old], project=PROJECT, stack=STACK)
    assert (old in match.claimed) is claimed


def test_children_of_a_renamed_parent_follow_it_by_their_name_prefix() -> None:
    """inheritedChildAlias: `app-fn` under a parent renamed from `app` to `newapp` was `app-fn`, now `newapp-fn`."""
    old_parent, new_parent = _urn("app", COMPONENT), _urn("newapp", COMPONENT)
    old_child = _urn("app-fn", JOB, old_parent)
    registrations = [
        Registered(new_parent, "newapp", COMPONENT, ROOT, [{"name": "app"}]),
        Registered(_urn("newapp-fn", JOB, new_parent), "newapp-fn", JOB, new_parent),
    ]
    match = match_old_state(registrations, [old_parent, old_child], project=PROJECT, stack=STACK)
    assert match.claimed == {old_parent: new_parent, old_child: _urn("newapp-fn", JOB, new_parent)}


def test_two_resources_cannot_take_over_one() -> None:
    old = _urn("gate", JOB, OLD_PARENT)
    registrations = [
        Registered(_urn("gate", JOB, NEW_PARENT), "gate", JOB, NEW_PARENT, [{"parentUrn": OLD_PARENT}]),
        Registered(_urn("gate", JOB, _urn("x", COMPONENT)), "gate", JOB, _urn("x", COMPONENT), [{"urn": old}]),
    ]
    assert match_old_state(registrations, [old], project=PROJECT, stack=STACK).errors


class _Thing(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(COMPONENT, name, None, opts)
        self.register_outputs({})


def _job_under(*, moved: bool, alias: bool) -> ProgramRun:
    def build() -> None:
        provider = k8s.Provider("cluster", kubeconfig="unused")
        host = _Thing("host", pulumi.ResourceOptions(providers=[provider]))
        parent: pulumi.Resource = _Thing("host-gate", pulumi.ResourceOptions(parent=host)) if moved else host
        aliases = [pulumi.Alias(parent=host)] if alias else None
        k8s.batch.v1.Job("host-gate", opts=pulumi.ResourceOptions(parent=parent, aliases=aliases))

    return run_pulumi(build, stack=STACK)


@pytest.mark.parametrize(("alias", "kept"), [(False, False), (True, True)], ids=["no-alias", "alias"])
def test_what_the_sdk_sends_for_an_alias_is_what_the_engine_needs(alias: bool, kept: bool) -> None:
    """The Python SDK's own alias spec, through the stand-in engine: only the aliased move keeps the Job."""
    before = {r.urn for r in _job_under(moved=False, alias=False).registrations}
    after = registered(_job_under(moved=True, alias=alias))
    match = match_old_state(after, before, project=PROJECT, stack=STACK)
    old_job = _urn("host-gate", JOB, OLD_PARENT)
    assert (old_job in match.claimed) is kept


def test_the_harness_gives_the_urns_the_engine_gives() -> None:
    """A grandchild's URN carries every ancestor's type, and a top-level one none of the stack's."""
    run = _job_under(moved=True, alias=False)
    assert run.one(COMPONENT, "host").urn == f"urn:pulumi:{STACK}::{PROJECT}::{COMPONENT}::host"
    assert run.one(COMPONENT, "host-gate").urn == NEW_PARENT
    assert run.one(JOB, "host-gate").urn == f"urn:pulumi:{STACK}::{PROJECT}::{COMPONENT}${COMPONENT}${JOB}::host-gate"
