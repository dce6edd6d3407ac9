#!/usr/bin/python3
"""Compare `dpflow bench ct` of two builds in the same minutes.

    bench/ct_compare.py BASE_DPFLOW NEW_DPFLOW [--rounds N] [-- BENCH_ARGS...]

Runs `BASE bench ct ARGS` and `NEW bench ct ARGS` alternately, N rounds
(default 5), and prints, per variant (create / established, udp / tcp),
the median Mpps and TSC cycles per packet of each build, their ratio,
and the rte_hash peer's median from the same runs where the build has
one. Alternating rounds share the machine's load between both builds;
on a loaded machine compare the medians, not single runs.
"""
import json
import statistics
import subprocess
import sys


def run(binary, args):
    out = subprocess.run([binary, "bench", "ct"] + args, check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


def main():
    argv = sys.argv[1:]
    bench_args = []
    if "--" in argv:
        i = argv.index("--")
        argv, bench_args = argv[:i], argv[i + 1:]
    rounds = 5
    if "--rounds" in argv:
        i = argv.index("--rounds")
        rounds = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    base, new = argv
    res = {}  # (build, variant) -> list of records
    for r in range(rounds):
        for name, binary in (("base", base), ("new", new)):
            for rec in run(binary, bench_args):
                res.setdefault((name, rec["variant"]), []).append(rec)
    variants = sorted({v for (_, v) in res})
    print("%-24s %9s %9s %9s %9s %7s %11s" %
          ("variant", "base Mpps", "base cyc", "new Mpps", "new cyc",
           "new/base", "peer Mpps"))
    for v in variants:
        b, n = res.get(("base", v), []), res.get(("new", v), [])
        med = lambda recs, k: statistics.median(x[k] for x in recs) if recs else float("nan")
        peers = [x["peer_mpps"] for x in b + n if x.get("peer_mpps")]
        bm, nm = med(b, "mpps"), med(n, "mpps")
        print("%-24s %9.2f %9.0f %9.2f %9.0f %7.2f %11s" %
              (v, bm, med(b, "cycles_per_pkt"), nm, med(n, "cycles_per_pkt"),
               nm / bm if b and n else float("nan"),
               "%.2f" % statistics.median(peers) if peers else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
