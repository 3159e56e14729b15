#!/usr/bin/env bash
# On the control plane: one fresh join token for each worker that is not a node of the cluster yet.
#
# `microk8s add-node` without --token-ttl issues a token that never expires and that the one join
# using it consumes; a token with a TTL is never consumed (canonical/microk8s
# scripts/wrappers/add_token.py @v1.36; canonical/microk8s-cluster-agent pkg/snap/snap.go
# ConsumeClusterToken @main, which MicroK8s 1.36 builds). A token an earlier run issued and no
# worker used would therefore stay valid for ever: each run first revokes those, by removing them
# from the cluster agent's token file. A worker that is already a node gets no token; its join
# step finds it joined. Joins run only after this step, so nothing else writes the file meanwhile.
#
# Prints `join.<node>=<add-node's JSON on one line>` per worker that needs a token: credentials,
# which the caller keeps secret and out of the logs. They are printed last, all at once, after every
# call that could fail: a failed step's error holds all it printed (pulumi-command
# remote/commandOutputs.go @v1.2.1). Nothing that names a token goes to stderr or on a command line.
#
# Inputs (environment): WORKERS (space-separated node names), MARKER_DIR, TOKENS_FILE (optional).
set -euo pipefail

: "${MARKER_DIR:?directory for the markers of this stack}"
WORKERS="${WORKERS:-}"
TOKENS_FILE="${TOKENS_FILE:-/var/snap/microk8s/current/credentials/cluster-tokens.txt}"
issued="${MARKER_DIR}/issued-join-tokens"

log() { echo "[workers] $*" >&2; }

sudo -n mkdir -p "${MARKER_DIR}"
if sudo -n test -s "${issued}" && sudo -n test -e "${TOKENS_FILE}"; then
  # The tokens to drop are read from the file (grep -f), never put on a command line.
  found=0
  remaining=$(sudo -n grep -vxF -f "${issued}" "${TOKENS_FILE}") || found=$?
  ((found <= 1)) || { log "could not read the cluster agent's token file"; exit 1; }
  if [[ -n "${remaining}" ]]; then
    printf '%s\n' "${remaining}" | sudo -n tee "${TOKENS_FILE}" >/dev/null
  else
    sudo -n truncate -s 0 "${TOKENS_FILE}"
  fi
  log "revoked the join tokens of earlier runs that no worker used"
fi
sudo -n install -m 600 /dev/null "${issued}"

tickets=""
for node in ${WORKERS}; do
  if sudo -n microk8s kubectl get node "${node}" -o name >/dev/null 2>&1; then
    log "${node} is already a node of the cluster"
    continue
  fi
  # add-node prints indented JSON; nothing in it has spaces.
  ticket=$(sudo -n microk8s add-node --format json | tr -d ' \n')
  token=$(sed -nE 's#.*"token":"([0-9a-f]{32})/.*#\1#p' <<<"${ticket}")
  [[ -n "${token}" ]] || { log "microk8s add-node printed no token for ${node}"; exit 1; }
  echo "${token}" | sudo -n tee -a "${issued}" >/dev/null
  log "issued a single-use join token for ${node}"
  tickets+="join.${node}=${ticket}"$'\n'
done
printf '%s' "${tickets}"
