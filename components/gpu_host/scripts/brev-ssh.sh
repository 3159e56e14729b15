#!/bin/sh
# Resolve how to reach a Brev instance over SSH, from the entry `brev refresh` writes to ~/.brev/ssh_config.
#
# POSIX sh: this runs on the operator's machine, whose /bin/sh may be dash or macOS's bash 3.2 (no ${x,,},
# no `base64 -w0`). It runs on every preview and `up`: a stopped and started instance may have a new address.
#
# Prints key=value lines: address, user, port, and the private key (base64, one line), last.
# The caller keeps this output out of the logs and marks it secret.
#
# `brev refresh` writes a `Host <name>` entry for RUNNING instances only, either with
# HostName/Port/User or with a cloudflared ProxyCommand (brevdev/brev-cli pkg/ssh/sshconfigurer.go
# @v0.6.327). `ssh -G` exits 0 even for a host no config names, echoing the name (lowercased) as its
# hostname (openssh/openssh-portable ssh.c, readconf.c @V_10_5_P1), so that case is detected from its output.
#
# Inputs (environment): BREV_NAME, ROLE (control-plane or worker).
set -eu

: "${BREV_NAME:?instance name}"
ROLE="${ROLE:-control-plane}"

fail() { echo "[brev] $*" >&2; exit 1; }

brev refresh </dev/null >&2 || fail "\`brev refresh\` failed: run \`brev login --token <token>\` and retry"

settings=$(ssh -G "${BREV_NAME}")
setting() { printf '%s\n' "${settings}" | awk -v key="$1" '$1 == key { $1 = ""; sub(/^ /, ""); print; exit }'; }

proxy=$(setting proxycommand)
if [ -n "${proxy}" ] && [ "${proxy}" != none ]; then
  if [ "${ROLE}" = worker ]; then
    fail "${BREV_NAME} is reachable only through a ProxyCommand (${proxy}), so it cannot be a worker: MicroK8s nodes talk to each other directly (25000/tcp and 16443/tcp to the control plane, 10250/tcp back, 4789/udp both ways). Use instances with public addresses, or host.mode ssh with workers you can reach."
  fi
  fail "${BREV_NAME} is reachable only through a ProxyCommand (${proxy}), which Pulumi's SSH client cannot use. Give the machine a direct SSH address and use host.mode ssh with gpu-tenancy:sshPrivateKey instead."
fi

address=$(setting hostname)
lower_name=$(printf '%s' "${BREV_NAME}" | tr '[:upper:]' '[:lower:]')
if [ -z "${address}" ] || [ "${address}" = "-" ] || [ "${address}" = "${lower_name}" ]; then
  fail "brev refresh wrote no SSH address for ${BREV_NAME}: is it RUNNING in \`brev ls\`, with a public address?"
fi
identity=$(setting identityfile)
case "${identity}" in
  "~"*) identity="${HOME}${identity#"~"}" ;;
esac
[ -r "${identity}" ] || fail "the identity file ${identity} for ${BREV_NAME} is not readable"
key=$(base64 <"${identity}" | tr -d '\n')

echo "address=${address}"
echo "user=$(setting user)"
echo "port=$(setting port)"
echo "privateKey=${key}"
