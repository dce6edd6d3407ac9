#!/usr/bin/python3
"""Timed transmit on an AF_PACKET port (txtime=1), live (TAP).

usage: live_txtime.py LIVE_TXTIME_SEND

One namespace made here holds a veth pair t0/t1. The helper (built from
live_txtime_send.c) opens `afpacket:t0,txtime=1`, sends frames of
ethertype 0x88b5, and a sniffer on t1 records what arrives and when
(CLOCK_MONOTONIC, as the helper's "sent" line). Checked:

- the port opens with txtime=1 (SO_TXTIME accepted) and 20 frames without
  a send time arrive;
- 20 frames scheduled 1 ms ahead arrive, and the port counts no errors
  (without an ETF qdisc the kernel sends them at once);
- txtime=2 is refused, and the error names the key;
- where `tc qdisc add ... etf` works on t0: 5 frames scheduled 20 ms ahead
  arrive no earlier than 19 ms after they were handed over (ETF's delta
  is 0.5 ms). Skipped where the kernel has no etf qdisc.

Bounded: at most 45 frames, every wait has a timeout; the namespace and
processes are removed at the end whatever happens. Without root or
namespaces the test reports itself skipped. No addresses are used.
"""
import os
import shutil
import subprocess
import sys

import livelib
from livelib import Tap

SEND = sys.argv[1]
NS = "dpftx%d" % (os.getpid() % 100000)
PY = "/usr/bin/python3"

T = Tap()
results = T.results
tap = T.ok
skip = T.skip


def sh(*args, check=True, timeout=20):
    return livelib.sh(*args, ns=NS, check=check, timeout=timeout)


# Receive frames of ethertype 0x88b5 on an interface for a while; print
# "MONO_NS PAYLOAD" for each.
SNIFF = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.bind((sys.argv[1], 0))
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    s.settimeout(max(0.01, end - time.monotonic()))
    try:
        d = s.recv(2048)
    except socket.timeout:
        break
    t = time.monotonic_ns()
    print(t, d[14:32].split(b"\0")[0].decode(), flush=True)
"""


def sniffer(secs):
    p = subprocess.Popen(["ip", "netns", "exec", NS, PY, "-c", SNIFF, "t1",
                          str(secs)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def send(uri, count, delay_ns, settle_ms=50):
    """Run the helper: (exit status, sent time, tx_pkts, tx_errors, text)."""
    r = sh(SEND, uri, str(count), str(delay_ns), str(settle_ms), check=False)
    sent = pkts = errs = None
    for line in r.stdout.splitlines():
        w = line.split()
        if w[:1] == ["sent"]:
            sent = int(w[1])
        elif w[:1] == ["tx_pkts"]:
            pkts, errs = int(w[1]), int(w[3])
    return r.returncode, sent, pkts, errs, r.stdout + r.stderr


def arrivals(p):
    out, _ = p.communicate(timeout=15)
    got = []
    for line in out.splitlines():
        w = line.split()
        if len(w) == 2 and w[1].startswith("dpflow-txtime-"):
            got.append((int(w[0]), w[1]))
    return got


def main():
    why = livelib.netns_unavailable(NS)
    if why:
        print("1..0 # SKIP " + why)
        return 0
    try:
        subprocess.run(["ip", "netns", "add", NS], check=True,
                       capture_output=True, timeout=10)
    except (subprocess.SubprocessError, OSError) as e:
        print("1..0 # SKIP cannot make namespace %s (%s)" % (NS, e))
        return 0
    print("1..4")
    procs = []
    try:
        sh("ip", "link", "add", "t0", "type", "veth", "peer", "name", "t1")
        for dev in ("t0", "t1", "lo"):
            sh("ip", "link", "set", dev, "up")

        # 1: the option is accepted; frames without a time still go
        p = sniffer(2)
        procs.append(p)
        rc, _, pkts, errs, text = send("afpacket:t0,txtime=1", 20, 0)
        got = arrivals(p)
        tap(rc == 0 and len(set(n for _, n in got)) == 20 and pkts == 20,
            "afpacket:t0,txtime=1 opens; 20 frames without a send time "
            "arrive", "rc %d, %d arrived, tx_pkts %s\n%s" %
            (rc, len(got), pkts, text))

        # 2: frames with a time, no ETF: sent at once, no errors
        p = sniffer(2)
        procs.append(p)
        rc, _, pkts, errs, text = send("afpacket:t0,txtime=1", 20, 1000000)
        got = arrivals(p)
        tap(rc == 0 and len(set(n for _, n in got)) == 20 and errs == 0,
            "20 frames scheduled 1 ms ahead arrive (no ETF qdisc: sent at "
            "once), no transmit errors", "rc %d, %d arrived, tx_errors %s\n"
            "%s" % (rc, len(got), errs, text))

        # 3: a bad value is refused, naming the key
        rc, _, _, _, text = send("afpacket:t0,txtime=2", 1, 0)
        tap(rc == 1 and "txtime" in text,
            "txtime=2 is refused and the error names the key", text)

        # 4: with ETF, a frame 20 ms ahead leaves no earlier than that
        what = "with an ETF qdisc, frames scheduled 20 ms ahead arrive " \
            ">= 19 ms later"
        etf = None
        if shutil.which("tc") is None:
            etf = "no tc"
        else:
            r = sh("tc", "qdisc", "add", "dev", "t0", "root", "etf",
                   "clockid", "CLOCK_TAI", "delta", "500000", check=False)
            if r.returncode:
                etf = "tc qdisc add etf failed: " + \
                    (r.stderr.strip() or "exit %d" % r.returncode)
        if etf:
            skip(what, etf)
        else:
            p = sniffer(3)
            procs.append(p)
            rc, sent, pkts, errs, text = send("afpacket:t0,txtime=1", 5,
                                              20000000, settle_ms=200)
            got = arrivals(p)
            lat = [(t - sent) / 1e6 for t, _ in got] if sent else []
            tap(rc == 0 and len(got) == 5 and min(lat) >= 19.0 and
                max(lat) < 1000, what,
                "rc %d, arrivals after %s ms, tx_errors %s\n%s" %
                (rc, ["%.2f" % x for x in lat], errs, text))
    except Exception as e:  # report, then clean up
        while len(results) < 4:
            tap(False, "setup or check raised", repr(e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
