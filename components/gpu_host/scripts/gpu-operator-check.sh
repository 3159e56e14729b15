#!/usr/bin/env bash
# Before installing the GPU Operator: stop with the fix if another install already runs.
#
# Two operators fight over the same ClusterPolicy and node components, and Helm
# would only report a bare name clash. An operator in the configured namespace
# that this stack labelled is its own earlier install, and is fine.
#
# Inputs (environment): NAMESPACE, PART_OF (the value of app.kubernetes.io/part-of on our namespaces),
# OPERATOR_SELECTOR (the label of the operator's Deployment).
set -euo pipefail

: "${NAMESPACE:?namespace this stack installs the operator in}"
: "${PART_OF:?label value that marks namespaces of this stack}"
: "${OPERATOR_SELECTOR:?label selector of the operator Deployment}"

kubectl() { sudo -n microk8s kubectl "$@"; }

namespaces=$(kubectl get deployments --all-namespaces -l "${OPERATOR_SELECTOR}" \
  -o jsonpath='{range .items[*]}{.metadata.namespace}{"\n"}{end}' | sort -u)

for namespace in ${namespaces}; do
  owner=$(kubectl get namespace "${namespace}" -o jsonpath='{.metadata.labels.app\.kubernetes\.io/part-of}')
  if [[ "${namespace}" == "${NAMESPACE}" && "${owner}" == "${PART_OF}" ]]; then
    continue
  fi
  echo "[gpu-operator] a GPU Operator this stack did not install already runs in namespace ${namespace}" \
    "(for example from \`microk8s enable nvidia\`). Set gpu-tenancy:gpuOperator.mode to adopt" \
    "(with its releaseName and namespace) or skip, or remove it with \`microk8s disable nvidia\`." >&2
  exit 1
done
echo "[gpu-operator] no foreign GPU Operator found" >&2
echo "clear=true"
