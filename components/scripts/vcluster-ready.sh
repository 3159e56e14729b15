#!/usr/bin/env bash
# Wait until a tenant's vCluster has written its kubeconfig Secret, run in-cluster by a Job Pulumi awaits.
#
# The control plane writes vc-<name> once it has started, not when Helm
# installs the chart: reading the Secret earlier would fail, or race.
#
# Inputs (environment): SECRET, TIMEOUT_SECONDS.
set -euo pipefail

: "${SECRET:?name of the kubeconfig Secret}"
: "${TIMEOUT_SECONDS:?time budget in seconds}"

echo "[vcluster-ready] waiting for secret/${SECRET}"
kubectl wait --for=create "secret/${SECRET}" --timeout="${TIMEOUT_SECONDS}s"
kubectl get "secret/${SECRET}" -o name
echo "[vcluster-ready] the vCluster has published its kubeconfig"
