"""A stand-in machine for host scripts: fake snap, microk8s, nvidia-smi, brev, ssh, kubectl and sudo.

Every fake logs its command line and answers as a host in the state given by
FAKE_* variables would, so a script's behaviour (what it runs, what it skips,
what it prints) is tested without a real host.
"""

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.gpu_host.host_scripts import SCRIPTS_DIR, render_script

FAKE = r"""#!/usr/bin/env bash
tool=$(basename "$0")
echo "${tool} $*" >> "${FAKE_LOG}"
# FAKE_FAIL_AT=<n>: the n-th call of any fake tool fails, printing its whole command line, as a tool that
# echoes its arguments in an error would (a failure injected at every point of a script).
if [[ -n "${FAKE_FAIL_AT:-}" ]]; then
  calls=$(wc -l < "${FAKE_LOG}")
  if (( calls == FAKE_FAIL_AT )); then
    echo "${tool}: failed: $*"
    echo "${tool}: failed: $*" >&2
    exit 1
  fi
fi
listed() { [[ " ${2} " == *" ${1} "* ]]; }
case "${tool}" in
  sudo) [[ "$1" == -n ]] && shift; exec "$@" ;;
  id) echo ubuntu ;;
  usermod) exit 0 ;;
  hostname) if [[ "${1:-}" == -I ]]; then echo "${FAKE_LOCAL_ADDRESSES:-10.0.0.6}"; else echo gpu-node-1; fi ;;
  snap)
    case "$1" in
      list) [[ -n "${FAKE_SNAP_CHANNEL:-}" ]] || { echo "error: no matching snaps installed" >&2; exit 1; }
            echo "Name Version Rev Tracking Publisher Notes"
            echo "microk8s v1.36.0 8000 ${FAKE_SNAP_CHANNEL} canonical classic" ;;
    esac ;;
  microk8s)
    case "$1" in
      add-node|join|leave|remove-node) exec python3 "${FAKE_CLUSTER}" "$@" ;;
      kubectl) [[ "$2" == wait || "$2" == drain || "$3" == node ]] && exec python3 "${FAKE_CLUSTER}" "${@:2}" ;;
    esac
    case "$1 $2" in
      "status --format") listed "$5" "${FAKE_ENABLED:-}" && echo enabled || echo disabled ;;
      "config "*) printf 'apiVersion: v1\nclusters:\n- cluster:\n    server: %s\n  name: microk8s\n' \
                    https://10.0.0.5:16443
                  printf 'users:\n- name: admin\n  user:\n    client-key-data: %s\n' "${FAKE_ADMIN_KEY:-a2V5}" ;;
      "kubectl get")
        if [[ "$3" == daemonset ]]; then
          # The ingress add-on's controller: FAKE_INGRESS is traefik (1.35 and later) or nginx (1.34 and before).
          [[ "$4" == traefik && "${FAKE_INGRESS:-traefik}" == traefik ]] && { echo "daemonset.apps/traefik"; exit 0; }
          [[ "$4" == nginx-ingress-microk8s-controller && "${FAKE_INGRESS:-}" == nginx ]] \
            && { echo "daemonset.apps/$4"; exit 0; }
          echo "Error from server (NotFound): daemonsets.apps \"$4\" not found" >&2; exit 1
        elif [[ "$3" == deployments ]]; then printf '%s\n' ${FAKE_OPERATOR_NAMESPACES:-}
        else echo "${FAKE_NAMESPACE_PART_OF:-}"; fi ;;
    esac ;;
  openssl) echo "X509v3 Subject Alternative Name:"
           echo "    DNS:kubernetes, IP Address:127.0.0.1, IP Address:10.0.0.5${FAKE_EXTRA_SAN:+, ${FAKE_EXTRA_SAN}}" ;;
  nvidia-smi) [[ -n "${FAKE_GPUS:-}" ]] || { echo "NVIDIA-SMI has failed" >&2; exit 9; }
              printf '%b\n' "${FAKE_GPUS}" ;;
  brev) exec python3 "${FAKE_BREV}" "$@" ;;
  timeout) [[ " ${FAKE_REACHABLE:-} " == *" ${*: -2:1} "* ]] || exit 124 ;;
  ssh)
    # `ssh -G <host>`: the config brev wrote. Any other call reaches a worker: here, this same stand-in machine
    # runs the remote command (its last argument), unless FAKE_SSH_UNREACHABLE says the worker is gone.
    if [[ "$1" == -G ]]; then
      echo "hostname ${FAKE_SSH_HOSTNAME:-198.51.100.7}"; echo "user ubuntu"; echo "port 22"
      echo "identityfile ${FAKE_IDENTITY}"; echo "proxycommand ${FAKE_PROXY:-none}"
    elif [[ -n "${FAKE_SSH_UNREACHABLE:-}" ]]; then
      echo "ssh: connect to host port 22: Connection timed out" >&2; exit 255
    else
      exec bash -c "${@: -1}"
    fi ;;
  kubectl)
    case "$1" in
      get) printf '%b' "${FAKE_GPU_NODES:-}" ;;
      create) cat <<'YAML'
kind: ConfigMap
YAML
      ;;
      apply) cat > /dev/null ;;
    esac ;;
esac
exit 0
"""

FAKE_BREV = r"""
# Brev as `brev ls --json` shows it (brevdev/brev-cli pkg/cmd/ls/ls.go @v0.6.327): instances live in
# FAKE_BREV_STATE (JSON name -> {status, id, gpu, type}); a new instance is DEPLOYING for FAKE_BREV_DEPLOY_POLLS
# listings, and gets a fresh id. `brev delete` takes a name or an id (pkg/cmd/delete/delete.go).
# FAKE_BREV_CREATE_FAILS: `brev create` exits non-zero, `after` making the instance (a CLI that gave up waiting) or
# `before` (refused).
import json, os, secrets, sys
path = os.environ["FAKE_BREV_STATE"]
state = json.load(open(path)) if os.path.exists(path) else {}
verb = sys.argv[1]
if verb == "ls":
    if os.environ.get("FAKE_BREV_LOGGED_OUT"):
        sys.exit("read: EOF")
    for name, entry in state.items():
        if entry["status"] == "DEPLOYING":
            entry["polls"] -= 1
            if entry["polls"] < 0:
                entry["status"] = "RUNNING"
    workspaces = [
        {"name": n, "id": e["id"], "status": e["status"], "gpu": e.get("gpu", "L40S"),
         "instance_type": e.get("type", "gpu-l40s-a.1gpu")}
        for n, e in state.items()
    ]
    print(json.dumps({"workspaces": workspaces or None}))
elif verb == "create":
    if os.environ.get("FAKE_BREV_CREATE_FAILS") == "before":
        sys.exit("error: no capacity for L40S on nebius")
    args = sys.argv[2:]
    flags = dict(zip(args[1::2], args[2::2]))
    state[args[0]] = {
        "status": "DEPLOYING",
        "polls": int(os.environ.get("FAKE_BREV_DEPLOY_POLLS", "0")),
        "id": "id-" + secrets.token_hex(4),
        "gpu": flags.get("--gpu-name", "L40S"),
        "type": flags.get("--type", "gpu-l40s-a.1gpu"),
    }
    if os.environ.get("FAKE_BREV_CREATE_FAILS") == "after":
        json.dump(state, open(path, "w"))
        sys.exit("error: context deadline exceeded")
elif verb == "delete":
    found = [n for n, e in state.items() if sys.argv[2] in (n, e["id"])]
    if not found:
        sys.exit(f"instance with id/name {sys.argv[2]} not found")
    del state[found[0]]
json.dump(state, open(path, "w"))
"""

FAKE_CLUSTER = r"""
# A MicroK8s cluster as its control plane and one worker see it (canonical/microk8s scripts/wrappers
# add_token.py, join.py, leave.py, remove_node.py @v1.36): FAKE_CLUSTER_STATE holds the nodes
# (name -> {"worker", "ready"}); the cluster agent's token file is FAKE_TOKENS_FILE and the worker's
# lock directory FAKE_LOCK_DIR. The worker that joins is named FAKE_WORKER_HOSTNAME.
import json, os, secrets, sys
from pathlib import Path
state_path = Path(os.environ["FAKE_CLUSTER_STATE"])
state = json.loads(state_path.read_text()) if state_path.exists() else {"nodes": {}}
nodes = state["nodes"]
tokens = Path(os.environ["FAKE_TOKENS_FILE"])
lock = Path(os.environ["FAKE_LOCK_DIR"]) / "clustered.lock"
verb, args = sys.argv[1], sys.argv[2:]
def save():
    state_path.write_text(json.dumps(state))
if verb == "add-node":
    token, check = os.environ.get("FAKE_JOIN_TOKEN") or secrets.token_hex(16), "0a1b2c3d4e5f"
    with tokens.open("a") as file:
        file.write(token + "\n")
    info = {"token": f"{token}/{check}", "urls": [f"10.0.0.5:25000/{token}/{check}", f"fd00::5:25000/{token}/{check}"]}
    print(json.dumps(info, indent=2))
elif verb == "join":
    url = args[0]
    print(f"Contacting cluster at {url.split(':')[0]}")
    # An address where something answers that is not this cluster's control plane (the worker's own agent).
    if url.split(":")[0] in os.environ.get("FAKE_JOIN_FAILS_VIA", "").split():
        print(f"Connection failed. Invalid token used to join: microk8s join {url} (500)")
        sys.exit(1)
    # As `microk8s join` does in some of its messages, the connection string is echoed.
    print(f"Joining with microk8s join {url} --worker")
    token = url.split("/")[1]
    held = tokens.read_text().splitlines() if tokens.exists() else []
    if token not in held:
        print("Error: invalid token (500).")
        sys.exit(6)
    tokens.write_text("".join(f"{line}\n" for line in held if line != token))
    lock.touch()
    nodes[os.environ.get("FAKE_WORKER_HOSTNAME", "gpu-node-2")] = {"worker": True, "ready": True}
    save()
    print("Successfully joined the cluster.")
elif verb == "leave":
    lock.unlink()
    nodes.get(os.environ.get("FAKE_WORKER_HOSTNAME", "gpu-node-2"), {})["ready"] = False
    save()
elif verb == "remove-node":
    if args[0] not in nodes:
        print(f"Node {args[0]} does not exist.")
        sys.exit(1)
    del nodes[args[0]]
    save()
elif verb == "get":
    name = args[1]
    if name not in nodes:
        print(f'Error from server (NotFound): nodes "{name}" not found', file=sys.stderr)
        sys.exit(1)
    if args[2:] == ["-o", "name"]:
        print(f"node/{name}")
    elif "Ready" in " ".join(args[2:]):
        # The node's Ready condition: a machine that stopped answering is Unknown (node lifecycle controller).
        print("True" if nodes[name].get("ready") else "Unknown", end="")
    else:
        print("microk8s-worker" if nodes[name]["worker"] else "", end="")
elif verb == "wait":
    name = args[1].removeprefix("node/")
    if not nodes.get(name, {}).get("ready"):
        print("error: timed out waiting for the condition", file=sys.stderr)
        sys.exit(1)
elif verb == "drain":
    # On a node that no longer answers, its pods never finish terminating: drain waits for them, and for
    # evictions a PodDisruptionBudget holds, until its timeout (kubernetes/kubectl pkg/drain @v0.36.0).
    if not nodes[args[0]].get("ready") and "--skip-wait-for-delete-timeout" not in " ".join(args):
        print("error: timed out waiting for the pods to be deleted", file=sys.stderr)
        sys.exit(1)
    nodes[args[0]]["drained"] = True
    nodes[args[0]]["drain_flags"] = [a for a in args[1:] if a.startswith("--")]
    save()
"""

TOOLS = (
    "sudo",
    "id",
    "usermod",
    "hostname",
    "snap",
    "microk8s",
    "openssl",
    "nvidia-smi",
    "brev",
    "ssh",
    "kubectl",
    "timeout",
)


def _interpreter(script: str) -> str:
    """bash for host scripts; dash, a strict POSIX sh, for those that run on the operator's machine (#!/bin/sh)."""
    return "dash" if (SCRIPTS_DIR / script).read_text().startswith("#!/bin/sh\n") else "bash"


MICROK8S_KUBELET_ARGS = """--kubeconfig=${SNAP_DATA}/credentials/kubelet.config
--root-dir=${SNAP_COMMON}/var/lib/kubelet
--fail-swap-on=false
--eviction-hard="memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi"
--container-runtime-endpoint=${SNAP_COMMON}/run/containerd.sock
--cluster-dns=10.152.183.10
"""
"""A few lines of MicroK8s' kubelet arguments as installed, the dns add-on's included (canonical/microk8s
microk8s-resources/default-args/kubelet @v1.36; canonical/microk8s-core-addons addons/dns/enable)."""


@dataclass
class FakeHost:
    root: Path
    state: dict[str, str] = field(default_factory=dict)

    @property
    def log(self) -> Path:
        return self.root / "calls.log"

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def brev_instances(self, **statuses: str) -> None:
        """Instances Brev already has, by name and status (e.g. RUNNING); they keep that status. Each has the
        id `id-<name>`, an L40S and the type gpu-l40s-a.1gpu."""
        state = {
            name.replace("_", "-"): {"status": status, "polls": 10**6, "id": f"id-{name.replace('_', '-')}"}
            for name, status in statuses.items()
        }
        (self.root / "brev.json").write_text(json.dumps(state))

    def brev_listing(self) -> dict[str, dict[str, str]]:
        path = self.root / "brev.json"
        listing: dict[str, dict[str, str]] = json.loads(path.read_text()) if path.exists() else {}
        return listing

    def cluster_nodes(self, **nodes: dict[str, bool]) -> None:
        """Nodes the cluster already has, by name: {"worker": ..., "ready": ...}."""
        state = {"nodes": {name.replace("_", "-"): node for name, node in nodes.items()}}
        (self.root / "cluster.json").write_text(json.dumps(state))

    def nodes(self) -> dict[str, dict[str, Any]]:
        path = self.root / "cluster.json"
        nodes: dict[str, dict[str, Any]] = json.loads(path.read_text())["nodes"] if path.exists() else {}
        return nodes

    @property
    def kubelet_args(self) -> list[str]:
        return (self.root / "args-kubelet").read_text().splitlines()

    @property
    def tokens_file(self) -> Path:
        return self.root / "cluster-tokens.txt"

    def brev_state(self) -> dict[str, str]:
        path = self.root / "brev.json"
        return {n: e["status"] for n, e in json.loads(path.read_text()).items()} if path.exists() else {}

    def run(self, script: str, inputs: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
        """Run the script exactly as shipped: rendered with its inputs, under bash, `stdin` on its stdin."""
        env = {
            "PATH": f"{self.root / 'bin'}:{os.environ['PATH']}",
            "HOME": str(self.root),
            "FAKE_LOG": str(self.log),
            "FAKE_BREV": str(self.root / "fake-brev.py"),
            "FAKE_BREV_STATE": str(self.root / "brev.json"),
            "FAKE_CLUSTER": str(self.root / "fake-cluster.py"),
            "FAKE_CLUSTER_STATE": str(self.root / "cluster.json"),
            "FAKE_TOKENS_FILE": str(self.root / "cluster-tokens.txt"),
            "FAKE_LOCK_DIR": str(self.root),
            **self.state,
        }
        return subprocess.run(
            [_interpreter(script), "-c", render_script(script, inputs)],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )


def fake_host(root: Path, without: tuple[str, ...] = ()) -> FakeHost:
    """A host with every fake tool installed except those in `without`."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    fake = root / "fake"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    (root / "fake-brev.py").write_text(FAKE_BREV)
    (root / "fake-cluster.py").write_text(FAKE_CLUSTER)
    for tool in TOOLS:
        if tool not in without:
            (bin_dir / tool).symlink_to(fake)
    (root / "args-kubelet").write_text(MICROK8S_KUBELET_ARGS)
    return FakeHost(root, {"ARGS_FILE": str(root / "args-kubelet")})
