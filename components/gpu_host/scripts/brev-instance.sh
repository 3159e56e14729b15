#!/bin/sh
# The Brev instance, on the machine running `pulumi up`: make sure it exists, runs and is what config asks, or delete it.
#
# POSIX sh: this runs on the operator's machine, whose /bin/sh may be dash or macOS's bash 3.2.
#
# ACTION=ensure (create and update): create the instance unless one of that name exists. Prints
# `created=true|false` (true when this stack created it, now or in an earlier run), `id=<Brev's id>` and
# the spec it was created or adopted with (gpuName, cloud, instanceType). pulumi-command hands the
# previous output to an update and to the delete as PULUMI_COMMAND_STDOUT (pulumi/pulumi-command
# provider/pkg/provider/local/commandOutputs.go @v1.2.1), so all of it survives every later `up`; but a
# failed command records nothing (its stdout goes only into the error), so once `brev create` has made an
# instance this step never fails: a failed `brev create` that left an instance behind, or a listing that
# fails just after, still records created=true (with no id, the delete goes by name). Waiting for RUNNING is
# ACTION=wait, a step of its own, so a timeout there cannot lose the record and leak a billed GPU.
# Brev cannot move an instance to another GPU, cloud or type (`brev scale` changes only the type, on
# some backends: brevdev/brev-cli pkg/cmd/scale/scale.go @v0.6.327): a spec that differs from the
# recorded one, or from what Brev lists for the instance, is refused, naming the config key. Only a new
# host.name makes a new instance.
# ACTION=wait: wait until Brev reports the instance RUNNING (`brev create` exits 0 even when the instance
# never gets there); refuse one that is stopped or failed.
# ACTION=delete: delete the instance by the id recorded when it was created (a name may by then belong
# to another instance), only when DELETE_ON_DESTROY is true and the marker says this stack created it.
#
# Brev is read with `brev ls --json`: {"workspaces": [{"name", "id", "status", "gpu", "instance_type",
# ...}] or null}; `brev delete` takes a name or an id, and reads more names from a stdin that is not a
# terminal (pkg/cmd/ls/ls.go, pkg/cmd/delete/delete.go @v0.6.327). python3 parses the JSON, as it is on
# every machine that runs this Pulumi Python program.
#
# Inputs (environment): ACTION, BREV_NAME, BREV_GPU_NAME, BREV_CLOUD, BREV_INSTANCE_TYPE (may be empty),
# CONFIG_KEY (the config key of the spec, e.g. gpu-tenancy:host), DELETE_ON_DESTROY (true/false),
# READY_TIMEOUT_SECONDS, POLL_SECONDS (optional).
set -eu

: "${ACTION:?ensure, wait or delete}"
: "${BREV_NAME:?instance name}"
BREV_GPU_NAME="${BREV_GPU_NAME:-}"
BREV_CLOUD="${BREV_CLOUD:-}"
BREV_INSTANCE_TYPE="${BREV_INSTANCE_TYPE:-}"
CONFIG_KEY="${CONFIG_KEY:-gpu-tenancy:host}"
DELETE_ON_DESTROY="${DELETE_ON_DESTROY:-false}"
READY_TIMEOUT_SECONDS="${READY_TIMEOUT_SECONDS:-900}"
POLL_SECONDS="${POLL_SECONDS:-10}"
previous="${PULUMI_COMMAND_STDOUT:-}"

fail() { echo "[brev] $*" >&2; exit 1; }
log() { echo "[brev] $*" >&2; }

command -v brev >/dev/null 2>&1 \
  || fail "the brev CLI is not installed on this machine: install it (https://docs.nvidia.com/brev/latest/cli/getting-started), run \`brev login --token <token>\`, then retry"
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to read \`brev ls --json\`"

# What the previous run recorded: recorded <key> prints its value, or nothing.
recorded() { printf '%s\n' "${previous}" | sed -n "s/^$1=//p" | head -n 1; }

# The instance as Brev lists it: "<status> <id> <gpu> <instance type>", or nothing when there is none.
# With an id, the instance of that id; otherwise the one named BREV_NAME.
instance() {
  if ! listing=$(brev ls --json </dev/null 2>&1); then
    fail "brev is not logged in (or cannot reach Brev): run \`brev login --token <token>\`, then retry. brev said: ${listing}"
  fi
  printf '%s' "${listing}" | python3 -c '
import json, sys
name, wanted_id = sys.argv[1], sys.argv[2]
for workspace in json.loads(sys.stdin.read()).get("workspaces") or []:
    if (wanted_id and workspace.get("id") == wanted_id) or (not wanted_id and workspace.get("name") == name):
        fields = [workspace.get(k) or "-" for k in ("status", "id", "gpu", "instance_type")]
        print(" ".join(field.replace(" ", "_") for field in fields))
        break
' "${BREV_NAME}" "${1:-}" || fail "\`brev ls --json\` printed something that is not Brev's JSON: ${listing}"
}

created=false
if [ "$(recorded created)" = true ]; then
  created=true
fi

if [ "${ACTION}" = delete ]; then
  if [ "${DELETE_ON_DESTROY}" != true ]; then
    log "keeping instance ${BREV_NAME} (host.deleteOnDestroy is false); \`brev delete ${BREV_NAME}\` removes it"
    exit 0
  fi
  if [ "${created}" != true ]; then
    log "keeping instance ${BREV_NAME}: it existed before this stack"
    exit 0
  fi
  id=$(recorded id)
  if [ -z "${id}" ]; then
    # Recorded by a version of this program that kept no id: the name is all there is.
    log "no id recorded for ${BREV_NAME}; deleting it by name"
    id="${BREV_NAME}"
  fi
  found=$(instance "$(recorded id)")
  if [ -z "${found}" ]; then
    log "instance ${BREV_NAME} (${id}) is already gone"
    exit 0
  fi
  log "deleting instance ${BREV_NAME} (${id})"
  brev delete "${id}" </dev/null >&2
  exit 0
fi

# Until RUNNING, or a failure naming what to do. Prints `status=RUNNING`.
wait_until_running() {
  current=$(instance)
  status=${current%% *}
  deadline=$(( $(date +%s) + READY_TIMEOUT_SECONDS ))
  while [ "${status}" != RUNNING ]; do
    case "${status}" in
      STOPPED|STOPPING) fail "instance ${BREV_NAME} is ${status}: start it (\`brev start ${BREV_NAME}\`), then retry" ;;
      FAILURE|DELETING) fail "instance ${BREV_NAME} is ${status} in Brev: delete it or choose another host.name" ;;
      "") fail "instance ${BREV_NAME} is not listed by \`brev ls\`" ;;
    esac
    if [ "$(date +%s)" -ge "${deadline}" ]; then
      fail "instance ${BREV_NAME} is still ${status} after ${READY_TIMEOUT_SECONDS}s; check \`brev ls\`, then retry (the instance is recorded as this stack's)"
    fi
    log "instance ${BREV_NAME} is ${status}; waiting for RUNNING"
    sleep "${POLL_SECONDS}"
    current=$(instance)
    status=${current%% *}
  done
  log "instance ${BREV_NAME} is RUNNING"
  echo "status=RUNNING"
}

if [ "${ACTION}" = wait ]; then
  wait_until_running
  exit 0
fi

[ "${ACTION}" = ensure ] || fail "unknown ACTION ${ACTION}: ensure, wait or delete"

# A spec recorded earlier that config no longer asks for: Brev cannot change it in place.
refuse_change() {
  key=$1 was=$2 now=$3
  fail "${CONFIG_KEY}.${key} is now '${now}', but instance ${BREV_NAME} was made with '${was}', and Brev cannot change that on an existing instance. Set ${CONFIG_KEY}.${key} back to '${was}', or give ${CONFIG_KEY}.name a new value for a new instance (the old one is then deleted only with deleteOnDestroy: true, and only if this stack created it)"
}
for pair in "gpuName=${BREV_GPU_NAME}" "cloud=${BREV_CLOUD}" "instanceType=${BREV_INSTANCE_TYPE}"; do
  key="${pair%%=*}"
  now="${pair#*=}"
  if printf '%s\n' "${previous}" | grep -q "^${key}="; then
    was=$(recorded "${key}")
    [ "${was}" = "${now}" ] || refuse_change "${key}" "${was}" "${now}"
  fi
done

current=$(instance)
if [ -z "${current}" ]; then
  set -- create "${BREV_NAME}" --gpu-name "${BREV_GPU_NAME}" --provider "${BREV_CLOUD}"
  if [ -n "${BREV_INSTANCE_TYPE}" ]; then
    set -- "$@" --type "${BREV_INSTANCE_TYPE}"
  fi
  log "brev $*"
  if ! brev "$@" </dev/null >&2; then
    # There was no instance of this name before: one listed now is this stack's, billed, and must be recorded.
    current=$( (instance) 2>/dev/null || true)
    [ -n "${current}" ] || fail "\`brev $*\` failed and no instance ${BREV_NAME} exists; retry"
    log "\`brev create\` failed, but instance ${BREV_NAME} exists: recording it as this stack's"
  fi
  created=true
  current=$( (instance) 2>/dev/null || true)
  [ -n "${current}" ] || log "instance ${BREV_NAME} is not listed yet: recorded without an id, so a delete goes by name"
else
  log "instance ${BREV_NAME} already exists (${current%% *})"
  # What Brev lists for it: its GPU (matched as `brev create --gpu-name` matches) and its exact type.
  gpu=$(printf '%s' "${current}" | cut -d' ' -f3)
  type=$(printf '%s' "${current}" | cut -d' ' -f4)
  lower_gpu=$(printf '%s' "${gpu}" | tr '[:upper:]' '[:lower:]')
  lower_wanted=$(printf '%s' "${BREV_GPU_NAME}" | tr '[:upper:]' '[:lower:]')
  case "${lower_gpu}" in
    -|*"${lower_wanted}"*) ;;
    *) refuse_change gpuName "${gpu}" "${BREV_GPU_NAME}" ;;
  esac
  if [ -n "${BREV_INSTANCE_TYPE}" ] && [ "${type}" != - ] && [ "${type}" != "${BREV_INSTANCE_TYPE}" ]; then
    refuse_change instanceType "${type}" "${BREV_INSTANCE_TYPE}"
  fi
fi

id=$(printf '%s' "${current}" | cut -s -d' ' -f2)
echo "created=${created}"
echo "id=${id}"
echo "gpuName=${BREV_GPU_NAME}"
echo "cloud=${BREV_CLOUD}"
echo "instanceType=${BREV_INSTANCE_TYPE}"
