#!/usr/bin/env bash
# Compare the machine with what the stack set up on it, and fail with every difference.
#
# pulumi-command's remote Command has no read, so `pulumi refresh` never looks at the machine: a snap
# channel, or a kubelet argument, changed by hand shows "no changes". This step runs when it is created,
# when what it expects changes, and whenever the operator asks with `pulumi up --replace <its URN>`
# (docs/operations.md, "Drift on the host"). It changes nothing.
#
# Read as the other steps read it: the Tracking column of `snap list microk8s` (snapcore/snapd
# cmd/snap/cmd_list.go @2.64), and the kubelet arguments file, one flag per line (kubelet-args.sh).
#
# Inputs (environment): MICROK8S_CHANNEL, KUBELET_FLAGS (--flag=value ..., space-separated), ARGS_FILE (optional).
set -euo pipefail

: "${MICROK8S_CHANNEL:?snap channel, e.g. 1.36/stable}"
: "${KUBELET_FLAGS:?--flag=value ..., space-separated}"
ARGS_FILE="${ARGS_FILE:-/var/snap/microk8s/current/args/kubelet}"

differences=()
if ! listing=$(snap list microk8s 2>/dev/null); then
  differences+=("microk8s is not installed (the stack installed it from ${MICROK8S_CHANNEL})")
else
  tracking=$(awk 'NR == 2 { print $4 }' <<<"${listing}")
  if [[ "${tracking}" != "${MICROK8S_CHANNEL}" ]]; then
    differences+=("microk8s tracks ${tracking}, the stack's versions.microk8s is ${MICROK8S_CHANNEL}")
  fi
  current=$(sudo -n cat "${ARGS_FILE}" 2>/dev/null || true)
  read -r -a flags <<<"${KUBELET_FLAGS}"
  for flag in "${flags[@]}"; do
    if ! grep -qxF -- "${flag}" <<<"${current}"; then
      name="${flag%%=*}"
      found=$(grep -E -- "^${name}(=|$)" <<<"${current}" || true)
      differences+=("the kubelet runs with '${found:-no ${name}}', the stack sets '${flag}'")
    fi
  done
fi

if ((${#differences[@]})); then
  echo "[drift] this machine is not as the stack left it:" >&2
  printf '[drift] - %s\n' "${differences[@]}" >&2
  echo "[drift] put it back (docs/operations.md, \"Drift on the host\"): \`sudo snap refresh microk8s --channel=${MICROK8S_CHANNEL}\` here, or \`pulumi up --replace\` on this machine's kubelet step" >&2
  exit 1
fi
echo "[drift] none: microk8s ${MICROK8S_CHANNEL}, kubelet ${KUBELET_FLAGS}" >&2
echo "drift=none"
