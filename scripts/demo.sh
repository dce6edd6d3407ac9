#!/bin/sh
# `make demo`: generate traffic with every protocol dpflow parses, plus a set
# of malformed packets, and show how the data plane's parser sees them.
# (The flow-engine milestone turns this into a full pipeline run.)
set -eu
DPFLOW=${1:-build/tools/dpflow/dpflow}
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
echo "== parser speed on this core (dpflow bench parse, short run)"
"$DPFLOW" bench parse --seconds 0.2 --trials 3 | grep -v '^{'
