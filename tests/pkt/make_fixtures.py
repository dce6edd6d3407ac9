#!/usr/bin/python3
"""Packet-in / packet-out fixtures for the packet edit actions.

Writes tests/pkt/edit_fixtures.h: a table of
{name, actions, rss hash, headroom, expected verdict, input frame, expected
output frame}. Inputs and expected outputs are built here with scapy, which
computes every length and checksum itself: nothing is taken from dpflow.
tests/unit/test_pkt_edit.c runs each fixture through the edit functions
and compares the output bytes exactly.

Actions are text, one or more separated by " ; ", parsed by the test:
  op key=value ...   (op names as dpflow_edit_op_name; see test_pkt_edit.c)
A drop leaves the frame as it was, so a dropped fixture's expected output
is its input (unless a re-parse rejected a completed rewrite).

The UDP source port of an encapsulation is computed here from the flow
hash described in lib/flow/pkt_edit_impl.h (MurmurHash3 of the inner
5-tuple, or the given RSS hash), scaled as Linux's udp_flow_src_port().

usage: make_fixtures.py [-o FILE]        write the fixtures (default: stdout)
       make_fixtures.py --check FILE     regenerate into a temporary
                                         directory and diff with FILE (TAP)
Run with /usr/bin/python3 (Debian's python3-scapy).
"""
import argparse
import difflib
import os
import socket
import struct
import sys
import tempfile

try:
    import logging
    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
    from scapy.all import (ARP, ICMP, IP, TCP, UDP, GRE, VXLAN, Dot1AD, Dot1Q,
                           Ether, ICMPv6EchoReply, ICMPv6EchoRequest, IPv6,
                           IPv6ExtHdrHopByHop, Raw)
    from scapy.contrib.geneve import GENEVE, GeneveOptions
except ImportError as e:  # pragma: no cover
    SCAPY_ERROR = str(e)
else:
    SCAPY_ERROR = None

MAC_A = "02:00:00:00:00:0a"
MAC_B = "02:00:00:00:00:0b"
MAC_GW = "02:00:00:00:00:99"
MAC_NH = "02:00:00:00:00:42"
V4_SRC, V4_DST = "192.0.2.1", "198.51.100.7"
V6_SRC, V6_DST = "2001:db8::1", "2001:db8:ffff::7"
PAYLOAD = bytes(range(0x41, 0x41 + 13))  # odd length: odd checksum tails

SPORT_MIN, SPORT_MAX = 32768, 60999


# ---- packet builders --------------------------------------------------------

def l2(vlan, src=MAC_A, dst=MAC_B):
    """Ethernet with 0, 1 (802.1Q) or 2 (802.1ad + 802.1Q) tags."""
    e = Ether(src=src, dst=dst)
    if vlan == 1:
        e = e / Dot1Q(vlan=100, prio=3)
    elif vlan == 2:
        e = e / Dot1AD(vlan=200) / Dot1Q(vlan=100, prio=3)
    return e


def ip_layer(ver, src=None, dst=None, ttl=64, tos=0x03, ident=0x1234):
    if ver == 4:
        return IP(src=src or V4_SRC, dst=dst or V4_DST, ttl=ttl, tos=tos,
                  id=ident)
    return IPv6(src=src or V6_SRC, dst=dst or V6_DST, hlim=ttl, tc=tos,
                fl=0x12345)


def l4_layer(ver, l4, sport=40000, dport=443, icmp_id=0x4242, udp0=False,
             seq=0x01020304, window=501):
    if l4 == "tcp":
        return TCP(sport=sport, dport=dport, seq=seq, ack=0x0a0b0c0d,
                   flags="PA", window=window)
    if l4 == "udp":
        return UDP(sport=sport, dport=dport, chksum=0 if udp0 else None)
    if l4 == "icmp":
        if ver == 4:
            return ICMP(type=8, id=icmp_id, seq=7)
        return ICMPv6EchoRequest(id=icmp_id, seq=7)
    raise ValueError(l4)


def pkt(ver=4, l4="tcp", vlan=0, src=None, dst=None, ttl=64, tos=0x03,
        sport=40000, dport=443, icmp_id=0x4242, udp0=False, mac_src=MAC_A,
        mac_dst=MAC_B, payload=PAYLOAD, ident=0x1234, seq=0x01020304,
        window=501):
    """A scapy packet: Ethernet [tags] / IP / L4 / payload."""
    return (l2(vlan, mac_src, mac_dst) /
            ip_layer(ver, src, dst, ttl, tos, ident) /
            l4_layer(ver, l4, sport, dport, icmp_id, udp0, seq, window) /
            Raw(payload))


def ip_only(p):
    """The IP datagram of a scapy packet (Ethernet and tags removed)."""
    layer = p.getlayer(IP) or p.getlayer(IPv6)
    return layer.copy()


def pad_to(b, n):
    return b + bytes(n - len(b)) if len(b) < n else b


# ---- the flow hash of pkt_edit_impl.h ---------------------------------------

def murmur3(data, seed=0):
    h = seed
    for i in range(0, len(data), 4):
        k = struct.unpack_from("<I", data, i)[0]
        k = (k * 0xCC9E2D51) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * 0x1B873593) & 0xFFFFFFFF
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def flow_hash(p, rss=0):
    """Hash of scapy packet @p as dpflow computes it before encapsulation."""
    if rss:
        return rss
    ip = p.getlayer(IP) or p.getlayer(IPv6)
    if ip is None:
        eth = p.getlayer(Ether)
        t = eth
        while isinstance(t.payload, (Dot1Q, Dot1AD)):
            t = t.payload
        key = (bytes(p)[:12] + struct.pack(">H", t.type)).ljust(40, b"\0")
        return murmur3(key)
    if isinstance(ip, IP):
        src = socket.inet_pton(socket.AF_INET, ip.src).ljust(16, b"\0")
        dst = socket.inet_pton(socket.AF_INET, ip.dst).ljust(16, b"\0")
        proto = ip.proto
    else:
        src = socket.inet_pton(socket.AF_INET6, ip.src)
        dst = socket.inet_pton(socket.AF_INET6, ip.dst)
        proto = ip.nh
    sport = dport = 0
    if TCP in p:
        sport, dport = p[TCP].sport, p[TCP].dport
    elif UDP in p:
        sport, dport = p[UDP].sport, p[UDP].dport
    elif ICMP in p:
        sport, dport = p[ICMP].type, p[ICMP].code
    elif ICMPv6EchoRequest in p:
        sport, dport = 128, 0
    elif ICMPv6EchoReply in p:
        sport, dport = 129, 0
    key = src + dst + struct.pack(">HHB3x", sport, dport, proto)
    return murmur3(key)


def udp_sport(h, lo=SPORT_MIN, hi=SPORT_MAX):
    """Linux udp_flow_src_port(): min + ((hash ^ hash << 16) * span >> 32)."""
    x = (h ^ (h << 16)) & 0xFFFFFFFF
    return lo + ((x * (hi - lo)) >> 32)


def flow_label(h):
    """Linux ip6_make_flowlabel(): rol32(hash, 16) & 0xfffff."""
    return (((h << 16) | (h >> 16)) & 0xFFFFFFFF) & 0xFFFFF


# ---- encapsulation, described once, spelled for dpflow and built by scapy --

class Encap:
    def __init__(self, type, ip=4, inner_eth=None, ttl=64, tos=0, vni=0,
                 flags=(), opts=b"", eth_src=MAC_GW, eth_dst=MAC_NH,
                 src=None, dst=None, dport=None, sport=None, fl=0):
        self.type, self.ip = type, ip
        if inner_eth is None:
            inner_eth = 0 if type == "ipip" else 1
        self.inner_eth, self.ttl, self.tos, self.vni = inner_eth, ttl, tos, vni
        self.flags, self.opts = tuple(flags), opts
        self.eth_src, self.eth_dst = eth_src, eth_dst
        self.src = src or ("203.0.113.1" if ip == 4 else "2001:db8:1::1")
        self.dst = dst or ("203.0.113.2" if ip == 4 else "2001:db8:2::2")
        self.dport, self.sport, self.fl = dport, sport, fl

    def text(self):
        t = ["encap", "type=" + self.type, "ip=%d" % self.ip,
             "inner_eth=%d" % self.inner_eth, "ttl=%d" % self.ttl,
             "tos=%d" % self.tos, "eth_src=" + self.eth_src,
             "eth_dst=" + self.eth_dst, "src=" + self.src, "dst=" + self.dst]
        if self.vni:
            t.append("vni=%d" % self.vni)
        if self.opts:
            t.append("opts=" + self.opts.hex())
        if self.dport:
            t.append("dport=%d" % self.dport)
        if self.sport:
            t.append("sport_min=%d" % self.sport[0])
            t.append("sport_max=%d" % self.sport[1])
        if self.fl:
            t.append("flow_label=%d" % self.fl)
        t.extend(self.flags)
        return " ".join(t)

    def build(self, inner, rss=0, raw=None):
        """Expected output of encapsulating scapy packet @inner (sent as
        the bytes @raw when given: scapy leaves Ethernet padding out of
        the outer lengths, the wire does not)."""
        h = flow_hash(inner, rss)
        payload = inner if self.inner_eth else ip_only(inner)
        if raw is not None:
            payload = Raw(raw)
        inner_ver = 4 if isinstance(payload, IP) else 6
        out = Ether(src=self.eth_src, dst=self.eth_dst)
        if self.ip == 4:
            o = IP(src=self.src, dst=self.dst, ttl=self.ttl, tos=self.tos,
                   id=0, flags="DF" if "df" in self.flags else 0)
        else:
            o = IPv6(src=self.src, dst=self.dst, hlim=self.ttl, tc=self.tos,
                     fl=flow_label(h) if "fl_hash" in self.flags else self.fl)
        if self.type in ("vxlan", "geneve"):
            lo, hi = self.sport or (SPORT_MIN, SPORT_MAX)
            u = UDP(sport=udp_sport(h, lo, hi),
                    dport=self.dport or (4789 if self.type == "vxlan"
                                         else 6081))
            if self.ip == 4 and "udp_csum" not in self.flags:
                u.chksum = 0
            if self.type == "vxlan":
                t = VXLAN(flags=0x08, vni=self.vni)
            else:
                proto = 0x6558 if self.inner_eth else (
                    0x0800 if inner_ver == 4 else 0x86DD)
                t = GENEVE(vni=self.vni, proto=proto,
                           critical=1 if "crit" in self.flags else 0,
                           optionlen=len(self.opts) // 4) / Raw(self.opts)
            return out / o / u / t / payload
        if self.type == "gre":
            proto = 0x6558 if self.inner_eth else (
                0x0800 if inner_ver == 4 else 0x86DD)
            if "key" in self.flags:
                g = GRE(key_present=1, key=self.vni, proto=proto)
            else:
                g = GRE(proto=proto)
            return out / o / g / payload
        return out / o / payload  # IP-in-IP: scapy sets protocol 4 / 41


# ---- the fixture table ------------------------------------------------------

class Fixtures:
    def __init__(self):
        self.cases = []
        self.names = set()

    def add(self, name, actions, inp, out=None, verdict="none", headroom=128,
            rss=0, csum=True):
        assert name not in self.names, name
        self.names.add(name)
        inp = bytes(inp)
        if out is None:
            assert verdict != "none", name
            out = inp
        self.cases.append(dict(name=name, actions=actions, inp=inp,
                               out=bytes(out), verdict=verdict,
                               headroom=headroom, rss=rss, csum=csum))


L4S = {4: ("tcp", "udp", "udp0", "icmp"), 6: ("tcp", "udp", "icmp")}
VLANS = {0: "", 1: " vlan", 2: " qinq"}


def base_kw(l4):
    return dict(l4="udp", udp0=True) if l4 == "udp0" else dict(l4=l4)


def in_place_cases(fx):
    """Per IP version, tag count and L4: every in-place rewrite."""
    for ver in (4, 6):
        new_src = "10.9.8.7" if ver == 4 else "2001:db8:aaaa::99"
        new_dst = "172.16.5.4" if ver == 4 else "fd00::1:2:3"
        for vlan in (0, 1, 2):
            for l4 in L4S[ver]:
                kw = dict(base_kw(l4), ver=ver, vlan=vlan)
                tag = "ipv%d %s%s" % (ver, l4, VLANS[vlan])
                inp = pkt(**kw)
                fx.add(tag + ": dec_ttl", "dec_ttl", inp,
                       pkt(**dict(kw, ttl=63)))
                fx.add(tag + ": nat src address",
                       "set_ipv%d_src addr=%s" % (ver, new_src), inp,
                       pkt(**dict(kw, src=new_src)))
                fx.add(tag + ": nat dst address",
                       "set_ipv%d_dst addr=%s" % (ver, new_dst), inp,
                       pkt(**dict(kw, dst=new_dst)))
                if kw["l4"] == "icmp":
                    fx.add(tag + ": nat src port (echo id)",
                           "set_l4_src port=4097", inp,
                           pkt(**dict(kw, icmp_id=4097)))
                    fx.add(tag + ": nat dst port (echo id)",
                           "set_l4_dst port=65535", inp,
                           pkt(**dict(kw, icmp_id=65535)))
                else:
                    fx.add(tag + ": nat src port", "set_l4_src port=1024",
                           inp, pkt(**dict(kw, sport=1024)))
                    fx.add(tag + ": nat dst port", "set_l4_dst port=8443",
                           inp, pkt(**dict(kw, dport=8443)))
                fx.add(tag + ": set dscp 46 keeps ecn", "set_dscp dscp=46",
                       inp, pkt(**dict(kw, tos=46 << 2 | 3)))
                fx.add(tag + ": set mac src and dst",
                       "set_mac src=%s dst=%s" % (MAC_GW, MAC_NH), inp,
                       pkt(**dict(kw, mac_src=MAC_GW, mac_dst=MAC_NH)))


def checksum_edge_cases(fx):
    """Results of 0x0000 / 0xffff, inputs carrying them, fragments..."""
    # A 16-bit word w of a covered sum S makes the checksum ~fold(S): with
    # w = 0 the checksum is c0 = ~fold(S - w), so w = c0 makes the folded
    # sum 0xffff and the checksum 0 (which UDP sends as 0xffff).
    def solve(build, csum_of):
        w = csum_of(build(0))
        return w, build(w)

    def udp_csum(off):
        return lambda p: UDP(bytes(p)[off:]).chksum

    base = dict(ver=4, l4="udp")
    port, p0 = solve(lambda w: pkt(**dict(base, sport=w)), udp_csum(34))
    assert udp_csum(34)(p0) == 0xFFFF
    fx.add("ipv4 udp: nat port to a checksum of zero gives 0xffff",
           "set_l4_src port=%d" % port, pkt(**base), p0)
    fx.add("ipv4 udp: nat from a 0xffff checksum",
           "set_l4_src port=5353", p0, pkt(**dict(base, sport=5353)))
    base6 = dict(ver=6, l4="udp")
    port6, p6 = solve(lambda w: pkt(**dict(base6, sport=w)), udp_csum(54))
    assert udp_csum(54)(p6) == 0xFFFF
    fx.add("ipv6 udp: nat port to a checksum of zero gives 0xffff",
           "set_l4_src port=%d" % port6, pkt(**base6), p6)
    # TCP: a port that makes the checksum 0x0000 (not 0xffff)
    tb = dict(ver=4, l4="tcp")

    def tcp_csum(p):
        return TCP(bytes(p)[34:]).chksum
    tport, pt = solve(lambda w: pkt(**dict(tb, dport=w)), tcp_csum)
    assert tcp_csum(pt) == 0
    fx.add("ipv4 tcp: nat port to a checksum of 0x0000",
           "set_l4_dst port=%d" % tport, pkt(**tb), pt)
    fx.add("ipv4 tcp: nat from a checksum of 0x0000",
           "set_l4_dst port=443", pt, pkt(**tb))
    # IPv4 header: TTL decrement to a header checksum of 0x0000, and from it

    def ip_csum(p):
        return IP(bytes(p)[14:]).chksum
    ident, pi = solve(lambda w: pkt(**dict(tb, ttl=63, ident=w)), ip_csum)
    assert ip_csum(pi) == 0
    fx.add("ipv4: dec_ttl to a header checksum of 0x0000", "dec_ttl",
           pkt(**dict(tb, ident=ident)), pi)
    ident2, pi2 = solve(lambda w: pkt(**dict(tb, ident=w)), ip_csum)
    assert ip_csum(pi2) == 0
    fx.add("ipv4: dec_ttl from a header checksum of 0x0000", "dec_ttl",
           pi2, pkt(**dict(tb, ttl=63, ident=ident2)))
    fx.add("ipv4: dec_ttl 255", "dec_ttl", pkt(**dict(tb, ttl=255)),
           pkt(**dict(tb, ttl=254)))
    fx.add("ipv4: dec_ttl 2 -> 1", "dec_ttl", pkt(**dict(tb, ttl=2)),
           pkt(**dict(tb, ttl=1)))
    fx.add("ipv6: dec_ttl 2 -> 1", "dec_ttl", pkt(ver=6, ttl=2),
           pkt(ver=6, ttl=1))
    # UDP checksum 0 on IPv4 stays 0 for every rewrite under it
    u0 = dict(ver=4, l4="udp", udp0=True)
    fx.add("ipv4 udp checksum 0: field write in payload stays 0",
           "field_set layer=l4 off=9 width=3 val=ffeedd", pkt(**u0),
           pkt(**dict(u0, payload=PAYLOAD[:1] + b"\xff\xee\xdd" +
                      PAYLOAD[4:])))
    # fragments: the first carries the L4 checksum, later ones have none
    def frag(ver_first, src=V4_SRC):
        if ver_first:
            return (Ether(src=MAC_A, dst=MAC_B) /
                    IP(src=src, dst=V4_DST, id=77, flags="MF") /
                    TCP(sport=1000, dport=2000) / Raw(b"x" * 24))
        return (Ether(src=MAC_A, dst=MAC_B) /
                IP(src=src, dst=V4_DST, id=77, frag=3, proto=6) /
                Raw(b"y" * 24))
    fx.add("ipv4 first fragment: nat src fixes the tcp checksum",
           "set_ipv4_src addr=10.0.0.1", frag(True),
           frag(True, "10.0.0.1"))
    fx.add("ipv4 later fragment: nat src fixes the header only",
           "set_ipv4_src addr=10.0.0.1", frag(False),
           frag(False, "10.0.0.1"))
    fx.add("ipv4 later fragment: no port to rewrite",
           "set_l4_dst port=1", frag(False), verdict="edit_no_l4_port")
    # IPv6 extension header before UDP: the pseudo-header still counts
    def hbh(src=V6_SRC, sport=5000):
        return (Ether(src=MAC_A, dst=MAC_B) /
                IPv6(src=src, dst=V6_DST) / IPv6ExtHdrHopByHop() /
                UDP(sport=sport, dport=6000) / Raw(PAYLOAD))
    fx.add("ipv6 hop-by-hop udp: nat src address",
           "set_ipv6_src addr=2001:db8::beef", hbh(),
           hbh(src="2001:db8::beef"))
    fx.add("ipv6 hop-by-hop udp: nat src port", "set_l4_src port=7",
           hbh(), hbh(sport=7))
    # ICMP echo reply (v4 and v6) carries the id too; errors have no port
    def echo_reply(ver, ident):
        return (Ether(src=MAC_A, dst=MAC_B) / ip_layer(ver) /
                (ICMP(type=0, id=ident, seq=1) if ver == 4 else
                 ICMPv6EchoReply(id=ident, seq=1)) / Raw(PAYLOAD))
    for ver in (4, 6):
        fx.add("ipv%d icmp echo reply: nat id" % ver, "set_l4_dst port=99",
               echo_reply(ver, 1), echo_reply(ver, 99))
    # UDP destination port to and from a tunnel port: the parse changes
    vx_payload = bytes(VXLAN(vni=3)) + bytes(pkt())
    fx.add("ipv4 udp: nat dst port to 4789 makes it vxlan",
           "set_l4_dst port=4789", pkt(l4="udp", payload=vx_payload),
           pkt(l4="udp", dport=4789, payload=vx_payload))
    fx.add("ipv6 udp: nat dst port from 4789 makes it plain udp",
           "set_l4_dst port=4790",
           pkt(ver=6, l4="udp", dport=4789, payload=vx_payload),
           pkt(ver=6, l4="udp", dport=4790, payload=vx_payload))
    unreach = (Ether(src=MAC_A, dst=MAC_B) / IP(src=V4_SRC, dst=V4_DST) /
               ICMP(type=3, code=1) / Raw(b"\0" * 28))
    fx.add("ipv4 icmp unreachable: no port to rewrite", "set_l4_src port=9",
           unreach, verdict="edit_no_l4_port")


def drop_cases(fx):
    arp = Ether(src=MAC_A, dst=MAC_B) / ARP(psrc=V4_SRC, pdst=V4_DST)
    for ver in (4, 6):
        fx.add("ipv%d: dec_ttl of ttl 1 drops" % ver, "dec_ttl",
               pkt(ver=ver, ttl=1), verdict="ttl_expired")
        fx.add("ipv%d vlan: dec_ttl of ttl 1 drops" % ver, "dec_ttl",
               pkt(ver=ver, ttl=1, vlan=1), verdict="ttl_expired")
    fx.add("ipv4: dec_ttl of ttl 0 drops", "dec_ttl", pkt(ttl=0),
           verdict="ttl_expired")
    fx.add("arp: dec_ttl is not ip", "dec_ttl", arp, verdict="edit_not_ip")
    fx.add("arp: set_dscp is not ip", "set_dscp dscp=1", arp,
           verdict="edit_not_ip")
    fx.add("ipv6: set_ipv4_src is not ipv4", "set_ipv4_src addr=1.2.3.4",
           pkt(ver=6), verdict="edit_not_ipv4")
    fx.add("ipv4: set_ipv6_dst is not ipv6", "set_ipv6_dst addr=::1",
           pkt(ver=4), verdict="edit_not_ipv6")
    fx.add("arp: nat port has no port", "set_l4_src port=1", arp,
           verdict="edit_no_l4_port")
    fx.add("ipv4: vlan_pop of an untagged frame", "vlan_pop", pkt(),
           verdict="edit_no_vlan")
    fx.add("ipv4 qinq: vlan_push of a third tag", "vlan_push tpid=0x8100 "
           "tci=5", pkt(vlan=2), verdict="vlan_too_many_tags")
    fx.add("ipv4: vlan_push with 3 bytes of headroom",
           "vlan_push tpid=0x8100 tci=5", pkt(), verdict="edit_no_headroom",
           headroom=3)
    fx.add("ipv4: decap of an untunnelled packet", "decap", pkt(),
           verdict="edit_no_tunnel")
    fx.add("ipv4: field beyond the frame",
           "field_set layer=l4 off=200 width=4 val=01020304", pkt(),
           verdict="edit_field_out_of_range")
    fx.add("ipv4: inner field of an untunnelled packet",
           "field_set layer=inner_l3 off=0 width=1 val=00", pkt(),
           verdict="edit_field_out_of_range")
    fx.add("ipv4: field of width 17 is a bad action",
           "field_set layer=l3 off=0 width=17 val=00", pkt(),
           verdict="edit_bad_action")
    fx.add("ipv4: field_add of width 5 is a bad action",
           "field_add layer=l3 off=0 width=5 delta=1", pkt(),
           verdict="edit_bad_action")
    fx.add("ipv4: register 4 does not exist", "reg_set r=4 val=1", pkt(),
           verdict="edit_bad_action")
    fx.add("ipv4: field_copy of different widths",
           "field_copy dst=l3:12:4 src=l3:16:2", pkt(),
           verdict="edit_bad_action")
    fx.add("arp: ip-in-ip encap is not ip",
           Encap("ipip").text(), arp, verdict="edit_not_ip")


def ethertype_and_mac_cases(fx):
    p = pkt()
    ipb = bytes(p)[14:]
    fx.add("ipv4: set_ethertype 0x88b5 (l3 becomes other)",
           "set_ethertype et=0x88b5", p,
           Ether(src=MAC_A, dst=MAC_B, type=0x88B5) / Raw(ipb))
    pv = pkt(vlan=1)
    fx.add("ipv4 vlan: set_ethertype writes the one after the tag",
           "set_ethertype et=0x88b5", pv,
           Ether(src=MAC_A, dst=MAC_B) / Dot1Q(vlan=100, prio=3, type=0x88B5)
           / Raw(ipb))
    fx.add("ipv4: set_ethertype to ipv6 keeps the rewrite, parser drops",
           "set_ethertype et=0x86dd", p,
           Ether(src=MAC_A, dst=MAC_B, type=0x86DD) / Raw(ipb),
           verdict="ipv6_bad_version", csum=False)
    fx.add("ipv6: set mac src only", "set_mac src=%s" % MAC_GW, pkt(ver=6),
           pkt(ver=6, mac_src=MAC_GW))
    fx.add("ipv6: set mac dst only", "set_mac dst=%s" % MAC_NH, pkt(ver=6),
           pkt(ver=6, mac_dst=MAC_NH))


def vlan_cases(fx):
    def tagged(inner_tags, ver=4, l4="tcp"):
        e = Ether(src=MAC_A, dst=MAC_B)
        for tpid, vid, prio in inner_tags:
            e = e / (Dot1AD(vlan=vid, prio=prio) if tpid == 0x88A8 else
                     Dot1Q(vlan=vid, prio=prio))
        return e / ip_layer(ver) / l4_layer(ver, l4) / Raw(PAYLOAD)
    for ver in (4, 6):
        for l4 in ("tcp", "udp", "icmp"):
            t = "ipv%d %s: " % (ver, l4)
            fx.add(t + "vlan_push 802.1q", "vlan_push tpid=0x8100 tci=0x6064",
                   tagged([], ver, l4), tagged([(0x8100, 100, 3)], ver, l4))
            fx.add(t + "vlan_push 802.1ad over 802.1q",
                   "vlan_push tpid=0x88a8 tci=0xa0c8",
                   tagged([(0x8100, 100, 3)], ver, l4),
                   tagged([(0x88A8, 200, 5), (0x8100, 100, 3)], ver, l4))
            fx.add(t + "vlan_pop one tag", "vlan_pop",
                   tagged([(0x8100, 100, 3)], ver, l4), tagged([], ver, l4))
            fx.add(t + "vlan_pop outer of two", "vlan_pop",
                   tagged([(0x88A8, 200, 5), (0x8100, 100, 3)], ver, l4),
                   tagged([(0x8100, 100, 3)], ver, l4))
    fx.add("ipv4: vlan_push with exactly 4 bytes of headroom",
           "vlan_push tpid=0x8100 tci=0x6064", tagged([]),
           tagged([(0x8100, 100, 3)]), headroom=4)
    fx.add("ipv4: vlan_push then vlan_pop is the identity",
           "vlan_push tpid=0x88a8 tci=7 ; vlan_pop", tagged([]), tagged([]))
    fx.add("ipv4: two pushes make a double tag",
           "vlan_push tpid=0x8100 tci=0x6064 ; vlan_push tpid=0x88a8 "
           "tci=0xa0c8", tagged([]),
           tagged([(0x88A8, 200, 5), (0x8100, 100, 3)]))
    vx = (Ether(src=MAC_GW, dst=MAC_NH) / IP(src="203.0.113.1",
                                              dst="203.0.113.2") /
          UDP(sport=50000, dport=4789, chksum=0) / VXLAN(vni=42) / pkt())
    vxt = (Ether(src=MAC_GW, dst=MAC_NH) / Dot1Q(vlan=9) /
           IP(src="203.0.113.1", dst="203.0.113.2") /
           UDP(sport=50000, dport=4789, chksum=0) / VXLAN(vni=42) / pkt())
    fx.add("vxlan: vlan_push on the outer frame shifts the inner offsets",
           "vlan_push tpid=0x8100 tci=9", vx, vxt)
    fx.add("vxlan: vlan_pop on the outer frame", "vlan_pop", vxt, vx)


GENEVE_OPT = None  # set in main (needs scapy)


def encaps():
    """Encapsulations tried on several inner packets."""
    return [
        ("vxlan4", Encap("vxlan", 4, vni=0x123456, ttl=32, tos=0x28)),
        ("vxlan4 df udp_csum", Encap("vxlan", 4, vni=7,
                                     flags=("df", "udp_csum"))),
        ("vxlan6", Encap("vxlan", 6, vni=99, tos=0xb8)),
        ("vxlan6 flow label hash", Encap("vxlan", 6, vni=99,
                                         flags=("fl_hash",))),
        ("vxlan4 port range and dport", Encap("vxlan", 4, vni=5,
                                              sport=(1000, 1099),
                                              dport=4790)),
        ("geneve4 eth", Encap("geneve", 4, vni=77)),
        ("geneve4 eth options crit", Encap("geneve", 4, vni=78,
                                           opts=GENEVE_OPT,
                                           flags=("crit",))),
        ("geneve6 ip", Encap("geneve", 6, vni=79, inner_eth=0,
                             fl=0xabcde)),
        ("geneve4 ip options", Encap("geneve", 4, vni=80, inner_eth=0,
                                     opts=GENEVE_OPT)),
        ("gre4 ip", Encap("gre", 4, inner_eth=0)),
        ("gre4 eth key", Encap("gre", 4, inner_eth=1, vni=0xdeadbeef,
                               flags=("key",))),
        ("gre6 ip key", Encap("gre", 6, inner_eth=0, vni=1,
                              flags=("key",))),
        ("gre6 eth", Encap("gre", 6, inner_eth=1)),
        ("ipip4", Encap("ipip", 4, ttl=17)),
        ("ipip6", Encap("ipip", 6, ttl=18)),
    ]


def encap_cases(fx):
    inners = [
        ("ipv4 tcp", pkt(ver=4, l4="tcp")),
        ("ipv6 udp", pkt(ver=6, l4="udp")),
        ("ipv4 icmp vlan", pkt(ver=4, l4="icmp", vlan=1)),
        ("ipv6 icmp qinq", pkt(ver=6, l4="icmp", vlan=2)),
    ]
    for ename, e in encaps():
        for iname, inner in inners:
            fx.add("encap %s of %s" % (ename, iname), e.text(), inner,
                   e.build(inner))
    e = Encap("vxlan", 4, vni=1)
    inner = pkt()
    fx.add("encap vxlan4 with the rss hash as flow hash", e.text(), inner,
           e.build(inner, rss=0x9e3779b9), rss=0x9e3779b9)
    arp = Ether(src=MAC_A, dst=MAC_B) / ARP(psrc=V4_SRC, pdst=V4_DST)
    fx.add("encap vxlan4 of arp (hash of the macs)", e.text(), arp,
           e.build(arp))
    # Ethernet padding: kept by a layer-2 tunnel, dropped by a layer-3 one
    small = pkt(l4="udp", payload=b"ab")
    padded = pad_to(bytes(small), 60)
    fx.add("encap vxlan4 keeps the inner ethernet padding", e.text(),
           padded, e.build(Ether(padded), raw=padded))
    g = Encap("gre", 4, inner_eth=0)
    fx.add("encap gre4 ip drops the ethernet padding", g.text(), padded,
           g.build(small))
    # headroom: exactly enough, and one byte short
    # outer IPv6 UDP checksum that computes to zero: sent as 0xffff. The
    # VNI's high 16 bits are one word of the sum: solve for them.
    c0 = UDP(bytes(Encap("vxlan", 6).build(inner))[54:]).chksum
    e0 = Encap("vxlan", 6, vni=c0 << 8)
    assert UDP(bytes(e0.build(inner))[54:]).chksum == 0xFFFF
    fx.add("encap vxlan6 whose udp checksum computes to zero", e0.text(),
           inner, e0.build(inner))
    need = 14 + 20 + 8 + 8
    fx.add("encap vxlan4 with exactly the headroom it needs", e.text(),
           inner, e.build(inner), headroom=need)
    fx.add("encap vxlan4 one byte short of headroom", e.text(), inner,
           verdict="edit_no_headroom", headroom=need - 1)
    need = 14 + 20 - 14  # IP-in-IP over IPv4 reuses the 14 Ethernet bytes
    ip4 = Encap("ipip", 4)
    fx.add("encap ipip4 with exactly the headroom it needs", ip4.text(),
           inner, ip4.build(inner), headroom=need)
    fx.add("encap ipip4 one byte short of headroom", ip4.text(), inner,
           verdict="edit_no_headroom", headroom=need - 1)
    g6 = Encap("geneve", 6, vni=3, opts=GENEVE_OPT * 8)
    fx.add("encap geneve6 with 64 option bytes needs 134 bytes",
           g6.text(), inner, verdict="edit_no_headroom", headroom=133)
    fx.add("encap geneve6 with 64 option bytes", g6.text(), inner,
           g6.build(inner), headroom=134)


def decap_cases(fx):
    inner_eth = pkt(ver=4, l4="tcp", vlan=1)
    inner_ip4 = ip_only(pkt(ver=4, l4="udp"))
    inner_ip6 = ip_only(pkt(ver=6, l4="tcp"))
    o4 = IP(src="203.0.113.1", dst="203.0.113.2", ttl=30)
    o6 = IPv6(src="2001:db8:1::1", dst="2001:db8:2::2", hlim=30)

    def outer_eth(vlan=0):
        return l2(vlan, MAC_GW, MAC_NH)

    def mac_ip(inner):  # what an IP payload becomes: outer MACs + inner IP
        return Ether(src=MAC_GW, dst=MAC_NH) / inner

    cases = [
        ("vxlan over ipv4", outer_eth() / o4 /
         UDP(sport=49999, dport=4789, chksum=0) / VXLAN(vni=10) / inner_eth,
         inner_eth, "vxlan"),
        ("vxlan over ipv6", outer_eth() / o6 / UDP(sport=49999, dport=4789) /
         VXLAN(vni=10) / inner_eth, inner_eth, "vxlan"),
        ("vxlan over tagged ipv4 (outer tag goes)", outer_eth(1) / o4 /
         UDP(sport=49999, dport=4789, chksum=0) / VXLAN(vni=10) / inner_eth,
         inner_eth, "vxlan"),
        ("geneve eth with options", outer_eth() / o4 /
         UDP(sport=1, dport=6081) /
         GENEVE(vni=5, proto=0x6558, optionlen=len(GENEVE_OPT) // 4) /
         Raw(GENEVE_OPT) / inner_eth, inner_eth, "geneve"),
        ("geneve ipv4 payload", outer_eth() / o6 / UDP(sport=1, dport=6081) /
         GENEVE(vni=5, proto=0x0800) / inner_ip4, mac_ip(inner_ip4),
         "geneve"),
        ("geneve ipv6 payload", outer_eth() / o4 /
         UDP(sport=1, dport=6081, chksum=0) / GENEVE(vni=5, proto=0x86DD) /
         inner_ip6, mac_ip(inner_ip6), "geneve"),
        ("gre eth with key", outer_eth() / o4 /
         GRE(key_present=1, key=0x01020304, proto=0x6558) / inner_eth,
         inner_eth, "gre"),
        ("gre ipv4 with checksum and sequence", outer_eth() / o4 /
         GRE(chksum_present=1, seqnum_present=1, sequence_number=9,
             proto=0x0800) / inner_ip4, mac_ip(inner_ip4), "gre"),
        ("gre over ipv6, ipv6 payload", outer_eth() / o6 /
         GRE(proto=0x86DD) / inner_ip6, mac_ip(inner_ip6), "gre"),
        ("ipip 4in4", outer_eth() / o4 / inner_ip4, mac_ip(inner_ip4),
         "ipip"),
        ("ipip 6in4", outer_eth() / o4 / inner_ip6, mac_ip(inner_ip6),
         "ipip"),
        ("ipip 4in6", outer_eth() / o6 / inner_ip4, mac_ip(inner_ip4),
         "ipip"),
        ("ipip 6in6", outer_eth() / o6 / inner_ip6, mac_ip(inner_ip6),
         "ipip"),
    ]
    for name, inp, out, typ in cases:
        fx.add("decap " + name, "decap", inp, out)
        fx.add("decap type=%s %s" % (typ, name), "decap type=" + typ, inp,
               out)
    fx.add("decap type=gre of a vxlan packet", "decap type=gre",
           cases[0][1], verdict="edit_no_tunnel")
    small = ip_only(pkt(ver=4, l4="udp", payload=b"z"))
    padded = pad_to(bytes(outer_eth() / o4 / small), 64)
    fx.add("decap ipip drops the outer ethernet padding", "decap", padded,
           mac_ip(small))


def round_trip_cases(fx):
    for ename, e in encaps():
        if e.dport:  # not a port the parser opens: no decap
            continue
        for ver in (4, 6):
            for l4 in ("tcp", "udp", "icmp"):
                if e.inner_eth:
                    inner = pkt(ver=ver, l4=l4, vlan=1)
                else:  # the outer MACs come back: use the inner's own
                    e.eth_src, e.eth_dst = MAC_A, MAC_B
                    inner = pkt(ver=ver, l4=l4)
                fx.add("round trip %s of ipv%d %s" % (ename, ver, l4),
                       e.text() + " ; decap", inner, inner)


def field_cases(fx):
    tcp = dict(ver=4, l4="tcp")
    fx.add("field_set ipv4 tos byte", "field_set layer=l3 off=1 width=1 "
           "val=b8", pkt(**tcp), pkt(**dict(tcp, tos=0xb8)))
    fx.add("field_set ipv4 dscp with a mask keeps ecn",
           "field_set layer=l3 off=1 width=1 val=b8 mask=fc", pkt(**tcp),
           pkt(**dict(tcp, tos=0xbb)))
    fx.add("field_set ipv4 dst address (ip and tcp checksums)",
           "field_set layer=l3 off=16 width=4 val=0a141e28", pkt(**tcp),
           pkt(**dict(tcp, dst="10.20.30.40")))
    fx.add("field_set ipv4 odd offset across src and dst",
           "field_set layer=l3 off=15 width=3 val=abcdef", pkt(**tcp),
           pkt(**dict(tcp, src="192.0.2.171", dst="205.239.100.7")))
    fx.add("field_set tcp window", "field_set layer=l4 off=14 width=2 "
           "val=ffff", pkt(**tcp), pkt(**dict(tcp, window=65535)))
    fx.add("field_add tcp seq wraps", "field_add layer=l4 off=4 width=4 "
           "delta=0x200", pkt(**dict(tcp, seq=0xffffff00)),
           pkt(**dict(tcp, seq=0x100)))
    fx.add("field_add ttl 255 is ttl - 1", "field_add layer=l3 off=8 "
           "width=1 delta=255", pkt(**tcp), pkt(**dict(tcp, ttl=63)))
    fx.add("field_set tcp payload at an odd offset",
           "field_set layer=l4 off=21 width=5 val=0102030405", pkt(**tcp),
           pkt(**dict(tcp, payload=PAYLOAD[:1] + bytes([1, 2, 3, 4, 5]) +
                      PAYLOAD[6:])))
    u6 = dict(ver=6, l4="udp")
    fx.add("field_set ipv6 dst address (udp checksum)",
           "field_set layer=l3 off=24 width=16 "
           "val=fd000000000000000000000000000099", pkt(**u6),
           pkt(**dict(u6, dst="fd00::99")))
    fx.add("field_set ipv6 traffic class nibbles",
           "field_set layer=l3 off=0 width=2 val=0ab0 mask=0ff0",
           pkt(**u6), pkt(**dict(u6, tos=0xab)))
    fx.add("field_set mac dst", "field_set layer=l2 off=0 width=6 "
           "val=020000000042", pkt(**u6), pkt(**dict(u6, mac_dst=MAC_NH)))
    fx.add("field_copy ipv4 dst to src",
           "field_copy dst=l3:12:4 src=l3:16:4", pkt(**tcp),
           pkt(**dict(tcp, src=V4_DST)))
    fx.add("field_copy tcp sport to dport",
           "field_copy dst=l4:2:2 src=l4:0:2", pkt(**tcp),
           pkt(**dict(tcp, dport=40000)))
    fx.add("register to field: ipv4 src from reg 2",
           "reg_set r=2 val=0x0a0b0c0d ; field_from_reg r=2 layer=l3 off=12 "
           "width=4", pkt(**tcp), pkt(**dict(tcp, src="10.11.12.13")))
    fx.add("field to register and back: udp dport = sport",
           "reg_from_field r=0 layer=l4 off=0 width=2 ; field_from_reg r=0 "
           "layer=l4 off=2 width=2", pkt(**u6),
           pkt(**dict(u6, dport=40000)))
    fx.add("register arithmetic into a field",
           "reg_set r=1 val=60 ; reg_add r=1 val=5 ; reg_copy dst=3 src=1 ; "
           "field_from_reg r=3 layer=l3 off=8 width=1",
           pkt(**tcp), pkt(**dict(tcp, ttl=65)))
    fx.add("field_set of the tcp checksum itself is left as written",
           "field_set layer=l4 off=16 width=2 val=1234", pkt(**tcp),
           bytes(pkt(**tcp))[:14 + 20 + 16] + b"\x12\x34" +
           bytes(pkt(**tcp))[14 + 20 + 18:], csum=False)
    fx.add("field_set udp dport to vxlan re-parses as a tunnel",
           "field_set layer=l4 off=2 width=2 val=12b5",
           pkt(ver=4, l4="udp", payload=bytes(8) + bytes(pkt())),
           pkt(ver=4, l4="udp", dport=4789, payload=bytes(8) + bytes(pkt())))

    # inner fields: every checksum from the inner L4 to the outer UDP / GRE
    def vx6(inner):
        return (Ether(src=MAC_GW, dst=MAC_NH) /
                IPv6(src="2001:db8:1::1", dst="2001:db8:2::2") /
                UDP(sport=50000, dport=4789) / VXLAN(vni=42) / inner)
    fx.add("field_set inner ipv4 dst under vxlan6 (3 checksums)",
           "field_set layer=inner_l3 off=16 width=4 val=0a000063",
           vx6(pkt(**tcp)), vx6(pkt(**dict(tcp, dst="10.0.0.99"))))
    fx.add("field_set inner tcp sport under vxlan6",
           "field_set layer=inner_l4 off=0 width=2 val=0050",
           vx6(pkt(**tcp)), vx6(pkt(**dict(tcp, sport=80))))
    fx.add("field_add inner ttl under vxlan6 (odd outer parity)",
           "field_add layer=inner_l3 off=8 width=1 delta=255",
           vx6(pkt(**dict(tcp, vlan=1))),
           vx6(pkt(**dict(tcp, vlan=1, ttl=63))))
    fx.add("field_set inner mac under vxlan6",
           "field_set layer=inner_l2 off=6 width=6 val=020000000099",
           vx6(pkt(**tcp)), vx6(pkt(**dict(tcp, mac_src=MAC_GW))))
    fx.add("field_set vxlan vni under ipv6 (udp checksum)",
           "field_set layer=tun off=4 width=3 val=0000ff",
           vx6(pkt(**tcp)),
           Ether(src=MAC_GW, dst=MAC_NH) /
           IPv6(src="2001:db8:1::1", dst="2001:db8:2::2") /
           UDP(sport=50000, dport=4789) / VXLAN(vni=255) / pkt(**tcp))

    def gre_c(inner):
        return (Ether(src=MAC_GW, dst=MAC_NH) /
                IP(src="203.0.113.1", dst="203.0.113.2") /
                GRE(chksum_present=1, proto=0x86DD) / inner)
    fx.add("field_set inner udp sport under gre with checksum",
           "field_set layer=inner_l4 off=0 width=2 val=abcd",
           gre_c(ip_only(pkt(**u6))),
           gre_c(ip_only(pkt(**dict(u6, sport=0xabcd)))))
    fx.add("field_set inner ipv6 src under gre with checksum",
           "field_set layer=inner_l3 off=8 width=16 "
           "val=20010db8000000000000000000000abc",
           gre_c(ip_only(pkt(**u6))),
           gre_c(ip_only(pkt(**dict(u6, src="2001:db8::abc")))))


def collect():
    fx = Fixtures()
    in_place_cases(fx)
    checksum_edge_cases(fx)
    drop_cases(fx)
    ethertype_and_mac_cases(fx)
    vlan_cases(fx)
    encap_cases(fx)
    decap_cases(fx)
    round_trip_cases(fx)
    field_cases(fx)
    return fx.cases


# ---- output -----------------------------------------------------------------

HEADER = """\
/*
 * Packet edit fixtures: GENERATED by tests/pkt/make_fixtures.py (scapy
 * builds every input and expected output, lengths and checksums included).
 * Do not edit; regenerate with
 *   /usr/bin/python3 tests/pkt/make_fixtures.py -o tests/pkt/edit_fixtures.h
 * The meson test pkt-edit-fixtures checks that this file matches the
 * generator. Included by tests/unit/test_pkt_edit.c.
 */
#ifndef DPFLOW_EDIT_FIXTURES_H
#define DPFLOW_EDIT_FIXTURES_H

#include <stdint.h>

struct edit_fixture {
	const char *name;
	const char *actions; /* "op k=v ... ; op ..." */
	const char *verdict; /* dpflow_drop_name() of the expected result */
	uint32_t rss_hash;   /* meta->rss_hash before the actions */
	uint16_t headroom;   /* bytes before the frame (meta->data_off) */
	uint8_t check_csum;  /* every checksum of the output must be right */
	const uint8_t *in;
	uint16_t in_len;
	const uint8_t *out;
	uint16_t out_len;
};
"""


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def c_bytes(name, b):
    lines = ["static const uint8_t %s[%d] = {" % (name, len(b))]
    for i in range(0, len(b), 12):
        lines.append("\t" + " ".join("0x%02x," % x for x in b[i:i + 12]))
    lines.append("};")
    return "\n".join(lines)


def render(cases):
    out = [HEADER]
    for i, c in enumerate(cases):
        out.append("/* %d: %s */" % (i, c["name"]))
        out.append(c_bytes("fx%d_in" % i, c["inp"]))
        out.append(c_bytes("fx%d_out" % i, c["out"]))
    out.append("")
    out.append("static const struct edit_fixture edit_fixtures[] = {")
    for i, c in enumerate(cases):
        out.append("\t{%s,\n\t %s,\n\t %s, 0x%08x, %d, %d, fx%d_in, %d, "
                   "fx%d_out, %d}," %
                   (c_string(c["name"]), c_string(c["actions"]),
                    c_string(c["verdict"]), c["rss"], c["headroom"],
                    1 if c["csum"] else 0, i, len(c["inp"]), i,
                    len(c["out"])))
    out.append("};")
    out.append("")
    out.append("#endif /* DPFLOW_EDIT_FIXTURES_H */")
    return "\n".join(out) + "\n"


def generate():
    global GENEVE_OPT
    GENEVE_OPT = bytes(GeneveOptions(classid=0x0102, type=0x80,
                                     data=b"\x01\x02\x03\x04"))
    return render(collect())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", help="file to write (default stdout)")
    ap.add_argument("--check", metavar="FILE",
                    help="regenerate into a temporary directory and diff "
                    "with FILE; print TAP")
    args = ap.parse_args()
    if SCAPY_ERROR:
        if args.check:
            print("1..0 # SKIP scapy not available: " + SCAPY_ERROR)
            return 0
        print("scapy not available: " + SCAPY_ERROR, file=sys.stderr)
        return 1
    if args.check:
        print("1..1")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "edit_fixtures.h")
            with open(path, "w") as f:
                f.write(generate())
            with open(path) as f:
                new = f.read().splitlines(keepends=True)
        try:
            with open(args.check) as f:
                old = f.read().splitlines(keepends=True)
        except OSError as e:
            print("not ok 1 - %s: %s" % (args.check, e))
            return 1
        diff = list(difflib.unified_diff(old, new, args.check,
                                         "regenerated", n=1))
        if diff:
            print("not ok 1 - %s differs from make_fixtures.py output "
                  "(regenerate it)" % args.check)
            for line in diff[:60]:
                print("# " + line.rstrip("\n"))
            return 1
        print("ok 1 - %s matches make_fixtures.py (%d lines)" %
              (os.path.basename(args.check), len(new)))
        return 0
    text = generate()
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
