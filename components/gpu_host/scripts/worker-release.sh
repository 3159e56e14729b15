#!/usr/bin/env bash
# On the control plane, for a worker: nothing while it is in the cluster; when it is removed, make it leave
# the cluster and take MicroK8s off it if this stack put it there, over SSH from here, and skip a worker that
# does not answer (dead, stopped, deleted), so that removing it never stops the `up` that removes it.
#
# A step on the worker itself could not do that: pulumi-command runs a remote delete through its own SSH
# connection and fails when the machine does not answer (provider/pkg/provider/remote/commandController.go
# Delete @v1.2.1). The control plane is reachable whenever the cluster is, and its node step removes the
# worker's node (`microk8s remove-node`) whether or not the worker left.
#
# ACTION=hold (create): read the key from stdin and forget it. ACTION=release (delete): as above; what runs on
# the worker, one after the other, is worker-join.sh ACTION=leave, then microk8s-remove.sh, as the program
# rendered them (base64).
#
# Inputs (environment): ACTION, WORKER_HOST, WORKER_USER, WORKER_PORT, LEAVE_SCRIPT, REMOVE_SCRIPT,
# CONNECT_TIMEOUT_SECONDS (optional). On stdin: the worker's SSH private key (secret, never in this text).
set -euo pipefail

: "${ACTION:?hold or release}"
: "${WORKER_HOST:?address of the worker}"
CONNECT_TIMEOUT_SECONDS="${CONNECT_TIMEOUT_SECONDS:-10}"

log() { echo "[worker ${WORKER_HOST}] $*" >&2; }

if [[ "${ACTION}" == hold ]]; then
  cat >/dev/null
  echo "release=on-removal"
  exit 0
fi
[[ "${ACTION}" == release ]] || { log "unknown ACTION ${ACTION}: hold or release"; exit 1; }
key=$(mktemp)
trap 'rm -f "${key}"' EXIT
chmod 600 "${key}"
cat >"${key}"
: "${WORKER_USER:?SSH user of the worker}"
: "${WORKER_PORT:?SSH port of the worker}"
: "${LEAVE_SCRIPT:?worker-join.sh leave, base64}"
: "${REMOVE_SCRIPT:?microk8s-remove.sh, base64}"

ssh_to_worker() {
  ssh -i "${key}" -p "${WORKER_PORT}" -o BatchMode=yes -o ConnectTimeout="${CONNECT_TIMEOUT_SECONDS}" \
    -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
    "${WORKER_USER}@${WORKER_HOST}" "$@"
}

if ! ssh_to_worker true </dev/null; then
  log "does not answer over SSH: not cleaned up, and removed all the same (its node goes from the control plane)." \
    "If the machine comes back, run \`sudo microk8s leave\` on it, and \`sudo snap remove --purge microk8s\` if this stack installed MicroK8s there."
  echo "released=unreachable"
  exit 0
fi
printf '%s' "${LEAVE_SCRIPT}" | base64 -d | ssh_to_worker 'bash -s' >&2
log "left the cluster"
printf '%s' "${REMOVE_SCRIPT}" | base64 -d | ssh_to_worker 'bash -s' >&2
echo "released=true"
