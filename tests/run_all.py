#!/usr/bin/python3
"""Run every test registered in a meson build directory and count results.

Criterion executables (suite 'unit') run with --tap and count one result per
test case; tests with protocol 'tap' count one result per TAP line; other
tests count one result from their exit status (77 = skipped). The last line
printed is 'N passed, N failed' (', N skipped' when some were skipped).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TAP_LINE = re.compile(r"^(not ok|ok)\b\s*(\d+)?\s*-?\s*(.*)$")


def parse_tap(text):
    """Return a list of (status, name, diag) from TAP text."""
    results, plan = [], None
    lines = text.splitlines()
    for n, line in enumerate(lines):
        m = re.match(r"^1\.\.(\d+)", line)
        if m:
            plan = int(m.group(1))
            continue
        m = TAP_LINE.match(line)
        if not m:
            continue
        name = m.group(3).strip()
        if re.search(r"#\s*skip", name, re.I):
            status = "skip"
        elif m.group(1) == "ok":
            status = "pass"
        else:
            status = "fail"
        diag = []
        for follow in lines[n + 1:n + 15]:
            if TAP_LINE.match(follow):
                break
            diag.append(follow)
        results.append((status, name, "\n".join(diag)))
    return results, plan


def run(test):
    env = dict(os.environ)
    env.update(test.get("env") or {})
    env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    cmd = list(test["cmd"])
    suites = [s.split(":")[-1] for s in test.get("suite", [])]
    tap_file = None
    # Criterion programs write TAP to a file; a TAP script of suite unit
    # prints its own (the Criterion flags would be lost on it, and its
    # results with them)
    if "unit" in suites and test.get("protocol") != "tap":
        fd, tap_file = tempfile.mkstemp(suffix=".tap")
        os.close(fd)
        cmd += ["--tap=" + tap_file, "--ascii", "-j2"]
    timeout = test.get("timeout") or 600
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=test.get("workdir") or None, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        out, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace")
        rc = "timeout"
    secs = time.monotonic() - start

    if tap_file:
        with open(tap_file, errors="replace") as f:
            tap = f.read()
        os.unlink(tap_file)
        results, plan = parse_tap(tap)
    elif test.get("protocol") == "tap":
        results, plan = parse_tap(out)
    else:
        status = "skip" if rc == 77 else "pass" if rc == 0 else "fail"
        results, plan = [(status, test["name"], "")], 1

    if plan is not None and len(results) < plan:
        results.append(("fail", "%d of %d planned results missing" %
                        (plan - len(results), plan), ""))
    if not results and rc != 77:
        # a test that says nothing has not passed
        results.append(("fail", "no results (exit status %s)" % rc, ""))
    if rc != 0 and rc != 77 and not any(r[0] == "fail" for r in results):
        results.append(("fail", "exit status %s" % rc, ""))
    return results, out, secs


def main():
    if len(sys.argv) < 2:
        print("usage: run_all.py BUILD_DIR [TEST_NAME...]", file=sys.stderr)
        return 2
    build, only = sys.argv[1], set(sys.argv[2:])
    tests = json.loads(subprocess.check_output(
        ["meson", "introspect", build, "--tests"]))
    totals = {"pass": 0, "fail": 0, "skip": 0}
    for test in tests:
        if only and test["name"] not in only:
            continue
        results, out, secs = run(test)
        counts = {k: sum(1 for r in results if r[0] == k) for k in totals}
        for k in totals:
            totals[k] += counts[k]
        print("%-22s %4d passed %4d failed %4d skipped  (%.1f s)" %
              (test["name"], counts["pass"], counts["fail"], counts["skip"],
               secs), flush=True)
        for status, name, diag in results:
            if status == "fail":
                print("    FAIL %s" % name)
                if diag:
                    print("      " + diag.replace("\n", "\n      "))
        if counts["fail"]:
            tail = out.strip().splitlines()[-40:]
            print("    --- output (last 40 lines) ---")
            for line in tail:
                print("    " + line)
    line = "%d passed, %d failed" % (totals["pass"], totals["fail"])
    if totals["skip"]:
        line += ", %d skipped" % totals["skip"]
    print(line)
    return 1 if totals["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
