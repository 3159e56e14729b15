#!/usr/bin/env bash
# Print an admin kubeconfig whose server is the address clients really use.
#
# A cloud VM's public address is often on no interface, so MicroK8s never put it
# in the API server certificate. When it is missing, it is added to
# csr.conf.template (which MicroK8s signs its server certificate from) and the
# server certificate is re-issued with the existing CA, so every existing
# kubeconfig stays valid. MicroK8s' apiservice-kicker notices a changed template
# within seconds and may re-issue the certificates itself first, restarting the
# host's containers once (canonical/microk8s microk8s-resources/wrappers/apiservice-kicker,
# scripts/wrappers/refresh_certs.py @v1.36).
#
# Inputs (environment): ADDRESS (IPv4 or DNS name), API_PORT.
set -euo pipefail

: "${ADDRESS:?address clients use}"
: "${API_PORT:?API server port}"

certs="${MICROK8S_CERTS:-/var/snap/microk8s/current/certs}"
log() { echo "[kubeconfig] $*" >&2; }

if [[ "${ADDRESS}" =~ ^[0-9]+(\.[0-9]+){3}$ ]]; then
  kind=IP; wanted="IP Address:${ADDRESS}"
else
  kind=DNS; wanted="DNS:${ADDRESS}"
fi

# One SAN per line, compared whole: 10.0.0.1 must not pass for 10.0.0.12.
sans=$(sudo -n openssl x509 -in "${certs}/server.crt" -noout -ext subjectAltName | tail -n +2 | tr ',' '\n' | sed 's/^ *//')
if grep -qxF "${wanted}" <<<"${sans}"; then
  log "${ADDRESS} is already in the API server certificate"
else
  if ! sudo -n grep -qE "^${kind}\.[0-9]+ = ${ADDRESS//./\\.}\$" "${certs}/csr.conf.template"; then
    last=$(sudo -n grep -oE "^${kind}\.[0-9]+" "${certs}/csr.conf.template" | cut -d. -f2 | sort -n | tail -n1)
    entry="${kind}.$(( ${last:-0} + 1 )) = ${ADDRESS}"
    log "adding '${entry}' to csr.conf.template"
    sudo -n sed -i "/^\[ *alt_names *\]/a ${entry}" "${certs}/csr.conf.template"
  fi
  log "re-issuing the API server certificate"
  sudo -n microk8s refresh-certs --cert server.crt >&2
  sudo -n microk8s status --wait-ready --timeout 600 >&2
fi

sudo -n microk8s config | sed -E "s#^( *server: https://)[^ ]+\$#\1${ADDRESS}:${API_PORT}#"
