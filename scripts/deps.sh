#!/bin/sh
# Install the Debian packages dpflow needs to build, test and run its demo.
# Idempotent: a no-op when everything is present; `apt-get update` runs at
# most once, and only when something is missing. Needs root to install.
#   scripts/deps.sh          build, test, demo
#   scripts/deps.sh --bench  the same (the benchmark peers' DPDK is now in
#                            the default list)
set -eu

# libdpdk-dev: the dpdk: port (lib/io/port_dpdk.c), which `make test` checks
# on virtual devices (tests/dpdk), and the benchmarks' DPDK peers.
# graphviz: dot, for `dpflowctl dump --dot | dot -Tsvg > graph.svg`.
PKGS="meson ninja-build pkg-config gcc clang libclang-rt-14-dev
libcriterion-dev libpcap-dev liburcu-dev libyaml-dev libjansson-dev
libmicrohttpd-dev libxdp-dev libbpf-dev tshark python3 python3-scapy curl
libdpdk-dev graphviz"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing$missing"
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing packages and not root: install$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
