#!/usr/bin/env bash
# On a worker: join the cluster as a MicroK8s worker, or leave it.
#
# ACTION=join: a machine that already joined is left alone (`microk8s join` has no such guard
# itself; `var/lock/clustered.lock` marks a joined node: canonical/microk8s
# scripts/wrappers/join.py mark_worker_node @v1.36). Otherwise each join URL is tried in turn with
# `microk8s join <url> --worker`, which opens its connection without a timeout of its own (join.py
# @v1.36), hence a probe of the cluster-agent port first; a join that fails moves on to the next URL.
# `add-node` lists an URL for every address of the control plane's interfaces, Docker's 172.17.0.1
# among them (scripts/wrappers/add_token.py get_network_info @v1.36): an address that is also one of
# this machine's own (`hostname -I`) would reach the worker's own cluster agent, so it is skipped.
# ACTION=leave: `microk8s leave` turns a joined worker back into a stand-alone MicroK8s; a machine
# that is not joined is left alone (the leave wrapper would exit 1:
# microk8s-resources/wrappers/microk8s-leave.wrapper @v1.36).
#
# The URLs carry a single-use token: MicroK8s' own output is passed through a filter that blanks
# tokens before it reaches stderr, and stdout says only `joined=true`.
#
# Inputs (environment): ACTION, LOCK_DIR (optional), CONNECT_TIMEOUT_SECONDS (optional). On stdin, for
# ACTION=join: the join URLs, space-separated <ip>:<port>/<token>/<check>, empty once joined. They never
# go in the script text, which a failed step's error prints whole.
set -euo pipefail

: "${ACTION:?join or leave}"
LOCK_DIR="${LOCK_DIR:-/var/snap/microk8s/current/var/lock}"
CONNECT_TIMEOUT_SECONDS="${CONNECT_TIMEOUT_SECONDS:-5}"

log() { echo "[worker] $*" >&2; }
fail() { log "$*"; exit 1; }
redact() { sed -E 's#[0-9a-f]{32}(/[0-9a-f]{12,})?#<token>#g'; }
joined() { [[ -e "${LOCK_DIR}/clustered.lock" ]]; }

if [[ "${ACTION}" == leave ]]; then
  if ! joined; then
    log "this machine is not a node of a cluster; nothing to leave"
    exit 0
  fi
  log "leaving the cluster"
  sudo -n microk8s leave 2>&1 | redact >&2
  exit 0
fi

[[ "${ACTION}" == join ]] || fail "unknown ACTION ${ACTION}: join or leave"
URLS=$(cat)
if joined; then
  log "this machine already joined the cluster"
  echo "joined=true"
  exit 0
fi
[[ -n "${URLS}" ]] \
  || fail "this machine is not a node of the cluster and has no join token: run \`pulumi up\` again, which issues one"

own=" $(hostname -I 2>/dev/null || true) "
tried=()
failed=()
for url in ${URLS}; do
  endpoint="${url%%/*}"
  address="${endpoint%:*}"
  port="${endpoint##*:}"
  if [[ "${own}" == *" ${address} "* || "${address}" == 127.* ]]; then
    log "skipping ${endpoint}: that address is this machine's own (its own cluster agent would answer)"
    continue
  fi
  # shellcheck disable=SC2016 # $1 and $2 are the probe's own arguments.
  if timeout "${CONNECT_TIMEOUT_SECONDS}" bash -c ': >"/dev/tcp/$1/$2"' probe "${address}" "${port}" 2>/dev/null; then
    log "joining the cluster through ${endpoint}"
    if sudo -n microk8s join "${url}" --worker 2>&1 | redact >&2; then
      echo "joined=true"
      exit 0
    fi
    log "microk8s join through ${endpoint} failed (its output is above); trying the next address"
    failed+=("${endpoint}")
    continue
  fi
  tried+=("${endpoint}")
done
if ((${#failed[@]})); then
  fail "microk8s join failed through ${failed[*]} (and nothing answered at ${tried[*]:-no other address}): see its output above; if the token was used up, run \`pulumi up\` again, which issues a new one"
fi
fail "no control-plane address answers from this machine (${tried[*]:-none}): workers reach the control plane directly on ${port:-25000}/tcp and 16443/tcp, and 4789/udp both ways (docs/operations.md)"
