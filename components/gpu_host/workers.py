"""Worker nodes: more GPU machines joined to the MicroK8s control plane, installed all at once, upgraded one by one.

Every worker goes through the same steps, the long ones (install, join) in parallel with the
other workers, so a cluster of seven machines is ready soon after one of two would be:

- on the worker: preflight (its GPUs, as on the control plane), then MicroK8s from the same channel;
- on the control plane: claim the worker's node name;
- on the control plane, once for all workers: a fresh single-use join token per worker that is not a
  node yet (secret, never logged);
- on the worker: join with its token; then MicroK8s held at the stack's channel (a no-op on a new
  worker, the refresh when `versions.microk8s` changes), the platform's kubelet arguments, and on the
  control plane a wait until its node is Ready.

The channel step of each worker waits for the control plane's whole bootstrap (refreshed, Ready,
its add-ons and kubeconfig) and for the worker before it to be Ready again: an upgrade goes
control plane first, then one worker at a time, never a node newer than its API server and never
two nodes away at once. The install step ignores later channel changes, so only the channel step
refreshes.

Each step undoes itself in reverse when the worker is removed: drain the node, leave the cluster,
remove the node, then MicroK8s comes off the worker if this stack installed it.
"""

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command

from components.gpu_host.host_facts import join_urls, parse_join_tickets, parse_preflight
from components.gpu_host.host_scripts import MARKER_DIR, remote_command, render_script
from components.gpu_host.remote_steps import remote_delete, remote_step
from config.gpu_host.host import HostExpectations

JOIN_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class Worker:
    key: str
    """Names the worker's resources, e.g. w1 (Brev) or its address (ssh): stable while the worker exists."""
    connection: pulumi.Output[Any]
    """SSH connection to the worker (secret)."""
    address: pulumi.Input[str]
    """Where the worker is reached, from outside and from the cluster's pods."""
    after: Sequence[pulumi.Resource] = ()
    """What must exist before the worker is reachable, e.g. its Brev instance."""


@dataclass(frozen=True)
class ControlPlane:
    connection: pulumi.Output[Any]
    """SSH connection to the control plane (secret)."""
    address: pulumi.Input[str]
    """Where the control plane is reached; a worker tries it last when it is an IPv4 address."""
    running: pulumi.Resource
    """The last control-plane step whose restarts and certificate changes a join must come after."""


@dataclass(frozen=True)
class WorkerChecks:
    """What every machine must prove before MicroK8s goes on it: the same GPUs as the control plane."""

    channel: str
    expect: HostExpectations
    expected_gpu: str | None
    kubelet_flags: str
    """The platform's kubelet arguments, space-separated, set on every worker as on the control plane."""


@dataclass(frozen=True)
class JoinedWorkers:
    nodes: list[pulumi.Output[str]]
    """Each worker's node name, in the order the workers were given."""
    ready: list[pulumi.Resource]
    """One per worker: done once its node is Ready."""


def _node_script(action: str, node: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    return {"ACTION": action, "NODE_NAME": node, "TIMEOUT_SECONDS": str(JOIN_TIMEOUT_SECONDS)}


def _node_step(
    resource_name: str,
    action: str,
    undo: str,
    node: pulumi.Input[str],
    *,
    connection: pulumi.Input[Any],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource],
) -> command.remote.Command:
    """worker-node.sh on the control plane: `action` when created, `undo` when deleted."""
    return remote_step(
        resource_name,
        connection=connection,
        script="worker-node.sh",
        inputs=_node_script(action, node),
        parent=parent,
        after=after,
        delete=remote_delete("worker-node.sh", _node_script(undo, node)),
    )


def teardown_scripts(marker_dir: str = MARKER_DIR, **leave_inputs: str) -> dict[str, str]:
    """What a removed worker runs, sent from the control plane (base64): leave the cluster, then MicroK8s off it if
    this stack installed it."""

    def encoded(name: str, inputs: dict[str, str]) -> str:
        return base64.b64encode(render_script(name, inputs).encode()).decode()

    return {
        "LEAVE_SCRIPT": encoded("worker-join.sh", {"ACTION": "leave", **leave_inputs}),
        "REMOVE_SCRIPT": encoded("microk8s-remove.sh", {"MARKER_DIR": marker_dir}),
    }


def _release_step(
    resource_name: str,
    worker: Worker,
    *,
    connection: pulumi.Input[Any],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource],
) -> command.remote.Command:
    """worker-release.sh on the control plane: the worker's own teardown when it is removed, skipped if it is dead."""
    part = worker.connection.apply
    inputs: dict[str, pulumi.Input[str]] = {
        "WORKER_HOST": pulumi.Output.unsecret(part(lambda c: str(c["host"]))),
        "WORKER_USER": pulumi.Output.unsecret(part(lambda c: str(c["user"]))),
        "WORKER_PORT": pulumi.Output.unsecret(part(lambda c: str(c["port"]))),
        **teardown_scripts(),
    }
    return remote_step(
        resource_name,
        connection=connection,
        script="worker-release.sh",
        inputs={**inputs, "ACTION": "hold"},
        parent=parent,
        after=after,
        delete=remote_delete("worker-release.sh", {**inputs, "ACTION": "release"}),
        stdin=pulumi.Output.secret(part(lambda c: str(c["privateKey"]))),
    )


def worker_node_list(names: list[str]) -> str:
    """The worker node names, space-separated; two machines with one hostname would be one node."""
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise pulumi.RunError(
            f"more than one worker has the hostname {', '.join(twice)}: a MicroK8s node is named after its "
            "machine's hostname, so give each worker its own (hostnamectl set-hostname)"
        )
    return " ".join(sorted(names))


def join_workers(
    name: str,
    workers: Sequence[Worker],
    *,
    control_plane: ControlPlane,
    checks: WorkerChecks,
    parent: pulumi.Resource,
) -> JoinedWorkers:
    """Every worker's steps, children of `parent`, named `<name>-<worker key>-<step>`."""
    if not workers:
        return JoinedWorkers([], [])
    cp = control_plane.connection
    nodes: list[pulumi.Output[str]] = []
    claims: list[command.remote.Command] = []
    installs: list[command.remote.Command] = []
    for worker in workers:
        prefix = f"{name}-{worker.key}"
        preflight = remote_step(
            f"{prefix}-preflight",
            connection=worker.connection,
            script="preflight.sh",
            inputs={
                "EXPECT_GPU": checks.expected_gpu or "",
                "MIN_GPU_MEMORY_MIB": str(checks.expect.min_gpu_memory_mib or ""),
                "UBUNTU_RELEASE": checks.expect.ubuntu_release,
            },
            parent=parent,
            after=worker.after,
            triggers=[checks.channel],
        )
        node = preflight.stdout.apply(lambda stdout: str(parse_preflight(stdout)["nodeName"]))
        nodes.append(node)
        installs.append(
            remote_step(
                f"{prefix}-microk8s",
                connection=worker.connection,
                script="microk8s-install.sh",
                inputs={"MICROK8S_CHANNEL": checks.channel, "MARKER_DIR": MARKER_DIR},
                parent=parent,
                after=[preflight],
                # MicroK8s comes off the worker from the control plane (worker-release.sh), which a dead worker
                # cannot stop. The channel step refreshes, in order; this one would do it beside the control plane's.
                ignore_changes=["create"],
            )
        )
        # Last to go: the node is removed once the worker has left the cluster.
        claims.append(
            _node_step(
                f"{prefix}-node", "claim", "remove", node, connection=cp, parent=parent, after=[control_plane.running]
            )
        )
    tokens = remote_step(
        f"{name}-join-tokens",
        connection=control_plane.connection,
        script="worker-tokens.sh",
        inputs={"WORKERS": pulumi.Output.all(*nodes).apply(worker_node_list), "MARKER_DIR": MARKER_DIR},
        parent=parent,
        after=claims,
        # With the last worker gone, the tokens no worker used are revoked.
        delete=remote_command("worker-tokens.sh", {"WORKERS": "", "MARKER_DIR": MARKER_DIR}),
        secret_output=True,
    )
    tickets = tokens.stdout.apply(parse_join_tickets)
    ready: list[pulumi.Resource] = []
    upgraded_before: list[pulumi.Resource] = [control_plane.running]
    for worker, node, install, claim in zip(workers, nodes, installs, claims, strict=True):
        prefix = f"{name}-{worker.key}"
        urls = pulumi.Output.all(tickets, node, control_plane.address).apply(
            lambda parts: join_urls(parts[0].get(parts[1]), parts[2])
        )
        join = remote_step(
            f"{prefix}-join",
            connection=worker.connection,
            script="worker-join.sh",
            inputs={"ACTION": "join"},
            stdin=pulumi.Output.secret(urls),
            parent=parent,
            after=[install, claim, tokens],
        )
        release = _release_step(f"{prefix}-release", worker, connection=cp, parent=parent, after=[join])
        channel = remote_step(
            f"{prefix}-channel",
            connection=worker.connection,
            script="microk8s-install.sh",
            inputs={"MICROK8S_CHANNEL": checks.channel, "MARKER_DIR": MARKER_DIR},
            parent=parent,
            after=[release, *upgraded_before],
            triggers=[checks.channel],
        )
        # The join wrote the control plane's arguments over the worker's: the platform's are set after it.
        kubelet = remote_step(
            f"{prefix}-kubelet",
            connection=worker.connection,
            script="kubelet-args.sh",
            inputs={"KUBELET_FLAGS": checks.kubelet_flags},
            parent=parent,
            after=[channel],
            triggers=[checks.channel],
        )
        remote_step(
            f"{prefix}-drift-check",
            connection=worker.connection,
            script="host-drift.sh",
            inputs={"MICROK8S_CHANNEL": checks.channel, "KUBELET_FLAGS": checks.kubelet_flags},
            parent=parent,
            after=[kubelet],
        )
        # First to go: the node is drained while it is still in the cluster.
        node_ready = _node_step(
            f"{prefix}-ready", "ready", "drain", node, connection=cp, parent=parent, after=[kubelet]
        )
        ready.append(node_ready)
        upgraded_before = [node_ready]
    return JoinedWorkers(nodes, ready)
