#!/usr/bin/env bash
# On the control plane: the Node of a worker, from claiming its name to removing it.
#
# ACTION=claim: refuse a name another machine's node already has (a node is named after its
# hostname, so two machines with one hostname would share it); a worker label means a worker that
# joined before. Joined workers carry node.kubernetes.io/microk8s-worker (canonical/microk8s
# scripts/wrappers/join.py @v1.36).
# ACTION=ready: wait until the node exists and is Ready.
# ACTION=drain: move every pod off the node, DaemonSets aside; a missing node is fine.
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
      log "draining"
      kubectl drain "${NODE_NAME}" --ignore-daemonsets --delete-emptydir-data --timeout="${TIMEOUT_SECONDS}s" >&2
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
