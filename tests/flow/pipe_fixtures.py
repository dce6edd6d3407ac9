#!/usr/bin/python3
"""Packet-in/packet-out fixtures for the flow engine, end to end.

Each case is {description, config, input packets, expected output packets
per port, expected drop counts}. Inputs and expected outputs are built with
scapy, which computes every length and checksum itself; dpflow runs the
config with `dpflow run` on pcap ports, and the packets it writes must equal
the expected ones byte for byte. TAP on stdout, one point per case.

usage: pipe_fixtures.py DPFLOW
"""
import os
import re
import subprocess
import sys
import tempfile

from scapy.all import (Ether, IP, IPv6, TCP, UDP, ICMP, Dot1Q, Raw,
                       rdpcap, wrpcap)
from scapy.layers.vxlan import VXLAN

MAC_A = "02:00:00:00:00:0a"
MAC_B = "02:00:00:00:00:0b"
ROUTER = "02:00:00:00:00:01"
NEXT_HOP = "02:00:00:00:00:99"


def eth(src=MAC_A, dst=MAC_B):
    return Ether(src=src, dst=dst)


def tcp4(src="10.1.2.3", dst="192.168.1.10", sport=40000, dport=80, ttl=64,
         payload=b"hello dpflow"):
    return eth() / IP(src=src, dst=dst, ttl=ttl) / \
        TCP(sport=sport, dport=dport, flags="S") / Raw(payload)


def udp4(src="10.1.2.3", dst="192.168.1.10", sport=5353, dport=53, ttl=64):
    return eth() / IP(src=src, dst=dst, ttl=ttl) / \
        UDP(sport=sport, dport=dport) / Raw(b"query")


def rebuilt(pkt):
    """The packet as bytes, with scapy filling lengths and checksums."""
    return bytes(pkt.__class__(bytes(pkt)))


def no_csum(pkt):
    """Clear the fields scapy must recompute after edits."""
    p = pkt.copy()
    for layer in (IP, TCP, UDP, ICMP):
        if p.haslayer(layer):
            if layer is IP:
                del p[IP].chksum
            else:
                del p[layer].chksum
    return bytes(p)


CASES = []


def case(desc, config, inputs, outputs, drops=None):
    CASES.append((desc, config, inputs, outputs, drops or {}))


# ---- forwarding kinds ------------------------------------------------------

case("basic: hit forwards to a port, miss drops",
     """
pipes:
  - name: p
    type: basic
    root: in
    match: [outer.ip.proto]
    fwd: {port: out}
    miss: drop
    entries:
      - match: {outer.ip.proto: 6}
""",
     [tcp4(), udp4()],
     {"out": [bytes(tcp4())]},
     {"flow_miss_drop": 1})

case("per-entry forwarding to a port and to a pipe; explicit drop",
     """
pipes:
  - name: first
    type: basic
    root: in
    match: [outer.l4.dport]
    fwd: per-entry
    miss: {port: other}
    entries:
      - {match: {outer.l4.dport: 80}, fwd: {pipe: second}}
      - {match: {outer.l4.dport: 53}, fwd: {port: out}}
      - {match: {outer.l4.dport: 22}, fwd: drop}
  - name: second
    type: basic
    match: [outer.ip.proto]
    fwd: {port: other}
    entries:
      - match: {outer.ip.proto: 6}
""",
     [tcp4(dport=80), udp4(dport=53), tcp4(dport=22), tcp4(dport=8080)],
     # within a burst, a packet that leaves at the first pipe goes out
     # before one that takes a second pipe (flows keep their order)
     {"out": [bytes(udp4(dport=53))],
      "other": [bytes(tcp4(dport=8080)), bytes(tcp4(dport=80))]},
     {"flow_drop": 1})

case("constant field: packets without the value miss",
     """
pipes:
  - name: p
    type: basic
    root: in
    match:
      - outer.l4.dport
      - {field: outer.ipv4.dst, value: 192.168.1.10}
    fwd: {port: out}
    entries:
      - match: {outer.l4.dport: 80}
""",
     [tcp4(), tcp4(dst="192.168.1.11")],
     {"out": [bytes(tcp4())]},
     {"flow_miss_drop": 1})

case("registers: set in one pipe, matched in the next",
     """
pipes:
  - name: tag
    type: basic
    root: in
    match: [outer.ip.proto]
    actions:
      - [{set: {field: meta.reg1, value: per-entry}}]
    fwd: {pipe: by_tag}
    entries:
      - {match: {outer.ip.proto: 6}, values: [100]}
      - {match: {outer.ip.proto: 17}, values: [200]}
  - name: by_tag
    type: basic
    match: [meta.reg1]
    fwd: per-entry
    entries:
      - {match: {meta.reg1: 100}, fwd: {port: out}}
      - {match: {meta.reg1: 200}, fwd: {port: other}}
""",
     [tcp4(), udp4()],
     {"out": [bytes(tcp4())], "other": [bytes(udp4())]})

# ---- ACL and LPM -------------------------------------------------------------

case("acl firewall: prefixes, port range, priorities, default deny",
     """
pipes:
  - name: fw
    type: acl
    root: in
    size: 64
    match: [outer.ipv4.src, outer.ip.proto, outer.l4.dport]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {outer.ipv4.src: 10.1.0.0/16, outer.ip.proto: 6, outer.l4.dport: 80-89}, priority: 10, fwd: {port: out}}
      - {match: {outer.ipv4.src: 10.0.0.0/8}, priority: 20, fwd: {port: other}}
      - {match: {outer.ipv4.src: 10.1.2.3/32, outer.l4.dport: 81}, priority: 5, fwd: drop}
""",
     [tcp4(dport=80), tcp4(dport=81), tcp4(dport=90), udp4(dport=85),
      tcp4(src="172.16.0.1")],
     {"out": [bytes(tcp4(dport=80))],
      "other": [bytes(tcp4(dport=90)), bytes(udp4(dport=85))]},
     {"flow_drop": 1, "flow_miss_drop": 1})

route_in = [tcp4(dst="192.168.1.10"), tcp4(dst="192.168.7.7"),
            tcp4(dst="8.8.8.8"), tcp4(dst="192.168.1.10", ttl=1)]


def routed(p):
    q = p.copy()
    q[Ether].src = ROUTER
    q[Ether].dst = NEXT_HOP
    q[IP].ttl -= 1
    return no_csum_rebuild(q)


def no_csum_rebuild(q):
    del q[IP].chksum
    return bytes(q.__class__(bytes(q)))


case("lpm router: longest prefix, dec_ttl, MAC rewrite, TTL expiry",
     """
pipes:
  - name: routes
    type: lpm
    root: in
    match: [outer.ipv4.dst]
    actions:
      - [{dec_ttl: true}, {set_mac_src: "%s"}, {set_mac_dst: "%s"}]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {outer.ipv4.dst: 192.168.0.0/16}, fwd: {port: other}}
      - {match: {outer.ipv4.dst: 192.168.1.0/24}, fwd: {port: out}}
""" % (ROUTER, NEXT_HOP),
     route_in,
     {"out": [routed(route_in[0])], "other": [routed(route_in[1])]},
     {"flow_miss_drop": 1, "ttl_expired": 1})

v6 = eth() / IPv6(src="fd00::1", dst="2001:db8:1::5", hlim=9) / \
    UDP(sport=1000, dport=2000) / Raw(b"v6")
case("lpm on IPv6 destinations",
     """
pipes:
  - name: routes6
    type: lpm
    root: in
    match: [outer.ipv6.dst]
    fwd: per-entry
    entries:
      - {match: {outer.ipv6.dst: "2001:db8::/32"}, fwd: {port: other}}
      - {match: {outer.ipv6.dst: "2001:db8:1::/48"}, fwd: {port: out}}
""",
     [v6],
     {"out": [bytes(v6)]})

# ---- packet actions ----------------------------------------------------------

nat_in = tcp4(src="10.1.2.3", sport=40000)
nat_out = nat_in.copy()
nat_out[IP].src = "203.0.113.7"
nat_out[TCP].sport = 61000
del nat_out[IP].chksum
del nat_out[TCP].chksum
case("source NAT of address and port, checksums fixed",
     """
pipes:
  - name: snat
    type: basic
    root: in
    match: [outer.ipv4.src, outer.l4.sport]
    actions:
      - [{nat_src_ip: per-entry}, {nat_src_port: per-entry}]
    fwd: {port: out}
    entries:
      - {match: {outer.ipv4.src: 10.1.2.3, outer.l4.sport: 40000}, values: ["203.0.113.7", 61000]}
""",
     [nat_in],
     {"out": [rebuilt(nat_out)]})

dnat_in = udp4(dst="192.168.1.10", dport=53)
dnat_out = dnat_in.copy()
dnat_out[IP].dst = "10.9.9.9"
dnat_out[UDP].dport = 5353
del dnat_out[IP].chksum
del dnat_out[UDP].chksum
case("destination NAT of a UDP flow",
     """
pipes:
  - name: dnat
    type: basic
    root: in
    match: [outer.ipv4.dst, outer.l4.dport]
    actions:
      - [{nat_dst_ip: "10.9.9.9"}, {nat_dst_port: 5353}]
    fwd: {port: out}
    entries:
      - {match: {outer.ipv4.dst: 192.168.1.10, outer.l4.dport: 53}}
""",
     [dnat_in],
     {"out": [rebuilt(dnat_out)]})

inner = Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") / \
    IP(src="172.16.1.1", dst="172.16.1.2") / TCP(sport=1234, dport=443) / \
    Raw(b"inside")
vx = eth() / IP(src="10.0.0.1", dst="10.0.0.2") / \
    UDP(sport=55555, dport=4789) / VXLAN(vni=42) / inner
case("VXLAN decapsulation to a port",
     """
pipes:
  - name: decap
    type: basic
    root: in
    match: [tunnel.id]
    actions:
      - [{decap: true}]
    fwd: {port: out}
    entries:
      - match: {tunnel.id: 42}
""",
     [vx],
     {"out": [bytes(inner)]})

vlan_in = tcp4()
vlan_out = Ether(src=MAC_A, dst=MAC_B) / Dot1Q(vlan=100, prio=3) / \
    vlan_in[IP].copy()
case("VLAN push, then pop in a second pipe",
     """
pipes:
  - name: push
    type: basic
    root: in
    match: [outer.ip.proto]
    actions:
      - [{vlan_push: {vid: 100, pcp: 3}}]
    fwd: per-entry
    entries:
      - {match: {outer.ip.proto: 6}, fwd: {port: out}}
      - {match: {outer.ip.proto: 17}, fwd: {pipe: pop}}
  - name: pop
    type: basic
    match: [outer.vlan0]
    actions:
      - [{vlan_pop: true}]
    fwd: {port: other}
    entries:
      - match: {outer.vlan0: 100}
""",
     [vlan_in, udp4()],
     {"out": [bytes(vlan_out)], "other": [bytes(udp4())]})

case("mirror: a copy to another port, the original forwarded",
     """
pipes:
  - name: tap
    type: basic
    root: in
    match: [outer.ip.proto]
    actions:
      - [{mirror: other}]
    fwd: {port: out}
    entries:
      - match: {outer.ip.proto: 6}
""",
     [tcp4()],
     {"out": [bytes(tcp4())], "other": [bytes(tcp4())]})


def run_case(dpflow, desc, config, inputs, outputs, drops, tmp):
    inp = os.path.join(tmp, "in.pcap")
    wrpcap(inp, inputs)
    ports = "ports:\n  - {name: in, uri: 'pcap:rx=%s'}\n" % inp
    for name in ("out", "other"):
        ports += "  - {name: %s, uri: 'pcap:tx=%s'}\n" % (
            name, os.path.join(tmp, name + ".pcap"))
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write(ports + config)
    p = subprocess.run([dpflow, "run", cfg], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    problems = []
    if p.returncode != 0:
        return ["dpflow run exited %d: %s" % (p.returncode, out[-800:])]
    for name in ("out", "other"):
        got = [bytes(x) for x in rdpcap(os.path.join(tmp, name + ".pcap"))]
        want = outputs.get(name, [])
        if len(got) != len(want):
            problems.append("port %s: %d packets, expected %d" %
                            (name, len(got), len(want)))
            continue
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                problems.append("port %s packet %d differs:\n  got  %s\n"
                                "  want %s" % (name, i, g.hex(), w.hex()))
    counted = dict(re.findall(r"^\s+([a-z0-9_]+)\s+(\d+)$",
                              out.split("drops:")[-1], re.M))
    for reason, n in drops.items():
        if int(counted.get(reason, 0)) != n:
            problems.append("drop %s: %s, expected %d" %
                            (reason, counted.get(reason, 0), n))
    for reason, n in counted.items():
        if reason not in drops:
            problems.append("unexpected drop %s: %s" % (reason, n))
    return problems


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                        "examples")
EXAMPLE_TRAFFIC = {"vxlan_decap.yaml": "vxlan", "demo.yaml": "all",
                   "ct_firewall.yaml": "default", "ecmp.yaml": "default",
                   "policer.yaml": "default"}


def run_l4lb_example(dpflow, tmp):
    """The balancer example on its own client traffic (what `make demo`
    runs): every client packet reaches a backend."""
    subprocess.run(["/usr/bin/python3",
                    os.path.join(EXAMPLES, "..", "scripts", "l4lb_traffic.py"),
                    tmp], check=True, timeout=60)
    p = subprocess.run([dpflow, "run", os.path.join(EXAMPLES, "l4lb.yaml")],
                       cwd=tmp, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        return ["exit %d: %s" % (p.returncode, out[-600:])]
    fwd = sum(int(n) for n in re.findall(r"^l4lb service .*: fwd (\d+) pkts",
                                           out, re.M))
    rx = re.search(r"^\s+client\s+rx\s+(\d+) pkts", out, re.M)
    if not rx or fwd != int(rx.group(1)) or fwd == 0:
        return ["client packets %s, forwarded by the services %d"
                % (rx.group(1) if rx else "?", fwd)]
    return []


def run_example(dpflow, name, tmp):
    """An example config loads, runs on generated traffic and sends some."""
    if name == "l4lb.yaml":
        return run_l4lb_example(dpflow, tmp)
    profile = EXAMPLE_TRAFFIC.get(name, "default")
    subprocess.run([dpflow, "gen", profile, "--count", "500", "--seed", "5",
                    "-o", os.path.join(tmp, "in.pcap")], check=True,
                   stdout=subprocess.DEVNULL)
    p = subprocess.run([dpflow, "run", os.path.join(EXAMPLES, name)],
                       cwd=tmp, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        return ["exit %d: %s" % (p.returncode, out[-600:])]
    sent = sum(int(n) for n in re.findall(r"tx\s+(\d+) pkts", out))
    rx = re.search(r"^\s+in\s+rx\s+(\d+) pkts", out, re.M)
    problems = []
    if not rx or int(rx.group(1)) != 500:
        problems.append("did not read the 500 input packets")
    if sent == 0:
        problems.append("sent nothing")
    return problems


def main():
    if len(sys.argv) != 2:
        print("usage: pipe_fixtures.py DPFLOW", file=sys.stderr)
        return 2
    failed = 0
    examples = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".yaml"))
    print("1..%d" % (len(CASES) + len(examples)))
    for n, (desc, config, inputs, outputs, drops) in enumerate(CASES, 1):
        with tempfile.TemporaryDirectory() as tmp:
            problems = run_case(sys.argv[1], desc, config, inputs, outputs,
                                drops, tmp)
        if problems:
            failed += 1
            print("not ok %d - %s" % (n, desc))
            for line in "\n".join(problems).splitlines()[:20]:
                print("# " + line)
        else:
            print("ok %d - %s" % (n, desc))
        sys.stdout.flush()
    for k, name in enumerate(examples, len(CASES) + 1):
        with tempfile.TemporaryDirectory() as tmp:
            problems = run_example(os.path.abspath(sys.argv[1]), name, tmp)
        print("%s %d - examples/%s runs on generated traffic" %
              ("not ok" if problems else "ok", k, name))
        for line in problems:
            print("# " + line)
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
