#!/usr/bin/python3
"""Packet-in/packet-out fixtures for the L4 load balancer (apps/l4lb).

usage: l4lb_fixtures.py [DPFLOW_EXE]

For each case group a config with an `apps: l4lb:` section and two pcap
ports (client, backend) is written to a temporary directory, the input
frames are written to the ports' rx pcaps and `dpflow run` is run until
they are exhausted. The frames it writes to the tx pcaps are compared byte
for byte with frames built here by scapy (lengths and checksums left for
scapy to compute), and its exit report (l4lb service / backend / drop
lines, the drops: section) with the expected counters. Values the balancer
chooses by hash (the SNAT port, the GUE source port, the IPv6 flow label)
are read from its output, checked for range and then used in the expected
frame. Output frames are matched to cases by content (the balancer hands
IPv4 and IPv6 packets on from different root pipes, so order across flows
is not kept); a frame that matches nothing is shown against the closest.

Case groups (one `dpflow run` each, the drops one run per case):
  nat        IPv4 TCP/UDP (zero UDP checksum kept), IPv6 TCP/UDP, an
             all-ports service: DNAT + SNAT out the backend port
  nat-reply  the same flows again (same SNAT ports), ICMP/ICMPv6 errors
             about two of them (quote translated), the backends' replies
             back out the client port, an ICMP error from the backend side
             to the SNAT address back to the client, a reply without
             connection
  dsr        ipip 4in4, 6in6, 6in4, 4in6; gue IPv4 (default and set port)
             and IPv6 (UDP checksum); padding/trailer left out; ICMP
             errors about DSR flows encapsulated whole
  dsr-family IPv4 encap_src with an IPv6 backend (refused or not sent)
  drops      no_service, not_ip, fragment, icmp_without_connection,
             icmp_malformed, reply_without_connection (the root pipe hands
             every packet to the balancer: none is a flow_miss_drop)
  spread     300 flows over weights 1:3: same backend in two runs, share,
             unique SNAT ports, every SYN/ACK back to its client; the
             same frames with `dpflow run --burst 64`
  sticky     SYN + 5 ACKs: one backend and SNAT port, new flows 1
  tunnel-port UDP services on 4789 and 6081: payloads that are no VXLAN or
             GENEVE balanced (NAT) and answered like any UDP
  burst      `dpflow run --burst` values outside 1..256 refused

Prints TAP: one test point per case. Run it with Debian's interpreter
(/usr/bin/python3), which has python3-scapy.
"""

import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

from scapy.all import (ARP, ICMP, IP, TCP, UDP, Ether, ICMPv6EchoRequest,
                       ICMPv6PacketTooBig, IPv6, IPv6ExtHdrFragment, Raw,
                       hexdump, raw)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DPFLOW = os.path.join(os.path.dirname(os.path.dirname(HERE)),
                              "build-rt", "tools", "dpflow", "dpflow")

# The balancer's MACs (config) and the peers that send to it.
CMAC = "02:00:00:00:00:01"   # client_mac
BMAC = "02:00:00:00:00:02"   # backend_mac
CGW = "02:00:00:00:00:aa"    # client_gateway_mac
BGW = "02:00:00:00:00:bb"    # backend_gateway_mac
CPEER = "02:00:00:00:99:01"  # the client-side router
BPEER = "02:00:00:00:99:02"  # a backend (or its router)

SNAT_PORT_LO = 1024          # L4LB_SNAT_PORT_LO
GUE_PORT_DEFAULT = 6080      # L4LB_GUE_PORT_DEFAULT
L4LB_DROPS = ("not_ip", "fragment", "no_service", "no_backend",
              "snat_ports_exhausted", "conn_table_full",
              "reply_without_connection", "icmp_without_connection",
              "icmp_malformed", "no_headroom", "frame_too_big")


class Tap:
    def __init__(self):
        self.points = []

    def check(self, desc, failures, checked=None, skip_empty=False):
        """One test point: @failures lists (packet, message)."""
        if checked == 0 and skip_empty:
            self.points.append((True, desc + " # SKIP no such packets", []))
            return
        ok = not failures and checked != 0
        diag = list(failures)
        if checked == 0:
            diag.append((None, "no packet to check"))
        self.points.append((ok, desc, diag))

    def finish(self):
        print("1..%d" % len(self.points))
        bad = 0
        for k, (ok, desc, diag) in enumerate(self.points, 1):
            print("%s %d - %s" % ("ok" if ok else "not ok", k, desc))
            if not ok:
                bad += 1
                for i, msg in diag[:5]:
                    where = "packet %s: " % i if i is not None else ""
                    for n, line in enumerate(str(msg).splitlines() or [""]):
                        print("# %s%s" % (where if n == 0 else "", line))
                if len(diag) > 5:
                    print("# ... %d more" % (len(diag) - 5))
        return 1 if bad else 0


# ---- pcap files ------------------------------------------------------------

def write_pcap(path, frames):
    """Classic pcap, Ethernet, microseconds; @frames are bytes (or scapy
    packets), written exactly (Ethernet padding included)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            b = fr if isinstance(fr, bytes) else raw(fr)
            f.write(struct.pack("<IIII", 1704067200, i, len(b), len(b)))
            f.write(b)


def read_pcap(path):
    """The frames of a pcap file (either byte order, us or ns stamps)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xa1b2c3d4, 0xa1b23c4d):
        end = "<"
    elif magic in (0xd4c3b2a1, 0x4d3cb2a1):
        end = ">"
    else:
        raise ValueError("%s: not a pcap file" % path)
    out, off = [], 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack(end + "IIII", data[off:off + 16])
        out.append(data[off + 16:off + 16 + caplen])
        off += 16 + caplen
    return out


# ---- running the balancer --------------------------------------------------

class Run:
    """One `dpflow run`: its outputs and its exit report."""

    def __init__(self):
        self.err = None
        self.client = []    # frames sent on the client port
        self.backend = []   # ... on the backend port
        self.services = {}  # name -> dict of counters
        self.backends = {}  # (service, "addr:port") -> dict
        self.l4lb_drops = {}
        self.drops = {}     # the drops: section (flow_miss_drop...)
        self.conns = {}
        self.rx_bursts = 0  # the workers' receive bursts
        self.text = ""


SVC_RE = re.compile(
    r"^l4lb service (\S+) (tcp|udp) (\S+):(\d+) (\w+): fwd (\d+) pkts (\d+) "
    r"bytes, reply (\d+) pkts, icmp (\d+), new flows (\d+), untracked (\d+), "
    r"rescheduled (\d+)$")
BE_RE = re.compile(r"^  backend (\S+:\d+) weight (\d+) (up|down) slots (\d+): "
                   r"fwd (\d+) pkts, new flows (\d+)$")
CONN_RE = re.compile(r"^l4lb connections: created (\d+), replaced (\d+), "
                     r"refused (\d+), expired (\d+)$")


def parse_report(r, text):
    svc = None
    section = None
    for line in text.splitlines():
        m = SVC_RE.match(line)
        if m:
            svc = m.group(1)
            r.services[svc] = dict(
                fwd=int(m.group(6)), fwd_bytes=int(m.group(7)),
                reply=int(m.group(8)), icmp=int(m.group(9)),
                new_flows=int(m.group(10)), untracked=int(m.group(11)),
                rescheduled=int(m.group(12)))
            section = None
            continue
        m = BE_RE.match(line)
        if m and svc:
            r.backends[(svc, m.group(1))] = dict(
                weight=int(m.group(2)), up=m.group(3) == "up",
                slots=int(m.group(4)), fwd=int(m.group(5)),
                new_flows=int(m.group(6)))
            continue
        m = CONN_RE.match(line)
        if m:
            r.conns = dict(created=int(m.group(1)), replaced=int(m.group(2)),
                           refused=int(m.group(3)), expired=int(m.group(4)))
            continue
        m = re.match(r"^  worker \d+\s+rx\s+\d+ pkts in (\d+) bursts", line)
        if m:
            r.rx_bursts += int(m.group(1))
            continue
        m = re.match(r"^l4lb drop (\S+): (\d+)$", line)
        if m:
            r.l4lb_drops[m.group(1)] = int(m.group(2))
            continue
        if re.match(r"^\S.*:$", line):
            section = line[:-1]
            continue
        m = re.match(r"^  (\w+)\s+(\d+)$", line)
        if m and section == "drops":
            r.drops[m.group(1)] = int(m.group(2))


def lb_config(services, **extra):
    c = {"client_port": "client", "backend_port": "backend",
         "client_mac": CMAC, "backend_mac": BMAC,
         "client_gateway_mac": CGW, "backend_gateway_mac": BGW}
    c.update(extra)
    c["services"] = services
    return c


class Runner:
    def __init__(self, dpflow, tmp):
        self.dpflow = dpflow
        self.tmp = tmp
        self.n = 0

    def run(self, name, lbcfg, client_in=(), backend_in=(), args=()):
        """Run the balancer on @client_in / @backend_in (frames), with
        the further `dpflow run` options @args."""
        self.n += 1
        d = os.path.join(self.tmp, "%02d-%s" % (self.n, name))
        os.makedirs(d)
        p = {k: os.path.join(d, k + ".pcap") for k in ("cin", "cout", "bin",
                                                       "bout")}
        write_pcap(p["cin"], client_in)
        write_pcap(p["bin"], backend_in)
        cfg = {"ports": [
            {"name": "client",
             "uri": "pcap:rx=%s,tx=%s" % (p["cin"], p["cout"])},
            {"name": "backend",
             "uri": "pcap:rx=%s,tx=%s" % (p["bin"], p["bout"])}],
            "apps": {"l4lb": lbcfg}}
        ypath = os.path.join(d, "lb.yaml")
        with open(ypath, "w") as f:  # JSON is YAML (flow style)
            json.dump(cfg, f, indent=1)
        r = Run()
        cmd = [self.dpflow, "run", ypath, "--duration", "20"] + list(args)
        try:
            res = subprocess.run(cmd, capture_output=True, text=True,
                                 timeout=60)
        except subprocess.TimeoutExpired:
            r.err = "%s: timed out" % " ".join(cmd)
            return r
        except OSError as e:
            r.err = "%s: %s" % (" ".join(cmd), e)
            return r
        r.text = res.stdout
        if res.returncode != 0:
            r.err = "%s: exit %d: %s" % (" ".join(cmd), res.returncode,
                                         (res.stderr or res.stdout).strip())
            return r
        try:
            r.client = read_pcap(p["cout"])
            r.backend = read_pcap(p["bout"])
        except (OSError, ValueError) as e:
            r.err = str(e)
            return r
        parse_report(r, res.stdout)
        return r


# ---- comparing -------------------------------------------------------------

def bytes_diff(got, want):
    """None when equal, else where they differ and both hexdumps."""
    if got == want:
        return None
    n = min(len(got), len(want))
    off = next((i for i in range(n) if got[i] != want[i]), n)
    return ("first difference at byte %d (got %d bytes, want %d)\n"
            "got:\n%s\nwant:\n%s" % (off, len(got), len(want),
                                      hexdump(got, dump=True),
                                      hexdump(want, dump=True)))


class Outs:
    """The frames a port sent, matched to cases by content, not by order:
    the balancer hands packets on per root pipe (IPv4, then IPv6), so
    frames of different flows may leave in another order than they came."""

    def __init__(self, frames):
        self.frames = list(frames)
        self.used = [False] * len(self.frames)

    def take(self, want_of):
        """The first unused frame g equal to want_of(g) (the expected frame
        built with what g's hash-chosen fields say), marked used: (g, want).
        Without one: the closest candidate, not marked, for the diff; or
        (None, None) when want_of gives None for every unused frame."""
        best = None
        for i, g in enumerate(self.frames):
            if self.used[i]:
                continue
            try:
                w = want_of(g)
            except (IndexError, ValueError, struct.error, AttributeError):
                w = None
            if w is None:
                continue
            if w == g:
                self.used[i] = True
                return g, w
            score = sum(a != b for a, b in zip(g, w)) + abs(len(g) - len(w))
            if best is None or score < best[0]:
                best = (score, g, w)
        return (best[1], best[2]) if best else (None, None)

    def left(self):
        return self.used.count(False)


def match_errs(got, want, what="frame"):
    if got is None:
        return [(None, "no %s sent" % what)]
    d = bytes_diff(got, want)
    return [(None, "no %s matches; the closest: %s" % (what, d))] if d else []


def drop_errs(r, want, want_miss=0):
    """Errors unless the l4lb drop counters are exactly @want (name ->
    count; others 0) and flow_miss_drop is @want_miss."""
    errs = []
    for name in L4LB_DROPS:
        got = r.l4lb_drops.get(name, 0)
        if got != want.get(name, 0):
            errs.append((None, "l4lb drop %s: %d, want %d"
                         % (name, got, want.get(name, 0))))
    for name in r.l4lb_drops:
        if name not in L4LB_DROPS:
            errs.append((None, "unknown l4lb drop %s" % name))
    miss = r.drops.get("flow_miss_drop", 0)
    if miss != want_miss:
        errs.append((None, "flow_miss_drop %d, want %d" % (miss, want_miss)))
    for name, n in sorted(r.drops.items()):
        if name != "flow_miss_drop" and n:
            errs.append((None, "drops: %s %d, want 0" % (name, n)))
    return errs


def svc_errs(r, name, **want):
    s = r.services.get(name)
    if s is None:
        return [(None, "no 'l4lb service %s' line" % name)]
    return [(None, "service %s: %s %d, want %d" % (name, k, s[k], v))
            for k, v in want.items() if s[k] != v]


# ---- building frames -------------------------------------------------------

def ip_of(p):
    return p[IP] if IP in p else p[IPv6]


def l4_of(p):
    return p[TCP] if TCP in p else p[UDP]


def concrete(frame):
    """@frame (a packet) rebuilt from its bytes: every field concrete."""
    return Ether(raw(frame))


def client_frame(l3):
    return Ether(dst=CMAC, src=CPEER) / l3


def backend_frame(l3):
    return Ether(dst=BMAC, src=BPEER) / l3


def rewrite(frame, dmac, smac, src, sport, dst, dport, keep_l4_csum=False):
    """@frame with new MACs, addresses and ports; scapy recomputes the IPv4
    header checksum and (unless @keep_l4_csum) the L4 checksum."""
    e = concrete(frame)
    e[Ether].dst, e[Ether].src = dmac, smac
    ip = ip_of(e)
    ip.src, ip.dst = src, dst
    if isinstance(ip, IP):
        del ip.chksum
    l4 = l4_of(e)
    l4.sport, l4.dport = sport, dport
    if not keep_l4_csum:
        del l4.chksum
    return raw(e)


def l4_ports(frame):
    """(sport, dport) of an Ethernet/IP(v6)/TCP|UDP frame given as bytes."""
    e = Ether(frame)
    if TCP not in e and UDP not in e:
        return None
    l4 = l4_of(e)
    return l4.sport, l4.dport


def dsr_expect(inner, out_v6, src, dst, dmac, tos, gue_port=None, sport=None,
               fl=0):
    """DSR output: @inner (the client's IP packet, bytes) behind an outer
    IP header (and a GUE UDP header when @gue_port)."""
    in_v6 = inner[0] >> 4 == 6
    if gue_port is not None:
        nh = 17
    else:
        nh = 41 if in_v6 else 4
    if out_v6:
        outer = IPv6(src=src, dst=dst, hlim=64, nh=nh, tc=tos, fl=fl)
    else:
        outer = IP(src=src, dst=dst, ttl=64, id=0, flags="DF", proto=nh,
                   tos=tos)
    if gue_port is not None:
        # IPv4: no checksum; IPv6: scapy computes it (RFC 8200 8.1)
        outer = outer / UDP(sport=sport, dport=gue_port,
                            chksum=None if out_v6 else 0)
    return raw(Ether(dst=dmac, src=BMAC, type=0x86dd if out_v6 else 0x0800)
               / outer / Raw(inner))


def outer_fields(frame, out_v6, gue):
    """(flow label, GUE source port) read from a DSR output frame."""
    fl = sport = None
    if out_v6 and len(frame) >= 18:
        fl = int.from_bytes(frame[14:18], "big") & 0xfffff
    off = 14 + (40 if out_v6 else 20)
    if gue and len(frame) >= off + 2:
        sport = int.from_bytes(frame[off:off + 2], "big")
    return fl, sport


def inner_ip(frame):
    """The IP packet of @frame without Ethernet padding or trailer."""
    e = Ether(frame)
    ip = ip_of(e)
    n = ip.len if isinstance(ip, IP) else 40 + ip.plen
    return raw(ip)[:n]


def tos_of(ipb):
    if ipb[0] >> 4 == 6:
        return ((ipb[0] & 0xf) << 4) | (ipb[1] >> 4)
    return ipb[1]


def embedded(l3, nbytes):
    """The first @nbytes of packet @l3 (what an ICMP error quotes)."""
    return raw(l3)[:nbytes]


# ---- case groups -----------------------------------------------------------

NAT_SERVICES = [
    {"name": "web4", "vip": "192.0.2.10", "proto": "tcp", "port": 80,
     "mode": "nat", "snat": "198.51.100.1",
     "backends": [{"addr": "10.0.1.1", "port": 8080,
                   "mac": "02:00:00:00:01:01"}]},
    {"name": "dns4", "vip": "192.0.2.10", "proto": "udp", "port": 53,
     "mode": "nat", "snat": "198.51.100.2",
     "backends": [{"addr": "10.0.1.2"}]},
    {"name": "web6", "vip": "2001:db8::10", "proto": "tcp", "port": 443,
     "mode": "nat", "snat": "2001:db8:ff::1",
     "backends": [{"addr": "2001:db8:1::1", "port": 8443,
                   "mac": "02:00:00:00:01:03"}]},
    {"name": "dns6", "vip": "2001:db8::10", "proto": "udp", "port": 53,
     "mode": "nat", "snat": "2001:db8:ff::2",
     "backends": [{"addr": "2001:db8:1::2", "port": 5353}]},
    {"name": "any4", "vip": "192.0.2.11", "proto": "tcp", "mode": "nat",
     "snat": "198.51.100.3", "backends": [{"addr": "10.0.1.4"}]},
]


class NatCase:
    """A client flow to a NAT service and where it must go."""

    def __init__(self, desc, svc, fwd, bmac, baddr, bport, snat, reply=None,
                 udp_zero=False):
        self.desc, self.svc, self.fwd = desc, svc, fwd
        self.bmac, self.baddr, self.bport, self.snat = bmac, baddr, bport, snat
        self.reply = reply          # payload layers of the backend's reply
        self.udp_zero = udp_zero
        ip, l4 = ip_of(fwd), l4_of(fwd)
        self.client, self.vip = ip.src, ip.dst
        self.cport, self.vport = l4.sport, l4.dport


def nat_cases():
    tcp_opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (12345, 0)),
                ("NOP", None), ("WScale", 7)]
    cs = []
    cs.append(NatCase(
        "NAT IPv4 TCP SYN (options, DF, tos, ttl, id kept)", "web4",
        client_frame(IP(src="203.0.113.7", dst="192.0.2.10", ttl=57,
                        id=0x1234, flags="DF", tos=0x28)
                     / TCP(sport=40001, dport=80, flags="S", seq=0x11223344,
                           window=64240, options=tcp_opts)),
        "02:00:00:00:01:01", "10.0.1.1", 8080, "198.51.100.1",
        reply=TCP(flags="SA", seq=0x55667788, ack=0x11223345,
                  window=65160, options=[("MSS", 1400)])))
    cs.append(NatCase(
        "NAT IPv4 TCP PSH/ACK with payload", "web4",
        client_frame(IP(src="203.0.113.8", dst="192.0.2.10", ttl=63,
                        id=0xbeef)
                     / TCP(sport=40002, dport=80, flags="PA", seq=1000,
                           ack=2000) / Raw(b"GET / HTTP/1.0\r\n\r\n")),
        "02:00:00:00:01:01", "10.0.1.1", 8080, "198.51.100.1",
        reply=TCP(flags="PA", seq=2000, ack=1018)
        / Raw(b"HTTP/1.0 200 OK\r\n\r\nhello")))
    cs.append(NatCase(
        "NAT IPv4 UDP, backend without port and MAC (gateway MAC, dport "
        "kept)", "dns4",
        client_frame(IP(src="203.0.113.9", dst="192.0.2.10", ttl=61, id=7)
                     / UDP(sport=5300, dport=53) / Raw(b"\x12\x34query")),
        BGW, "10.0.1.2", 53, "198.51.100.2",
        reply=UDP() / Raw(b"\x12\x34answer!")))
    cs.append(NatCase(
        "NAT IPv4 UDP with zero checksum: stays zero", "dns4",
        client_frame(IP(src="203.0.113.10", dst="192.0.2.10", id=8)
                     / UDP(sport=5301, dport=53, chksum=0)
                     / Raw(b"\x00\x01nocsum")),
        BGW, "10.0.1.2", 53, "198.51.100.2",
        reply=UDP(chksum=0) / Raw(b"\x00\x01nocsum-reply"), udp_zero=True))
    cs.append(NatCase(
        "NAT IPv6 TCP SYN (IPv6 VIP, SNAT, backend)", "web6",
        client_frame(IPv6(src="2001:db8:c::7", dst="2001:db8::10", hlim=55,
                          tc=0x10, fl=0x12345)
                     / TCP(sport=40003, dport=443, flags="S", seq=777,
                           options=tcp_opts)),
        "02:00:00:00:01:03", "2001:db8:1::1", 8443, "2001:db8:ff::1",
        reply=TCP(flags="SA", seq=999, ack=778)))
    cs.append(NatCase(
        "NAT IPv6 UDP", "dns6",
        client_frame(IPv6(src="2001:db8:c::8", dst="2001:db8::10")
                     / UDP(sport=5302, dport=53) / Raw(b"six-query")),
        BGW, "2001:db8:1::2", 5353, "2001:db8:ff::2",
        reply=UDP() / Raw(b"six-answer")))
    cs.append(NatCase(
        "NAT all-ports service, backend port 0: destination port kept",
        "any4",
        client_frame(IP(src="203.0.113.11", dst="192.0.2.11")
                     / TCP(sport=40004, dport=8081, flags="S", seq=5)),
        BGW, "10.0.1.4", 8081, "198.51.100.3",
        reply=TCP(flags="SA", seq=6, ack=6)))
    return cs


def check_nat_fwd(tap, c, outs):
    """Case @c's frame among @outs (the backend port's); its SNAT port."""
    def want_of(g):
        ports = l4_ports(g)
        if ports is None:
            return None
        return rewrite(c.fwd, c.bmac, BMAC, c.snat, ports[0], c.baddr,
                       c.bport, keep_l4_csum=c.udp_zero)

    got, want = outs.take(want_of)
    errs = match_errs(got, want)
    # the SNAT port of the frame (or of the closest one) for the replies
    snat_port = l4_ports(got)[0] if got is not None else None
    if snat_port is not None:
        if snat_port < SNAT_PORT_LO:
            errs.append((None, "SNAT port %d < %d"
                         % (snat_port, SNAT_PORT_LO)))
    tap.check("%s: out the backend port as %s:%d, SNAT %s:%s" %
              (c.desc, c.baddr, c.bport, c.snat, snat_port), errs)
    return snat_port


def nat_reply_frame(c, snat_port):
    l3 = (IP(src=c.baddr, dst=c.snat, ttl=64, id=0x4321) if ":" not in c.snat
          else IPv6(src=c.baddr, dst=c.snat, hlim=64))
    l4 = c.reply.copy()
    l4.sport, l4.dport = c.bport, snat_port
    return backend_frame(l3 / l4)


def group_nat(tap, runner):
    cfg = lb_config(NAT_SERVICES)
    cases = nat_cases()
    r1 = runner.run("nat-fwd", cfg, [c.fwd for c in cases])
    if r1.err:
        tap.check("NAT: dpflow run", [(None, r1.err)])
        return
    outs1 = Outs(r1.backend)
    snat = [check_nat_fwd(tap, c, outs1) for c in cases]
    errs = []
    if len(r1.backend) != len(cases) or r1.client:
        errs.append((None, "%d frames out the backend port, %d out the client"
                     " port; want %d, 0" % (len(r1.backend), len(r1.client),
                                            len(cases))))
    errs += drop_errs(r1, {})
    for name, fwd, new in (("web4", 2, 2), ("dns4", 2, 2), ("web6", 1, 1),
                           ("dns6", 1, 1), ("any4", 1, 1)):
        errs += svc_errs(r1, name, fwd=fwd, new_flows=new, untracked=0)
    tap.check("NAT: counters (fwd, new flows per service, no drops)", errs)

    # The second run: the same forward frames (so the same SNAT ports),
    # ICMP errors about two of the flows, then the backends' replies.
    rtr4, rtr6 = "203.0.113.254", "2001:db8:c::fe"
    c0, c4 = cases[0], cases[4]
    quote4 = (IP(src=c0.vip, dst=c0.client, ttl=60, id=0x4242)
              / TCP(sport=c0.vport, dport=c0.cport, flags="SA", seq=0x5566,
                    ack=0x11223345))
    icmp4 = client_frame(IP(src=rtr4, dst=c0.vip, ttl=250, id=0x777)
                         / ICMP(type=3, code=4, nexthopmtu=1400)
                         / Raw(embedded(quote4, 28)))
    quote6 = (IPv6(src=c4.vip, dst=c4.client, hlim=61)
              / TCP(sport=c4.vport, dport=c4.cport, flags="SA", seq=999,
                    ack=778))
    icmp6 = client_frame(IPv6(src=rtr6, dst=c4.vip, hlim=250)
                         / ICMPv6PacketTooBig(mtu=1280)
                         / Raw(embedded(quote6, 48)))
    replies = [(c, nat_reply_frame(c, snat[i]) if snat[i] is not None
                else None) for i, c in enumerate(cases)]
    used = set(s for s in snat if s is not None)
    stray_port = next(p for p in range(20000, 30000) if p not in used)
    stray = backend_frame(IP(src=c0.baddr, dst=c0.snat)
                          / TCP(sport=c0.bport, dport=stray_port, flags="SA"))
    # (c) an ICMP port unreachable from the backend side, sent to the SNAT
    # address about the packet the balancer sent the backend
    rtrb = "10.0.1.254"
    quoteb = None
    icmpb = []
    if snat[0] is not None:
        quoteb = (IP(src=c0.snat, dst=c0.baddr, ttl=63, id=0x4343)
                  / TCP(sport=snat[0], dport=c0.bport, flags="S",
                        seq=0x11223344))
        icmpb = [backend_frame(IP(src=rtrb, dst=c0.snat, ttl=251, id=0x888)
                               / ICMP(type=3, code=3)
                               / Raw(embedded(quoteb, 28)))]
    r2 = runner.run("nat-reply", cfg, [c.fwd for c in cases] + [icmp4, icmp6],
                    [f for _, f in replies if f is not None] + [stray] +
                    icmpb)
    if r2.err:
        tap.check("NAT replies: dpflow run", [(None, r2.err)])
        return
    errs = []
    outs2, couts2 = Outs(r2.backend), Outs(r2.client)
    for i, f in enumerate(r1.backend):
        got, want = outs2.take(lambda g: f)
        errs += [(i, m) for _, m in match_errs(got, want, "frame of the "
                                               "second run")]
    tap.check("NAT: a second run with the same config forwards byte for "
              "byte alike (same SNAT ports)", errs)

    for c, f in replies:
        if f is None:
            errs = [(None, "no forward frame to take the SNAT port from")]
        else:
            want = rewrite(f, CGW, CMAC, c.vip, c.vport, c.client, c.cport,
                           keep_l4_csum=c.udp_zero)
            errs = match_errs(*couts2.take(lambda g, w=want: w))
        tap.check("NAT reply (%s): out the client port as %s:%d -> %s:%d"
                  % (c.desc.split(" (")[0].split(",")[0], c.vip, c.vport,
                     c.client, c.cport), errs)

    # (a) ICMP frag needed about the IPv4 TCP flow: to its backend, the
    # quoted packet as the backend sent it (backend:bport -> snat:port)
    n = len(cases)
    errs = [(None, "no SNAT port from the forward case")]
    if snat[0] is not None:
        q = IP(raw(quote4))
        q.src, q.dst = c0.baddr, c0.snat
        del q.chksum
        q[TCP].sport, q[TCP].dport = c0.bport, snat[0]
        want = raw(Ether(dst=c0.bmac, src=BMAC)
                   / IP(src=rtr4, dst=c0.baddr, ttl=250, id=0x777)
                   / ICMP(type=3, code=4, nexthopmtu=1400)
                   / Raw(raw(q)[:28]))
        errs = match_errs(*outs2.take(lambda g: want))
    tap.check("ICMP frag needed about a NAT flow: to %s, quote %s:%d -> "
              "%s:SNAT port, checksums right" % (c0.baddr, c0.baddr, c0.bport,
                                                 c0.snat), errs)
    errs = [(None, "no SNAT port from the forward case")]
    if snat[4] is not None:
        q = IPv6(raw(quote6))
        q.src, q.dst = c4.baddr, c4.snat
        q[TCP].sport, q[TCP].dport = c4.bport, snat[4]
        want = raw(Ether(dst=c4.bmac, src=BMAC)
                   / IPv6(src=rtr6, dst=c4.baddr, hlim=250)
                   / ICMPv6PacketTooBig(mtu=1280) / Raw(raw(q)[:48]))
        errs = match_errs(*outs2.take(lambda g: want))
    tap.check("ICMPv6 packet too big about a NAT flow: to %s, quote "
              "translated, checksum right" % c4.baddr, errs)

    errs = [(None, "no SNAT port from the forward case")]
    if quoteb is not None:
        q = IP(raw(quoteb))
        q.src, q.dst = c0.client, c0.vip
        del q.chksum
        q[TCP].sport, q[TCP].dport = c0.cport, c0.vport
        want = raw(Ether(dst=CGW, src=CMAC)
                   / IP(src=rtrb, dst=c0.client, ttl=251, id=0x888)
                   / ICMP(type=3, code=3) / Raw(raw(q)[:28]))
        errs = match_errs(*couts2.take(lambda g: want))
    tap.check("ICMP port unreachable to the SNAT address about a NAT flow: "
              "to the client %s, quote %s:%d -> %s:%d, checksums right"
              % (c0.client, c0.client, c0.cport, c0.vip, c0.vport), errs)

    errs = []
    n_rep = sum(1 for _, f in replies if f is not None) + len(icmpb)
    if len(r2.backend) != n + 2 or len(r2.client) != n_rep:
        errs.append((None, "%d frames out the backend port, %d out the "
                     "client port; want %d, %d" % (len(r2.backend),
                                                   len(r2.client), n + 2,
                                                   n_rep)))
    errs += drop_errs(r2, {"reply_without_connection": 1})
    errs += svc_errs(r2, "web4", fwd=2, reply=2, icmp=1 + len(icmpb),
                     new_flows=2)
    errs += svc_errs(r2, "web6", fwd=1, reply=1, icmp=1, new_flows=1)
    errs += svc_errs(r2, "dns4", fwd=2, reply=2, icmp=0)
    tap.check("NAT: reply to a SNAT port without a connection: dropped "
              "(reply_without_connection), counters", errs)


DSR_SERVICES = [
    {"name": "ipip4", "vip": "192.0.2.20", "proto": "tcp", "mode": "ipip",
     "encap_src": "198.51.100.20",
     "backends": [{"addr": "10.0.2.1", "mac": "02:00:00:00:02:01"}]},
    {"name": "ipip6", "vip": "2001:db8::20", "proto": "tcp", "port": 80,
     "mode": "ipip", "encap_src": "2001:db8:e::1",
     "backends": [{"addr": "2001:db8:2::1", "mac": "02:00:00:00:02:02"}]},
    {"name": "gue4", "vip": "192.0.2.21", "proto": "udp", "port": 53,
     "mode": "gue", "encap_src": "198.51.100.21",
     "backends": [{"addr": "10.0.2.2"}]},
    {"name": "gue4p", "vip": "192.0.2.21", "proto": "tcp", "port": 443,
     "mode": "gue", "gue_port": 9000, "encap_src": "198.51.100.21",
     "backends": [{"addr": "10.0.2.3", "mac": "02:00:00:00:02:03"}]},
    {"name": "gue6", "vip": "2001:db8::21", "proto": "udp", "port": 53,
     "mode": "gue", "encap_src": "2001:db8:e::2",
     "backends": [{"addr": "2001:db8:2::2"}]},
    {"name": "ip6in4", "vip": "2001:db8::22", "proto": "tcp", "port": 80,
     "mode": "ipip", "encap_src": "198.51.100.22",
     "backends": [{"addr": "10.0.2.4"}]},
    {"name": "ip4in6", "vip": "192.0.2.22", "proto": "tcp", "port": 80,
     "mode": "ipip", "encap_src": "2001:db8:e::3",
     "backends": [{"addr": "2001:db8:2::3"}]},
]


class DsrCase:
    def __init__(self, desc, svc, frame, src, dst, dmac, gue_port=None):
        self.desc, self.svc, self.frame = desc, svc, frame
        self.src, self.dst, self.dmac = src, dst, dmac
        self.gue_port = gue_port
        self.out_v6 = ":" in dst


def pad60(frame):
    b = raw(frame)
    return b + b"\x00" * max(0, 60 - len(b))


def dsr_cases():
    cs = []
    syn4 = client_frame(IP(src="203.0.113.20", dst="192.0.2.20", tos=0xb8,
                           ttl=50, id=99)
                        / TCP(sport=41000, dport=22, flags="S", seq=1,
                              options=[("MSS", 1460)]))
    cs.append(DsrCase("DSR ipip IPv4: outer IPv4 proto 4, id 0, DF, ttl 64, "
                      "inner tos", "ipip4", syn4, "198.51.100.20", "10.0.2.1",
                      "02:00:00:00:02:01"))
    short = client_frame(IP(src="203.0.113.21", dst="192.0.2.20", ttl=50)
                         / TCP(sport=41001, dport=80, flags="S", seq=2))
    cs.append(DsrCase("DSR ipip IPv4, 60-byte padded frame: inner packet "
                      "without the padding", "ipip4", pad60(short),
                      "198.51.100.20", "10.0.2.1", "02:00:00:00:02:01"))
    syn6 = client_frame(IPv6(src="2001:db8:c::20", dst="2001:db8::20",
                             tc=0x22, fl=0xabcde, hlim=50)
                        / TCP(sport=41002, dport=80, flags="S", seq=3))
    cs.append(DsrCase("DSR ipip IPv6: outer IPv6 nh 41, hlim 64, inner tc, "
                      "20-bit flow label", "ipip6", syn6, "2001:db8:e::1",
                      "2001:db8:2::1", "02:00:00:00:02:02"))
    ack6 = raw(client_frame(IPv6(src="2001:db8:c::21", dst="2001:db8::20")
                            / TCP(sport=41003, dport=80, flags="A", seq=4,
                                  ack=5) / Raw(b"x"))) + b"\xde\xad\xbe\xef"
    cs.append(DsrCase("DSR ipip IPv6, frame with a 4-byte trailer: inner "
                      "packet without it", "ipip6", ack6, "2001:db8:e::1",
                      "2001:db8:2::1", "02:00:00:00:02:02"))
    udp4 = client_frame(IP(src="203.0.113.22", dst="192.0.2.21", tos=0x04)
                        / UDP(sport=5400, dport=53) / Raw(b"q?"))
    cs.append(DsrCase("DSR gue IPv4, default port 6080, padded frame: UDP "
                      "checksum 0, source port >= 32768", "gue4",
                      pad60(udp4), "198.51.100.21", "10.0.2.2", BGW,
                      gue_port=GUE_PORT_DEFAULT))
    tcp4 = client_frame(IP(src="203.0.113.23", dst="192.0.2.21")
                        / TCP(sport=41004, dport=443, flags="PA", seq=9,
                              ack=10) / Raw(b"\x16\x03\x01hello"))
    cs.append(DsrCase("DSR gue IPv4, configured gue_port 9000", "gue4p",
                      tcp4, "198.51.100.21", "10.0.2.3", "02:00:00:00:02:03",
                      gue_port=9000))
    udp6 = client_frame(IPv6(src="2001:db8:c::22", dst="2001:db8::21",
                             tc=0xb8)
                        / UDP(sport=5401, dport=53) / Raw(b"odd-len"))
    cs.append(DsrCase("DSR gue IPv6 outer: UDP checksum valid", "gue6",
                      udp6, "2001:db8:e::2", "2001:db8:2::2", BGW,
                      gue_port=GUE_PORT_DEFAULT))
    s64 = client_frame(IPv6(src="2001:db8:c::23", dst="2001:db8::22",
                            tc=0x48)
                       / TCP(sport=41005, dport=80, flags="S", seq=11))
    cs.append(DsrCase("DSR ipip IPv6 VIP, IPv4 backend: outer IPv4 proto 41",
                      "ip6in4", s64, "198.51.100.22", "10.0.2.4", BGW))
    s46 = client_frame(IP(src="203.0.113.24", dst="192.0.2.22", tos=0x10)
                       / TCP(sport=41006, dport=80, flags="S", seq=12))
    cs.append(DsrCase("DSR ipip IPv4 VIP, IPv6 backend: outer IPv6 nh 4",
                      "ip4in6", s46, "2001:db8:e::3", "2001:db8:2::3", BGW))
    return cs


def check_dsr(tap, desc, outs, inner, out_v6, src, dst, dmac, gue_port):
    def want_of(g):
        fl, sport = outer_fields(g, out_v6, gue_port is not None)
        return dsr_expect(inner, out_v6, src, dst, dmac, tos_of(inner),
                          gue_port, sport or 0, fl or 0)

    got, want = outs.take(want_of)
    errs = match_errs(got, want)
    fl = sport = None
    if not errs:
        fl, sport = outer_fields(got, out_v6, gue_port is not None)
        if gue_port is not None and sport < 0x8000:
            errs.append((None, "GUE source port %s, want >= 32768" % sport))
        if out_v6 and not 0 <= fl < 1 << 20:
            errs.append((None, "flow label %s" % fl))
    extra = []
    if fl is not None:
        extra.append("flow label 0x%05x" % fl)
    if sport is not None:
        extra.append("sport %d" % sport)
    tap.check("%s%s" % (desc, " (%s)" % ", ".join(extra) if extra else ""),
              errs)


def group_dsr(tap, runner):
    cfg = lb_config(DSR_SERVICES)
    cases = dsr_cases()
    # ICMP errors about three of the flows, after the flows' packets
    c0, c2, c4 = cases[0], cases[2], cases[4]
    f0 = Ether(raw(c0.frame))
    quote = (IP(src=f0[IP].dst, dst=f0[IP].src, ttl=64)
             / TCP(sport=f0[TCP].dport, dport=f0[TCP].sport, flags="SA"))
    icmp_ipip = client_frame(IP(src="203.0.113.254", dst=f0[IP].dst,
                                tos=0xc0, id=5)
                             / ICMP(type=3, code=4, nexthopmtu=1300)
                             / Raw(embedded(quote, 28)))
    f2 = Ether(raw(c2.frame))
    quote6 = (IPv6(src=f2[IPv6].dst, dst=f2[IPv6].src)
              / TCP(sport=f2[TCP].dport, dport=f2[TCP].sport, flags="SA"))
    icmp6_ipip = client_frame(IPv6(src="2001:db8:c::fe", dst=f2[IPv6].dst)
                              / ICMPv6PacketTooBig(mtu=1280)
                              / Raw(raw(quote6)))
    f4 = Ether(c4.frame)
    quote_g = (IP(src=f4[IP].dst, dst=f4[IP].src)
               / UDP(sport=f4[UDP].dport, dport=f4[UDP].sport)
               / Raw(b"answer"))
    icmp_gue = client_frame(IP(src="203.0.113.253", dst=f4[IP].dst)
                            / ICMP(type=11, code=0)
                            / Raw(embedded(quote_g, 28)))
    icmps = [("ICMP frag needed about a DSR ipip flow: the whole ICMP "
              "packet IP-in-IP to the flow's backend", icmp_ipip, c0),
             ("ICMPv6 packet too big about an IPv6 DSR flow: encapsulated "
              "(nh 41) to the flow's backend", icmp6_ipip, c2),
             ("ICMP time exceeded about a DSR gue flow: GUE-encapsulated to "
              "the flow's backend", icmp_gue, c4)]
    r = runner.run("dsr", cfg, [c.frame for c in cases]
                   + [f for _, f, _ in icmps])
    if r.err:
        tap.check("DSR: dpflow run", [(None, r.err)])
        return
    outs = Outs(r.backend)
    for c in cases:
        check_dsr(tap, c.desc, outs, inner_ip(c.frame if isinstance(
            c.frame, bytes) else raw(c.frame)), c.out_v6, c.src, c.dst,
            c.dmac, c.gue_port)
    for desc, f, c in icmps:
        check_dsr(tap, desc, outs, inner_ip(raw(f)), c.out_v6, c.src, c.dst,
                  c.dmac, c.gue_port)
    errs = []
    n = len(cases) + len(icmps)
    if len(r.backend) != n or r.client:
        errs.append((None, "%d frames out the backend port, %d out the client"
                     " port; want %d, 0" % (len(r.backend), len(r.client), n)))
    errs += drop_errs(r, {})
    errs += svc_errs(r, "ipip4", fwd=2, new_flows=2, icmp=1, untracked=0)
    errs += svc_errs(r, "ipip6", fwd=2, new_flows=2, icmp=1, untracked=0)
    errs += svc_errs(r, "gue4", fwd=1, new_flows=1, icmp=1, untracked=0)
    errs += svc_errs(r, "gue6", fwd=1, new_flows=1, icmp=0, untracked=0)
    tap.check("DSR: counters (fwd, icmp, new flows per service, no drops)",
              errs)


def group_dsr_family(tap, runner):
    """A DSR service whose encap_src is not of a backend's family cannot
    build that backend's outer header: the config must be refused (or the
    frame not sent with a made-up outer source)."""
    cfg = lb_config([{"name": "mixed", "vip": "192.0.2.40", "proto": "tcp",
                      "port": 80, "mode": "ipip",
                      "encap_src": "198.51.100.40",
                      "backends": [{"addr": "2001:db8:2::40"}]}])
    syn = client_frame(IP(src="203.0.113.40", dst="192.0.2.40")
                       / TCP(sport=42000, dport=80, flags="S"))
    r = runner.run("dsr-family", cfg, [syn])
    errs = []
    if r.err is None:
        for i, g in enumerate(r.backend):
            e = Ether(g)
            if IPv6 in e:
                errs.append((i, "config accepted; sent with outer IPv6 "
                             "source %s (the IPv4 encap_src 198.51.100.40 in "
                             "16 bytes)" % e[IPv6].src))
            else:
                errs.append((i, "config accepted; sent %s" % e.summary()))
    tap.check("DSR: IPv4 encap_src with an IPv6 backend: refused at load, "
              "no frame with a made-up outer source", errs)


DROP_SERVICES = [
    {"name": "web4", "vip": "192.0.2.10", "proto": "tcp", "port": 80,
     "mode": "nat", "snat": "198.51.100.1",
     "backends": [{"addr": "10.0.1.1", "port": 8080}]},
    {"name": "web6", "vip": "2001:db8::20", "proto": "tcp", "port": 80,
     "mode": "ipip", "encap_src": "2001:db8:e::1",
     "backends": [{"addr": "2001:db8:2::1"}]},
]


def drop_cases():
    q4 = (IP(src="192.0.2.10", dst="203.0.113.50")
          / TCP(sport=80, dport=43000, flags="SA"))
    q6 = (IPv6(src="2001:db8::20", dst="2001:db8:c::50")
          / TCP(sport=80, dport=43001, flags="SA"))
    frag_tcp = raw(TCP(sport=43002, dport=80, flags="S")) + b"A" * 16
    c = client_frame
    return [
        ("TCP to a VIP on a port without service: no_service", "client",
         c(IP(src="203.0.113.50", dst="192.0.2.10")
           / TCP(sport=43000, dport=81, flags="S")), {"no_service": 1}, 0),
        ("UDP to a TCP-only VIP: no_service", "client",
         c(IP(src="203.0.113.50", dst="192.0.2.10")
           / UDP(sport=43000, dport=80)), {"no_service": 1}, 0),
        ("TCP to an address that is no VIP: no_service", "client",
         c(IP(src="203.0.113.50", dst="192.0.2.99")
           / TCP(sport=43000, dport=80, flags="S")), {"no_service": 1}, 0),
        ("ARP: not_ip", "client",
         Ether(dst="ff:ff:ff:ff:ff:ff", src=CPEER)
         / ARP(psrc="192.0.2.1", pdst="192.0.2.10", hwsrc=CPEER),
         {"not_ip": 1}, 0),
        ("IPv4 first fragment to a VIP: fragment", "client",
         c(IP(src="203.0.113.50", dst="192.0.2.10", flags="MF", proto=6,
              id=77) / Raw(frag_tcp)), {"fragment": 1}, 0),
        ("IPv4 later fragment to a VIP: fragment", "client",
         c(IP(src="203.0.113.50", dst="192.0.2.10", frag=5, proto=6, id=77)
           / Raw(b"B" * 24)), {"fragment": 1}, 0),
        ("IPv6 fragment to a VIP: fragment", "client",
         c(IPv6(src="2001:db8:c::50", dst="2001:db8::20")
           / IPv6ExtHdrFragment(m=1, id=0x99, nh=6) / Raw(frag_tcp)),
         {"fragment": 1}, 0),
        ("ICMP frag needed about an unknown flow: icmp_without_connection",
         "client", c(IP(src="203.0.113.254", dst="192.0.2.10")
                     / ICMP(type=3, code=4, nexthopmtu=1400)
                     / Raw(embedded(q4, 28))),
         {"icmp_without_connection": 1}, 0),
        ("ICMPv6 packet too big about an unknown flow: "
         "icmp_without_connection", "client",
         c(IPv6(src="2001:db8:c::fe", dst="2001:db8::20")
           / ICMPv6PacketTooBig(mtu=1280) / Raw(raw(q6))),
         {"icmp_without_connection": 1}, 0),
        ("ICMP echo request to a VIP: icmp_malformed", "client",
         c(IP(src="203.0.113.50", dst="192.0.2.10")
           / ICMP(type=8, id=1, seq=1) / Raw(b"ping")),
         {"icmp_malformed": 1}, 0),
        ("ICMPv6 echo request to a VIP: icmp_malformed", "client",
         c(IPv6(src="2001:db8:c::50", dst="2001:db8::20")
           / ICMPv6EchoRequest(id=1, seq=1)), {"icmp_malformed": 1}, 0),
        ("reply to the SNAT address without a connection: "
         "reply_without_connection", "backend",
         backend_frame(IP(src="10.0.1.1", dst="198.51.100.1")
                       / TCP(sport=8080, dport=5000, flags="SA")),
         {"reply_without_connection": 1}, 0),
    ]


def group_drops(tap, runner):
    cfg = lb_config(DROP_SERVICES)
    for k, (desc, port, frame, want, miss) in enumerate(drop_cases()):
        r = runner.run("drop%d" % k, cfg, [frame] if port == "client" else [],
                       [frame] if port == "backend" else [])
        if r.err:
            tap.check(desc, [(None, r.err)])
            continue
        errs = drop_errs(r, want, miss)
        if r.client or r.backend:
            errs.append((None, "%d frames sent (client %d, backend %d)"
                         % (len(r.client) + len(r.backend), len(r.client),
                            len(r.backend))))
        for name in ("web4", "web6"):
            errs += svc_errs(r, name, fwd=0, reply=0, icmp=0, new_flows=0)
        tap.check(desc, errs)


SPREAD_BACKENDS = {"10.0.3.1": "02:00:00:00:03:01",
                   "10.0.3.2": "02:00:00:00:03:02"}
SPREAD_SERVICE = {"name": "spread", "vip": "192.0.2.30", "proto": "tcp",
                  "port": 80, "mode": "nat", "snat": "198.51.100.30",
                  "backends": [{"addr": "10.0.3.1", "port": 80, "weight": 1,
                                "mac": "02:00:00:00:03:01"},
                               {"addr": "10.0.3.2", "port": 80, "weight": 3,
                                "mac": "02:00:00:00:03:02"}]}


def spread_want(frame, got):
    """The NAT output of @frame to the spread service, with the backend and
    SNAT port @got has; None when @got is no frame to a backend."""
    e = Ether(got)
    if IP not in e or TCP not in e or e[IP].dst not in SPREAD_BACKENDS:
        return None
    be = e[IP].dst
    return rewrite(frame, SPREAD_BACKENDS[be], BMAC, "198.51.100.30",
                   e[TCP].sport, be, 80)


def nat_out_check(frame, got):
    """Errors of NAT output @got for input @frame to the spread service,
    whose backend is read from @got; returns (errs, backend)."""
    e = Ether(got)
    if IP not in e or TCP not in e:
        return ["not IPv4/TCP: %s" % e.summary()], None
    be = e[IP].dst
    if be not in SPREAD_BACKENDS:
        return ["to %s, no backend of the service" % be], None
    if e[TCP].sport < SNAT_PORT_LO:
        return ["SNAT port %d" % e[TCP].sport], be
    d = bytes_diff(got, spread_want(frame, got))
    return ([d] if d else []), be


def group_spread(tap, runner):
    cfg = lb_config([SPREAD_SERVICE])
    rnd = random.Random(4242)
    frames = []
    for i in range(300):
        src = "100.%d.%d.%d" % (rnd.randrange(64, 128), rnd.randrange(256),
                                rnd.randrange(1, 255))
        frames.append(client_frame(
            IP(src=src, dst="192.0.2.30", ttl=rnd.randrange(32, 128),
               id=rnd.randrange(65536))
            / TCP(sport=rnd.randrange(1024, 65536), dport=80, flags="S",
                  seq=100000 + i, window=rnd.randrange(1024, 65536))))
    # the second run also has every backend's SYN/ACK, in the flows'
    # order (backend port bursts follow the client port's)
    runs, picks, snats, errs = [], [], [], []
    for k in (1, 2):
        replies = []
        if k == 2:
            for i, f in enumerate(frames):
                if i not in snats[0]:
                    continue
                be, port = snats[0][i]
                replies.append((i, backend_frame(
                    IP(src=be, dst="198.51.100.30", ttl=64, id=i)
                    / TCP(sport=80, dport=port, flags="SA", seq=900000 + i,
                          ack=100001 + i, window=29200))))
        r = runner.run("spread%d" % k, cfg, frames, [f for _, f in replies])
        if r.err:
            tap.check("spread: dpflow run", [(None, r.err)])
            return
        pick, snat = {}, {}
        for j, g in enumerate(r.backend):
            e = Ether(g)
            seq = e[TCP].seq - 100000 if TCP in e else -1
            if not 0 <= seq < len(frames) or seq in pick:
                errs.append((j, "run %d: unexpected frame %s"
                             % (k, e.summary())))
                continue
            es, be = nat_out_check(frames[seq], g)
            pick[seq] = be
            snat[seq] = (be, e[TCP].sport)
            errs += [(j, "run %d flow %d: %s" % (k, seq, m)) for m in es]
        if len(pick) != len(frames):
            errs.append((None, "run %d: %d of %d flows forwarded"
                         % (k, len(pick), len(frames))))
        runs.append(r)
        picks.append(pick)
        snats.append(snat)
    tap.check("spread: 300 SYNs from random clients, each forwarded byte "
              "exact (NAT) to a backend of the service", errs)
    differ = [(s, picks[0].get(s), picks[1].get(s)) for s in range(300)
              if picks[0].get(s) != picks[1].get(s)]
    tap.check("spread: every flow gets the same backend in two runs",
              [(None, "flow %d: %s, then %s" % d) for d in differ[:5]]
              + ([(None, "%d flows differ" % len(differ))] if differ else []))
    n2 = sum(1 for b in picks[0].values() if b == "10.0.3.2")
    share = n2 / max(1, len(picks[0]))
    tap.check("spread: weights 1 and 3: share of the second %.2f in "
              "[0.6, 0.9]" % share,
              [] if 0.6 <= share <= 0.9 else
              [(None, "share %.3f (%d of %d)" % (share, n2, len(picks[0])))])
    errs = []
    r = runs[0]
    errs += svc_errs(r, "spread", fwd=300, new_flows=300, untracked=0)
    for be in SPREAD_BACKENDS:
        n = sum(1 for b in picks[0].values() if b == be)
        info = r.backends.get(("spread", be + ":80"))
        if info is None:
            errs.append((None, "no backend line for %s:80" % be))
        elif info["new_flows"] != n or info["fwd"] != n:
            errs.append((None, "backend %s: fwd %d, new flows %d; the "
                         "output has %d" % (be, info["fwd"],
                                            info["new_flows"], n)))
    errs += drop_errs(r, {})
    tap.check("spread: backend counters agree with the output", errs)

    by = {}
    for i, key in snats[0].items():
        by.setdefault(key, []).append(i)
    dup = [(k, v) for k, v in by.items() if len(v) > 1]
    tap.check("spread: every flow has its own (backend, SNAT port)",
              [(None, "%s:%d for flows %s" % (k[0], k[1], v))
               for k, v in dup])

    # bursts of 64 (as docs/apps/l4lb.md runs the balancer): the same
    # frames, in the same order, as bursts of 32
    r64 = runner.run("spread-burst64", cfg, frames, args=["--burst", "64"])
    errs = [(None, r64.err)] if r64.err else []
    if not r64.err:
        if r64.backend != runs[0].backend:
            n = sum(1 for a, b in zip(r64.backend, runs[0].backend) if a != b)
            errs.append((None, "%d frames out, %d differ from bursts of 32 "
                         "(%d frames)" % (len(r64.backend), n,
                                          len(runs[0].backend))))
        want = (len(frames) + 63) // 64, (len(frames) + 31) // 32
        if (r64.rx_bursts, runs[0].rx_bursts) != want:
            errs.append((None, "receive bursts %d and %d, want %d and %d"
                         % ((r64.rx_bursts, runs[0].rx_bursts) + want)))
        errs += svc_errs(r64, "spread", fwd=300, new_flows=300, untracked=0)
        errs += drop_errs(r64, {})
    tap.check("spread: dpflow run --burst 64 (5 bursts, not 10) forwards the "
              "300 SYNs byte for byte as bursts of 32 do", errs)

    errs = []
    outs = Outs(runs[1].client)
    for i, f in replies:
        c = Ether(raw(frames[i]))
        want = rewrite(f, CGW, CMAC, "192.0.2.30", 80, c[IP].src,
                       c[TCP].sport)
        errs += [(i, m) for _, m in match_errs(*outs.take(
            lambda g, w=want: w), "reply")]
    if len(runs[1].client) != len(replies):
        errs.append((None, "%d frames out the client port, want %d"
                     % (len(runs[1].client), len(replies))))
    errs += drop_errs(runs[1], {})
    errs += svc_errs(runs[1], "spread", fwd=300, reply=len(replies),
                     new_flows=300)
    tap.check("spread: the backends' SYN/ACKs to all %d flows go back to "
              "their clients, byte exact" % len(replies),
              errs if replies else [(None, "no forward frames")])


def group_sticky(tap, runner):
    cfg = lb_config([SPREAD_SERVICE])
    ip = IP(src="100.64.1.1", dst="192.0.2.30")
    frames = [client_frame(ip / TCP(sport=44444, dport=80, flags="S",
                                    seq=1000))]
    for k in range(5):
        frames.append(client_frame(
            ip / TCP(sport=44444, dport=80, flags="A" if k % 2 else "PA",
                     seq=1001 + 10 * k, ack=5001)
            / Raw(b"segment %d" % k)))
    r = runner.run("sticky", cfg, frames)
    if r.err:
        tap.check("sticky: dpflow run", [(None, r.err)])
        return
    errs = []
    seen = set()
    outs = Outs(r.backend)
    for i, f in enumerate(frames):
        g, want = outs.take(lambda g, f=f: spread_want(f, g))
        es = match_errs(g, want)
        errs += [(i, m) for _, m in es]
        if es:
            continue
        seen.add((Ether(g)[IP].dst, l4_ports(g)[0]))
        if l4_ports(g)[0] < SNAT_PORT_LO:
            errs.append((i, "SNAT port %d" % l4_ports(g)[0]))
    if len(seen) != 1:
        errs.append((None, "backend, SNAT port: %s" % sorted(seen,
                                                             key=str)))
    errs += svc_errs(r, "spread", fwd=6, new_flows=1, untracked=0)
    errs += drop_errs(r, {})
    tap.check("connection: SYN then 5 ACKs of one flow: one backend and SNAT "
              "port, byte exact, new flows 1 (%s)" % ", ".join(
                  "%s:%s" % s for s in sorted(seen, key=str)), errs)


def group_mtu(tap, runner):
    """DSR packets too big for the backend MTU once encapsulated: dropped,
    and the client told (ICMP frag needed / packet too big from the VIP)
    when it asked not to fragment."""
    svcs = [
        {"name": "big4", "vip": "192.0.2.30", "proto": "tcp", "port": 80,
         "mode": "ipip", "encap_src": "198.51.100.30",
         "backends": [{"addr": "10.0.3.1", "mac": "02:00:00:00:03:01"}]},
        {"name": "big6", "vip": "2001:db8::30", "proto": "tcp", "port": 80,
         "mode": "ipip", "encap_src": "2001:db8:e::30",
         "backends": [{"addr": "2001:db8:3::1",
                       "mac": "02:00:00:00:03:02"}]}]
    cli4, cli6 = "203.0.113.30", "2001:db8:c::30"

    def v4(n, df, sport):
        return client_frame(IP(src=cli4, dst="192.0.2.30", id=0x1234,
                               flags="DF" if df else 0)
                            / TCP(sport=sport, dport=80, flags="A")
                            / Raw(b"x" * (n - 40)))

    big_df, big_nodf, fits = v4(1490, True, 3001), v4(1490, False, 3002), \
        v4(1480, True, 3003)
    big6 = client_frame(IPv6(src=cli6, dst="2001:db8::30")
                        / TCP(sport=3004, dport=80, flags="A")
                        / Raw(b"y" * 1440))
    r = runner.run("mtu", lb_config(svcs, backend_mtu=1500),
                   [big_df, big_nodf, fits, big6])
    if r.err:
        tap.check("MTU: dpflow run", [(None, r.err)])
        return
    outs, couts = Outs(r.backend), Outs(r.client)
    ip4 = raw(big_df[IP])
    want4 = raw(Ether(dst=CGW, src=CMAC)
                / IP(src="192.0.2.30", dst=cli4, ttl=64, id=0)
                / ICMP(type=3, code=4, nexthopmtu=1480)
                / Raw(ip4[:28]))
    tap.check("MTU: a 1490-byte IPv4 packet with DF (1510 encapsulated, MTU "
              "1500): ICMP frag needed, next-hop MTU 1480, from the VIP to "
              "the client", match_errs(*couts.take(lambda g: want4)))
    ip6 = raw(big6[IPv6])
    want6 = raw(Ether(dst=CGW, src=CMAC)
                / IPv6(src="2001:db8::30", dst=cli6, hlim=64)
                / ICMPv6PacketTooBig(mtu=1460) / Raw(ip6[:1232]))
    tap.check("MTU: a 1500-byte IPv6 packet (1540 encapsulated): ICMPv6 "
              "packet too big, MTU 1460, quoting 1232 bytes",
              match_errs(*couts.take(lambda g: want6)))
    wantf = raw(Ether(dst="02:00:00:00:03:01", src=BMAC)
                / IP(src="198.51.100.30", dst="10.0.3.1", ttl=64, id=0,
                     flags="DF", proto=4, tos=0)
                / fits[IP])
    errs = match_errs(*outs.take(lambda g: wantf))
    if len(r.backend) != 1 or len(r.client) != 2:
        errs.append((None, "%d frames out the backend port, %d out the "
                     "client port; want 1, 2" % (len(r.backend),
                                                  len(r.client))))
    errs += drop_errs(r, {"frame_too_big": 3})
    tap.check("MTU: exactly 1500 encapsulated goes through; the three too "
              "big are dropped (frame_too_big), no ICMP for IPv4 without "
              "DF", errs)


def group_mtu_nat(tap, runner):
    """NAT packets over backend_mtu (issue 23: a 1500-byte packet went out
    with backend_mtu 1280): handled as the DSR modes handle theirs, with
    no overhead: dropped (frame_too_big), the client told when it asked
    not to fragment; an ICMP error too big for the backend dropped."""
    svcs = [
        {"name": "mtu4", "vip": "192.0.2.40", "proto": "tcp", "port": 80,
         "mode": "nat", "snat": "198.51.100.40",
         "backends": [{"addr": "10.0.4.1", "port": 8080,
                       "mac": "02:00:00:00:04:01"}]},
        {"name": "mtu6", "vip": "2001:db8::40", "proto": "tcp", "port": 80,
         "mode": "nat", "snat": "2001:db8:ff::40",
         "backends": [{"addr": "2001:db8:4::1",
                       "mac": "02:00:00:00:04:02"}]}]
    cli4, cli6 = "203.0.113.40", "2001:db8:c::40"

    def v4(n, df, sport):
        return client_frame(IP(src=cli4, dst="192.0.2.40", id=0x2345,
                               flags="DF" if df else 0)
                            / TCP(sport=sport, dport=80, flags="A")
                            / Raw(b"x" * (n - 40)))

    big_df, big_nodf, fits = v4(1500, True, 4001), v4(1500, False, 4002), \
        v4(1280, True, 4003)
    big6 = client_frame(IPv6(src=cli6, dst="2001:db8::40")
                        / TCP(sport=4004, dport=80, flags="A")
                        / Raw(b"y" * 1440))
    # an ICMP error about the tracked flow of @fits, 1400 bytes long
    quote = (IP(src="192.0.2.40", dst=cli4, ttl=60, id=0x4646)
             / TCP(sport=80, dport=4003, flags="A") / Raw(b"z" * 1340))
    icmp_big = client_frame(IP(src="203.0.113.254", dst="192.0.2.40",
                               ttl=250, id=0x999)
                            / ICMP(type=3, code=4, nexthopmtu=1400)
                            / Raw(embedded(quote, 1372)))
    r = runner.run("mtu-nat", lb_config(svcs, backend_mtu=1280),
                   [big_df, big_nodf, fits, big6, icmp_big])
    if r.err:
        tap.check("NAT MTU: dpflow run", [(None, r.err)])
        return
    outs, couts = Outs(r.backend), Outs(r.client)
    ip4 = raw(big_df[IP])
    want4 = raw(Ether(dst=CGW, src=CMAC)
                / IP(src="192.0.2.40", dst=cli4, ttl=64, id=0)
                / ICMP(type=3, code=4, nexthopmtu=1280)
                / Raw(ip4[:28]))
    tap.check("NAT MTU: a 1500-byte IPv4 TCP packet with DF (backend_mtu "
              "1280): ICMP frag needed, next-hop MTU 1280, from the VIP to "
              "the client", match_errs(*couts.take(lambda g: want4)))
    ip6 = raw(big6[IPv6])
    want6 = raw(Ether(dst=CGW, src=CMAC)
                / IPv6(src="2001:db8::40", dst=cli6, hlim=64)
                / ICMPv6PacketTooBig(mtu=1280) / Raw(ip6[:1232]))
    tap.check("NAT MTU: a 1500-byte IPv6 TCP packet: ICMPv6 packet too "
              "big, MTU 1280, quoting 1232 bytes",
              match_errs(*couts.take(lambda g: want6)))

    def wantf(g):
        sport = l4_ports(g)[0]
        return rewrite(fits, "02:00:00:00:04:01", BMAC, "198.51.100.40",
                       sport, "10.0.4.1", 8080)

    errs = match_errs(*outs.take(wantf))
    if len(r.backend) != 1 or len(r.client) != 2:
        errs.append((None, "%d frames out the backend port, %d out the "
                     "client port; want 1, 2" % (len(r.backend),
                                                  len(r.client))))
    errs += drop_errs(r, {"frame_too_big": 4})
    errs += svc_errs(r, "mtu4", fwd=1, fwd_bytes=1294, icmp=0)
    errs += svc_errs(r, "mtu6", fwd=0, icmp=0)
    tap.check("NAT MTU: exactly 1280 goes through translated; the three too "
              "big and a 1400-byte ICMP error about a flow are dropped "
              "(frame_too_big 4), no ICMP for IPv4 without DF", errs)


TUNNEL_PORT_SERVICES = [
    {"name": "vxport4", "vip": "192.0.2.60", "proto": "udp", "port": 4789,
     "mode": "nat", "snat": "198.51.100.60",
     "backends": [{"addr": "10.0.6.1", "port": 4789,
                   "mac": "02:00:00:00:06:01"}]},
    {"name": "genport4", "vip": "192.0.2.60", "proto": "udp", "port": 6081,
     "mode": "nat", "snat": "198.51.100.61",
     "backends": [{"addr": "10.0.6.2", "port": 16081,
                   "mac": "02:00:00:00:06:02"}]},
    {"name": "vxport6", "vip": "2001:db8::60", "proto": "udp", "port": 4789,
     "mode": "nat", "snat": "2001:db8:ff::60",
     "backends": [{"addr": "2001:db8:6::1", "port": 4789,
                   "mac": "02:00:00:00:06:03"}]},
]


def tunnel_port_cases():
    """UDP to a VIP on the VXLAN/GENEVE port whose payload is no tunnel
    (issue 23: the parser dropped them as eth_truncated, vxlan_truncated,
    geneve_bad_version before the balancer saw them)."""
    def c4(sport, dport, payload):
        return client_frame(IP(src="203.0.113.60", dst="192.0.2.60", id=60)
                            / UDP(sport=sport, dport=dport) / Raw(payload))
    vx16 = bytes([0x08, 0, 0, 0, 0, 0, 7, 0]) + b"\x02" * 8
    return [
        NatCase("UDP to VIP:4789 carrying 'hello' (no VXLAN header)",
                "vxport4", c4(40060, 4789, b"hello"), "02:00:00:00:06:01",
                "10.0.6.1", 4789, "198.51.100.60",
                reply=UDP() / Raw(b"hello back")),
        NatCase("UDP to VIP:4789, VXLAN header and 8 bytes (no inner "
                "Ethernet)", "vxport4", c4(40061, 4789, vx16),
                "02:00:00:00:06:01", "10.0.6.1", 4789, "198.51.100.60",
                reply=UDP() / Raw(b"short")),
        NatCase("UDP to VIP:6081 carrying text (GENEVE version 1 to the "
                "parser)", "genport4", c4(40062, 6081, b"GET / HTTP/1.0\r\n"),
                "02:00:00:00:06:02", "10.0.6.2", 16081, "198.51.100.61",
                reply=UDP() / Raw(b"HTTP/1.0 200 OK\r\n")),
        NatCase("IPv6 UDP to VIP:4789 carrying 'hello'", "vxport6",
                client_frame(IPv6(src="2001:db8:c::60", dst="2001:db8::60")
                             / UDP(sport=40063, dport=4789)
                             / Raw(b"hello")),
                "02:00:00:00:06:03", "2001:db8:6::1", 4789,
                "2001:db8:ff::60", reply=UDP() / Raw(b"six back")),
    ]


def group_tunnel_port(tap, runner):
    """UDP services on the VXLAN and GENEVE ports: payloads that are no
    tunnel are balanced (NAT) like any UDP, and the replies go back."""
    cfg = lb_config(TUNNEL_PORT_SERVICES)
    cases = tunnel_port_cases()
    r1 = runner.run("tunport-fwd", cfg, [c.fwd for c in cases])
    if r1.err:
        tap.check("tunnel ports: dpflow run", [(None, r1.err)])
        return
    outs = Outs(r1.backend)
    snat = [check_nat_fwd(tap, c, outs) for c in cases]
    errs = drop_errs(r1, {})
    if len(r1.backend) != len(cases) or r1.client:
        errs.append((None, "%d frames out the backend port, %d out the client"
                     " port; want %d, 0" % (len(r1.backend), len(r1.client),
                                            len(cases))))
    for name, fwd in (("vxport4", 2), ("genport4", 1), ("vxport6", 1)):
        errs += svc_errs(r1, name, fwd=fwd, new_flows=fwd, untracked=0)
    tap.check("tunnel ports: UDP to VIP:4789/6081 with no tunnel in it is "
              "balanced, no parser drop (counters)", errs)

    replies = [(c, nat_reply_frame(c, snat[i])) for i, c in enumerate(cases)
               if snat[i] is not None]
    r2 = runner.run("tunport-reply", cfg, [c.fwd for c in cases],
                    [f for _, f in replies])
    if r2.err:
        tap.check("tunnel ports replies: dpflow run", [(None, r2.err)])
        return
    couts = Outs(r2.client)
    errs = [(None, "no SNAT port from the forward run")] \
        if len(replies) != len(cases) else []
    for c, f in replies:
        want = rewrite(f, CGW, CMAC, c.vip, c.vport, c.client, c.cport)
        errs += match_errs(*couts.take(lambda g, w=want: w))
    errs += drop_errs(r2, {})
    tap.check("tunnel ports: the backends' replies go back to the clients "
              "from VIP:4789/6081", errs)


def group_burst_option(tap, dpflow):
    """`dpflow run --burst`: values outside 1..256 refused, exit 2."""
    errs = []
    for bad in ("0", "257", "x", "64x", ""):
        cmd = [dpflow, "run", "/nonexistent.yaml", "--burst", bad]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        want = "dpflow run: --burst '%s': expected 1..256" % bad
        if res.returncode != 2 or want not in res.stderr:
            errs.append((None, "--burst '%s': exit %d, %r" % (
                bad, res.returncode, res.stderr.strip())))
    tap.check("dpflow run --burst 0, 257, x, 64x and '': refused (exit 2, "
              "expected 1..256)", errs)


def main():
    if len(sys.argv) > 2:
        sys.stderr.write(__doc__)
        return 2
    dpflow = sys.argv[1] if len(sys.argv) == 2 else DEFAULT_DPFLOW
    tap = Tap()
    with tempfile.TemporaryDirectory(prefix="l4lb-fix-") as tmp:
        runner = Runner(dpflow, tmp)
        group_nat(tap, runner)
        group_dsr(tap, runner)
        group_dsr_family(tap, runner)
        group_mtu(tap, runner)
        group_mtu_nat(tap, runner)
        group_drops(tap, runner)
        group_spread(tap, runner)
        group_sticky(tap, runner)
        group_tunnel_port(tap, runner)
        group_burst_option(tap, dpflow)
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
