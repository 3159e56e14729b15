#!/usr/bin/env bash
# On the control plane: the Node of a worker, from claiming its name to removing it.
#
# ACTION=claim: refuse a name another machine's node already has (a node is named after its
# hostname, so two machines with one hostname would share it); a worker label means a worker that
# joined before. Joined workers carry node.kubernetes.io/microk8s-worker (canonical/microk8s
# scripts/wrappers/join.py @v1.36).
# ACTION=ready: wait until the node exists and is Ready.
# ACTION=drain: move every pod off the node, DaemonSets aside; a missing node is fine. A node that is not
# Ready (its machine died) cannot confirm its pods are gone, and drain would wait for them for ever: its pods
# are deleted rather than evicted (--disable-eviction, past PodDisruptionBudgets), unmanaged ones too
# (--force), and pods already being deleted are not waited for (--skip-wait-for-delete-timeout):
# kubernetes/kubectl pkg/cmd/drain/drain.go @v0.36.0.
# ACTION=remove: `microk8s remove-node`, which deletes the Node and its callback token, and exits 1
# for a node that does not exist (scripts/wrappers/remove_node.py @v1.36), hence the check.
#
# Inputs (environment): ACTION, NODE_NAME, TIMEOUT_SECONDS, POLL_SECONDS (optional).
set -euo pipefail

: "${ACTION:?claim, ready, drain or remove}"
: "${NODE_NAME:?node name of the worker}"
: "${TIMEOUT_SECONDS:?how long to wait}"
POLL_SECONDS="${POLL_SECONDS:-5}"

log() { echo "[worker ${NODE_NAME}] $*" >&2; }
fail() { log "$*"; exit 1; }
kubectl() { sudo -n microk8s kubectl "$@"; }
exists() { kubectl get node "${NODE_NAME}" -o name >/dev/null 2>&1; }

case "${ACTION}" in
  claim)
    if exists; then
      role=$(kubectl get node "${NODE_NAME}" -o 'jsonpath={.metadata.labels.node\.kubernetes\.io/microk8s-worker}')
      [[ -n "${role}" ]] \
        || fail "the cluster already has a node named ${NODE_NAME} that is not a worker: every machine needs its own hostname"
      log "already a worker of this cluster"
    fi
    echo "node=${NODE_NAME}"
    ;;
  ready)
    deadline=$(( $(date +%s) + TIMEOUT_SECONDS ))
    until exists; do
      (( $(date +%s) < deadline )) || fail "no node ${NODE_NAME} registered within ${TIMEOUT_SECONDS}s of the join"
      sleep "${POLL_SECONDS}"
    done
    kubectl wait --for=condition=Ready "node/${NODE_NAME}" --timeout="${TIMEOUT_SECONDS}s" >&2
    echo "ready=${NODE_NAME}"
    ;;
  drain)
    if exists; then
      flags=(--ignore-daemonsets --delete-emptydir-data --timeout="${TIMEOUT_SECONDS}s")
      ready=$(kubectl get node "${NODE_NAME}" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')
      if [[ "${ready}" != True ]]; then
        log "the node is not Ready (${ready:-no status}): its machine is gone; deleting its pods without waiting"
        flags+=(--force --disable-eviction --skip-wait-for-delete-timeout=1)
      else
        log "draining"
      fi
      kubectl drain "${NODE_NAME}" "${flags[@]}" >&2
    else
      log "no such node; nothing to drain"
    fi
    ;;
  remove)
    if exists; then
      log "removing the node from the cluster"
      sudo -n microk8s remove-node "${NODE_NAME}" >&2
    else
      log "no such node; nothing to remove"
    fi
    ;;
  *) fail "unknown ACTION ${ACTION}: claim, ready, drain or remove" ;;
esac
