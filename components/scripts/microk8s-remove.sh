#!/usr/bin/env bash
# Teardown: remove MicroK8s only if this stack installed it; a MicroK8s found on the host stays.
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
