#!/usr/bin/python3
"""Packet fixtures: UDP to the VXLAN and GENEVE ports whose payload is no
such tunnel is a UDP packet like any other (issue 23).

The parser guesses VXLAN from UDP destination port 4789 and GENEVE from
6081; a payload that does not parse as that tunnel (too short, a flag or
version refused, an inner frame that fails) must reach the pipes as plain
UDP with `tunnel.invalid` 1 (docs/inspect.md), not be dropped before them.
Each case is {description, config, input packets, expected output packets
per port, expected drop counts}, run end to end by `dpflow run` on pcap
ports with tests/flow/pipe_fixtures.py's runner; scapy builds the inputs
and the expected outputs (lengths and checksums its own), compared byte
for byte. TAP on stdout, one point per case.

usage: tunnel_port_fixtures.py DPFLOW
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "flow"))
sys.dont_write_bytecode = True      # no __pycache__ in the source tree
import pipe_fixtures as pf  # noqa: E402

from scapy.all import IP, IPv6, UDP, Ether, Raw  # noqa: E402
from scapy.layers.vxlan import VXLAN  # noqa: E402

CASES = []


def case(desc, config, inputs, outputs, drops=None):
    CASES.append((desc, config, inputs, outputs, drops or {}))


def udp(dport, payload, sport=40000, v6=False, dst=None):
    ip = IPv6(src="2001:db8::1", dst=dst or "2001:db8::10") if v6 else \
        IP(src="203.0.113.7", dst=dst or "192.0.2.10")
    return pf.eth() / ip / UDP(sport=sport, dport=dport) / Raw(payload)


def vxlan_hdr(vni, flags=0x08):
    return bytes([flags, 0, 0, 0]) + vni.to_bytes(3, "big") + b"\x00"


def geneve_hdr(vni, proto, ver=0):
    return bytes([ver << 6, 0]) + proto.to_bytes(2, "big") + \
        vni.to_bytes(3, "big") + b"\x00"


INNER = bytes(Ether(src="02:00:00:00:01:01", dst="02:00:00:00:01:02") /
              IP(src="172.16.1.1", dst="172.16.1.2") / UDP(sport=1, dport=2) /
              Raw(b"inner"))

# UDP to 4789 / 6081 that is no VXLAN / GENEVE, with what fails
NOT_TUNNELS = [
    udp(4789, b"hello"),                              # 5 bytes
    udp(4789, b"\x12\x34\x01\x00\x00\x01" + b"\x00" * 6 +
        b"\x07example\x03com\x00\x00\x01\x00\x01"),    # I flag clear
    udp(4789, vxlan_hdr(7) + b"\x02" * 10),           # inner eth 10 bytes
    udp(4789, vxlan_hdr(7) + INNER[:30], v6=True),    # inner ipv4 cut
    udp(6081, b"GET / HTTP/1.0\r\n\r\n"),             # version 1
    udp(6081, geneve_hdr(9, 0x6558, ver=2) + INNER),  # version 2
    udp(6081, geneve_hdr(9, 0x0806) + b"\x00" * 28),  # protocol ARP
]
VXLAN_OK = pf.eth() / IP(src="10.0.0.1", dst="10.0.0.2") / \
    UDP(sport=55555, dport=4789) / VXLAN(vni=42) / Raw(INNER)

case("a pipe matching UDP ports 4789 and 6081 forwards UDP whose payload "
     "is no VXLAN/GENEVE, unchanged",
     """
pipes:
  - name: ports
    type: basic
    root: in
    match: [outer.l4.dport]
    fwd: {port: out}
    miss: drop
    entries:
      - match: {outer.l4.dport: 4789}
      - match: {outer.l4.dport: 6081}
""",
     NOT_TUNNELS, {"out": [bytes(p) for p in NOT_TUNNELS]})

case("tunnel.invalid 1 for those, 0 with tunnel.type 1 for real VXLAN; "
     "other UDP misses",
     """
pipes:
  - name: split
    type: control
    root: in
    match: [tunnel.invalid, tunnel.type]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {tunnel.invalid: 1, tunnel.type: 0}, priority: 1,
         fwd: {port: out}}
      - {match: {tunnel.invalid: 0, tunnel.type: 1}, priority: 1,
         fwd: {port: other}}
""",
     NOT_TUNNELS + [VXLAN_OK, udp(53, b"hello")],
     {"out": [bytes(p) for p in NOT_TUNNELS], "other": [bytes(VXLAN_OK)]},
     {"flow_miss_drop": 1})

# DNAT of such packets: address and port rewritten, checksums fixed, both
# from a tunnel port (4789 -> 14789) and to one (53 -> 4789: the packet is
# parsed again and stays UDP).
dnat_in = [udp(4789, b"hello"), udp(53, b"hello", dst="192.0.2.11")]
dnat_out = []
for p in dnat_in:
    q = p.copy()
    q[IP].dst = "10.9.9.9"
    q[UDP].dport = 14789 if p[UDP].dport == 4789 else 4789
    del q[IP].chksum
    del q[UDP].chksum
    dnat_out.append(pf.rebuilt(q))
case("destination NAT of UDP from and to port 4789 with no VXLAN in it",
     """
pipes:
  - name: dnat
    type: basic
    root: in
    match: [outer.ipv4.dst, outer.l4.dport]
    actions:
      - [{nat_dst_ip: "10.9.9.9"}, {nat_dst_port: 14789}]
      - [{nat_dst_ip: "10.9.9.9"}, {nat_dst_port: 4789}]
    fwd: {port: out}
    entries:
      - {match: {outer.ipv4.dst: 192.0.2.10, outer.l4.dport: 4789},
         action: 0}
      - {match: {outer.ipv4.dst: 192.0.2.11, outer.l4.dport: 53},
         action: 1}
""",
     dnat_in, {"out": dnat_out})


def main():
    if len(sys.argv) != 2:
        print("usage: tunnel_port_fixtures.py DPFLOW", file=sys.stderr)
        return 2
    failed = 0
    print("1..%d" % len(CASES))
    for n, (desc, config, inputs, outputs, drops) in enumerate(CASES, 1):
        with tempfile.TemporaryDirectory() as tmp:
            problems = pf.run_case(sys.argv[1], desc, config, inputs, outputs,
                                   drops, tmp)
        print("%s %d - %s" % ("not ok" if problems else "ok", n, desc))
        for line in "\n".join(problems).splitlines()[:20]:
            print("# " + line)
        failed += bool(problems)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
