#!/usr/bin/env bash
# Enable the MicroK8s add-ons the platform needs, and RBAC. Add-ons already enabled are left alone.
#
# - dns: CoreDNS; hostpath-storage: the default StorageClass for each vCluster's PVC.
#   `microk8s status --addon <name>` prints exactly enabled or disabled (canonical/microk8s
#   scripts/wrappers/status.py @v1.36).
# - RBAC: MicroK8s starts its API server with --authorization-mode=AlwaysAllow, so no Role or
#   ClusterRole is enforced until `microk8s enable rbac` sets RBAC,Node (and restarts kubelite).
#   Its status check only looks for a cluster-admin ClusterRole, so the API server's own arguments
#   are read instead (canonical/microk8s-core-addons addons/rbac/enable @f689811; canonical/microk8s
#   microk8s-resources/default-args/kube-apiserver @v1.36). The admin kubeconfig (CN=admin,
#   O=system:masters) keeps full access; CoreDNS, hostpath-provisioner and Calico ship their RBAC.
#
# - ingress (expose sni) must be Traefik: MicroK8s 1.35 replaced NGINX with Traefik in its ingress add-on
#   (canonical/microk8s-core-addons ce8e8d1, branch 1.35), but a snap refresh redeploys no add-on, and the
#   status check of either version finds an NGINX ingress enabled (1.34: pod/nginx-ingress-microk8s-controller;
#   1.36: the ingressclass `public`, which NGINX made too): so what runs is checked, the Traefik DaemonSet
#   ingress/traefik (addons/ingress/enable, values.yaml @f689811).
#
# Inputs (environment): ADDONS (space-separated add-on names), APISERVER_ARGS (optional; the API
# server's arguments file).
set -euo pipefail

: "${ADDONS:?space-separated add-on names}"
APISERVER_ARGS="${APISERVER_ARGS:-/var/snap/microk8s/current/args/kube-apiserver}"

for addon in ${ADDONS}; do
  if sudo -n microk8s status --format short --addon "${addon}" | grep -qx enabled; then
    echo "[microk8s] ${addon} is already enabled" >&2
  else
    echo "[microk8s] enabling ${addon}" >&2
    sudo -n microk8s enable "${addon}" >&2
  fi
done

if [[ " ${ADDONS} " == *" ingress "* ]] \
  && ! sudo -n microk8s kubectl get daemonset traefik -n ingress -o name >/dev/null 2>&1; then
  if sudo -n microk8s kubectl get daemonset nginx-ingress-microk8s-controller -n ingress -o name >/dev/null 2>&1; then
    echo "[microk8s] the ingress add-on runs NGINX (enabled before MicroK8s 1.35, kept by the refresh), and expose: sni needs the Traefik it installs since 1.35. Switch it (Ingresses on the host stop for about a minute): sudo microk8s addons repo update core && sudo microk8s disable ingress && sudo microk8s enable ingress, then run pulumi up again" >&2
  else
    echo "[microk8s] the ingress add-on reports enabled, but no Traefik DaemonSet ingress/traefik runs: check \`microk8s kubectl get all -n ingress\`, or re-enable it (sudo microk8s disable ingress && sudo microk8s enable ingress)" >&2
  fi
  exit 1
fi

if sudo -n grep -qx -- '--authorization-mode=RBAC,Node' "${APISERVER_ARGS}"; then
  echo "[microk8s] RBAC is already enforced" >&2
else
  echo "[microk8s] enabling rbac (the API server restarts)" >&2
  sudo -n microk8s enable rbac >&2
fi
sudo -n microk8s status --wait-ready --timeout 600 >&2
echo "addons=${ADDONS} rbac"
