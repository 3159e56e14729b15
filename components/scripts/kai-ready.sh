#!/usr/bin/env bash
# Readiness gate for KAI Scheduler, run in-cluster by a Job that pulumi-kubernetes awaits.
#
# Helm's wait is not enough: the chart installs only KAI's operator, which then
# deploys the queue-controller, whose validating webhook refuses every Queue
# (failurePolicy: Fail) until it serves. So this gate waits for the operator's
# own verdict (Config kai-config, condition Ready), then proves the webhook
# answers by submitting a probe Queue as a server-side dry run: the API server
# runs every admission webhook for a dry run but stores nothing.
#
# Inputs (environment): KAI_CONFIG, PROBE_MANIFEST, TIMEOUT_SECONDS, RETRY_SECONDS.
set -euo pipefail

: "${KAI_CONFIG:?name of the KAI Config object}"
: "${PROBE_MANIFEST:?path of the probe Queue manifest}"
: "${TIMEOUT_SECONDS:?overall time budget in seconds}"
RETRY_SECONDS="${RETRY_SECONDS:-5}"

deadline=$(( $(date +%s) + TIMEOUT_SECONDS ))

seconds_left() {
  local left=$(( deadline - $(date +%s) ))
  if (( left < 1 )); then left=1; fi
  echo "${left}"
}

log() { echo "[kai-ready] $*"; }

log "waiting for configs.kai.scheduler/${KAI_CONFIG} to exist"
kubectl wait --for=create "configs.kai.scheduler/${KAI_CONFIG}" --timeout="$(seconds_left)s"

log "waiting for KAI's operator to report Ready"
kubectl wait --for=condition=Ready "configs.kai.scheduler/${KAI_CONFIG}" --timeout="$(seconds_left)s"

log "probing the Queue admission webhook with a server-side dry run"
attempt=1
until kubectl create --dry-run=server -f "${PROBE_MANIFEST}" -o name; do
  if (( $(date +%s) >= deadline )); then
    log "KAI did not admit the probe Queue within ${TIMEOUT_SECONDS}s (${attempt} attempts)" >&2
    exit 1
  fi
  attempt=$(( attempt + 1 ))
  sleep "${RETRY_SECONDS}"
done
log "KAI admits Queues (attempt ${attempt})"
