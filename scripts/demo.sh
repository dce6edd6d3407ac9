#!/bin/sh
# `make demo`: generate traffic with every protocol dpflow parses, plus a set
# of malformed packets, show how the parser sees them, then run a real data
# plane on it (examples/demo.yaml: classify by tunnel, decapsulate, 5-tuple
# ACL, forward) and show its counters.
set -eu
DPFLOW=$(realpath "${1:-build/tools/dpflow/dpflow}")
EXAMPLES=$(realpath "$(dirname "$0")/../examples")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== dpflow gen all: 5000 packets, every protocol, tunnel and option"
"$DPFLOW" gen all --count 5000 --seed 7 -o "$tmp/all.pcap"
echo "== dpflow gen all --malformed: 500 truncated and corrupted packets"
"$DPFLOW" gen all --malformed --count 500 --seed 7 -o "$tmp/bad.pcap"

echo
echo "== the first three packets, as the parser sees them (dpflow inspect)"
"$DPFLOW" inspect "pcap:$tmp/all.pcap" | head -n 3
echo
echo "== parser summary of the valid traffic"
"$DPFLOW" inspect --summary "pcap:$tmp/all.pcap"
echo
echo "== parser summary of the malformed traffic: every packet dropped, by reason"
"$DPFLOW" inspect --summary "pcap:$tmp/bad.pcap"
echo
echo "== a data plane: dpflow run examples/demo.yaml on the valid traffic"
echo "   (classify by tunnel -> decapsulate VXLAN/GENEVE/GRE/IP-in-IP -> ACL -> ports)"
cp "$tmp/all.pcap" "$tmp/in.pcap"
(cd "$tmp" && "$DPFLOW" run "$EXAMPLES/demo.yaml")
echo "   first packets forwarded by the ACL, as written to allowed.pcap:"
"$DPFLOW" inspect "pcap:$tmp/allowed.pcap" | head -n 2
echo
echo "== the L4 load balancer app: dpflow run examples/l4lb.yaml"
echo "   (800 TCP connections to a NAT VIP and a DSR VIP, 100 DNS queries over"
echo "    IPv6 to a GUE VIP; Maglev spreads them by weight, each flow keeps"
echo "    its backend)"
/usr/bin/python3 "$(dirname "$0")/l4lb_traffic.py" "$tmp"
(cd "$tmp" && "$DPFLOW" run "$EXAMPLES/l4lb.yaml" | grep -E '^(l4lb |  backend [^ ])')
echo "   first packets sent to the backends (NAT, then IP-in-IP):"
"$DPFLOW" inspect "pcap:$tmp/to_backends.pcap" | head -n 1
"$DPFLOW" inspect "pcap:$tmp/to_backends.pcap" | grep -m 1 ipip || true
echo
echo "== parser speed on this core (dpflow bench parse, short run)"
"$DPFLOW" bench parse --seconds 0.2 --trials 3 | grep -v '^{'
