#!/usr/bin/env bash
# Second half of the GPU gate, after its first container ran nvidia-smi on an allocated GPU:
# record what every GPU node advertises, in a ConfigMap that Pulumi reads back as the `gpu` output.
#
# Fails when no node carries nvidia.com/gpu.present=true: tenant pods select on that label.
#
# Inputs (environment): INVENTORY (ConfigMap name), NAMESPACE.
set -euo pipefail

: "${INVENTORY:?ConfigMap name}"
: "${NAMESPACE:?namespace of the ConfigMap}"

columns='{.metadata.name}{"\t"}{.metadata.labels.nvidia\.com/gpu\.product}{"\t"}{.metadata.labels.nvidia\.com/gpu\.memory}{"\t"}{.metadata.labels.nvidia\.com/cuda\.driver-version\.full}{"\t"}{.status.allocatable.nvidia\.com/gpu}{"\n"}'
nodes=$(kubectl get nodes -l nvidia.com/gpu.present=true -o jsonpath="{range .items[*]}${columns}{end}")
if [[ -z "${nodes}" ]]; then
  echo "[gpu-gate] no node is labelled nvidia.com/gpu.present=true; is GPU feature discovery running?" >&2
  exit 1
fi
printf '%s\n' "${nodes}" >&2
kubectl create configmap "${INVENTORY}" --namespace "${NAMESPACE}" --from-literal=nodes.tsv="${nodes}" \
  --dry-run=client -o yaml | kubectl apply -f - >&2
