#!/usr/bin/env bash
# Run a libFuzzer target for a bounded time on a scratch copy of its seed
# corpus, so that the checked-in corpus is never modified.
# usage: run_fuzz.sh FUZZER SEED_DIR [SECONDS]   (DPFLOW_FUZZ_SECONDS overrides)
set -euo pipefail
fuzzer=$1
seeds=$2
secs=${DPFLOW_FUZZ_SECONDS:-${3:-60}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
cd "$work"
status=0
"$fuzzer" -max_total_time="$secs" -max_len=4096 -timeout=10 \
	-rss_limit_mb=2048 -print_final_stats=1 corpus "$seeds" \
	>fuzz.log 2>&1 || status=$?
tail -n 30 fuzz.log
if [ "$status" != 0 ]; then
	echo "fuzz: $fuzzer exited with status $status"
	for f in crash-* leak-* timeout-* oom-*; do
		[ -f "$f" ] && { echo "$f:"; od -An -tx1 "$f" | head -n 8; }
	done
	exit 1
fi
echo "fuzz: ${secs}s clean, corpus $(ls corpus | wc -l) inputs"
