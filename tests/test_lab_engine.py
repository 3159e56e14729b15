"""The real Pulumi engine in the lab: what an `up` does to each resource, and whether tests/engine_rules.py agrees.

The suite's lifecycle tests (test_safe_to_change.py, test_lifecycle.py, test_dead_cluster.py) plan an `up`
with a model of the engine's step generator; here the lab's CLI (v3.274.0, built from the Go module proxy)
and its Kubernetes provider take the same before and after programs against the lab's API server, and the
steps they take are compared with the model's, case by case. Each case is one rule the program relies on.
"""

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
import pytest
from pulumi import automation as auto

from harness import ROOT, run_pulumi
from harness.lab.build import PULUMI_KUBERNETES_RELEASE
from harness.lab.cluster import read_lab
from harness.lab.engine import Engine
from tests.engine_rules import Step, plan
from tests.lab import Lab, private_lab

PROVIDER_VERSION = PULUMI_KUBERNETES_RELEASE.removeprefix("v")
"""The lab's build of pulumi-kubernetes (the module proxy serves its provider module at that release alone)."""
NAMESPACE = "engine-rules"


@dataclasses.dataclass(frozen=True)
class Shape:
    """One program: its ConfigMaps (name -> data), the options that matter, and the provider's identity."""

    maps: tuple[tuple[str, str], ...] = (("first", "one"), ("second", "two"))
    object_names: tuple[tuple[str, str], ...] = ()
    """Resource -> the object's metadata.name, where it differs from the resource's."""
    ignore_data: bool = False
    replace_on_data: bool = False
    delete_before_replace: bool = False
    cluster: str = "lab"
    mutable: bool = True
    """The provider's enableConfigMapMutable, as the program sets it (components/shared/providers.py)."""
    aliases: tuple[tuple[str, str], ...] = ()
    """New resource name -> the old one it was."""


def program(kubeconfig: str, shape: Shape) -> Callable[[], None]:
    def build() -> None:
        provider = k8s.Provider(
            "lab",
            kubeconfig=kubeconfig,
            cluster_identifier=shape.cluster,
            enable_config_map_mutable=shape.mutable,
            opts=pulumi.ResourceOptions(version=PROVIDER_VERSION),
        )
        names = dict(shape.object_names)
        aliases = dict(shape.aliases)
        for resource, data in shape.maps:
            options = pulumi.ResourceOptions(
                provider=provider,
                ignore_changes=["data"] if shape.ignore_data else None,
                replace_on_changes=["data"] if shape.replace_on_data else None,
                delete_before_replace=shape.delete_before_replace,
                aliases=[pulumi.Alias(name=aliases[resource])] if resource in aliases else None,
            )
            metadata = {"name": names.get(resource, resource), "namespace": NAMESPACE}
            k8s.core.v1.ConfigMap(resource, metadata=metadata, data={"value": data}, opts=options)

    return build


CASES: dict[str, tuple[Shape, Shape]] = {
    "nothing-changes": (Shape(), Shape()),
    "data-changes-in-place": (Shape(), Shape(maps=(("first", "uno"), ("second", "two")))),
    "an-ignored-change-is-no-change": (
        Shape(ignore_data=True),
        Shape(maps=(("first", "uno"), ("second", "two")), ignore_data=True),
    ),
    # A fixed name can only be replaced deleting first (see the last test): the program's gates do so.
    "replace-on-changes-replaces": (
        Shape(replace_on_data=True, delete_before_replace=True),
        Shape(maps=(("first", "uno"), ("second", "two")), replace_on_data=True, delete_before_replace=True),
    ),
    "a-new-object-name-replaces-creating-first": (Shape(), Shape(object_names=(("first", "first-renamed"),))),
    "delete-before-replace-deletes-first": (
        Shape(delete_before_replace=True),
        Shape(object_names=(("first", "first-renamed"),), delete_before_replace=True),
    ),
    "a-new-cluster-identifier-replaces-everything-of-that-provider": (Shape(), Shape(cluster="lab-rebuilt")),
    "a-dropped-resource-is-deleted": (Shape(), Shape(maps=(("first", "one"),))),
}


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    with private_lab("engine", kai_crds=False) as lab:
        lab.admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, manager="test")
        yield lab


@pytest.fixture(scope="module")
def engine(lab: Lab) -> Engine:
    described = read_lab(lab.state)
    assert described is not None
    binaries = Path(described["binaries"])
    shutil.rmtree(lab.state / "engine", ignore_errors=True)  # this lab's cluster is new: so is its state
    engine = Engine(lab.state / "engine", binaries / "pulumi").prepare()
    engine.install_plugin("resource", "kubernetes", PROVIDER_VERSION, binaries / "pulumi-resource-kubernetes")
    return engine


def _real_steps(stack: auto.Stack) -> list[Step]:
    """What the engine did, as the model names it: a replacement is `replace` where it is created and `delete`
    where the old one goes; `same` is no step."""
    steps: list[Step] = []

    def record(event: auto.EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is None or pre.metadata.type.startswith("pulumi:"):
            return
        op = pre.metadata.op
        name = pre.metadata.urn.rsplit("::", 1)[-1]
        kind = {
            "create": "create",
            "update": "update",
            "delete": "delete",
            "replace": "replace",
            "delete-replaced": "delete",
        }
        if op.value in kind:
            steps.append(Step(kind[op.value], name, pre.metadata.type))

    stack.up(on_event=record)
    return steps


def _order(step: Step) -> tuple[str, str]:
    return step.op, step.name


@pytest.mark.parametrize("case", CASES)
def test_the_engine_takes_the_steps_the_model_plans(lab: Lab, engine: Engine, case: str) -> None:
    before, after = CASES[case]
    kubeconfig = (lab.state / "kubeconfig").read_text()
    stack = engine.stack("engine-rules", case, program(kubeconfig, before))
    stack.up()
    stack.workspace.program = program(kubeconfig, after)
    real = _real_steps(stack)

    modelled_before = run_pulumi(program(kubeconfig, before), stack=case)
    modelled_after = run_pulumi(program(kubeconfig, after), stack=case)
    modelled = [s for s in plan(modelled_before, modelled_after) if not s.type.startswith("pulumi:")]
    assert sorted(real, key=_order) == sorted(modelled, key=_order), (real, modelled)
    deletes = [i for i, s in enumerate(real) if s.op == "delete"]
    creates = [i for i, s in enumerate(real) if s.op in ("create", "replace")]
    if after.delete_before_replace:
        assert all(d < c for d in deletes for c in creates), ("the old object goes first", real)
    else:
        assert all(d > c for d in deletes for c in creates), ("the new object comes first", real)
    stack.destroy()


def test_an_alias_keeps_the_live_object_of_a_renamed_resource(lab: Lab, engine: Engine) -> None:
    """The URN test's premise (tests/test_urns.py): a registration moved under an alias is the same resource, so
    the engine neither creates nor deletes, and the object on the cluster is the one it was."""
    kubeconfig = (lab.state / "kubeconfig").read_text()
    stack = engine.stack("engine-rules", "alias", program(kubeconfig, Shape()))
    stack.up()
    uid = lab.admin.get("v1", "ConfigMap", "first", NAMESPACE)["metadata"]["uid"]
    renamed = Shape(
        maps=(("primary", "one"), ("second", "two")),
        object_names=(("primary", "first"),),
        aliases=(("primary", "first"),),
    )
    stack.workspace.program = program(kubeconfig, renamed)
    assert _real_steps(stack) == []
    assert lab.admin.get("v1", "ConfigMap", "first", NAMESPACE)["metadata"]["uid"] == uid
    stack.destroy()


def test_without_mutable_config_maps_a_data_change_replaces_a_fixed_name_and_the_up_fails(
    lab: Lab, engine: Engine
) -> None:
    """Why every provider of the program says ConfigMaps and Secrets are mutable: otherwise a change of contents is a
    replacement, created before the old one is deleted, under the same name, and the create fails. The model plans
    the replacement; the real engine fails on it. (v4.25.0 applies the new object over the old and conflicts with its
    field manager; later providers refuse it as AlreadyExists: provider/pkg/await/await.go Creation @v4.32.0.)"""
    kubeconfig = (lab.state / "kubeconfig").read_text()
    before = Shape(mutable=False)
    after = Shape(maps=(("first", "uno"), ("second", "two")), mutable=False)
    modelled = plan(run_pulumi(program(kubeconfig, before)), run_pulumi(program(kubeconfig, after)))
    assert Step("replace", "first", "kubernetes:core/v1:ConfigMap") in modelled
    stack = engine.stack("engine-rules", "immutable", program(kubeconfig, before))
    stack.up()
    stack.workspace.program = program(kubeconfig, after)
    with pytest.raises(auto.CommandError, match="field conflict"):
        stack.up()
    assert lab.admin.get("v1", "ConfigMap", "first", NAMESPACE)["data"] == {"value": "one"}, "the old one stays"
    stack.destroy()


def _chart(folder: Path) -> Path:
    """The smallest chart: one ConfigMap."""
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text("apiVersion: v2\nname: tiny\nversion: 0.1.0\n")
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-the-chart"}, "data": {"a": "b"}}
    (folder / "templates" / "configmap.yaml").write_text(json.dumps(manifest))
    return folder


def dead_cluster_program(kubeconfig: str, chart: Path | None) -> Callable[[], None]:
    """The cluster's provider (its identity kept), a plain object and, with `chart`, a Helm release."""

    def build() -> None:
        provider = k8s.Provider(
            "lab",
            kubeconfig=kubeconfig,
            cluster_identifier="lab",
            enable_config_map_mutable=True,
            opts=pulumi.ResourceOptions(version=PROVIDER_VERSION),
        )
        if chart is None:
            return
        inside = pulumi.ResourceOptions(provider=provider)
        k8s.core.v1.ConfigMap("plain", metadata={"name": "plain", "namespace": NAMESPACE}, opts=inside)
        k8s.helm.v3.Release("release", name="tiny", chart=str(chart), namespace=NAMESPACE, opts=inside)

    return build


def _kinds_in_state(stack: auto.Stack) -> set[str]:
    deployment = stack.export_stack().deployment
    assert deployment is not None
    return {resource["type"] for resource in deployment.get("resources") or []}


def test_a_dead_cluster_stops_the_up_at_its_helm_release_until_the_state_forgets_it(
    lab: Lab, engine: Engine, tmp_path: Path
) -> None:
    """ops/forget_cluster.py's premise and its remedy, on the real engine (its provider v4.25.0): with the cluster
    gone (its provider now reaches nothing), PULUMI_K8S_DELETE_UNREACHABLE lets the plain object go from the state,
    but the release's delete fails and so does the `up`; `pulumi stack export`, the tool, and `pulumi stack import`
    leave a state the same `up` finishes from."""
    kubeconfig = (lab.state / "kubeconfig").read_text()
    stack = engine.stack("engine-rules", "dead-cluster", dead_cluster_program(kubeconfig, _chart(tmp_path / "tiny")))
    stack.up()
    dead = re.sub(r"server: \S+", "server: https://127.0.0.1:1", kubeconfig)
    stack.workspace.program = dead_cluster_program(dead, None)
    stack.workspace.env_vars = {**stack.workspace.env_vars, "PULUMI_K8S_DELETE_UNREACHABLE": "true"}
    with pytest.raises(auto.CommandError, match="release"):
        stack.up()
    left = _kinds_in_state(stack)
    assert "kubernetes:helm.sh/v3:Release" in left, left
    assert "kubernetes:core/v1:ConfigMap" not in left, "a plain object of an unreachable cluster is let go"

    export = tmp_path / "before.json"
    export.write_text(json.dumps({"version": 3, "deployment": stack.export_stack().deployment}))
    forgotten = subprocess.run(
        [sys.executable, "-m", "ops.forget_cluster", str(export)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    stack.import_stack(auto.Deployment(**json.loads(forgotten.stdout)))
    stack.up()
    left = _kinds_in_state(stack)
    assert not {t for t in left if t.startswith("kubernetes:")}, left
