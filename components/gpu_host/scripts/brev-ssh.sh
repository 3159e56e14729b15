#!/usr/bin/env bash
# Resolve how to reach a Brev instance over SSH, from the entry `brev refresh` writes to ~/.brev/ssh_config.
#
# Prints key=value lines: address, user, port, and the private key (base64, one line).
# The caller keeps this output out of the logs and marks it secret.
#
# `brev refresh` writes a `Host <name>` entry for RUNNING instances only, either with
# HostName/Port/User or with a cloudflared ProxyCommand (brevdev/brev-cli pkg/ssh/sshconfigurer.go
# @v0.6.327). `ssh -G` exits 0 even for a host no config names, echoing the name as its hostname
# (openssh/openssh-portable ssh.c, readconf.c @V_10_5_P1), so that case is detected from its output.
#
# Inputs (environment): BREV_NAME, ROLE (control-plane or worker).
set -euo pipefail

: "${BREV_NAME:?instance name}"
ROLE="${ROLE:-control-plane}"

fail() { echo "[brev] $*" >&2; exit 1; }

brev refresh </dev/null >&2 || fail "\`brev refresh\` failed: run \`brev login --token <token>\` and retry"

settings=$(ssh -G "${BREV_NAME}")
setting() { awk -v key="$1" '$1 == key { $1 = ""; sub(/^ /, ""); print; exit }' <<<"${settings}"; }

proxy=$(setting proxycommand)
if [[ -n "${proxy}" && "${proxy}" != none && "${ROLE}" == worker ]]; then
  fail "${BREV_NAME} is reachable only through a ProxyCommand (${proxy}), so it cannot be a worker: MicroK8s nodes talk to each other directly (25000/tcp and 16443/tcp to the control plane, 10250/tcp back, 4789/udp both ways). Use instances with public addresses, or host.mode ssh with workers you can reach."
fi
if [[ -n "${proxy}" && "${proxy}" != none ]]; then
  fail "${BREV_NAME} is reachable only through a ProxyCommand (${proxy}), which Pulumi's SSH client cannot use. Give the machine a direct SSH address and use host.mode ssh with gpu-tenancy:sshPrivateKey instead."
fi

address=$(setting hostname)
if [[ -z "${address}" || "${address}" == "-" || "${address}" == "${BREV_NAME,,}" ]]; then
  fail "brev refresh wrote no SSH address for ${BREV_NAME}: is it RUNNING in \`brev ls\`, with a public address?"
fi
identity=$(setting identityfile)
identity="${identity/#\~/${HOME}}"
[[ -r "${identity}" ]] || fail "the identity file ${identity} for ${BREV_NAME} is not readable"

echo "address=${address}"
echo "user=$(setting user)"
echo "port=$(setting port)"
echo "privateKey=$(base64 -w0 "${identity}")"
