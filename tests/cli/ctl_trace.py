#!/usr/bin/python3
"""`dpflowctl trace` and the control socket's `trace` request against a
live `dpflow run --control`, whose pcap ports read FIFOs that this script
keeps feeding with packets built by scapy: port `in` a cycle of five
packets that each take another way through a first-match ACL and an LPM
pipe, port `in2` one UDP flow into a CT pipe. Every live trace is checked
against the config's rules (the way each packet must take) and against
`dpflow trace` of the same packet offline: the steps and the verdict are
the same (the CT step differs only where a live connection has seen
packets before), consecutive traces of a burst follow the cycle, and a
hit's slot is the slot `entries.list` gives the entry. Then `--port`, a
port that receives nothing (an empty list, "timeout": true), the text
form (the lines `dpflow trace` prints), `--json`, the request's errors
(unknown port, count and timeout_ms out of range or of the wrong type, an
unknown key; the "unknown cmd" list) and dpflowctl's usage errors. TAP
on stdout, one point per case; a few seconds.

usage: ctl_trace.py DPFLOW DPFLOWCTL
"""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, "/usr/lib/python3/dist-packages")
from scapy.all import IP, TCP, UDP, Ether, Raw  # noqa: E402

CONFIG = """\
ports:
  - {name: in, uri: 'pcap:rx=%(in)s'}
  - {name: in2, uri: 'pcap:rx=%(in2)s'}
  - {name: out, uri: 'null:'}
pipes:
  - name: firewall
    type: acl
    root: in
    size: 64
    match: [outer.ipv4.src, outer.ip.proto, outer.l4.dport]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {outer.ipv4.src: 10.0.0.7/32}, priority: 1, fwd: drop}
      - {match: {outer.ipv4.src: 10.0.0.0/8, outer.ip.proto: 6}, priority: 10, fwd: {pipe: routes}}
      - {match: {outer.ip.proto: 17, outer.l4.dport: 53}, priority: 20, fwd: {port: out}}
  - name: routes
    type: lpm
    size: 64
    match: [outer.ipv4.dst]
    actions:
      - [{dec_ttl: true}, {set_mac_dst: per-entry}]
    fwd: {port: out}
    miss: drop
    entries:
      - {match: {outer.ipv4.dst: 192.168.0.0/16}, values: [null, "02:00:00:00:0a:01"]}
  - name: conntrack
    type: ct
    root: in2
    size: 1024
    fwd: {port: out}
    miss: drop
"""

MAC = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")

# Port in's cycle, each packet with the way the config's rules give it:
# [(pipe, match, entry id or None)], then the verdict.
CYCLE = [
    ("the blocked host: rule 0 (priority 1) drops it",
     Ether(**MAC) / IP(src="10.0.0.7", dst="192.168.1.1") /
     TCP(sport=1000, dport=80),
     [("firewall", "hit", 0)], {"to": "drop", "reason": "flow_drop"}),
    ("TCP from 10/8 to a routed address: rule 1, then the route",
     Ether(**MAC) / IP(src="10.0.0.8", dst="192.168.1.1") /
     TCP(sport=1000, dport=80) / Raw(b"x" * 10),
     [("firewall", "hit", 1), ("routes", "hit", 0)],
     {"to": "port", "port": "out"}),
    ("TCP from 10/8 to an address no route covers: rule 1, the lpm miss",
     Ether(**MAC) / IP(src="10.0.0.8", dst="172.16.0.1") /
     TCP(sport=1000, dport=80),
     [("firewall", "hit", 1), ("routes", "miss", None)],
     {"to": "drop", "reason": "flow_miss_drop"}),
    ("DNS: rule 2 sends it out",
     Ether(**MAC) / IP(src="198.51.100.1", dst="192.0.2.1") /
     UDP(sport=5353, dport=53) / Raw(b"q" * 12),
     [("firewall", "hit", 2)], {"to": "port", "port": "out"}),
    ("UDP elsewhere: no rule, the acl miss",
     Ether(**MAC) / IP(src="198.51.100.1", dst="192.0.2.1") /
     UDP(sport=5353, dport=54),
     [("firewall", "miss", None)],
     {"to": "drop", "reason": "flow_miss_drop"}),
]
FLOW = Ether(**MAC) / IP(src="10.0.0.1", dst="10.0.0.2") / \
    UDP(sport=1111, dport=53) / Raw(b"dns?")

n_points = 0
failed = 0


def point(ok, name, detail=""):
    global n_points, failed
    n_points += 1
    if not ok:
        failed += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n_points, name))
    if not ok and detail:
        for line in str(detail).splitlines()[:20]:
            print("#   " + line)
    sys.stdout.flush()


def pcap_header():
    return struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)


def pcap_record(frame):
    return struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame


class Feeder(threading.Thread):
    """Writes a capture into a FIFO: the header, then @frames over and
    over, a few hundred packets at a time, until stopped; closing it is
    the capture's end."""

    def __init__(self, path, frames):
        super().__init__(daemon=True)
        self.path = path
        self.chunk = b"".join(pcap_record(f) for f in frames) * \
            max(1, 200 // len(frames))
        self.stop = threading.Event()

    def run(self):
        try:
            with open(self.path, "wb", buffering=0) as f:
                f.write(pcap_header())
                while not self.stop.is_set():
                    f.write(self.chunk)
                    time.sleep(0.02)
        except (BrokenPipeError, OSError):
            pass  # the run is gone


def request(sock, req):
    """One request line, one reply line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(sock)
        s.sendall((json.dumps(req) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            got = s.recv(65536)
            if not got:
                break
            buf += got
    return json.loads(buf)


def offline(dpflow, d, cfg, port, frame, text=False):
    """`dpflow trace` of @frame arriving on @port: its JSON (or text)."""
    path = os.path.join(d, "one.pcap")
    with open(path, "wb") as f:
        f.write(pcap_header() + pcap_record(frame))
    p = subprocess.run([dpflow, "trace", cfg, "--pcap", path, "--port",
                        port] + ([] if text else ["--json"]), cwd=d,
                       capture_output=True, text=True, timeout=60)
    if p.returncode:
        return None
    return p.stdout if text else json.loads(p.stdout)


def way(t):
    """The part of a trace both forms share: port, steps, verdict."""
    return {k: t.get(k) for k in ("port", "steps", "verdict")}


def rules_say(t, steps, verdict):
    """Does trace @t take the way the config's rules give?"""
    got = [(s["pipe"], s["match"], s.get("entry")) for s in t["steps"]]
    return got == steps and t["verdict"] == verdict


def ctl(dpflowctl, sock, *args):
    p = subprocess.run([dpflowctl, "-s", sock, "-t", "20"] + list(args),
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def main():
    dpflow, dpflowctl = (os.path.abspath(p) for p in sys.argv[1:3])
    with tempfile.TemporaryDirectory() as d:
        fifo, fifo2 = os.path.join(d, "in.fifo"), os.path.join(d, "in2.fifo")
        os.mkfifo(fifo)
        os.mkfifo(fifo2)
        live = os.path.join(d, "live.yaml")
        with open(live, "w") as f:
            f.write(CONFIG % {"in": fifo, "in2": fifo2})
        # the same pipes offline, on files
        off = os.path.join(d, "off.yaml")
        with open(off, "w") as f:
            f.write(CONFIG % {"in": "one.pcap", "in2": "one.pcap"})

        # offline first: each packet's way, checked against the rules
        want = []
        for name, pkt, steps, verdict in CYCLE:
            t = offline(dpflow, d, off, "in", bytes(pkt))
            point(t is not None and rules_say(t, steps, verdict),
                  "offline: " + name, t)
            want.append(way(t) if t else None)
        want_ct = offline(dpflow, d, off, "in2", bytes(FLOW))
        s = want_ct["steps"][0] if want_ct and want_ct["steps"] else {}
        point(s.get("match") == "tracked" and
              s.get("ct_state") == "udp_unreplied" and
              s.get("ct_flags") == 1 and
              want_ct["verdict"] == {"to": "port", "port": "out"},
              "offline: a UDP packet opens a connection (new, unreplied)",
              want_ct)

        feeders = [Feeder(fifo, [bytes(c[1]) for c in CYCLE]),
                   Feeder(fifo2, [bytes(FLOW)])]
        for f in feeders:
            f.start()
        sock = os.path.join(d, "ctl.sock")
        run = subprocess.Popen([dpflow, "run", live, "--control", sock,
                                "--duration", "60"], cwd=d,
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            live_checks(dpflow, dpflowctl, d, off, sock, run, want, want_ct)
        finally:
            for f in feeders:
                f.stop.set()
            try:
                out, err = run.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                run.kill()
                out, err = run.communicate()
            point(run.returncode == 0 and "status: ok" in out,
                  "the run ends normally when its captures end",
                  "rc %s\n%s\n%s" % (run.returncode, out[-1000:], err))

    print("1..%d" % n_points)
    return 1 if failed else 0


def live_checks(dpflow, dpflowctl, d, off, sock, run, want, want_ct):
    for _ in range(200):
        if os.path.exists(sock) or run.poll() is not None:
            break
        time.sleep(0.05)
    point(os.path.exists(sock), "dpflow run serves its control socket",
          run.poll() is not None and run.communicate()[1])
    if not os.path.exists(sock):
        return
    # wait until both ports have had a few bursts (CT's first packet is
    # then long past)
    for _ in range(200):
        ports = {p["name"]: p["stats"]["rx_pkts"] for p in
                 request(sock, {"cmd": "ports"}).get("ports", [])}
        if ports.get("in", 0) >= 100 and ports.get("in2", 0) >= 100:
            break
        time.sleep(0.02)

    # eight packets of one burst on port in: each the way offline
    # `dpflow trace` gives its packet, in the order of the cycle
    r = request(sock, {"cmd": "trace", "port": "in", "count": 8,
                       "timeout_ms": 5000, "id": 7})
    traces = r.get("traces") or []
    kinds = [[k for k, w in enumerate(want) if w == way(t)] for t in traces]
    point(r.get("ok") is True and r.get("timeout") is False and
          r.get("id") == 7 and len(traces) == 8,
          "trace port in, count 8: eight traces, no timeout", r)
    point(traces and all(len(k) == 1 for k in kinds),
          "each live trace equals `dpflow trace` of one packet of the "
          "cycle (port, steps, verdict)",
          json.dumps(traces, indent=1) + "\nwant " + json.dumps(want))
    point(traces and all(len(k) == 1 for k in kinds) and
          all(kinds[i + 1][0] == (kinds[i][0] + 1) % len(CYCLE)
              for i in range(len(kinds) - 1)),
          "the traces of a burst are consecutive packets: the cycle's "
          "order", kinds)
    listed = request(sock, {"cmd": "entries.list", "pipe": "firewall"})
    slot_of = {e["id"]: e["slot"] for e in listed.get("entries", [])}
    hits = [s for t in traces for s in t["steps"]
            if s["pipe"] == "firewall" and s["match"] == "hit"]
    point(hits and all(s["slot"] == slot_of.get(s["entry"]) for s in hits),
          "a hit's slot is the one entries.list gives its entry id",
          (hits, slot_of))

    # port in2: the CT pipe's connection, seen before (not new)
    r = request(sock, {"cmd": "trace", "port": "in2", "count": 2})
    traces = r.get("traces") or []
    s = [t["steps"][0] if t["steps"] else {} for t in traces]
    w = want_ct["steps"][0] if want_ct and want_ct["steps"] else {}
    point(r.get("ok") is True and len(traces) == 2 and
          all(t["port"] == "in2" and
              t["verdict"] == want_ct["verdict"] for t in traces) and
          all(x.get("pipe") == "conntrack" and x.get("type") == "ct" and
              x.get("match") == w.get("match") and
              x.get("ct_state") == w.get("ct_state") and
              x.get("ct_flags") == 0 and
              isinstance(x.get("connection"), int) and
              x.get("to") == w.get("to") and x.get("port") == w.get("port")
              for x in s),
          "trace port in2: the CT step as offline, the connection "
          "tracked and unreplied, no longer new", (r, want_ct))
    point(len({x.get("connection") for x in s}) == 1,
          "both packets of the flow are the same connection", s)

    # any port
    seen, ok = set(), True
    for _ in range(6):
        r = request(sock, {"cmd": "trace"})
        for t in r.get("traces") or []:
            seen.add(t["port"])
            ok = t["port"] == "in2" or way(t) in want
            if not ok:
                break
    point(r.get("ok") is True and seen and seen <= {"in", "in2"} and ok,
          "trace on any port: packets of in or in2, each as offline",
          (r, seen))

    # a port that receives nothing: an empty list, said so
    t0 = time.monotonic()
    r = request(sock, {"cmd": "trace", "port": "out", "timeout_ms": 200})
    dt = time.monotonic() - t0
    point(r == {"ok": True, "traces": [], "timeout": True} and
          0.19 <= dt < 5,
          "a port with no traffic: ok, no traces, timeout true, after "
          "timeout_ms", (r, dt))

    # the request's errors
    bad = [({"port": "nosuch"}, "port", "no port named 'nosuch'"),
           ({"port": 3}, "port", "'port' must be a string"),
           ({"count": 0}, "count", "'count' must be an integer within 1..8"),
           ({"count": 9}, "count", "'count' must be an integer within 1..8"),
           ({"count": "2"}, "count", "'count' must be an integer"),
           ({"timeout_ms": 0}, "timeout_ms",
            "'timeout_ms' must be an integer within 1..10000"),
           ({"timeout_ms": 10001}, "timeout_ms", "within 1..10000"),
           ({"bogus": 1}, "bogus", "trace: unknown key 'bogus'")]
    for extra, field, msg in bad:
        req = dict({"cmd": "trace"}, **extra)
        r = request(sock, req)
        point(r.get("ok") is False and r.get("field") == field and
              msg in r.get("error", ""),
              "%s: refused, field %s" % (json.dumps(req), field), r)
    r = request(sock, {"cmd": "nosuch"})
    point(r.get("ok") is False and "entries.batch, trace)" in
          r.get("error", ""), "the unknown cmd message lists trace", r)

    # dpflowctl: text as `dpflow trace` prints it
    texts = []
    for _, pkt, _, _ in CYCLE:
        t = offline(dpflow, d, off, "in", bytes(pkt), text=True) or ""
        # its packet line and the frames out are the capture's: the
        # lines between are the way
        lines = t.splitlines()
        end = [i for i, x in enumerate(lines) if x.startswith("verdict:")]
        texts.append(lines[1:end[0] + 1] if end else None)
    rc, out, err = ctl(dpflowctl, sock, "trace", "--port", "in", "--count",
                       "3")
    lines = out.splitlines()
    heads = [i for i, x in enumerate(lines) if x.startswith("packet ")]
    bodies = [lines[a + 1:b] for a, b in zip(heads, heads[1:] + [None])]
    point(rc == 0 and not err and len(heads) == 3 and
          [lines[i] for i in heads] ==
          ["packet %d of 3: received on port 'in'" % k for k in (1, 2, 3)]
          and all(b in texts for b in bodies),
          "dpflowctl trace: each packet's lines are those `dpflow trace` "
          "prints for it", out + err + "\nwant one of " + json.dumps(texts))
    rc, out, err = ctl(dpflowctl, sock, "trace", "--count", "2", "--json")
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    point(rc == 0 and out.count("\n") == 1 and doc and doc["ok"] is True
          and doc["timeout"] is False and len(doc["traces"]) == 2 and
          all(way(t) in want or t["port"] == "in2" for t in doc["traces"]),
          "dpflowctl trace --json: the reply, one JSON line", out + err)
    rc, out, err = ctl(dpflowctl, sock, "trace", "--port", "nosuch")
    point(rc == 1 and not out and "no port named 'nosuch'" in err and
          "(field port)" in err, "dpflowctl trace --port nosuch: exit 1, "
          "the server's message", (rc, out, err))
    rc, out, err = ctl(dpflowctl, sock, "trace", "--port", "out",
                       "--timeout", "100")
    point(rc == 1 and not out and
          "no packet received on port 'out' within 100 ms" in err,
          "dpflowctl trace on a port with no traffic: exit 1, said so",
          (rc, out, err))
    rc, out, err = ctl(dpflowctl, sock, "trace", "--port", "out",
                       "--timeout", "100", "--json")
    point(rc == 1 and json.loads(out or "{}").get("timeout") is True,
          "... and with --json the reply, timeout true, exit 1",
          (rc, out, err))
    for args, why in ((["--count", "0"], "--count takes a number within "
                       "1..8, not '0'"),
                      (["--count", "9"], "within 1..8"),
                      (["--timeout", "x"], "--timeout takes milliseconds"),
                      (["--timeout", "10001"], "within 1..10000"),
                      (["--port"], "--port takes a value"),
                      (["--frob"], "unknown argument '--frob'")):
        rc, out, err = ctl(dpflowctl, sock, "trace", *args)
        point(rc == 2 and not out and err.count("\n") == 1 and why in err
              and "try 'dpflowctl trace --help'" in err,
              "dpflowctl trace %s: usage error, one line, exit 2" %
              " ".join(args), (rc, out, err))
    rc, out, err = ctl(dpflowctl, sock, "trace", "--help")
    point(rc == 0 and out.startswith("usage: dpflowctl trace") and not err,
          "dpflowctl trace --help", (rc, out, err))


if __name__ == "__main__":
    sys.exit(main())
