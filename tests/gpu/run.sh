#!/bin/sh
# Build dpflow with meson in its own directory and run every GPU test
# (meson test --suite gpu), then the GPU benchmarks (meson benchmarks of
# suite 'gpu', then `dpflow bench ... --target gpu`; GPU_NO_BENCH=1 skips
# them). The dpflow tool is built with the GPU test programs. Logs go to $OUT when set (else to
# BUILD/gpu-logs). The last line printed is "N passed, N failed".
#
#   tests/gpu/run.sh                 # build in build-gpu-run
#   GPU_BUILD=dir GPU_MESON_ARGS='-Dnative=false' tests/gpu/run.sh
#   GPU_BUILD=dir GPU_NO_BUILD=1 tests/gpu/run.sh   # programs built elsewhere
#
# Where libpcap, libyaml, liburcu or Criterion are missing (a bare CUDA
# machine), the Debian packages unpacked under .gpudeps/root (see
# docs/gpu.md) are used instead, and only the GPU test programs are built.
# The build is without -Werror for C (a newer host compiler must not stop
# the GPU run over CPU code; CI keeps it); CUDA code keeps -Werror.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${GPU_BUILD:-$ROOT/build-gpu-run}
LOG=${OUT:-$B/gpu-logs}
mkdir -p "$LOG"
export NVCC="${NVCC:-/usr/local/cuda/bin/nvcc}"
MESON=meson
command -v meson >/dev/null 2>&1 || MESON="python3 -m mesonbuild.mesonmain"

if { [ -n "${GPU_BUNDLED:-}" ] ||
	! pkg-config --exists libpcap yaml-0.1 liburcu-qsbr criterion 2>/dev/null; } &&
	[ -d "$ROOT/.gpudeps/root" ]; then
	D=$ROOT/.gpudeps/root
	PC=$D/usr/lib/x86_64-linux-gnu/pkgconfig
	export PATH="$D/usr/bin:$PATH" PKG_CONFIG="$D/usr/bin/pkgconf"
	export PKG_CONFIG_PATH="$PC" PKG_CONFIG_LIBDIR="$PC"
	export LD_LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	echo "run.sh: using the libraries unpacked in .gpudeps"
fi

{
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
	"$NVCC" --version 2>&1 | tail -1
} | tee "$LOG/gpu-env.txt"

if [ ! -f "$B/build.ninja" ]; then
	$MESON setup "$B" "$ROOT" -Dtests=true -Dgpu=enabled -Dwerror=false \
		${GPU_MESON_ARGS:-} >"$LOG/gpu-setup.log" 2>&1 || {
		tail -30 "$LOG/gpu-setup.log"
		echo "meson setup failed"
		echo "0 passed, 1 failed"
		exit 1
	}
fi

# Build only what the GPU tests and benchmarks run (-k 0: one program
# that does not build does not stop the others).
TARGETS=$($MESON introspect "$B" --tests --benchmarks 2>/dev/null | python3 -c '
import json, os, sys
b = os.path.realpath(sys.argv[1])
seen = set()
doc = json.load(sys.stdin)
for t in doc["tests"] + doc["benchmarks"]:
    if True:
        if "gpu" in t.get("suite", []) or any(s.endswith(":gpu") for s in t.get("suite", [])):
            p = os.path.realpath(t["cmd"][0])
            if p.startswith(b + "/") and p not in seen:
                seen.add(p)
                print(os.path.relpath(p, b))
' "$B")
# the dpflow tool too: gpu-run-cli and the benchmarks below run it
TARGETS="$TARGETS tools/dpflow/dpflow"
if [ -n "${GPU_NO_BUILD:-}" ]; then
	# Programs built elsewhere (the GPU machine's meson may not read the
	# build directory): run every GPU test program directly.
	echo "run.sh: GPU_NO_BUILD set: running the test programs in $B/tests/gpu"
	: >"$LOG/gpu-testlog.json"
	MISSING=
	for t in "$B"/tests/gpu/test_gpu_*; do
		[ -f "$t" ] && [ -x "$t" ] || continue
		n=$(basename "$t")
		t0=$(date +%s%N)
		timeout "${GPU_TEST_TIMEOUT:-600}" "$t" >"$LOG/$n.log" 2>&1
		rc=$?
		d=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')
		case $rc in
		0) r=OK ;;
		77) r=SKIP ;;
		124) r=TIMEOUT ;;
		*) r=FAIL ;;
		esac
		echo "{\"name\": \"$n\", \"result\": \"$r\", \"duration\": $d}" \
			>>"$LOG/gpu-testlog.json"
		echo "$r $n ($d s)" | tee -a "$LOG/gpu-tests.log"
		[ "$r" = OK ] || [ "$r" = SKIP ] ||
			tail -25 "$LOG/$n.log" | tee -a "$LOG/gpu-tests.log"
	done
else
	echo "run.sh: building $(echo $TARGETS | wc -w) GPU programs"
	ninja -C "$B" -k 0 $TARGETS >"$LOG/gpu-build.log" 2>&1 ||
		grep -E "error|FAILED" "$LOG/gpu-build.log" | head -30

	# Run the tests whose programs built; the others count as failed.
	$MESON introspect "$B" --tests 2>/dev/null | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if any(s.split(":")[-1] == "gpu" for s in t.get("suite", [])):
        ok = os.path.exists(t["cmd"][0])
        print(("run " if ok else "missing ") + t["name"])
' >"$LOG/gpu-list.txt"
	RUN=$(sed -n 's/^run //p' "$LOG/gpu-list.txt")
	MISSING=$(sed -n 's/^missing //p' "$LOG/gpu-list.txt")
	[ -z "$MISSING" ] || echo "run.sh: did not build: $MISSING"
	rm -f "$B/meson-logs/testlog.json"
	if [ -n "$RUN" ]; then
		$MESON test -C "$B" --no-rebuild --print-errorlogs \
			--num-processes 1 $RUN 2>&1 | tee "$LOG/gpu-tests.log"
	fi
	cp "$B/meson-logs/testlog.json" "$LOG/gpu-testlog.json" 2>/dev/null ||
		: >"$LOG/gpu-testlog.json"
fi

[ -n "${GPU_NO_BUILD:-}" ] ||
	NB=$($MESON introspect "$B" --benchmarks 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for t in json.load(sys.stdin) if any(s.split(":")[-1] == "gpu" for s in t.get("suite", []))))')
if [ "${NB:-0}" -gt 0 ]; then
	$MESON test -C "$B" --benchmark --suite gpu --no-rebuild \
		--print-errorlogs --num-processes 1 --verbose 2>&1 |
		tee "$LOG/gpu-bench.log"
fi

# The GPU benchmarks (dpflow bench ... --target gpu), unless GPU_NO_BENCH:
# each one's log in $LOG, its headline figures in the summary below.
# (the dpflow tool was built with the test programs; a tool that did not
# build is a failed check, not a silent skip)
DPFLOW=$B/tools/dpflow/dpflow
: >"$LOG/gpu-bench-summary.txt"
if [ -z "${GPU_NO_BUILD:-}" ] && [ ! -x "$DPFLOW" ]; then
	MISSING="$MISSING dpflow-tool"
fi
if [ -z "${GPU_NO_BENCH:-}" ] && [ -x "$DPFLOW" ]; then
	for b in "exact-1m --target gpu --trials 3" \
		"acl-10k --target gpu --trials 3" \
		"l4lb --target gpu --trials 2" \
		"e2e --target gpu" "e2e --target gpu --hdr-split 64" \
		"e2e --target gpu --size 1500" \
		"e2e --target gpu --size 1500 --path device"; do
		f=$LOG/bench-$(echo "$b" | tr -c 'a-z0-9\n' '_').log
		echo "run.sh: dpflow bench $b"
		timeout 300 "$DPFLOW" bench $b >"$f" 2>&1
		rc=$?
		{
			echo "== dpflow bench $b (exit $rc)"
			grep -E "^# (gpu kernel|copies|goal|latency|check|  )|^l4lb" "$f" |
				cut -c1-150
		} >>"$LOG/gpu-bench-summary.txt"
	done
fi

python3 - "$LOG/gpu-testlog.json" $MISSING <<'PY'
import json, os, sys
counts = {}
try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    lines = []
rows = [json.loads(l) for l in lines if l.strip()]
for r in rows:
    counts[r["result"]] = counts.get(r["result"], 0) + 1
    print("%-8s %-28s %6.1f s" % (r["result"], r["name"], r.get("duration", 0)))
for name in sys.argv[2:]:
    print("%-8s %-28s (did not build)" % ("FAIL", name))
try:
    bench = open(os.path.join(os.path.dirname(sys.argv[1]),
                              "gpu-bench-summary.txt")).read().strip()
except OSError:
    bench = ""
try:
    env = open(os.path.join(os.path.dirname(sys.argv[1]),
                            "gpu-env.txt")).read().splitlines()
except OSError:
    env = []
gpus = [l for l in env[1:] if l.strip() and "," in l]
print("gpu: " + (gpus[0] if gpus else "none found by nvidia-smi"))
if bench:
    print(bench)
passed = counts.get("OK", 0) + counts.get("EXPECTEDFAIL", 0)
skipped = counts.get("SKIP", 0)
failed = len(rows) - passed - skipped + len(sys.argv) - 2
if not rows and failed == 0:
    failed = 1
line = "%d passed, %d failed" % (passed, failed)
if skipped:
    line += ", %d skipped" % skipped
print(line)
sys.exit(1 if failed else 0)
PY
