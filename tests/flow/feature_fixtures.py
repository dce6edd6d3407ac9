#!/usr/bin/python3
"""Packet fixtures for the flow engine's hash, maglev, ct, meter, encap,
lpm-vrf, rss and handler features, end to end through `dpflow run`.

Same contract as pipe_fixtures.py (whose runner this reuses): scapy builds
inputs and expected outputs; where dpflow picks by a hash (HASH pipes, RSS
queues, Maglev pipes) the expected choice comes from this file's own
MurmurHash3, Toeplitz and Maglev table, written from their specifications
(include/dpflow/maglev.h for Maglev's name hashes), not from dpflow's code.
TAP on stdout, one point per case.

usage: feature_fixtures.py DPFLOW
"""
import os
import re
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipe_fixtures as pf  # noqa: E402

from scapy.all import Ether, IP, IPv6, TCP, UDP, Dot1Q, Raw  # noqa: E402
from scapy.layers.vxlan import VXLAN  # noqa: E402


def murmur3_32(data, seed=0):
    """MurmurHash3_x86_32 (Austin Appleby's reference algorithm)."""
    c1, c2 = 0xcc9e2d51, 0x1b873593
    h = seed & 0xffffffff
    n = len(data) // 4
    for i in range(n):
        k = struct.unpack_from("<I", data, 4 * i)[0]
        k = (k * c1) & 0xffffffff
        k = ((k << 15) | (k >> 17)) & 0xffffffff
        k = (k * c2) & 0xffffffff
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xffffffff
        h = (h * 5 + 0xe6546b64) & 0xffffffff
    tail = data[4 * n:]
    k = 0
    for i in reversed(range(len(tail))):
        k = (k << 8) | tail[i]
    if tail:
        k = (k * c1) & 0xffffffff
        k = ((k << 15) | (k >> 17)) & 0xffffffff
        k = (k * c2) & 0xffffffff
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85ebca6b) & 0xffffffff
    h ^= h >> 13
    h = (h * 0xc2b2ae35) & 0xffffffff
    h ^= h >> 16
    return h


RSS_KEY = bytes([0x6d, 0x5a] * 20)


def toeplitz(data, key=RSS_KEY):
    """Microsoft RSS Toeplitz hash: for each set input bit, XOR the 32 key
    bits starting at that bit position."""
    k = int.from_bytes(key, "big")
    klen = len(key) * 8
    h = 0
    for i, byte in enumerate(data):
        for b in range(8):
            if byte & (0x80 >> b):
                pos = i * 8 + b
                h ^= (k >> (klen - 32 - pos)) & 0xffffffff
    return h


def ip4(s):
    return bytes(int(x) for x in s.split("."))


CASES = []


def case(desc, config, inputs, outputs, drops=None, expect_text=None):
    CASES.append((desc, config, inputs, outputs, drops or {}, expect_text))


def flow(sport, dport=80, src="10.1.2.3", dst="192.168.1.10"):
    return pf.eth() / IP(src=src, dst=dst) / \
        TCP(sport=sport, dport=dport, flags="S") / Raw(b"hash me")


# ---- HASH: the entry at murmur3(key) % size ---------------------------------

HASH_SIZE = 8
hash_in = [flow(40000 + i) for i in range(24)]


def hash_slot(p, seed):
    key = ip4(p[IP].src) + ip4(p[IP].dst) + bytes([p[IP].proto]) + \
        struct.pack(">HH", p[TCP].sport, p[TCP].dport)
    return murmur3_32(key, seed) % HASH_SIZE


# slots 0..3 go to out, 4..5 to other, 6..7 are empty (miss: drop)
def hash_expect(seed):
    out, other, miss = [], [], 0
    for p in hash_in:
        s = hash_slot(p, seed)
        if s < 4:
            out.append(bytes(p))
        elif s < 6:
            other.append(bytes(p))
        else:
            miss += 1
    return out, other, miss


for seed in (0, 12345):
    out, other, miss = hash_expect(seed)
    case("hash pipe (seed %d): slot = murmur3(5-tuple) %% %d" % (seed,
                                                                 HASH_SIZE),
         """
pipes:
  - name: ecmp
    type: hash
    root: in
    size: %d
    hash_seed: %d
    match: [outer.ipv4.src, outer.ipv4.dst, outer.ip.proto, outer.l4.sport,
            outer.l4.dport]
    fwd: per-entry
    miss: drop
    entries:
      - {index: 0, fwd: {port: out}}
      - {index: 1, fwd: {port: out}}
      - {index: 2, fwd: {port: out}}
      - {index: 3, fwd: {port: out}}
      - {index: 4, fwd: {port: other}}
      - {index: 5, fwd: {port: other}}
""" % (HASH_SIZE, seed),
         hash_in, {"out": out, "other": other},
         {"flow_miss_drop": miss} if miss else {})

# ---- CT: states in metadata, matched by the next pipe ----------------------

C, S = ("10.0.0.1", 40001), ("10.0.0.2", 80)


def seg(frm, to, flags, payload=b""):
    p = pf.eth() / IP(src=frm[0], dst=to[0]) / \
        TCP(sport=frm[1], dport=to[1], flags=flags)
    return p / Raw(payload) if payload else p


syn = seg(C, S, "S")
synack = seg(S, C, "SA")
ack = seg(C, S, "A")
data = seg(C, S, "PA", b"GET /")
stray = seg(("10.0.0.7", 5555), S, "A")  # mid-stream, no connection

case("ct pipe: handshake states and reply flag; strict TCP refuses a "
     "stray ACK",
     """
pipes:
  - name: track
    type: ct
    root: in
    size: 64
    ct: {tcp_strict: true}
    fwd: {pipe: policy}
    miss: {port: other}
  - name: policy
    type: basic
    match: [meta.ct_state, meta.ct_flags]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {meta.ct_state: 1, meta.ct_flags: 1}, fwd: {port: out}}
      - {match: {meta.ct_state: 2, meta.ct_flags: 2}, fwd: {port: out}}
      - {match: {meta.ct_state: 3, meta.ct_flags: 0}, fwd: {port: out}}
""",
     # SYN: SYN_SENT(1)+NEW; SYN-ACK: SYN_RECV(2)+REPLY; ACK and data:
     # ESTABLISHED(3); data matches too; the stray ACK takes miss
     [syn, synack, ack, data, stray],
     {"out": [bytes(syn), bytes(synack), bytes(ack), bytes(data)],
      "other": [bytes(stray)]})

# ---- meters: rate 0 makes colours a function of bytes alone ----------------

m_in = [pf.udp4(sport=1000 + i) for i in range(10)]
m_len = len(bytes(m_in[0]))
# srTCM colour-blind, cir 0: green while the committed bucket holds the
# packet, then yellow while the excess bucket does, then red (RFC 2697)
cbs, ebs = 3 * m_len, 2 * m_len


def remark(p, dscp):
    q = p.copy()
    q[IP].tos = dscp << 2
    del q[IP].chksum
    return pf.rebuilt(q)


case("srtcm meter: 3 green to out, 2 yellow re-marked to other, 5 red "
     "dropped",
     """
pipes:
  - name: police
    type: basic
    root: in
    match: [outer.ip.proto]
    monitor: {meter: {alg: srtcm, cir: 0, cbs: %d, ebs: %d}}
    fwd: {port: out}
    color_fwd: {yellow: {pipe: remark}}
    entries:
      - match: {outer.ip.proto: 17}
  - name: remark
    type: basic
    match: [meta.color]
    actions:
      - [{set: {field: outer.ip.dscp, value: 10}}]
    fwd: {port: other}
    entries:
      - match: {meta.color: 1}
""" % (cbs, ebs),
     m_in,
     {"out": [bytes(p) for p in m_in[:3]],
      "other": [remark(p, 10) for p in m_in[3:5]]},
     {"flow_meter_red": 5})

# ---- copy into a register: a wider field gives its low 32 bits -------------
# (docs/config.md, Actions; issue 23: it gave the first 32 bits)

COPY_CHECK = """
pipes:
  - name: take
    type: basic
    root: in
    match: [outer.ip.proto]
    actions:
      - [{copy: {field: meta.reg0, from: %s}}]
    fwd: {pipe: check}
    entries:
      - match: {outer.ip.proto: 17}
  - name: check
    type: basic
    match: [meta.reg0]
    fwd: {port: out}
    miss: drop
    entries:
      - match: {meta.reg0: %d}
"""
copy_mac_in = [pf.eth(src="02:00:11:22:33:44") / IP(src="10.1.2.3",
               dst="192.168.1.10") / UDP(sport=5353, dport=53) /
               Raw(b"query")]
case("copy reg0 from outer.eth.src (48 bits): its low 32 bits",
     COPY_CHECK % ("outer.eth.src", 0x11223344), copy_mac_in,
     {"out": [bytes(p) for p in copy_mac_in]})
copy_v6_in = [pf.eth() / IPv6(src="2001:db8::aabb:ccdd", dst="2001:db8::1")
              / UDP(sport=5353, dport=53) / Raw(b"query")]
case("copy reg0 from outer.ipv6.src (128 bits): its low 32 bits",
     COPY_CHECK % ("outer.ipv6.src", 0xaabbccdd), copy_v6_in,
     {"out": [bytes(p) for p in copy_v6_in]})

# ---- per-entry encapsulation ------------------------------------------------

enc_in = [pf.udp4(dst="192.168.1.10"), pf.udp4(dst="192.168.1.20")]


def vxlan_of(p, dst, vni):
    # what dpflow's encap builds: outer UDP source port from the inner flow
    # is not predictable here, so compare with the port dpflow chose
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / \
        IP(src="172.16.0.1", dst=dst, ttl=64, flags="DF", id=0) / \
        UDP(sport=0, dport=4789) / VXLAN(vni=vni, flags=0x08) / p


case("per-entry VXLAN encap: each entry its own remote and VNI",
     """
pipes:
  - name: tunnel
    type: basic
    root: in
    match: [outer.ipv4.dst]
    actions:
      - [{encap: per-entry}]
    fwd: {port: out}
    entries:
      - match: {outer.ipv4.dst: 192.168.1.10}
        values:
          - {type: vxlan, src: 172.16.0.1, dst: 172.16.0.10,
             src_mac: "02:00:00:00:00:01", dst_mac: "02:00:00:00:00:02",
             vni: 100}
      - match: {outer.ipv4.dst: 192.168.1.20}
        values:
          - {type: vxlan, src: 172.16.0.1, dst: 172.16.0.20,
             src_mac: "02:00:00:00:00:01", dst_mac: "02:00:00:00:00:02",
             vni: 200}
""",
     enc_in,
     {"out": [("vxlan", "172.16.0.10", 100, bytes(enc_in[0])),
              ("vxlan", "172.16.0.20", 200, bytes(enc_in[1]))]})

# ---- LPM with an exact field first (a VRF by VLAN) --------------------------


def vl(vid, dst):
    return pf.eth() / Dot1Q(vlan=vid) / IP(src="10.9.9.9", dst=dst) / \
        UDP(sport=1, dport=2) / Raw(b"vrf")


vrf_in = [vl(10, "10.1.2.3"), vl(20, "10.1.2.3"), vl(10, "10.200.0.1"),
          vl(20, "10.200.0.1"), vl(30, "10.1.2.3")]
case("lpm with an exact VLAN before the address: one table per VLAN",
     """
pipes:
  - name: vrf
    type: lpm
    root: in
    match: [outer.vlan0, outer.ipv4.dst]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {outer.vlan0: 10, outer.ipv4.dst: 10.0.0.0/8},
         fwd: {port: out}}
      - {match: {outer.vlan0: 10, outer.ipv4.dst: 10.1.0.0/16},
         fwd: {port: other}}
      - {match: {outer.vlan0: 20, outer.ipv4.dst: 10.0.0.0/8},
         fwd: {port: other}}
      - {match: {outer.vlan0: 20, outer.ipv4.dst: 0.0.0.0/0},
         fwd: {port: out}}
""",
     vrf_in,
     # vlan 10: 10.1.2.3 -> /16 other; 10.200.0.1 -> /8 out
     # vlan 20: both -> /8 other; vlan 30: no table -> miss
     {"out": [bytes(vrf_in[2])],
      "other": [bytes(vrf_in[0]), bytes(vrf_in[1]), bytes(vrf_in[3])]},
     {"flow_miss_drop": 1})


# ---- RSS to software queues and a software handler -------------------------

rss_in = [flow(30000 + 7 * i, dport=443, src="10.0.%d.%d" % (i % 5, i))
          for i in range(40)]
# replies of the first ten flows: same queue as their flow (symmetric)
rss_in += [pf.eth() / IP(src=p[IP].dst, dst=p[IP].src) /
           TCP(sport=p[TCP].dport, dport=p[TCP].sport, flags="SA")
           for p in rss_in[:10]]
rss_udp = [pf.udp4(sport=2000 + i) for i in range(6)]


def rss_queue(p, first, n):
    l4 = p[TCP]
    h = toeplitz(ip4(p[IP].src) + ip4(p[IP].dst) +
                 struct.pack(">HH", l4.sport, l4.dport))
    return first + (h & 127) % n


rss_counts = {q: 0 for q in range(4)}
for p in rss_in:
    rss_counts[rss_queue(p, 1, 3)] += 1
rss_text = ["queue %d\\s+%d pkts" % (q, n) for q, n in rss_counts.items()]
rss_text.append("count\\s+%d pkts" % len(rss_udp))
case("rss: TCP over queues 1..3 by symmetric Toeplitz, UDP to a handler",
     """
context: {rss_queues: 4}
pipes:
  - name: p
    type: basic
    root: in
    match: [outer.ip.proto]
    fwd: {rss: {queues: 3, first: 1}}
    miss: {handler: count}
    entries:
      - match: {outer.ip.proto: 6}
""",
     rss_in + rss_udp, {}, {}, rss_text)


# ---- Maglev pipes: members over a prime table (include/dpflow/maglev.h) -----

M64 = (1 << 64) - 1


def maglev_name_hash(name, seed):
    """maglev.h: 64-bit FNV-1a, XOR the seed, splitmix64's finaliser."""
    h = 0xcbf29ce484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001b3) & M64
    h ^= seed
    h = ((h ^ (h >> 30)) * 0xbf58476d1ce4e5b9) & M64
    h = ((h ^ (h >> 27)) * 0x94d049bb133111eb) & M64
    return h ^ (h >> 31)


def maglev_table(weights, m):
    """The paper's Pseudocode 1 with weighted turns: in each round every
    member (name order) earns its weight and takes a turn per wmax of
    credit, walking offset + j * skip to its next free slot."""
    names = sorted(n for n, w in weights.items() if w > 0)
    table = [None] * m
    if not names:
        return table
    wmax = max(weights[n] for n in names)
    off = {n: maglev_name_hash(n, 0x6d61676c65766f66) % m for n in names}
    skip = {n: maglev_name_hash(n, 0x6d61676c65767370) % (m - 1) + 1
            for n in names}
    nxt = dict.fromkeys(names, 0)
    credit = dict.fromkeys(names, 0)
    filled = 0
    while filled < m:
        for n in names:
            credit[n] += weights[n]
            while credit[n] >= wmax and filled < m:
                credit[n] -= wmax
                while table[(off[n] + nxt[n] * skip[n]) % m] is not None:
                    nxt[n] += 1
                table[(off[n] + nxt[n] * skip[n]) % m] = n
                nxt[n] += 1
                filled += 1
            if filled == m:
                break
    return table


MAGLEV_SLOTS = 251
maglev_in = [flow(41000 + 13 * i, src="10.9.%d.%d" % (i % 3, i))
             for i in range(60)]
# member: (port, last byte of the destination MAC its entry writes)
maglev_members = {"10.0.0.1:80": ("out", 1), "10.0.0.2:80": ("out", 2),
                  "10.0.0.3:80": ("other", 3), "10.0.0.4:80": ("other", 4)}

for seed, weights in ((77, {"10.0.0.1:80": 1, "10.0.0.2:80": 2,
                            "10.0.0.3:80": 1, "10.0.0.4:80": 0}),
                      (0, {"10.0.0.1:80": 3, "10.0.0.2:80": 1,
                           "10.0.0.3:80": 1, "10.0.0.4:80": 1})):
    table = maglev_table(weights, MAGLEV_SLOTS)
    outs = {"out": [], "other": []}
    for p in maglev_in:
        key = ip4(p[IP].src) + ip4(p[IP].dst) + bytes([p[IP].proto]) + \
            struct.pack(">HH", p[TCP].sport, p[TCP].dport)
        member = table[murmur3_32(key, seed) % MAGLEV_SLOTS]
        port, mac = maglev_members[member]
        q = p.copy()
        q[Ether].dst = "02:00:00:00:0a:%02x" % mac
        outs[port].append(bytes(q))
    entries = "".join(
        "      - {member: '%s', weight: %d, values: ['02:00:00:00:0a:%02x'],"
        " fwd: {port: %s}}\n" % (n, weights[n], maglev_members[n][1],
                                 maglev_members[n][0])
        for n in sorted(maglev_members))
    case("maglev pipe (seed %d, weights %s): each flow to its member by "
         "the paper's table over %d slots" %
         (seed, "/".join(str(weights[n]) for n in sorted(weights)),
          MAGLEV_SLOTS),
         """
pipes:
  - name: lb
    type: hash
    root: in
    size: 8
    hash_seed: %d
    maglev: {slots: %d}
    match: [outer.ipv4.src, outer.ipv4.dst, outer.ip.proto, outer.l4.sport,
            outer.l4.dport]
    actions:
      - [{set_mac_dst: per-entry}]
    fwd: per-entry
    miss: drop
    entries:
%s""" % (seed, MAGLEV_SLOTS, entries),
         maglev_in, outs)

def check_text(out, patterns):
    return ["output lacks /%s/:\n%s" % (pat, out[-600:])
            for pat in patterns if not re.search(pat, out)]


def check_vxlan(got, want):
    """Compare an encapsulated packet field by field with scapy."""
    _, dst, vni, inner = want
    p = Ether(got)
    problems = []
    if not p.haslayer(VXLAN):
        return ["not VXLAN: %s" % got.hex()]
    if p[IP].dst != dst or p[VXLAN].vni != vni:
        problems.append("outer dst %s vni %d, expected %s %d" %
                        (p[IP].dst, p[VXLAN].vni, dst, vni))
    if bytes(p[VXLAN].payload) != inner:
        problems.append("inner frame differs")
    q = Ether(got)
    del q[IP].chksum
    del q[IP].len
    del q[UDP].len
    q[UDP].chksum = p[UDP].chksum
    if pf.rebuilt(q) != got:
        problems.append("outer lengths or IPv4 checksum wrong: %s" %
                        got.hex())
    return problems


def run(dpflow, desc, config, inputs, outputs, drops, text, tmp):
    enc = {k: v for k, v in outputs.items()
           if v and isinstance(v[0], tuple)}
    if text:
        problems = pf.run_case(dpflow, desc, config, inputs, outputs, drops,
                               tmp)
        p = subprocess.run([dpflow, "run", os.path.join(tmp, "config.yaml")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=60)
        return problems + check_text(p.stdout.decode(errors="replace"), text)
    if not enc:
        return pf.run_case(dpflow, desc, config, inputs, outputs, drops, tmp)
    plain = {k: [b"?"] * len(v) for k, v in outputs.items()}
    problems = [x for x in pf.run_case(dpflow, desc, config, inputs, plain,
                                       drops, tmp)
                if "differs" not in x]
    for name, want in enc.items():
        got = [bytes(x) for x in pf.rdpcap(os.path.join(tmp, name +
                                                        ".pcap"))]
        for g, w in zip(got, want):
            problems += check_vxlan(g, w)
    return problems


def main():
    dpflow = sys.argv[1]
    print("1..%d" % len(CASES))
    failed = 0
    for i, (desc, config, inputs, outputs, drops, text) in enumerate(CASES,
                                                                     1):
        with tempfile.TemporaryDirectory() as tmp:
            problems = run(dpflow, desc, config, inputs, outputs, drops, text,
                           tmp)
        if problems:
            failed += 1
            print("not ok %d - %s" % (i, desc))
            for p in problems:
                for line in p.splitlines():
                    print("#   " + line)
        else:
            print("ok %d - %s" % (i, desc))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
