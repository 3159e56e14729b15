#!/usr/bin/env bash
# Install MicroK8s from a pinned snap channel and hold it there.
#
# Idempotent: an install on the right channel is left alone; a different channel
# is refreshed to the configured one (that is how a version bump in config lands).
# `snap refresh --hold` stops snapd from ever upgrading the control plane on its own.
# A marker records that this stack installed MicroK8s, so teardown removes only its own.
#
# Upstream, as read: `snap list` prints Name Version Rev Tracking ... (Tracking is column 4) and fails
# for a snap that is not installed; `snap refresh --hold <snap>` holds it indefinitely (snapd 2.58+),
# while `snap refresh <snap> --channel` still moves it (snapcore/snapd cmd/snap/cmd_list.go,
# cmd_snap_op.go, overlord/snapstate/target.go @2.64). `microk8s status --wait-ready --timeout N`
# exits 1 at its timeout (canonical/microk8s scripts/wrappers/status.py @v1.36).
#
# Inputs (environment): MICROK8S_CHANNEL, MARKER_DIR.
set -euo pipefail

: "${MICROK8S_CHANNEL:?snap channel, e.g. 1.36/stable}"
: "${MARKER_DIR:?directory for the markers of this stack}"

log() { echo "[microk8s] $*" >&2; }

if ! snap list microk8s >/dev/null 2>&1; then
  log "installing microk8s from ${MICROK8S_CHANNEL}"
  sudo -n snap install microk8s --classic --channel="${MICROK8S_CHANNEL}"
  sudo -n mkdir -p "${MARKER_DIR}"
  sudo -n touch "${MARKER_DIR}/microk8s-installed"
else
  tracking=$(snap list microk8s | awk 'NR == 2 { print $4 }')
  if [[ "${tracking}" != "${MICROK8S_CHANNEL}" ]]; then
    log "refreshing microk8s from ${tracking} to ${MICROK8S_CHANNEL}"
    sudo -n snap refresh microk8s --channel="${MICROK8S_CHANNEL}"
  else
    log "microk8s already tracks ${MICROK8S_CHANNEL}"
  fi
fi

sudo -n snap refresh --hold microk8s >&2
sudo -n usermod -a -G microk8s "$(id -un)"
sudo -n microk8s status --wait-ready --timeout 600 >&2
echo "channel=${MICROK8S_CHANNEL}"
