#!/usr/bin/env bash
# The Brev instance, on the machine running `pulumi up`: make sure it exists and runs, or delete it.
#
# ACTION=ensure (create and update): create the instance unless one of that name
# exists, then wait until Brev reports it RUNNING (`brev create` exits 0 even when
# the instance never gets there). Prints `created=true` when this stack created
# the instance, now or in an earlier run: pulumi-command hands the previous
# output to an update and to the delete as PULUMI_COMMAND_STDOUT
# (pulumi/pulumi-command provider/pkg/provider/local/commandOutputs.go @v1.2.1), so the marker
# survives every later `up`.
# ACTION=delete: delete the instance, only when DELETE_ON_DESTROY is true and
# the marker says this stack created it.
#
# Brev is read with `brev ls --json`: {"workspaces": [{"name", "status", ...}] or null}
# (brevdev/brev-cli pkg/cmd/ls/ls.go @v0.6.327); python3 parses it, as it is on every machine that
# runs this Pulumi Python program.
#
# Inputs (environment): ACTION, BREV_NAME, BREV_GPU_NAME, BREV_CLOUD, BREV_INSTANCE_TYPE (may be empty),
# DELETE_ON_DESTROY (true/false), READY_TIMEOUT_SECONDS, POLL_SECONDS (optional).
set -euo pipefail

: "${ACTION:?ensure or delete}"
: "${BREV_NAME:?instance name}"
BREV_GPU_NAME="${BREV_GPU_NAME:-}"
BREV_CLOUD="${BREV_CLOUD:-}"
BREV_INSTANCE_TYPE="${BREV_INSTANCE_TYPE:-}"
DELETE_ON_DESTROY="${DELETE_ON_DESTROY:-false}"
READY_TIMEOUT_SECONDS="${READY_TIMEOUT_SECONDS:-900}"
POLL_SECONDS="${POLL_SECONDS:-10}"
previous="${PULUMI_COMMAND_STDOUT:-}"

fail() { echo "[brev] $*" >&2; exit 1; }
log() { echo "[brev] $*" >&2; }

command -v brev >/dev/null 2>&1 \
  || fail "the brev CLI is not installed on this machine: install it (https://docs.nvidia.com/brev/latest/cli/getting-started), run \`brev login --token <token>\`, then retry"
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to read \`brev ls --json\`"

# The instance's status as Brev reports it, or nothing when there is no instance of that name.
status() {
  local listing
  # Without a session `brev ls` would prompt; stdin from /dev/null turns the prompt into an error.
  if ! listing=$(brev ls --json </dev/null 2>&1); then
    fail "brev is not logged in (or cannot reach Brev): run \`brev login --token <token>\`, then retry. brev said: ${listing}"
  fi
  python3 -c '
import json, sys
for workspace in json.loads(sys.stdin.read()).get("workspaces") or []:
    if workspace.get("name") == sys.argv[1]:
        print(workspace.get("status") or "UNKNOWN")
        break
' "${BREV_NAME}" <<<"${listing}" || fail "\`brev ls --json\` printed something that is not Brev's JSON: ${listing}"
}

created=false
if grep -qx "created=true" <<<"${previous}"; then
  created=true
fi

if [[ "${ACTION}" == delete ]]; then
  if [[ "${DELETE_ON_DESTROY}" != true ]]; then
    log "keeping instance ${BREV_NAME} (host.deleteOnDestroy is false); \`brev delete ${BREV_NAME}\` removes it"
    exit 0
  fi
  if [[ "${created}" != true ]]; then
    log "keeping instance ${BREV_NAME}: it existed before this stack"
    exit 0
  fi
  if [[ -z "$(status)" ]]; then
    log "instance ${BREV_NAME} is already gone"
    exit 0
  fi
  log "deleting instance ${BREV_NAME}"
  brev delete "${BREV_NAME}" </dev/null >&2
  exit 0
fi

[[ "${ACTION}" == ensure ]] || fail "unknown ACTION ${ACTION}: ensure or delete"
current=$(status)
if [[ -z "${current}" ]]; then
  args=(create "${BREV_NAME}" --gpu-name "${BREV_GPU_NAME}" --provider "${BREV_CLOUD}")
  if [[ -n "${BREV_INSTANCE_TYPE}" ]]; then
    args+=(--type "${BREV_INSTANCE_TYPE}")
  fi
  log "brev ${args[*]}"
  brev "${args[@]}" </dev/null >&2
  created=true
  current=$(status)
else
  log "instance ${BREV_NAME} already exists (${current})"
fi

deadline=$(( $(date +%s) + READY_TIMEOUT_SECONDS ))
while [[ "${current}" != RUNNING ]]; do
  case "${current}" in
    STOPPED|STOPPING) fail "instance ${BREV_NAME} is ${current}: start it (\`brev start ${BREV_NAME}\`), then retry" ;;
    FAILURE|DELETING) fail "instance ${BREV_NAME} is ${current} in Brev: delete it or choose another host.name" ;;
    "") fail "instance ${BREV_NAME} is not listed by \`brev ls\` after \`brev create\`" ;;
  esac
  if (( $(date +%s) >= deadline )); then
    fail "instance ${BREV_NAME} is still ${current} after ${READY_TIMEOUT_SECONDS}s; check \`brev ls\`, then retry"
  fi
  log "instance ${BREV_NAME} is ${current}; waiting for RUNNING"
  sleep "${POLL_SECONDS}"
  current=$(status)
done
log "instance ${BREV_NAME} is RUNNING"
echo "created=${created}"
