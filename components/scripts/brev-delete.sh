#!/usr/bin/env bash
# Delete the Brev instance on `pulumi destroy`, but only when asked to and only if this stack created it.
#
# Inputs (environment): BREV_NAME, DELETE_ON_DESTROY (true/false),
# PULUMI_COMMAND_STDOUT (the create step's output, handed over by pulumi-command).
set -euo pipefail

: "${BREV_NAME:?instance name}"
: "${DELETE_ON_DESTROY:?true or false}"
created_output="${PULUMI_COMMAND_STDOUT:-}"

if [[ "${DELETE_ON_DESTROY}" != true ]]; then
  echo "[brev] keeping instance ${BREV_NAME} (host.deleteOnDestroy is false)" >&2
  exit 0
fi
if ! grep -qx "created=true" <<<"${created_output}"; then
  echo "[brev] keeping instance ${BREV_NAME}: it existed before this stack" >&2
  exit 0
fi
echo "[brev] deleting instance ${BREV_NAME}" >&2
brev delete "${BREV_NAME}" </dev/null >&2
