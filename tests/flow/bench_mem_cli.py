#!/usr/bin/python3
"""`dpflow bench mem` as a user runs it: the five lookup patterns, each
with a row and a JSON line of positive figures; bad options refused with
exit 2 and a message naming the option; --help with exit 0. TAP on
stdout, one point per case.

usage: bench_mem_cli.py DPFLOW
"""
import json
import subprocess
import sys

PATTERNS = ["line", "line+same-page", "line>same-page", "line+page",
            "line>page"]


def run(dpflow, *args):
    p = subprocess.run([dpflow, "bench", "mem", *args], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def main():
    dpflow = sys.argv[1]
    cases = []

    rc, out, err = run(dpflow, "--mb", "8", "--seconds", "0.02",
                       "--trials", "1")
    rows = [l.split() for l in out.splitlines() if l.startswith("mem ")]
    docs = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    cases.append(("a run exits 0", rc == 0, err))
    cases.append(("one row a pattern, in order",
                  [r[1] for r in rows] == PATTERNS, out))
    cases.append(("one JSON line a pattern, positive ns and cycles",
                  [d["pattern"] for d in docs] == PATTERNS and
                  all(d["ns_per_lookup"] > 0 and d["cycles_per_lookup"] > 0
                      and d["mb"] == 8 and d["burst"] == 32 for d in docs),
                  out))
    cases.append(("the one-line pattern's extra is 0",
                  bool(rows) and float(rows[0][4]) == 0.0, out))

    rc, out, err = run(dpflow, "--mb", "8", "--seconds", "0.02",
                       "--trials", "1", "--no-huge", "--burst", "64")
    docs = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    cases.append(("--no-huge --burst 64 are taken",
                  rc == 0 and len(docs) == 5 and
                  all(not d["huge"] and d["burst"] == 64 for d in docs),
                  out + err))

    for args, name in ((["--mb", "3"], "--mb"), (["--mb", "0"], "--mb"),
                       (["--burst", "0"], "--burst"),
                       (["--burst", "257"], "--burst"),
                       (["--seconds", "x"], "--seconds"),
                       (["--trials", "0"], "--trials")):
        rc, out, err = run(dpflow, *args)
        cases.append(("%s refused" % " ".join(args),
                      rc == 2 and ("bad value '%s' for %s" % (args[1], name))
                      in err, err))
    rc, out, err = run(dpflow, "extra")
    cases.append(("a stray argument is refused",
                  rc == 2 and "unexpected 'extra'" in err, err))
    rc, out, err = run(dpflow, "--help")
    cases.append(("--help exits 0 and names the options",
                  rc == 0 and "--no-huge" in out and "--mb N" in out, out))

    print("1..%d" % len(cases))
    failed = 0
    for i, (desc, ok, detail) in enumerate(cases, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, desc))
        if not ok:
            failed += 1
            for line in detail.splitlines()[:10]:
                print("# " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
