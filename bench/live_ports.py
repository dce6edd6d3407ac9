#!/usr/bin/python3
"""Forwarding rate of `dpflow run` between veths, per port kind and workers.

usage: live_ports.py DPFLOW [--kinds afpacket,afxdp] [--workers 1,2]
                            [--seconds S] [--flows N] [--rss soft|port]

Three namespaces made here: A runs a blaster (`dpflow run`, one worker, with an
in-memory `gen:` port, 64-byte UDP frames of N flows, sent out of a0 by a
port of the kind measured), M runs the dpflow under test (ports on a1 and
b1 of that kind, W queues each, --workers W, --rss as given), B receives on b0 (its stack
drops the frames). The pipeline in M: an exact-match pipe on the outer
5-tuple with a counter (1024 entries that the traffic does not hit: every
packet is looked up and forwarded to b1 by the miss), as
tests/live/live_forward.py's ports.

The rate is what M forwarded: the pipe's packets over a window of S
seconds, read from M's metrics endpoint at both ends of the window. Also
printed: what the blaster sent, M's receive-side drops (the kernel's, from
the port counters), and the same pipeline run on an in-memory `gen:` port
into a `null:` sink (no kernel in the path) for comparison.

Everything is removed at the end. Needs root and iproute2; only addresses
inside the namespaces are used (none: the frames are raw).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

TAG = "dpfb%d" % (os.getpid() % 100000)
NS_A, NS_B, NS_M = TAG + "a", TAG + "b", TAG + "m"
METRICS = "127.0.0.1:%d" % (19500 + os.getpid() % 400)

PIPE = """pipes:
  - name: fwd
    type: basic
    root: in
    size: 2048
    match: [outer.ipv4.src, outer.ipv4.dst, outer.l4.sport, outer.l4.dport,
            outer.ip.proto]
    monitor: {counter: true}
    fwd: {port: out}
    miss: {port: out}
    entries:
%s
"""


def entries():
    return "\n".join(
        "      - {match: {outer.ipv4.src: 192.0.2.%d, outer.ipv4.dst: "
        "198.51.100.%d, outer.l4.sport: %d, outer.l4.dport: 7, "
        "outer.ip.proto: 17}}" % (i % 250 + 1, i // 250 + 1, 1000 + i)
        for i in range(1024))


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True,
                          text=True, timeout=30)


def setup(queues):
    for ns in (NS_A, NS_B, NS_M):
        sh("ip", "netns", "add", ns)
    nq = ["numtxqueues", str(queues), "numrxqueues", str(queues)]
    sh("ip", "link", "add", "a0", "netns", NS_A, *nq, "type", "veth",
       "peer", "name", "a1", "netns", NS_M, *nq)
    sh("ip", "link", "add", "b0", "netns", NS_B, *nq, "type", "veth",
       "peer", "name", "b1", "netns", NS_M, *nq)
    for ns, dev in ((NS_A, "a0"), (NS_B, "b0"), (NS_M, "a1"), (NS_M, "b1")):
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def teardown(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=5)
    for ns in (NS_A, NS_B, NS_M):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def scrape(ns):
    out = sh("ip", "netns", "exec", ns, "curl", "-s", "--max-time", "3",
             "http://%s/metrics" % METRICS, check=False).stdout
    m = re.search(r'^dpflow_pipe_packets_total\{pipe="fwd"\} (\d+)$', out,
                  re.M)
    d = sum(int(x) for x in re.findall(
        r'^dpflow_port_rx_dropped_total\{port="in"\} (\d+)$', out, re.M))
    return (int(m.group(1)) if m else None), d, time.monotonic()


def measure(dpflow, kind, workers, seconds, flows, rss, tmp):
    procs = []
    try:
        setup(workers)
        q = ",queues=%d" % workers if workers > 1 else ""
        mid = os.path.join(tmp, "mid.yaml")
        with open(mid, "w") as f:
            f.write("ports:\n  - {name: in, uri: '%s:a1%s'}\n"
                    "  - {name: out, uri: '%s:b1%s'}\n" % (kind, q, kind, q))
            f.write(PIPE % entries())
        blast = os.path.join(tmp, "blast.yaml")
        with open(blast, "w") as f:
            f.write("ports:\n  - {name: in, uri: 'gen:default,loop,"
                    "flows=%d,size=64,mix=udp:100'}\n"
                    "  - {name: out, uri: '%s:a0%s'}\n"
                    % (flows, kind,
                       ",qdisc_bypass" if kind == "afpacket" else ""))
            f.write("pipes:\n  - {name: tx, type: basic, root: in, match: "
                    "[outer.ip.proto], miss: {port: out}}\n")
        mproc = subprocess.Popen(
            ["ip", "netns", "exec", NS_M, dpflow, "run", mid, "--workers",
             str(workers), "--rss", rss, "--metrics", METRICS, "--duration",
             str(seconds + 20)], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        procs.append(mproc)
        time.sleep(1.0)
        bproc = subprocess.Popen(
            ["ip", "netns", "exec", NS_A, dpflow, "run", blast,
             "--duration", str(seconds + 10)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(bproc)
        time.sleep(1.5)  # warm up
        p0, d0, t0 = scrape(NS_M)
        time.sleep(seconds)
        p1, d1, t1 = scrape(NS_M)
        bproc.send_signal(signal.SIGTERM)
        btext, _ = bproc.communicate(timeout=30)
        mproc.send_signal(signal.SIGTERM)
        mtext, _ = mproc.communicate(timeout=30)
        if p0 is None or p1 is None:
            print("# %s %dw: no metrics\n%s" % (kind, workers, mtext[-2000:]))
            return None
        sent = re.search(r"^\s+out\s+rx\s+\d+ pkts.*tx\s+(\d+) pkts", btext,
                         re.M)
        return {"mpps": (p1 - p0) / (t1 - t0) / 1e6,
                "drops": d1 - d0,
                "blaster_pkts": int(sent.group(1)) if sent else 0}
    finally:
        teardown(procs)


def in_memory(dpflow, workers, flows, rss, tmp):
    cfg = os.path.join(tmp, "mem.yaml")
    count = 10000000 * workers
    with open(cfg, "w") as f:
        f.write("ports:\n  - {name: in, uri: 'gen:default,count=%d,"
                "flows=%d,size=64,mix=udp:100,queues=%d'}\n"
                "  - {name: out, uri: 'null:'}\n" % (count, flows, workers))
        f.write(PIPE % entries())
    t0 = time.monotonic()
    r = subprocess.run([dpflow, "run", cfg, "--workers", str(workers),
                        "--rss", rss],
                       capture_output=True, text=True, timeout=120)
    t = time.monotonic() - t0
    m = re.search(r"^\s+fwd\s+basic\s+(\d+) pkts", r.stdout, re.M)
    return int(m.group(1)) / t / 1e6 if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dpflow")
    ap.add_argument("--kinds", default="afpacket,afxdp")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--flows", type=int, default=1024)
    ap.add_argument("--rss", default="soft", choices=("soft", "port"))
    a = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("live_ports: needs root and iproute2", file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix="dpflow-bench-")
    rows = []
    try:
        for kind in a.kinds.split(","):
            for w in (int(x) for x in a.workers.split(",")):
                r = measure(a.dpflow, kind, w, a.seconds, a.flows, a.rss,
                            tmp)
                if r:
                    rows.append((kind, w, r))
                    print("%-9s %d worker(s), rss %s: %6.2f Mpps forwarded, "
                          "blaster sent %d, kernel drops at M %d"
                          % (kind, w, a.rss, r["mpps"], r["blaster_pkts"],
                             r["drops"]), flush=True)
        for w in (int(x) for x in a.workers.split(",")):
            mpps = in_memory(a.dpflow, w, a.flows, a.rss, tmp)
            print("gen->null %d worker(s), rss %s: %6.2f Mpps (same "
                  "pipeline, in "
                  "memory, config load included)" % (w, a.rss, mpps or 0),
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
