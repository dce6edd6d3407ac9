#!/usr/bin/python3
"""`dpflow trace CONFIG --pcap FILE --index N` as an operator uses it: the
way one packet takes through the pipes, checked against what the config
says (which rule of a first-match ACL by priority a packet must hit, an
LPM miss, a CT pipe's new connection and a TCP packet that cannot open
one), and against the real thing: the frame the trace says leaves a port
is byte for byte the frame `dpflow run` writes for the same packet, and a
NAT rewrite equals the one scapy computes (checksums included). Packets
are built with scapy. Usage errors exit 2, a missing packet or port 1.
TAP on stdout, one point per case.

usage: trace.py DPFLOW
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, "/usr/lib/python3/dist-packages")
from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap, rdpcap  # noqa: E402

FIREWALL = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
  - {name: out, uri: 'pcap:tx=out.pcap'}
pipes:
  - name: firewall
    type: acl
    root: in
    size: 64
    match: [outer.ipv4.src, outer.ip.proto, outer.l4.dport]
    monitor: {counter: true}
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
"""

NAT = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
  - {name: out, uri: 'pcap:tx=out.pcap'}
pipes:
  - name: snat
    type: basic
    root: in
    size: 16
    match: [outer.ipv4.src]
    actions:
      - [{set: {field: outer.ipv4.src, value: per-entry}}, {set: {field: outer.l4.sport, value: per-entry}}]
    fwd: {port: out}
    miss: drop
    entries:
      - {match: {outer.ipv4.src: 10.1.1.1}, values: [203.0.113.9, 40000]}
"""

CT = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
  - {name: out, uri: 'pcap:tx=out.pcap'}
pipes:
  - name: conntrack
    type: ct
    root: in
    size: 1024
    ct: {tcp_strict: true}
    fwd: {port: out}
    miss: drop
"""

MAC = dict(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")

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


def run(dpflow, args, cwd):
    return subprocess.run([dpflow] + args, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def trace(dpflow, d, cfg, index, extra=()):
    p = run(dpflow, ["trace", cfg, "--pcap", "in.pcap", "--index",
                     str(index), "--json"] + list(extra), d)
    if p.returncode != 0:
        return None, p
    return json.loads(p.stdout), p


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def main():
    dpflow = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as d:
        write(d, "fw.yaml", FIREWALL)
        write(d, "nat.yaml", NAT)
        write(d, "ct.yaml", CT)
        pkts = [
            # 0: the blocked host: rule 0 (priority 1) although rule 1
            # matches too
            Ether(**MAC) / IP(src="10.0.0.7", dst="192.168.1.1") /
            TCP(sport=1000, dport=80),
            # 1: TCP from 10/8 to a routed address: rule 1, then the
            # route (TTL 64 -> 63, destination MAC of the entry)
            Ether(**MAC) / IP(src="10.0.0.8", dst="192.168.1.1", ttl=64) /
            TCP(sport=1000, dport=80) / Raw(b"x" * 10),
            # 2: TCP from 10/8 to an address no route covers: rule 1,
            # then the LPM miss
            Ether(**MAC) / IP(src="10.0.0.8", dst="172.16.0.1") /
            TCP(sport=1000, dport=80),
            # 3: DNS from anywhere: rule 2, straight out
            Ether(**MAC) / IP(src="198.51.100.1", dst="192.0.2.1") /
            UDP(sport=5353, dport=53) / Raw(b"q" * 12),
            # 4: UDP elsewhere: no rule
            Ether(**MAC) / IP(src="198.51.100.1", dst="192.0.2.1") /
            UDP(sport=5353, dport=54),
            # 5: a truncated IPv4 header: dropped by the parser
            Ether(**MAC, type=0x0800) / Raw(b"\x45\x00\x00"),
        ]
        wrpcap(os.path.join(d, "in.pcap"), pkts)

        t, p = trace(dpflow, d, "fw.yaml", 0)
        point(t is not None and [s["pipe"] for s in t["steps"]] ==
              ["firewall"] and t["steps"][0]["match"] == "hit" and
              t["steps"][0]["entry"] == 0 and
              t["verdict"] == {"to": "drop", "reason": "flow_drop"} and
              t["out"] == [],
              "first match by priority: the blocked host hits rule 0 "
              "and is dropped by its forwarding", t or p.stderr)

        t, p = trace(dpflow, d, "fw.yaml", 1)
        ok = t is not None and [(s["pipe"], s["match"]) for s in
                                t["steps"]] == [("firewall", "hit"),
                                                ("routes", "hit")]
        ok = ok and t["steps"][0]["entry"] == 1 and \
            t["steps"][0]["to"] == "pipe" and \
            t["steps"][0]["next"] == "routes" and \
            t["steps"][1]["actions"] is True and \
            t["verdict"] == {"to": "port", "port": "out"}
        point(ok, "a routed packet: rule 1 forwards to the lpm pipe, whose "
              "entry runs its actions and sends it out", t or p.stderr)
        want = pkts[1].copy()
        want[Ether].dst = "02:00:00:00:0a:01"
        want[IP].ttl = 63
        del want[IP].chksum
        want = bytes(Ether(bytes(want)))
        got = bytes.fromhex(t["out"][0]["frame"]) if t and t["out"] else b""
        point(got == want, "the frame out: TTL 63, the entry's MAC, IPv4 "
              "checksum as scapy computes it", (got.hex(), want.hex()))

        # the same packet through `dpflow run`: the frame written is the
        # frame the trace shows
        wrpcap(os.path.join(d, "one.pcap"), [pkts[1]])
        os.replace(os.path.join(d, "in.pcap"), os.path.join(d, "all.pcap"))
        os.replace(os.path.join(d, "one.pcap"), os.path.join(d, "in.pcap"))
        r = run(dpflow, ["run", "fw.yaml"], d)
        sent = [bytes(x) for x in rdpcap(os.path.join(d, "out.pcap"))] \
            if r.returncode == 0 else []
        point(sent == [got], "`dpflow run` writes the frame the trace shows",
              r.stderr or [x.hex() for x in sent])
        os.replace(os.path.join(d, "all.pcap"), os.path.join(d, "in.pcap"))

        t, p = trace(dpflow, d, "fw.yaml", 2)
        point(t is not None and len(t["steps"]) == 2 and
              t["steps"][1]["match"] == "miss" and
              t["verdict"] == {"to": "drop", "reason": "flow_miss_drop"},
              "no route: the lpm pipe misses, its miss drops", t or p.stderr)

        t, p = trace(dpflow, d, "fw.yaml", 3)
        point(t is not None and len(t["steps"]) == 1 and
              t["steps"][0]["entry"] == 2 and
              t["out"] and bytes.fromhex(t["out"][0]["frame"]) ==
              bytes(pkts[3]),
              "DNS: rule 2 sends it out unchanged", t or p.stderr)

        t, p = trace(dpflow, d, "fw.yaml", 4)
        point(t is not None and t["steps"][0]["match"] == "miss" and
              t["verdict"]["reason"] == "flow_miss_drop",
              "no rule: the acl pipe misses", t or p.stderr)

        t, p = trace(dpflow, d, "fw.yaml", 5)
        point(t is not None and t["steps"] == [] and
              t["verdict"]["to"] == "drop" and
              t["verdict"]["reason"].startswith("ipv4"),
              "a cut IPv4 header: dropped by the parser before any pipe",
              t or p.stderr)

        # NAT: the rewrite against scapy's
        wrpcap(os.path.join(d, "in.pcap"), [
            Ether(**MAC) / IP(src="10.1.1.1", dst="192.0.2.10") /
            UDP(sport=1234, dport=53) / Raw(b"abcdef")])
        t, p = trace(dpflow, d, "nat.yaml", 0)
        want = Ether(**MAC) / IP(src="203.0.113.9", dst="192.0.2.10") / \
            UDP(sport=40000, dport=53) / Raw(b"abcdef")
        got = bytes.fromhex(t["out"][0]["frame"]) if t and t["out"] else b""
        point(got == bytes(want), "NAT: source address and port rewritten, "
              "IPv4 and UDP checksums equal scapy's", (got.hex(),
                                                      bytes(want).hex()))

        # CT: a SYN opens a connection; a lone ACK cannot
        wrpcap(os.path.join(d, "in.pcap"), [
            Ether(**MAC) / IP(src="10.0.0.1", dst="10.0.0.2") /
            TCP(sport=1111, dport=80, flags="S"),
            Ether(**MAC) / IP(src="10.0.0.1", dst="10.0.0.2") /
            TCP(sport=1111, dport=80, flags="A")])
        t, p = trace(dpflow, d, "ct.yaml", 0)
        s = t["steps"][0] if t and t["steps"] else {}
        point(s.get("match") == "tracked" and
              s.get("ct_state") == "syn_sent" and s.get("ct_flags") == 1 and
              t["verdict"] == {"to": "port", "port": "out"},
              "CT: a SYN makes a new connection in syn_sent", t or p.stderr)
        t, p = trace(dpflow, d, "ct.yaml", 1)
        s = t["steps"][0] if t and t["steps"] else {}
        point(s.get("match") == "no-connection" and
              s.get("ct_drop") == "invalid" and
              t["verdict"]["reason"] == "flow_miss_drop",
              "CT: an ACK with no connection cannot open one", t or p.stderr)

        # the text form names the pipes and the verdict
        p = run(dpflow, ["trace", "ct.yaml", "--pcap", "in.pcap"], d)
        point(p.returncode == 0 and
              "pipe 'conntrack' (ct): tracked connection" in p.stdout and
              "verdict: port 'out'" in p.stdout,
              "text output names the pipe, the connection and the verdict",
              p.stdout + p.stderr)

        # errors
        p = run(dpflow, ["trace", "ct.yaml", "--pcap", "in.pcap", "--index",
                         "7"], d)
        point(p.returncode == 1 and "no packet 7" in p.stderr,
              "a packet past the end: exit 1, named", p.stderr)
        p = run(dpflow, ["trace", "ct.yaml", "--pcap", "in.pcap", "--port",
                         "nosuch"], d)
        point(p.returncode == 1 and "no port 'nosuch'" in p.stderr,
              "an unknown --port: exit 1, named", p.stderr)
        p = run(dpflow, ["trace", "ct.yaml"], d)
        point(p.returncode == 2 and "--pcap" in p.stderr,
              "no --pcap: usage, exit 2", p.stderr)
        p = run(dpflow, ["trace", "ct.yaml", "--pcap", "missing.pcap"], d)
        point(p.returncode == 1 and "missing.pcap" in p.stderr,
              "a missing capture: exit 1, named", p.stderr)
        before = sorted(os.listdir(d))
        run(dpflow, ["trace", "fw.yaml", "--pcap", "in.pcap"], d)
        point(sorted(os.listdir(d)) == before and
              not os.path.exists(os.path.join(d, "out.pcap.tmp")),
              "a trace creates no file (the config's tx capture untouched)",
              sorted(os.listdir(d)))

    print("1..%d" % n_points)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
