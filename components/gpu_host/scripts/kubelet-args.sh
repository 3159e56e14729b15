#!/usr/bin/env bash
# Set the platform kubelet arguments in the MicroK8s kubelet arguments file; restart kubelite if one changed.
#
# Idempotent: a flag already set to its value is left alone; a flag set to another value is replaced; when
# nothing changed, kubelite is not restarted. Other flags (MicroK8s' own, the dns add-on's) are kept.
# kubelite reads the file only when it starts; MicroK8s restarts it with `snapctl restart
# microk8s.daemon-kubelite`, `snap restart` from a shell (canonical/microk8s
# microk8s-resources/actions/common/utils.sh restart_service, snap/snapcraft.yaml daemon-kubelite @v1.36).
# A worker's file is overwritten with the control plane's when it joins (scripts/wrappers/join.py
# store_base_kubelet_args @v1.36), so on a worker this runs after the join.
#
# Inputs (environment): KUBELET_FLAGS (--flag=value ..., space-separated: no value holds a space), ARGS_FILE
# (optional).
set -euo pipefail

: "${KUBELET_FLAGS:?--flag=value ..., space-separated}"
ARGS_FILE="${ARGS_FILE:-/var/snap/microk8s/current/args/kubelet}"

log() { echo "[kubelet] $*" >&2; }

current=$(sudo -n cat "${ARGS_FILE}")
updated="${current}"
changed=0
read -r -a flags <<<"${KUBELET_FLAGS}"
for flag in "${flags[@]}"; do
  if grep -qxF -- "${flag}" <<<"${updated}"; then
    continue
  fi
  name="${flag%%=*}"
  updated=$(awk -v name="${name}" '$0 != name && index($0, name "=") != 1' <<<"${updated}")
  updated+=$'\n'"${flag}"
  log "setting ${flag}"
  changed=1
done

if ((changed)); then
  # tee keeps the file's owner and mode (root:microk8s 0660).
  printf '%s\n' "${updated}" | sudo -n tee "${ARGS_FILE}" >/dev/null
  log "restarting kubelite (this machine's pods keep running; its API server, if any, is back within a minute)"
  sudo -n snap restart microk8s.daemon-kubelite >&2
  sudo -n microk8s status --wait-ready --timeout 600 >&2
else
  log "the kubelet already runs with the platform's arguments"
fi
echo "kubelet=${KUBELET_FLAGS}"
