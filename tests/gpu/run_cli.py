#!/usr/bin/python3
"""`dpflow run CONFIG --target gpu` as a user runs it: every example data
plane on the same traffic with --target cpu and --target gpu; the output
captures must be equal byte for byte, the port and pipe counters equal,
and both runs end with 'status: ok'. examples/policer.yaml is left out:
its meters read the clock, so two runs differ on any target; l4lb runs on
the CPU target only (docs/apps/l4lb.md). One skipped point where no GPU
is usable.
TAP on stdout, one point per config.

usage: run_cli.py DPFLOW EXAMPLES_DIR
"""
import filecmp
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = {"policer.yaml", "l4lb.yaml"}


def gpu_usable():
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and "GPU" in p.stdout


def counters(report):
    """The port and pipe counter lines of a run's report."""
    keep, section = [], None
    for line in report.splitlines():
        if line.startswith(("duration:", "status:")):
            break  # the timing lines end the counters
        if re.match(r"^[a-z][a-z ]*:$", line):
            section = line
            continue
        if section in ("ports:", "pipes:", "drops:"):
            keep.append(line)
    return keep


def run(dpflow, cfg, work, target):
    p = subprocess.run([dpflow, "run", cfg, "--target", target], cwd=work,
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def main():
    dpflow, examples = os.path.abspath(sys.argv[1]), sys.argv[2]
    if not gpu_usable():
        print("1..1\nok 1 - # skip no GPU usable here (nvidia-smi -L)")
        return 0
    configs = sorted(f for f in os.listdir(examples)
                     if f.endswith(".yaml") and f not in SKIP)
    top = tempfile.mkdtemp(prefix="dpflow-gpu-cli-")
    traffic = os.path.join(top, "in.pcap")
    subprocess.run([dpflow, "gen", "all", "--count", "20000", "--seed", "7",
                    "-o", traffic], check=True, capture_output=True)
    print("1..%d" % len(configs))
    failed = 0
    for i, name in enumerate(configs, 1):
        cfg = os.path.join(os.path.abspath(examples), name)
        out, why = {}, []
        for target in ("cpu", "gpu"):
            work = os.path.join(top, name + "." + target)
            os.makedirs(work)
            shutil.copy(traffic, os.path.join(work, "in.pcap"))
            out[target] = (work,) + run(dpflow, cfg, work, target)
            rc, stdout, stderr = out[target][1:]
            if rc != 0 or "status: ok" not in stdout:
                why.append("%s: exit %d: %s" % (target, rc,
                                                stderr.strip()[-400:]))
        if not why:
            cpu, gpu = out["cpu"][0], out["gpu"][0]
            files = sorted(f for f in os.listdir(cpu)
                           if f.endswith(".pcap") and f != "in.pcap")
            if not files:
                why.append("no output capture")
            for f in files:
                if not filecmp.cmp(os.path.join(cpu, f),
                                   os.path.join(gpu, f), shallow=False):
                    why.append("%s differs" % f)
            if counters(out["cpu"][2]) != counters(out["gpu"][2]):
                why.append("counters differ:\n" + "\n".join(
                    counters(out["cpu"][2]) + ["--"] +
                    counters(out["gpu"][2])))
        if why:
            failed += 1
            print("not ok %d - %s: cpu and gpu targets agree" % (i, name))
            for line in "\n".join(why).splitlines():
                print("# " + line)
        else:
            print("ok %d - %s: cpu and gpu targets agree (%s)" %
                  (i, name, ", ".join(files)))
    shutil.rmtree(top, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
