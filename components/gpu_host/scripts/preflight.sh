#!/usr/bin/env bash
# Preflight on the GPU host: the driver works and the GPU is the one the stack was planned for.
#
# Prints key=value lines (hostname, ubuntu, and one `gpu=name|memoryMiB|driver` per GPU).
# Nothing is changed on the host.
#
# The query format is nvidia-smi's documented --query-gpu/--format=csv,noheader,nounits (nvidia-smi(1));
# nvidia-smi is closed source, so this is the one fact here checked only against its manual.
#
# Inputs (environment): EXPECT_GPU (text every GPU name must contain; may be empty),
# MIN_GPU_MEMORY_MIB (may be empty), UBUNTU_RELEASE (expected VERSION_ID, a warning only).
set -euo pipefail

EXPECT_GPU="${EXPECT_GPU:-}"
MIN_GPU_MEMORY_MIB="${MIN_GPU_MEMORY_MIB:-}"
: "${UBUNTU_RELEASE:?expected Ubuntu release}"

fail() { echo "[preflight] $*" >&2; exit 1; }

# shellcheck disable=SC1091 # os-release exists on every systemd distribution.
. /etc/os-release
if [[ "${ID:-}" != ubuntu || "${VERSION_ID:-}" != "${UBUNTU_RELEASE}" ]]; then
  echo "[preflight] warning: this host runs ${PRETTY_NAME:-an unknown OS}; the stack is tested on Ubuntu ${UBUNTU_RELEASE}" >&2
fi

command -v nvidia-smi >/dev/null 2>&1 \
  || fail "nvidia-smi is not installed: this host has no NVIDIA driver. Install one (e.g. \`sudo ubuntu-drivers install --gpgpu\`) and reboot, or use an image that ships it (Brev's do)."
if ! gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits 2>&1); then
  fail "nvidia-smi cannot talk to the driver: ${gpus}. A reboot after a driver install usually fixes this."
fi
[[ -n "${gpus}" ]] || fail "nvidia-smi sees no GPU on this host"

echo "hostname=$(hostname)"
echo "ubuntu=${VERSION_ID:-unknown}"
while IFS=, read -r name memory driver; do
  name="${name## }"; memory="${memory// /}"; driver="${driver// /}"
  if [[ -n "${EXPECT_GPU}" && "${name,,}" != *"${EXPECT_GPU,,}"* ]]; then
    fail "found GPU '${name}', but host.expect asks for '${EXPECT_GPU}'"
  fi
  [[ "${memory}" =~ ^[0-9]+$ ]] || fail "nvidia-smi reports no memory size for GPU '${name}' (${memory})"
  if [[ -n "${MIN_GPU_MEMORY_MIB}" ]] && (( memory < MIN_GPU_MEMORY_MIB )); then
    fail "GPU '${name}' has ${memory} MiB, less than host.expect.minGpuMemoryMiB (${MIN_GPU_MEMORY_MIB})"
  fi
  echo "gpu=${name}|${memory}|${driver}"
done <<<"${gpus}"
