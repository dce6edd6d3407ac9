#!/usr/bin/python3
"""What idle workers cost: CPU time of `dpflow run` whose ports receive
nothing, for one or more dpflow binaries in the same run (a build to
compare with first, e.g. the previous release's).

usage: idle_cpu.py [--workers N] [--seconds S] [--rounds R] DPFLOW...

Each round runs every binary in turn on the same config: two `ring:`
ports that nobody feeds, one exact pipe between them, --workers N, for S
seconds. The figure is the whole process's user + system CPU time from
/proc/PID/stat, sampled from 0.5 s after start (past the config load) to
the end of the window, as a share of one core. Prints a row per binary
and round, then the median per binary, and one JSON line each.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CONFIG = """ports:
  - {name: a, uri: 'ring:idle_a'}
  - {name: b, uri: 'ring:idle_b'}
pipes:
  - name: fwd
    type: basic
    root: a
    match: [outer.l4.dport]
    fwd: {port: b}
    miss: drop
"""


def cpu_seconds(pid):
    """User + system CPU time of process @pid so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def measure(dpflow, cfg, workers, seconds):
    """Share of one core that an idle run of @dpflow takes."""
    p = subprocess.Popen([dpflow, "run", cfg, "--workers", str(workers)],
                         stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        c0, t0 = cpu_seconds(p.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(p.pid), time.monotonic()
    finally:
        p.terminate()
        p.wait(timeout=30)
    return (c1 - c0) / (t1 - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("dpflow", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "idle.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        shares = {b: [] for b in a.dpflow}
        print("%-6s %-50s %s" % ("round", "dpflow", "CPU (share of a core)"))
        for r in range(a.rounds):
            for b in a.dpflow:
                s = measure(os.path.abspath(b), cfg, a.workers, a.seconds)
                shares[b].append(s)
                print("%-6d %-50s %.1f%%" % (r + 1, b, 100 * s), flush=True)
        for b in a.dpflow:
            m = statistics.median(shares[b])
            print("median %-50s %.1f%% (%d workers, %.1f s)" %
                  (b, 100 * m, a.workers, a.seconds))
            print(json.dumps({"bench": "idle-cpu", "dpflow": b,
                              "workers": a.workers, "seconds": a.seconds,
                              "core_share": [round(x, 4) for x in shares[b]],
                              "median": round(m, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
