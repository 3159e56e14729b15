#!/usr/bin/env bash
# Teardown: remove MicroK8s only if this stack installed it; a MicroK8s found on the host stays.
#
# `snap remove --purge` also deletes the snap's data, hostpath volumes included, and takes no
# snapshot (snapcore/snapd cmd/snap/cmd_snap_op.go @2.64; canonical/microk8s-core-addons
# addons/hostpath-storage @f689811 keeps volumes under $SNAP_COMMON/default-storage).
#
# Inputs (environment): MARKER_DIR.
set -euo pipefail

: "${MARKER_DIR:?directory for the markers of this stack}"

if [[ ! -e "${MARKER_DIR}/microk8s-installed" ]]; then
  echo "[microk8s] not installed by this stack; leaving it in place" >&2
  exit 0
fi
sudo -n snap remove --purge microk8s >&2
sudo -n rm -f "${MARKER_DIR}/microk8s-installed"
