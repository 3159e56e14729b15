#!/usr/bin/env bash
# Enable the MicroK8s add-ons the platform needs: CoreDNS, and a default StorageClass
# (hostpath-storage) for each vCluster's PVC. Add-ons already enabled are left alone.
#
# `microk8s status --addon <name>` prints exactly enabled or disabled (canonical/microk8s
# scripts/wrappers/status.py @v1.36).
#
# Inputs (environment): ADDONS (space-separated add-on names).
set -euo pipefail

: "${ADDONS:?space-separated add-on names}"

for addon in ${ADDONS}; do
  if sudo -n microk8s status --format short --addon "${addon}" | grep -qx enabled; then
    echo "[microk8s] ${addon} is already enabled" >&2
  else
    echo "[microk8s] enabling ${addon}" >&2
    sudo -n microk8s enable "${addon}" >&2
  fi
done
sudo -n microk8s status --wait-ready --timeout 600 >&2
echo "addons=${ADDONS}"
