#!/usr/bin/env bash
# Create the Brev instance unless one of that name exists (runs where `pulumi up` runs).
#
# Prints `created=true` only when this run created the instance: the delete step
# reads it back, so `pulumi destroy` can never delete a machine it did not make.
#
# Inputs (environment): BREV_NAME, BREV_GPU_NAME, BREV_CLOUD, BREV_INSTANCE_TYPE (may be empty).
set -euo pipefail

: "${BREV_NAME:?instance name}"
: "${BREV_GPU_NAME:?GPU name filter}"
: "${BREV_CLOUD:?cloud provider}"
BREV_INSTANCE_TYPE="${BREV_INSTANCE_TYPE:-}"

fail() { echo "[brev] $*" >&2; exit 1; }

command -v brev >/dev/null 2>&1 \
  || fail "the brev CLI is not installed on this machine: install it (https://docs.nvidia.com/brev/latest/cli/getting-started), run \`brev login --token <token>\`, then retry"

# Without a session `brev ls` would prompt; stdin from /dev/null turns the prompt into an error.
if ! instances=$(brev ls </dev/null 2>&1); then
  fail "brev is not logged in (or cannot reach Brev): run \`brev login --token <token>\`, then retry. brev said: ${instances}"
fi

if awk 'NR > 1 { print $1 }' <<<"${instances}" | grep -qxF "${BREV_NAME}"; then
  echo "[brev] instance ${BREV_NAME} already exists; leaving it as it is" >&2
  echo "created=false"
  exit 0
fi

args=(create "${BREV_NAME}" --gpu-name "${BREV_GPU_NAME}" --provider "${BREV_CLOUD}")
if [[ -n "${BREV_INSTANCE_TYPE}" ]]; then
  args+=(--type "${BREV_INSTANCE_TYPE}")
fi
echo "[brev] brev ${args[*]}" >&2
brev "${args[@]}" </dev/null >&2
echo "created=true"
