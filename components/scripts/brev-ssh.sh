#!/usr/bin/env bash
# Resolve how to reach a Brev instance over SSH, from the entry `brev refresh` writes to ~/.brev/ssh_config.
#
# Prints key=value lines: address, user, port, and the private key (base64, one line).
# The caller marks this output secret.
#
# Inputs (environment): BREV_NAME.
set -euo pipefail

: "${BREV_NAME:?instance name}"

fail() { echo "[brev] $*" >&2; exit 1; }

brev refresh </dev/null >&2 || fail "\`brev refresh\` failed: run \`brev login --token <token>\` and retry"

settings=$(ssh -G "${BREV_NAME}") || fail "ssh has no settings for ${BREV_NAME}: is the instance listed by \`brev ls\`?"
setting() { awk -v key="$1" '$1 == key { $1 = ""; sub(/^ /, ""); print; exit }' <<<"${settings}"; }

proxy=$(setting proxycommand)
if [[ -n "${proxy}" && "${proxy}" != none ]]; then
  fail "${BREV_NAME} is reachable only through a ProxyCommand (${proxy}), which Pulumi's SSH client cannot use. Give the machine a direct SSH address and use host.mode ssh with gpu-tenancy:sshPrivateKey instead."
fi

address=$(setting hostname)
identity=$(setting identityfile)
identity="${identity/#\~/${HOME}}"
[[ -r "${identity}" ]] || fail "the identity file ${identity} for ${BREV_NAME} is not readable"

echo "address=${address}"
echo "user=$(setting user)"
echo "port=$(setting port)"
echo "privateKey=$(base64 -w0 "${identity}")"
