#!/usr/bin/python3
"""Edge-case captures for the tshark comparison of dpflow's parser.

Builds, with scapy, one capture per theme covering every protocol, option
and link type the parser claims (include/dpflow/parse.h, docs/inspect.md),
a capture of malformed packets, each labelled with the drop reason dpflow
must give (docs/inspect.md, "Drop reasons"), and a capture of UDP packets
to the VXLAN and GENEVE ports whose payload is no such tunnel, each
labelled with why (plain UDP for dpflow: `tun_invalid`, no drop).

Usage: edge_cases.py DIR     writes the captures into DIR and lists them.

run.py imports build() and write(); every capture is compared with tshark
(compare.py) and the malformed labels are checked, by name, against
dpflow's `drop` field.
"""

import logging
import os
import random
import struct
import sys

logging.getLogger('scapy.runtime').setLevel(logging.ERROR)
logging.getLogger('scapy').setLevel(logging.ERROR)

from scapy.all import (ARP, ICMP, IP, SCTP, TCP, UDP, CookedLinux,  # noqa
                       Dot1AD, Dot1Q, Dot3, Ether, ICMPv6DestUnreach,
                       ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NS,
                       ICMPv6PacketTooBig, ICMPv6TimeExceeded, IPv6,
                       IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                       IPv6ExtHdrHopByHop, IPv6ExtHdrRouting,
                       IPv6ExtHdrSegmentRouting, LLC, PadN, Raw,
                       RouterAlert, SCTPChunkData, SCTPChunkInit, STP,
                       IPOption_NOP, IPOption_RR, IPOption_Router_Alert,
                       IPOption_Timestamp, IPOption_EOL)

try:
    from scapy.all import CookedLinuxV2
except ImportError:          # older scapy: SLL2 header built by hand
    CookedLinuxV2 = None
try:
    from scapy.all import PcapNgWriter
except ImportError:
    PcapNgWriter = None

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LOOP = 108
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276

MAC_A = '02:00:00:00:00:0a'
MAC_B = '02:00:00:00:00:0b'
V4_A, V4_B = '192.0.2.1', '198.51.100.2'
V6_A, V6_B = '2001:db8::a', '2001:db8:1::b'


class Case(object):
    def __init__(self, label, data, drop=None, wirelen=None,
                 tun_invalid=None):
        self.label = label
        self.data = bytes(data)
        self.drop = drop
        self.wirelen = wirelen if wirelen is not None else len(self.data)
        # why the payload of a UDP tunnel port is no tunnel (compare.py's
        # TUN_INVALID_REASONS or the inner packet's drop reason)
        self.tun_invalid = tun_invalid


class Capture(object):
    def __init__(self, name, linktype, cases, fmt='pcap', malformed=False,
                 fuzz=False):
        self.name = name
        self.linktype = linktype
        self.cases = cases
        self.fmt = fmt
        self.malformed = malformed      # cases carry the drop reason
        self.fuzz = fuzz                # random corruptions, unlabelled

    @property
    def filename(self):
        return self.name + ('.pcapng' if self.fmt == 'pcapng' else '.pcap')

    @property
    def labels(self):
        return [c.label for c in self.cases]


# ---------------------------------------------------------------------------
# Header helpers

def E(**k):
    k.setdefault('src', MAC_A)
    k.setdefault('dst', MAC_B)
    return Ether(**k)


def v4(**k):
    k.setdefault('src', V4_A)
    k.setdefault('dst', V4_B)
    return IP(**k)


def v6(**k):
    k.setdefault('src', V6_A)
    k.setdefault('dst', V6_B)
    return IPv6(**k)


def pad(data, to=60, fill=b'\x00'):
    data = bytes(data)
    return data + fill * max(0, to - len(data))


def csum16(data):
    if len(data) % 2:
        data += b'\x00'
    s = sum(struct.unpack('!%dH' % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def vxlan_hdr(vni, flags=0x08):
    return struct.pack('!BBHI', flags, 0, 0, (vni & 0xffffff) << 8)


def geneve_hdr(vni, proto, opts=b'', ver=0, oam=False, crit=False,
               optlen=None):
    if optlen is None:
        optlen = len(opts) // 4
    b0 = (ver << 6) | (optlen & 0x3f)
    b1 = (0x80 if oam else 0) | (0x40 if crit else 0)
    return struct.pack('!BBHI', b0, b1, proto, (vni & 0xffffff) << 8) + opts


def geneve_opt(cls, typ, data):
    assert len(data) % 4 == 0
    return struct.pack('!HBB', cls, typ, len(data) // 4) + data


def gre_hdr(proto, payload=b'', csum=False, key=None, seq=None, ver=0,
            routing=False):
    flags = (0x8000 if csum else 0) | (0x4000 if routing else 0) | \
        (0x2000 if key is not None else 0) | \
        (0x1000 if seq is not None else 0) | (ver & 7)
    opt = b''
    if csum:
        opt += b'\x00\x00\x00\x00'
    if key is not None:
        opt += struct.pack('!I', key)
    if seq is not None:
        opt += struct.pack('!I', seq)
    h = struct.pack('!HH', flags, proto) + opt
    if csum:
        c = csum16(h + bytes(payload))
        h = h[:4] + struct.pack('!H', c) + h[6:]
    return h + bytes(payload)


def with_byte(data, off, value):
    data = bytearray(bytes(data))
    data[off] = value
    return bytes(data)


def with_u16(data, off, value):
    data = bytearray(bytes(data))
    data[off:off + 2] = struct.pack('!H', value)
    return bytes(data)


def udp_tun(outer_ip, dport, payload, sport=49152):
    return E() / outer_ip / UDP(sport=sport, dport=dport) / Raw(bytes(payload))


def inner_eth(**k):
    return Ether(src='02:00:00:00:01:0c', dst='02:00:00:00:01:0d', **k)


# ---------------------------------------------------------------------------
# Well-formed captures

def cap_l2():
    c = []
    a = c.append
    a(Case('untagged ipv4 udp', pad(E() / v4() / UDP(sport=1, dport=2))))
    a(Case('802.1Q vid 10, pcp 7, dei 1',
           E() / Dot1Q(prio=7, id=1, vlan=10) / v4() / TCP()))
    a(Case('802.1Q vid 0', pad(E() / Dot1Q(vlan=0) / v4() / UDP())))
    a(Case('802.1Q vid 4095', pad(E() / Dot1Q(vlan=4095) / v6() / UDP())))
    a(Case('802.1ad alone', pad(E() / Dot1AD(vlan=300) / v4() / UDP())))
    a(Case('802.1ad + 802.1Q', E() / Dot1AD(prio=5, vlan=100) /
           Dot1Q(prio=3, vlan=200) / v4() / TCP(flags='SA')))
    a(Case('802.1Q + 802.1Q', E() / Dot1Q(vlan=1) / Dot1Q(vlan=2) / v6() /
           TCP()))
    a(Case('802.1Q + 802.1ad (reverse order)', pad(
        E() / Dot1Q(vlan=11) / Dot1AD(vlan=12) / v4() / UDP())))
    a(Case('802.1ad + 802.1ad', pad(E() / Dot1AD(vlan=7) / Dot1AD(vlan=8) /
                                    v4() / UDP())))
    a(Case('arp', pad(E(dst='ff:ff:ff:ff:ff:ff') /
                      ARP(psrc=V4_A, pdst=V4_B))))
    a(Case('arp in 802.1Q', pad(E() / Dot1Q(vlan=33) / ARP())))
    a(Case('arp in qinq', pad(E() / Dot1AD(vlan=3) / Dot1Q(vlan=4) /
                              ARP())))
    a(Case('lldp ethertype 0x88cc', pad(bytes(E(type=0x88cc)) +
                                        b'\x02\x07\x04' + b'\x00' * 6)))
    a(Case('802.3 length + llc (stp)',
           pad(Dot3(src=MAC_A, dst='01:80:c2:00:00:00') / LLC() / STP())))
    a(Case('0x9100 is not a vlan tpid', pad(
        bytes(E(type=0x9100)) + b'\x00\x05\x08\x00' + bytes(v4() / UDP()))))
    a(Case('ipv4 udp padded with zeros', pad(E() / v4() / UDP())))
    a(Case('ipv4 udp padded with 0xaa',
           pad(E() / v4() / UDP() / Raw(b'x'), fill=b'\xaa')))
    a(Case('ipv4 tcp, 4 trailing bytes (fcs-like)',
           bytes(E() / v4() / TCP() / Raw(b'y' * 30)) + b'\xde\xad\xbe\xef'))
    a(Case('ipv6 udp padded', pad(E() / v6() / UDP(), 90, b'\x55')))
    a(Case('802.1Q ipv4 icmp padded', pad(E() / Dot1Q(vlan=5) / v4() /
                                          ICMP())))
    a(Case('802.1Q 1518-byte frame', E() / Dot1Q(vlan=8) / v4() / UDP() /
           Raw(b'm' * (1518 - 46))))
    return Capture('l2', LINKTYPE_ETHERNET, c)


def cap_jumbo():
    """Frames above 2 KiB: docs/inspect.md has `inspect` print every
    packet of the file, so these must come out too."""
    c = []
    for size in (2048, 4096, 9018):
        c.append(Case('%d-byte frame, ipv4 udp' % size,
                      E() / v4() / UDP() / Raw(b'j' * (size - 42))))
    c.append(Case('9018-byte frame, vxlan inner tcp', udp_tun(
        v6(), 4789, vxlan_hdr(9) + bytes(inner_eth() / v4() / TCP() /
                                         Raw(b'J' * (9018 - 62 - 8 - 54))))))
    return Capture('jumbo', LINKTYPE_ETHERNET, c)


def cap_ipv4():
    c = []
    a = c.append
    a(Case('tos 0xb9 ttl 1', E() / v4(tos=0xb9, ttl=1) / UDP()))
    a(Case('tos 0xff ttl 255', E() / v4(tos=0xff, ttl=255) / TCP()))
    a(Case('ttl 0 tos 0', pad(E() / v4(ttl=0, tos=0) / UDP())))
    a(Case('df set', E() / v4(flags='DF') / TCP()))
    a(Case('reserved flag set', E() / v4(flags=4) / UDP()))
    a(Case('option nop+eol (ihl 6)', E() /
           v4(options=[IPOption_NOP(), IPOption_NOP(), IPOption_NOP(),
                       IPOption_EOL()]) / TCP()))
    a(Case('option record route', E() /
           v4(options=[IPOption_RR(routers=['10.0.0.1', '10.0.0.2'])]) /
           UDP()))
    a(Case('option router alert', E() /
           v4(options=[IPOption_Router_Alert()]) / UDP(dport=9)))
    a(Case('option timestamp', E() /
           v4(options=[IPOption_Timestamp(flg=0, timestamp=[1, 2])]) /
           ICMP()))
    a(Case('options 40 bytes (ihl 15)', E() /
           v4(options=[IPOption_RR(routers=['10.0.0.%d' % i
                                            for i in range(1, 10)]),
                       IPOption_EOL()]) / TCP()))
    payload = bytes(TCP(sport=1234, dport=80, flags='PA') / Raw(b'A' * 64))
    a(Case('first fragment tcp', E() / v4(flags='MF', frag=0, proto=6, id=7) /
           Raw(payload[:40])))
    a(Case('middle fragment tcp', E() / v4(flags='MF', frag=5, proto=6,
                                           id=7) / Raw(payload[40:64])))
    a(Case('last fragment tcp', E() / v4(frag=8, proto=6, id=7) /
           Raw(payload[64:])))
    udpp = bytes(UDP(sport=5000, dport=53) / Raw(b'Q' * 100))
    a(Case('first fragment udp (udp length = whole datagram)', E() /
           v4(flags='MF', proto=17, id=8) / Raw(udpp[:48])))
    a(Case('later fragment udp', E() / v4(frag=6, proto=17, id=8) /
           Raw(udpp[48:])))
    a(Case('later fragment with offset 8191', pad(E() /
           v4(frag=8191, proto=17) / Raw(b'x'))))
    a(Case('first fragment icmp', E() / v4(flags='MF', proto=1) /
           Raw(bytes(ICMP(type=8) / Raw(b'p' * 40))[:24])))
    a(Case('first fragment with df+mf', E() / v4(flags='DF+MF') / UDP(
        len=8) / Raw(b'd' * 16)))
    a(Case('later fragment of gre (no tunnel)', E() / v4(frag=10, proto=47) /
           Raw(b'\x00' * 24)))
    a(Case('later fragment of ipip (no tunnel)', E() / v4(frag=3, proto=4) /
           Raw(bytes(v4() / UDP()))))
    a(Case('unknown protocol 253', E() / v4(proto=253) / Raw(b'\x01' * 10)))
    a(Case('protocol 0 in ipv4', pad(E() / v4(proto=0) / Raw(b'\x00' * 8))))
    a(Case('igmp (protocol 2)', pad(E() / v4(proto=2, dst='224.0.0.1') /
                                    Raw(b'\x11\x64\xee\x9b' + b'\0' * 4))))
    a(Case('esp (protocol 50)', E() / v4(proto=50) / Raw(b'\x00' * 24)))
    a(Case('ipv4 total length < frame (padding after)', pad(
        E() / v4() / UDP(), 80, b'\x01')))
    a(Case('ipv4 empty payload, proto tcp, only header: later frag',
           pad(E() / v4(frag=1, proto=6))))
    a(Case('ipv4 broadcast/zero addresses', pad(
        E() / v4(src='0.0.0.0', dst='255.255.255.255') / UDP(sport=68,
                                                            dport=67))))
    return Capture('ipv4', LINKTYPE_ETHERNET, c)


def cap_ipv6():
    c = []
    a = c.append
    a(Case('tclass 0xb9 hlim 1', E() / v6(tc=0xb9, hlim=1) / UDP()))
    a(Case('tclass 0xff flow label', E() / v6(tc=0xff, fl=0xfffff, hlim=255) /
           TCP()))
    a(Case('hop-by-hop', E() / v6() / IPv6ExtHdrHopByHop() / UDP()))
    a(Case('hop-by-hop router alert', E() / v6() /
           IPv6ExtHdrHopByHop(options=[RouterAlert()]) / ICMPv6EchoRequest()))
    a(Case('hop-by-hop 24 bytes', E() / v6() /
           IPv6ExtHdrHopByHop(options=[PadN(optdata=b'\x00' * 20)]) / TCP()))
    a(Case('routing type 0', E() / v6() /
           IPv6ExtHdrRouting(addresses=['2001:db8::99'], segleft=1) / UDP()))
    a(Case('routing type 4 (srh)', E() / v6() /
           IPv6ExtHdrSegmentRouting(addresses=['2001:db8::1',
                                               '2001:db8::2']) / TCP()))
    a(Case('destination options', E() / v6() / IPv6ExtHdrDestOpt() / UDP()))
    a(Case('fragment first', E() / v6() /
           IPv6ExtHdrFragment(m=1, offset=0, id=1) / TCP()))
    a(Case('fragment later', E() / v6() /
           IPv6ExtHdrFragment(m=1, offset=100, nh=6, id=1) /
           Raw(b'x' * 32)))
    a(Case('fragment last', E() / v6() /
           IPv6ExtHdrFragment(m=0, offset=200, nh=17, id=1) /
           Raw(b'x' * 16)))
    udpp = bytes(UDP(sport=5353, dport=5353) / Raw(b'U' * 200))
    a(Case('fragment first udp (udp length = whole datagram)', E() / v6() /
           IPv6ExtHdrFragment(m=1, offset=0, nh=17, id=2) /
           Raw(udpp[:64])))
    a(Case('atomic fragment (offset 0, m 0)', E() / v6() /
           IPv6ExtHdrFragment(m=0, offset=0, id=3) / UDP()))
    a(Case('chain hbh dst rt frag(first) dst tcp', E() / v6() /
           IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() /
           IPv6ExtHdrRouting(addresses=['2001:db8::5']) /
           IPv6ExtHdrFragment(m=1, id=4) / IPv6ExtHdrDestOpt() / TCP()))
    a(Case('chain hbh rt frag(later)', E() / v6() / IPv6ExtHdrHopByHop() /
           IPv6ExtHdrRouting() / IPv6ExtHdrFragment(m=0, offset=9, nh=60) /
           Raw(b'\x06\x00' + b'\x00' * 30)))
    a(Case('chain hbh dst icmpv6', E() / v6() / IPv6ExtHdrHopByHop() /
           IPv6ExtHdrDestOpt() / ICMPv6EchoReply()))
    exts = v6() / IPv6ExtHdrHopByHop()
    for _ in range(6):
        exts = exts / IPv6ExtHdrDestOpt()
    a(Case('dst opts before hop-by-hop (any order is walked)', E() / v6() /
           IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop() / UDP()))
    a(Case('8 extension headers (the maximum)', E() / exts /
           IPv6ExtHdrRouting() / UDP()))
    a(Case('no next header', pad(E() / v6(nh=59))))
    a(Case('no next header with trailing bytes', E() / v6(nh=59) /
           Raw(b'junk')))
    a(Case('dst opts then no next header', pad(E() / v6() /
                                             IPv6ExtHdrDestOpt(nh=59))))
    a(Case('ah (51) is not walked', E() / v6(nh=51) /
           Raw(b'\x06\x04\x00\x00' + b'\x00' * 20) / TCP()))
    a(Case('hbh then esp (50)', E() / v6() / IPv6ExtHdrHopByHop(nh=50) /
           Raw(b'\x00' * 16)))
    a(Case('mobility (135) not walked', E() / v6(nh=135) /
           Raw(b'\x3b\x00\x00\x00\x00\x00\x00\x00')))
    a(Case('unknown protocol 253', E() / v6(nh=253) / Raw(b'\x00' * 8)))
    a(Case('payload length 0, no next header', pad(E() / v6(nh=59,
                                                            plen=0))))
    a(Case('ipv6 padded in short datagram', pad(E() / v6() /
                                                IPv6ExtHdrDestOpt(nh=59), 90)))
    for src, dst in [('::', '::1'),
                     ('fe80::1:0:0:0', 'ff02::1'),
                     ('2001:db8:0:0:1:0:0:1', '2001:db8:0:1:1:1:1:1'),
                     ('2001:db8::1:0:0:0:1', '1::'),
                     ('2001:0:0:1::1', 'fe80::ab:cdef'),
                     ('::ffff:192.0.2.1', '64:ff9b::c000:201'),
                     ('::192.0.2.1', '::ffff:0:c000:201'),
                     ('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff',
                      '2001:db8:a:b:c:d:e:f')]:
        a(Case('addresses %s > %s' % (src, dst),
               E() / IPv6(src=src, dst=dst) / UDP()))
    return Capture('ipv6', LINKTYPE_ETHERNET, c)


def cap_l4():
    c = []
    a = c.append
    for name, fl in [('fin', 0x01), ('syn', 0x02), ('rst', 0x04),
                     ('psh', 0x08), ('ack', 0x10), ('urg', 0x20),
                     ('ece', 0x40), ('cwr', 0x80), ('syn+ack', 0x12),
                     ('all 8', 0xff), ('none', 0x00)]:
        a(Case('tcp flags %s' % name, E() / v4() /
               TCP(sport=40000, dport=443, flags=fl)))
    a(Case('tcp ns/ae bit and reserved bits set (not in tcp_flags)',
           E() / v4() / TCP(flags=0x1ff, reserved=7)))
    a(Case('tcp options mss ws sackok ts nop', E() / v6() /
           TCP(flags='S', options=[('MSS', 1460), ('NOP', None),
                                   ('WScale', 7), ('SAckOK', b''),
                                   ('Timestamp', (1, 2))])))
    a(Case('tcp options 40 bytes (doff 15)', E() / v4() /
           TCP(options=[('NOP', None)] * 39 + [('EOL', None)])))
    a(Case('tcp sack option + payload', E() / v4() /
           TCP(flags='A', options=[('SAck', (1, 2, 3, 4))]) /
           Raw(b'data' * 10)))
    a(Case('tcp ports 0 and 65535', E() / v4() / TCP(sport=0, dport=65535)))
    a(Case('tcp doff 5 with payload', E() / v6() / TCP(flags='PA') /
           Raw(b'GET / HTTP/1.1\r\n\r\n')))
    a(Case('udp', E() / v4() / UDP(sport=1000, dport=2000) / Raw(b'u' * 5)))
    a(Case('udp zero checksum', E() / v4() / UDP(chksum=0) / Raw(b'z')))
    a(Case('udp length 8, no payload', pad(E() / v6() / UDP())))
    a(Case('udp ports 0 and 65535', E() / v4() / UDP(sport=65535, dport=0)))
    a(Case('udp shorter than the datagram (trailing bytes)', E() / v4() /
           UDP(len=9) / Raw(b'abcdefgh')))
    a(Case('icmp echo request', E() / v4() / ICMP(type=8, id=1, seq=2) /
           Raw(b'ping')))
    a(Case('icmp echo reply', E() / v4() / ICMP(type=0)))
    a(Case('icmp unreachable with inner ipv4/udp', E() / v4() /
           ICMP(type=3, code=3) / v4(src=V4_B, dst=V4_A) /
           UDP(sport=53, dport=4789)))
    a(Case('icmp time exceeded with inner tcp', E() / v4() /
           ICMP(type=11, code=0) / v4() / TCP()))
    a(Case('icmp unknown type 200 code 9', E() / v4() / ICMP(type=200,
                                                             code=9)))
    a(Case('icmpv6 echo request', E() / v6() / ICMPv6EchoRequest()))
    a(Case('icmpv6 neighbour solicitation', E() / v6(hlim=255) /
           ICMPv6ND_NS(tgt='2001:db8::1')))
    a(Case('icmpv6 unreachable with inner ipv6/udp', E() / v6() /
           ICMPv6DestUnreach(code=4) / v6(src=V6_B, dst=V6_A) /
           UDP(dport=6081)))
    a(Case('icmpv6 packet too big', E() / v6() / ICMPv6PacketTooBig(mtu=1280)
           / v6() / TCP()))
    a(Case('icmpv6 time exceeded code 1', E() / v6() /
           ICMPv6TimeExceeded(code=1) / v6() / UDP()))
    a(Case('sctp init', E() / v4() / SCTP(sport=5000, dport=38412) /
           SCTPChunkInit()))
    a(Case('sctp data', E() / v6() / SCTP(sport=1, dport=2) /
           SCTPChunkData(data=b'abc')))
    a(Case('sctp chunk length beyond the packet (not checked)', E() / v4() /
           SCTP(sport=3, dport=4) / Raw(b'\x00\x03\x01\x00' + b'\x00' * 8)))
    a(Case('tcp option with length 0 (options not parsed)',
           with_byte(bytes(E() / v4() / TCP(options=[('MSS', 1460)])),
                     14 + 20 + 21, 0)))
    a(Case('icmp unreachable quoting 8 bytes of an ipv4 header', E() / v4() /
           ICMP(type=3, code=1) / Raw(bytes(v4() / UDP())[:8])))
    a(Case('icmpv6 unreachable quoting a cut ipv6 header', E() / v6() /
           ICMPv6DestUnreach() / Raw(bytes(v6())[:20])))
    a(Case('sctp common header only', pad(E() / v4() / SCTP(sport=7,
                                                            dport=9))))
    a(Case('udp source port 4789 (not vxlan: destination port decides)',
           E() / v4() / UDP(sport=4789, dport=40000) / Raw(b'\x00' * 20)))
    a(Case('udp source port 6081, dport 53', E() / v4() /
           UDP(sport=6081, dport=53) / Raw(b'\x00' * 20)))
    a(Case('tcp port 4789 (not vxlan)', E() / v4() /
           TCP(sport=1, dport=4789) / Raw(vxlan_hdr(1) +
                                          bytes(inner_eth() / v4()))))
    a(Case('udp first fragment to 4789, payload no vxlan (not tried)',
           E() / v4(flags='MF', id=9) / UDP(sport=1, dport=4789, len=200) /
           Raw(b'hello')))
    return Capture('l4', LINKTYPE_ETHERNET, c)


def cap_vxlan():
    c = []
    a = c.append
    a(Case('vxlan ipv4 inner eth ipv4 tcp', udp_tun(
        v4(), 4789, vxlan_hdr(100) + bytes(inner_eth() / v4(tos=4, ttl=9) /
                                           TCP(flags='S')))))
    a(Case('vxlan inner ipv6 udp', udp_tun(
        v4(), 4789, vxlan_hdr(0xffffff) + bytes(inner_eth() / v6() /
                                                UDP(sport=9, dport=10)))))
    a(Case('vxlan vni 0 inner icmp', udp_tun(
        v4(), 4789, vxlan_hdr(0) + bytes(inner_eth() / v4() / ICMP()))))
    a(Case('vxlan inner vlan', udp_tun(
        v4(), 4789, vxlan_hdr(5) + bytes(inner_eth() / Dot1Q(vlan=42) /
                                         v4() / UDP()))))
    a(Case('vxlan inner qinq', udp_tun(
        v6(), 4789, vxlan_hdr(6) + bytes(inner_eth() / Dot1AD(vlan=1) /
                                         Dot1Q(vlan=2) / v6() / TCP()))))
    a(Case('vxlan inner arp', udp_tun(
        v4(), 4789, vxlan_hdr(7) + bytes(inner_eth() / ARP()))))
    a(Case('vxlan over ipv6', udp_tun(
        v6(tc=0x10, hlim=3), 4789, vxlan_hdr(8) + bytes(inner_eth() / v4() /
                                                       SCTP()))))
    a(Case('vxlan outer vlan', E() / Dot1Q(vlan=99) / v4() /
           UDP(sport=50000, dport=4789) /
           Raw(vxlan_hdr(9) + bytes(inner_eth() / v4() / UDP()))))
    a(Case('vxlan outer qinq + ipv6 ext', E() / Dot1AD(vlan=10) /
           Dot1Q(vlan=20) / v6() / IPv6ExtHdrDestOpt() /
           UDP(sport=50001, dport=4789) /
           Raw(vxlan_hdr(10) + bytes(inner_eth() / v6() /
                                     ICMPv6EchoRequest()))))
    a(Case('vxlan inner vxlan (not opened)', udp_tun(
        v4(), 4789, vxlan_hdr(11) + bytes(
            inner_eth() / v4() / UDP(sport=1, dport=4789) /
            Raw(vxlan_hdr(12) + bytes(inner_eth() / v4() / TCP()))))))
    a(Case('vxlan inner gre (not opened)', udp_tun(
        v4(), 4789, vxlan_hdr(13) + bytes(
            inner_eth() / v4(proto=47) /
            Raw(gre_hdr(0x0800, bytes(v4() / UDP()), key=5))))))
    a(Case('vxlan inner ipip (not opened)', udp_tun(
        v4(), 4789, vxlan_hdr(14) + bytes(inner_eth() / v4() / v4() /
                                          UDP()))))
    a(Case('vxlan inner geneve (not opened)', udp_tun(
        v4(), 4789, vxlan_hdr(15) + bytes(
            inner_eth() / v6() / UDP(dport=6081) /
            Raw(geneve_hdr(1, 0x0800) + bytes(v4() / UDP()))))))
    a(Case('vxlan inner padded frame', udp_tun(
        v4(), 4789, vxlan_hdr(16) + pad(inner_eth() / v4() / UDP(), 60,
                                        b'\xee'))))
    a(Case('vxlan outer padded frame', pad(udp_tun(
        v4(), 4789, vxlan_hdr(17) + bytes(inner_eth() / v4(proto=253))), 120,
        b'\x77')))
    a(Case('vxlan inner ipv4 options + first fragment', udp_tun(
        v4(), 4789, vxlan_hdr(18) + bytes(
            inner_eth() / v4(flags='MF', options=[IPOption_NOP()] * 4) /
            TCP()))))
    a(Case('vxlan inner ipv6 later fragment', udp_tun(
        v4(), 4789, vxlan_hdr(19) + bytes(
            inner_eth() / v6() / IPv6ExtHdrFragment(offset=5, nh=17) /
            Raw(b'f' * 16)))))
    a(Case('vxlan inner ipv6 ext chain', udp_tun(
        v4(), 4789, vxlan_hdr(20) + bytes(
            inner_eth() / v6() / IPv6ExtHdrHopByHop() /
            IPv6ExtHdrRouting() / IPv6ExtHdrDestOpt() / TCP(flags=0xc2)))))
    a(Case('vxlan sport 6081 dport 4789', udp_tun(
        v4(), 4789, vxlan_hdr(21) + bytes(inner_eth() / v4() / UDP()),
        sport=6081)))
    a(Case('vxlan flags with G bit (gbp)', udp_tun(
        v4(), 4789, vxlan_hdr(22, flags=0x88) + bytes(inner_eth() / v4() /
                                                      UDP()))))
    a(Case('vxlan inner no next header', udp_tun(
        v6(), 4789, vxlan_hdr(23) + bytes(inner_eth() / v6(nh=59)))))
    a(Case('vxlan inner lldp', udp_tun(
        v4(), 4789, vxlan_hdr(24) + bytes(inner_eth(type=0x88cc)) +
        b'\x00' * 10)))
    a(Case('vxlan inner 802.3/llc', udp_tun(
        v4(), 4789, vxlan_hdr(25) + pad(Dot3(src=MAC_A, dst=MAC_B) /
                                        LLC() / STP()))))
    return Capture('vxlan', LINKTYPE_ETHERNET, c)


def cap_geneve():
    c = []
    a = c.append
    eth_in = inner_eth() / v4() / TCP(sport=7, dport=8, flags='F')
    a(Case('geneve no options, inner eth', udp_tun(
        v4(), 6081, geneve_hdr(1, 0x6558) + bytes(eth_in))))
    a(Case('geneve one option, inner eth ipv6', udp_tun(
        v4(), 6081, geneve_hdr(2, 0x6558, geneve_opt(0x0102, 0x80,
                                                     b'\xaa' * 4)) +
        bytes(inner_eth() / v6() / UDP()))))
    a(Case('geneve three options', udp_tun(
        v6(), 6081, geneve_hdr(3, 0x6558, geneve_opt(1, 1, b'') +
                               geneve_opt(2, 2, b'\x01' * 8) +
                               geneve_opt(3, 3, b'\x02' * 12)) +
        bytes(eth_in))))
    a(Case('geneve 252 bytes of options (optlen 63)', udp_tun(
        v4(), 6081, geneve_hdr(4, 0x6558, geneve_opt(0xffff, 0x7f,
                                                     b'\x00' * 248)) +
        bytes(eth_in))))
    a(Case('geneve inner ipv4 (0x0800)', udp_tun(
        v4(), 6081, geneve_hdr(5, 0x0800) + bytes(v4(ttl=2) / UDP()))))
    a(Case('geneve inner ipv6 (0x86dd)', udp_tun(
        v4(), 6081, geneve_hdr(6, 0x86dd) + bytes(v6() /
                                                  ICMPv6EchoRequest()))))
    a(Case('geneve inner ipv6 with options', udp_tun(
        v6(), 6081, geneve_hdr(7, 0x86dd, geneve_opt(9, 9, b'\x09' * 4)) +
        bytes(v6() / IPv6ExtHdrDestOpt() / TCP()))))
    a(Case('geneve oam + critical flags', udp_tun(
        v4(), 6081, geneve_hdr(8, 0x6558, geneve_opt(1, 0x80, b''),
                               oam=True, crit=True) + bytes(eth_in))))
    a(Case('geneve vni 0xffffff inner vlan', udp_tun(
        v4(), 6081, geneve_hdr(0xffffff, 0x6558) +
        bytes(inner_eth() / Dot1Q(vlan=4001) / v4() / UDP()))))
    a(Case('geneve outer vlan ipv6', E() / Dot1Q(vlan=3) / v6() /
           UDP(sport=60000, dport=6081) /
           Raw(geneve_hdr(9, 0x0800) + bytes(v4() / SCTP()))))
    a(Case('geneve option length overrunning the options (not checked)',
           udp_tun(v4(), 6081, geneve_hdr(13, 0x0800,
                                          struct.pack('!HBB', 1, 1, 5)) +
                   bytes(v4() / UDP()))))
    a(Case('geneve inner arp', udp_tun(
        v4(), 6081, geneve_hdr(10, 0x6558) + pad(inner_eth() / ARP()))))
    a(Case('geneve inner ipv4 fragment later', udp_tun(
        v4(), 6081, geneve_hdr(11, 0x0800) + bytes(v4(frag=4, proto=6) /
                                                   Raw(b'x' * 8)))))
    a(Case('geneve inner gre (not opened)', udp_tun(
        v4(), 6081, geneve_hdr(12, 0x0800) + bytes(
            v4(proto=47) / Raw(gre_hdr(0x86dd, bytes(v6() / UDP())))))))
    return Capture('geneve', LINKTYPE_ETHERNET, c)


def cap_gre():
    c = []
    a = c.append
    inner4 = bytes(v4(src='10.1.1.1', dst='10.2.2.2') / TCP(sport=22,
                                                            dport=2222))
    inner6 = bytes(v6(src='fd00::1', dst='fd00::2') / UDP(sport=1, dport=2))
    ieth = bytes(inner_eth() / v4() / ICMP())
    combos = [(False, None, None), (True, None, None), (False, 7, None),
              (False, None, 9), (True, 0xffffffff, None), (True, None, 1),
              (False, 0, 0xffffffff), (True, 0x01020304, 5)]
    for csum, key, seq in combos:
        name = '+'.join(n for n, v in (('csum', csum),
                                       ('key', key is not None),
                                       ('seq', seq is not None)) if v) or \
            'plain'
        a(Case('gre %s inner ipv4' % name, E() / v4(proto=47) /
               Raw(gre_hdr(0x0800, inner4, csum=csum, key=key, seq=seq))))
        a(Case('gre %s inner ipv6' % name, E() / v4(proto=47) /
               Raw(gre_hdr(0x86dd, inner6, csum=csum, key=key, seq=seq))))
        a(Case('gre %s inner eth (0x6558), outer ipv6' % name, E() /
               v6(nh=47) /
               Raw(gre_hdr(0x6558, ieth, csum=csum, key=key, seq=seq))))
    a(Case('gre inner eth with vlan', E() / v4(proto=47) /
           Raw(gre_hdr(0x6558, bytes(inner_eth() / Dot1Q(vlan=12) / v6() /
                                     TCP()), key=12))))
    a(Case('gre over vlan, inner ipv4 udp 4789 (not opened)', E() /
           Dot1Q(vlan=2) / v4(proto=47) /
           Raw(gre_hdr(0x0800, bytes(v4() / UDP(dport=4789) /
                                     Raw(vxlan_hdr(1) +
                                         bytes(inner_eth() / v4())))))))
    a(Case('gre inner gre (not opened)', E() / v4(proto=47) /
           Raw(gre_hdr(0x0800, bytes(v4(proto=47) /
                                     Raw(gre_hdr(0x0800, inner4)))))))
    a(Case('gre outer ipv6 ext chain', E() / v6() / IPv6ExtHdrHopByHop() /
           IPv6ExtHdrDestOpt(nh=47) / Raw(gre_hdr(0x0800, inner4, key=3))))
    a(Case('gre strict-route and recursion bits set (not checked)', E() /
           v4(proto=47) / Raw(struct.pack('!HH', 0x0b00, 0x0800) + inner4)))
    a(Case('gre outer padded', pad(E() / v4(proto=47) /
                                   Raw(gre_hdr(0x0800, bytes(v4(proto=253)))),
                                   90, b'\x99')))
    a(Case('gre inner ipv4 later fragment', E() / v4(proto=47) /
           Raw(gre_hdr(0x0800, bytes(v4(frag=20, proto=17) /
                                     Raw(b'x' * 12))))))
    return Capture('gre', LINKTYPE_ETHERNET, c)


def cap_ipip():
    c = []
    a = c.append
    a(Case('ipv4 in ipv4', E() / v4(proto=4) / v4(src='10.0.0.1',
                                                  dst='10.0.0.2') / TCP()))
    a(Case('ipv6 in ipv4', E() / v4(proto=41) / v6() / UDP()))
    a(Case('ipv4 in ipv6', E() / v6(nh=4) / v4() / ICMP()))
    a(Case('ipv6 in ipv6', E() / v6(nh=41) / v6(src='fd00::5', dst='fd00::6')
           / TCP(flags='R')))
    a(Case('ipv4 in ipv4 inner options + udp', E() / v4(proto=4) /
           v4(options=[IPOption_RR(routers=['1.2.3.4'])]) / UDP()))
    a(Case('ipv6 in ipv4 inner ext chain', E() / v4(proto=41) / v6() /
           IPv6ExtHdrHopByHop() / IPv6ExtHdrFragment(m=1) / TCP()))
    a(Case('ipv6 in ipv6 after outer hop-by-hop', E() / v6() /
           IPv6ExtHdrHopByHop(nh=41) / v6() / ICMPv6EchoRequest()))
    a(Case('ipv4 in ipv4 inner later fragment', E() / v4(proto=4) /
           v4(frag=2, proto=6) / Raw(b'\x00' * 16)))
    a(Case('ipv4 in ipv4 in ipv4 (inner not opened)', E() / v4(proto=4) /
           v4(proto=4) / v4() / UDP()))
    a(Case('ipv6 in ipv6 inner vxlan (not opened)', E() / v6(nh=41) / v6() /
           UDP(dport=4789) / Raw(vxlan_hdr(3) + bytes(inner_eth() / v4()))))
    a(Case('ipv4 in ipv4 in vlan, outer padded', pad(
        E() / Dot1Q(vlan=77) / v4(proto=4) / v4(proto=253), 80)))
    a(Case('ipv4 in ipv4, first fragment of the inner', E() / v4(proto=4) /
           v4(flags='MF') / UDP(len=8) / Raw(b'f' * 8)))
    return Capture('ipip', LINKTYPE_ETHERNET, c)


def l3_mix():
    """IP packets (no link header) for the captures of other link types."""
    return [
        ('ipv4 udp', v4() / UDP(sport=11, dport=22)),
        ('ipv6 tcp', v6() / TCP(flags='SA')),
        ('ipv4 icmp', v4(tos=0x20) / ICMP()),
        ('ipv6 ext + icmpv6', v6() / IPv6ExtHdrHopByHop() /
         ICMPv6EchoRequest()),
        ('ipv4 vxlan', v4() / UDP(sport=50000, dport=4789) /
         Raw(vxlan_hdr(77) + bytes(inner_eth() / v6() / UDP()))),
        ('ipv6 gre key', v6(nh=47) / Raw(gre_hdr(0x0800, bytes(v4() / TCP()),
                                                 key=0xabcd))),
        ('ipv4 in ipv6', v6(nh=4) / v4() / SCTP()),
        ('ipv4 later fragment', v4(frag=3, proto=17) / Raw(b'x' * 8)),
    ]


def sll_hdr(proto, pkttype=0, hatype=1, addr=b'\x02\x00\x00\x00\x00\x0a'):
    return CookedLinux(pkttype=pkttype, lladdrtype=hatype,
                       lladdrlen=len(addr),
                       src=addr + b'\x00' * (8 - len(addr)), proto=proto)


def sll2_hdr(proto, ifindex=2, pkttype=0, hatype=1,
             addr=b'\x02\x00\x00\x00\x00\x0a'):
    if CookedLinuxV2 is not None:
        return bytes(CookedLinuxV2(proto=proto, ifindex=ifindex,
                                   lladdrtype=hatype, pkttype=pkttype,
                                   lladdrlen=len(addr),
                                   src=addr + b'\x00' * (8 - len(addr))))
    return struct.pack('!HHIHBB8s', proto, 0, ifindex, hatype, pkttype,
                       len(addr), addr + b'\x00' * (8 - len(addr)))


def ethertype_of(pkt):
    return 0x86dd if isinstance(pkt, IPv6) else 0x0800


def cap_sll():
    c = [Case('sll ' + n, bytes(sll_hdr(ethertype_of(p), pkttype=i % 5)) +
              bytes(p)) for i, (n, p) in enumerate(l3_mix())]
    c.append(Case('sll arp', bytes(sll_hdr(0x0806)) + bytes(ARP())))
    c.append(Case('sll vlan-tagged payload', bytes(sll_hdr(0x8100)) +
                  bytes(Dot1Q(vlan=321) / v4() / UDP())))
    c.append(Case('sll loopback hatype 772', bytes(
        sll_hdr(0x0800, hatype=772, addr=b'\x00' * 6)) + bytes(v4() / TCP())))
    c.append(Case('sll outgoing, padded', bytes(sll_hdr(0x86dd, pkttype=4)) +
                  pad(v6(nh=59), 60)))
    return Capture('link_sll', LINKTYPE_LINUX_SLL, c)


def cap_sll2():
    c = [Case('sll2 ' + n, sll2_hdr(ethertype_of(p), ifindex=i + 1) +
              bytes(p)) for i, (n, p) in enumerate(l3_mix())]
    c.append(Case('sll2 arp', sll2_hdr(0x0806) + bytes(ARP())))
    c.append(Case('sll2 qinq payload', sll2_hdr(0x88a8) +
                  bytes(Dot1AD(vlan=1) / Dot1Q(vlan=2) / v6() / UDP())))
    return Capture('link_sll2', LINKTYPE_LINUX_SLL2, c)


def cap_raw():
    c = [Case('raw ' + n, bytes(p)) for n, p in l3_mix()]
    c.append(Case('raw ipv4 padded', pad(v4() / UDP(), 40, b'\x01')))
    return Capture('link_raw', LINKTYPE_RAW, c)


def cap_null():
    fams = [2, 24, 28, 30]
    c = []
    for i, (n, p) in enumerate(l3_mix()):
        fam = 2 if isinstance(p, IP) else fams[1 + i % 3]
        c.append(Case('null af %d %s' % (fam, n),
                      struct.pack('=I', fam) + bytes(p)))
    # A capture written on a host of the other byte order (docs/ports.md:
    # swapped back when above 0xffff; tshark does the same).
    other = '>' if sys.byteorder == 'little' else '<'
    c.append(Case('null af 2 in the other byte order',
                  struct.pack(other + 'I', 2) + bytes(v4() / TCP())))
    c.append(Case('null af 30 in the other byte order',
                  struct.pack(other + 'I', 30) + bytes(v6() / UDP())))
    return Capture('link_null', LINKTYPE_NULL, c)


def cap_loop():
    c = []
    for i, (n, p) in enumerate(l3_mix()):
        fam = 2 if isinstance(p, IP) else 24
        c.append(Case('loop af %d %s' % (fam, n),
                      struct.pack('!I', fam) + bytes(p)))
    return Capture('link_loop', LINKTYPE_LOOP, c)


def cap_pcapng():
    c = [Case('pcapng ' + n, bytes(E(type=ethertype_of(p)) / p))
         for n, p in l3_mix()]
    c.append(Case('pcapng vlan arp', pad(E() / Dot1Q(vlan=6) / ARP())))
    c.append(Case('pcapng geneve', udp_tun(
        v4(), 6081, geneve_hdr(5, 0x6558, geneve_opt(1, 1, b'\x00' * 4)) +
        bytes(inner_eth() / v4() / UDP()))))
    return Capture('pcapng', LINKTYPE_ETHERNET, c, fmt='pcapng')


# ---------------------------------------------------------------------------
# Malformed packets, with the drop reason dpflow must give.

def cap_malformed():
    c = []

    def m(reason, label, data, wirelen=None):
        c.append(Case(label, data, drop=reason, wirelen=wirelen))

    udp4 = bytes(E() / v4() / UDP(sport=1, dport=2) / Raw(b'p' * 18))
    tcp4 = bytes(E() / v4() / TCP() / Raw(b't' * 20))

    # eth_truncated
    m('eth_truncated', 'eth 13 bytes', udp4[:13])
    m('eth_truncated', 'eth 1 byte', udp4[:1])
    m('eth_truncated', 'gre 0x6558 inner eth 12 bytes', E() / v4(proto=47) /
      Raw(gre_hdr(0x6558, b'\x02' * 12)))

    # vlan_truncated
    q = bytes(E() / Dot1Q(vlan=5) / v4() / UDP())
    m('vlan_truncated', '802.1Q tag 2 of 4 bytes', q[:16])
    m('vlan_truncated', '802.1Q tpid, no tag', q[:14])
    qq = bytes(E() / Dot1AD(vlan=5) / Dot1Q(vlan=6) / v4() / UDP())
    m('vlan_truncated', 'second tag 3 of 4 bytes', qq[:21])

    # vlan_too_many_tags
    m('vlan_too_many_tags', '802.1ad 802.1Q 802.1Q',
      E() / Dot1AD(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3) / v4() / UDP())
    m('vlan_too_many_tags', '802.1Q x3', E() / Dot1Q(vlan=1) /
      Dot1Q(vlan=2) / Dot1Q(vlan=3) / v6() / UDP())
    m('vlan_too_many_tags', '802.1ad x3 + arp', pad(
        E() / Dot1AD(vlan=1) / Dot1AD(vlan=2) / Dot1AD(vlan=3) / ARP()))

    # ipv4_truncated
    m('ipv4_truncated', 'ipv4 19 bytes', udp4[:14 + 19])
    m('ipv4_truncated', 'ipv4 0 bytes', udp4[:14])
    m('ipv4_truncated', 'vlan + ipv4 10 bytes', q[:18 + 10])
    m('ipv4_truncated', 'ipv4 cut by the capture (caplen 30 of 60)',
      pad(udp4)[:30], wirelen=60)
    m('ipv4_truncated', 'ipip inner ipv4 10 bytes', E() / v4(proto=4) /
      Raw(bytes(v4())[:10]))
    m('ipv4_truncated', 'gre inner ipv4 19 bytes', E() / v4(proto=47) /
      Raw(gre_hdr(0x0800, bytes(v4())[:19])))

    # ipv4_bad_version
    m('ipv4_bad_version', 'ethertype 0x0800 carrying ipv6',
      bytes(E(type=0x0800)) + bytes(v6() / UDP()))
    m('ipv4_bad_version', 'version 5', with_byte(udp4, 14, 0x55))
    m('ipv4_bad_version', 'version 0', with_byte(udp4, 14, 0x05))
    m('ipv4_bad_version', 'ipip proto 4 carrying ipv6', E() / v4(proto=4) /
      v6() / UDP())
    m('ipv4_bad_version', 'gre 0x0800 carrying ipv6', E() / v4(proto=47) /
      Raw(gre_hdr(0x0800, bytes(v6() / UDP()))))

    # ipv4_bad_ihl
    m('ipv4_bad_ihl', 'ihl 4', with_byte(udp4, 14, 0x44))
    m('ipv4_bad_ihl', 'ihl 0', with_byte(udp4, 14, 0x40))
    m('ipv4_bad_ihl', 'ihl 15 beyond the frame', pad(
        with_byte(bytes(E() / v4() / UDP()), 14, 0x4f)[:14 + 28]))
    m('ipv4_bad_ihl', 'ihl 6, frame ends after 20 bytes',
      with_byte(bytes(E() / v4(len=20)), 14, 0x46))

    # ipv4_bad_total_length
    m('ipv4_bad_total_length', 'total length 19', with_u16(udp4, 16, 19))
    m('ipv4_bad_total_length', 'total length 0', with_u16(udp4, 16, 0))
    m('ipv4_bad_total_length', 'total length beyond the frame by 1',
      with_u16(udp4, 16, len(udp4) - 14 + 1))
    m('ipv4_bad_total_length', 'total length 1500 in a 60-byte frame',
      pad(E() / v4(len=1500) / UDP()))
    m('ipv4_bad_total_length', 'ihl 6, total length 22',
      E() / v4(options=[IPOption_NOP()] * 4, len=22) / UDP())
    m('ipv4_bad_total_length', 'cut by the capture (caplen 40 of 74)',
      tcp4[:40], wirelen=len(tcp4))
    m('ipv4_bad_total_length', 'gre inner total length beyond outer',
      E() / v4(proto=47) / Raw(gre_hdr(0x0800, bytes(v4(len=100) / UDP()))))

    # ipv6_truncated
    u6 = bytes(E() / v6() / UDP())
    m('ipv6_truncated', 'ipv6 39 bytes', u6[:14 + 39])
    m('ipv6_truncated', 'ipv6 0 bytes', u6[:14])
    m('ipv6_truncated', 'ipv6-in-ipv4 inner 30 bytes', E() / v4(proto=41) /
      Raw(bytes(v6())[:30]))

    # ipv6_bad_version
    m('ipv6_bad_version', 'ethertype 0x86dd carrying ipv4',
      bytes(E(type=0x86dd)) + bytes(v4() / UDP() / Raw(b'\x00' * 20)))
    m('ipv6_bad_version', 'version 7', with_byte(u6, 14, 0x70))
    m('ipv6_bad_version', 'ipv6-in-ipv6 inner version 4', E() / v6(nh=41) /
      Raw(bytes(v4() / UDP() / Raw(b'\x00' * 20))))

    # ipv6_bad_payload_length
    m('ipv6_bad_payload_length', 'payload length 100, 8 present',
      E() / v6(plen=100) / UDP())
    m('ipv6_bad_payload_length', 'payload length 65535',
      E() / v6(plen=65535) / TCP())
    m('ipv6_bad_payload_length', 'payload length beyond by 1',
      with_u16(u6, 18, 9))
    m('ipv6_bad_payload_length', 'gre inner ipv6 payload length beyond',
      E() / v4(proto=47) / Raw(gre_hdr(0x86dd, bytes(v6(plen=50) / UDP()))))

    # ipv6_ext_truncated
    m('ipv6_ext_truncated', 'hop-by-hop of 24 bytes, 8 in the datagram',
      E() / v6(nh=0, plen=8) / Raw(b'\x11\x02' + b'\x00' * 6))
    m('ipv6_ext_truncated', 'dst opts 4 bytes', E() / v6(nh=60, plen=4) /
      Raw(b'\x11\x00\x01\x02'))
    m('ipv6_ext_truncated', 'fragment header 6 bytes', E() /
      v6(nh=44, plen=6) / Raw(b'\x11\x00\x00\x01\x00\x00'))
    m('ipv6_ext_truncated', 'cut by the payload length, frame padded',
      pad(E() / v6(nh=0, plen=8) / Raw(b'\x11\x01' + b'\x00' * 14), 120))
    m('ipv6_ext_truncated', 'second header of a chain cut short',
      E() / v6(nh=0, plen=12) / Raw(b'\x2b\x00\x01\x04\x00\x00\x00\x00' +
                                    b'\x11\x02\x00\x00'))

    # ipv6_ext_too_many
    nine = v6() / IPv6ExtHdrHopByHop()
    for _ in range(8):
        nine = nine / IPv6ExtHdrDestOpt()
    m('ipv6_ext_too_many', '9 extension headers', E() / nine / UDP())
    nine_mixed = v6() / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / \
        IPv6ExtHdrRouting() / IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting() / \
        IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting() / IPv6ExtHdrDestOpt() / \
        IPv6ExtHdrFragment(m=1)
    m('ipv6_ext_too_many', '9 mixed extension headers', E() / nine_mixed /
      TCP())
    m('ipv6_ext_too_many', 'ipv6-in-ipv4 inner 9 headers', E() /
      v4(proto=41) / nine / ICMPv6EchoRequest())

    # tcp_truncated
    m('tcp_truncated', 'tcp 19 bytes', E() / v4(proto=6) /
      Raw(bytes(TCP())[:19]))
    m('tcp_truncated', 'tcp 0 bytes', pad(E() / v4(proto=6)))
    m('tcp_truncated', 'ipv6 tcp 10 bytes', E() / v6(nh=6) /
      Raw(bytes(TCP())[:10]))
    m('tcp_truncated', 'first fragment with 8 bytes of tcp', E() /
      v4(flags='MF', proto=6) / Raw(bytes(TCP())[:8]))
    m('tcp_truncated', 'ipv6 hop-by-hop filling the datagram, tcp next',
      pad(E() / v6(plen=8) / IPv6ExtHdrHopByHop(nh=6), 80))
    m('tcp_truncated', 'tcp cut by ip total length, frame padded',
      pad(E() / v4(proto=6, len=30) / Raw(bytes(TCP())), 80))

    # tcp_bad_data_offset
    m('tcp_bad_data_offset', 'data offset 4', E() / v4() / TCP(dataofs=4))
    m('tcp_bad_data_offset', 'data offset 0', E() / v4() / TCP(dataofs=0))
    m('tcp_bad_data_offset', 'data offset 15 in 20 bytes', E() / v4() /
      TCP(dataofs=15))
    m('tcp_bad_data_offset', 'data offset 6 in 20 bytes', E() / v6() /
      TCP(dataofs=6))
    m('tcp_bad_data_offset', 'gre inner tcp data offset 2', E() /
      v4(proto=47) / Raw(gre_hdr(0x0800, bytes(v4() / TCP(dataofs=2)))))

    # udp_truncated
    m('udp_truncated', 'udp 7 bytes', E() / v4(proto=17) /
      Raw(bytes(UDP())[:7]))
    m('udp_truncated', 'udp 0 bytes', pad(E() / v4(proto=17)))
    m('udp_truncated', 'ipv6 udp 4 bytes', E() / v6(nh=17) /
      Raw(bytes(UDP())[:4]))
    m('udp_truncated', 'ipv6 payload length 0, next header udp, padded',
      pad(E() / v6(nh=17, plen=0)))
    m('udp_truncated', 'ipip inner udp 6 bytes', E() / v4(proto=4) /
      v4(proto=17) / Raw(b'\x00' * 6))

    # udp_bad_length
    m('udp_bad_length', 'udp length 7', E() / v4() / UDP(len=7) /
      Raw(b'x' * 4))
    m('udp_bad_length', 'udp length 0 (ipv4)', E() / v4() / UDP(len=0) /
      Raw(b'x' * 4))
    m('udp_bad_length', 'udp length beyond the datagram, frame padded',
      pad(E() / v4() / UDP(len=30), 90))
    m('udp_bad_length', 'ipv6 udp length 9 of 8', E() / v6() / UDP(len=9))

    # icmp_truncated (the ICMP/ICMPv6 header is 8 bytes: type, code,
    # checksum and the 4-byte rest-of-header; tshark needs all 8 too)
    m('icmp_truncated', 'icmp 4 bytes', pad(E() / v4(proto=1) /
                                            Raw(b'\x08\x00\xf7\xff')))
    m('icmp_truncated', 'icmp 7 bytes', E() / v4(proto=1) /
      Raw(bytes(ICMP())[:7]))
    m('icmp_truncated', 'icmp 0 bytes', pad(E() / v4(proto=1)))
    m('icmp_truncated', 'icmpv6 6 bytes', E() / v6(nh=58) /
      Raw(bytes(ICMPv6EchoRequest())[:6]))
    m('icmp_truncated', 'ipv6-in-ipv6 inner icmpv6 2 bytes', E() /
      v6(nh=41) / v6(nh=58) / Raw(b'\x80\x00'))

    # sctp_truncated
    m('sctp_truncated', 'sctp 11 bytes', E() / v4(proto=132) /
      Raw(bytes(SCTP())[:11]))
    m('sctp_truncated', 'sctp 0 bytes', pad(E() / v4(proto=132)))
    m('sctp_truncated', 'ipv6 sctp 8 bytes', E() / v6(nh=132) /
      Raw(bytes(SCTP())[:8]))

    # gre_truncated
    m('gre_truncated', 'gre 3 bytes', E() / v4(proto=47) / Raw(b'\x00' * 3))
    m('gre_truncated', 'gre checksum bit, 4 bytes', E() / v4(proto=47) /
      Raw(b'\x80\x00\x08\x00'))
    m('gre_truncated', 'gre key bit, 6 bytes', E() / v4(proto=47) /
      Raw(b'\x20\x00\x08\x00\x00\x01'))
    m('gre_truncated', 'gre csum+key+seq, 12 bytes', E() / v4(proto=47) /
      Raw(b'\xb0\x00\x08\x00' + b'\x00' * 8))
    m('gre_truncated', 'gre seq bit, 7 bytes, frame padded', pad(
        E() / v4(proto=47) / Raw(b'\x10\x00\x08\x00\x00\x00\x00'), 80))

    # gre_bad_version
    m('gre_bad_version', 'gre version 1 (pptp)', E() / v4(proto=47) /
      Raw(struct.pack('!HHHHI', 0x3001, 0x880b, 0, 7, 1)))
    m('gre_bad_version', 'gre version 7', E() / v4(proto=47) /
      Raw(struct.pack('!HH', 0x0007, 0x0800) + bytes(v4() / UDP())))
    m('gre_bad_version', 'gre routing bit', E() / v4(proto=47) /
      Raw(struct.pack('!HHHH', 0x4000, 0x0800, 0, 0) +
          b'\x00\x00\x00\x00' + bytes(v4() / UDP())))

    # tunnel_unknown_payload
    m('tunnel_unknown_payload', 'gre arp (0x0806)', E() / v4(proto=47) /
      Raw(gre_hdr(0x0806, bytes(ARP()))))
    m('tunnel_unknown_payload', 'gre ppp (0x880b), key', E() / v6(nh=47) /
      Raw(gre_hdr(0x880b, b'\xff\x03\x00\x21', key=1)))

    return Capture('malformed', LINKTYPE_ETHERNET, c, malformed=True)


def cap_tun_invalid():
    """UDP to 4789/6081 whose payload is not the tunnel the port names:
    valid UDP packets for dpflow (docs/inspect.md), each labelled with why
    the tunnel fails, which compare.py must derive from tshark too."""
    c = []

    def t(reason, label, data):
        c.append(Case(label, data, tun_invalid=reason))

    def vx(inner, vni=1, outer=None):
        return bytes(udp_tun(outer or v4(), 4789, vxlan_hdr(vni) +
                             bytes(inner)))

    # the tunnel header itself
    t('vxlan_truncated', 'vxlan 7 bytes', udp_tun(v4(), 4789,
                                                  vxlan_hdr(1)[:7]))
    t('vxlan_truncated', 'vxlan 0 bytes', udp_tun(v6(), 4789, b''))
    t('vxlan_truncated', 'vxlan cut by udp length, frame padded', pad(
        E() / v4() / UDP(sport=5, dport=4789, len=12) /
        Raw(vxlan_hdr(1)[:4]), 80))
    t('vxlan_truncated', "udp 4789 carrying 'hello'", udp_tun(
        v4(), 4789, b'hello'))
    t('vxlan_i_flag_clear', 'vxlan flags 0, valid inner frame', udp_tun(
        v4(), 4789, vxlan_hdr(2, flags=0) + bytes(inner_eth() / v4() /
                                                  UDP())))
    t('vxlan_i_flag_clear', 'vxlan flags 0xf7 (all but I) over ipv6',
      udp_tun(v6(), 4789, vxlan_hdr(3, flags=0xf7) +
              bytes(inner_eth() / v6() / TCP())))
    t('vxlan_i_flag_clear', 'udp 4789 carrying a dns-like query',
      udp_tun(v4(), 4789, b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00'
              b'\x00\x07example\x03com\x00\x00\x01\x00\x01'))
    t('geneve_truncated', 'geneve 7 bytes', udp_tun(
        v4(), 6081, geneve_hdr(1, 0x6558)[:7]))
    t('geneve_truncated', 'geneve options 4 of 8 bytes', udp_tun(
        v4(), 6081, geneve_hdr(1, 0x6558, optlen=2) + b'\x00\x01\x01\x00'))
    t('geneve_truncated', 'geneve options 252 bytes announced, none',
      udp_tun(v6(), 6081, geneve_hdr(1, 0x0800, optlen=63)))
    for ver in (1, 2, 3):
        t('geneve_bad_version', 'geneve version %d' % ver, udp_tun(
            v4(), 6081, geneve_hdr(1, 0x6558, ver=ver) +
            bytes(inner_eth() / v4() / UDP())))
    t('geneve_bad_version', "udp 6081 carrying 'GET / HTTP/1.0'", udp_tun(
        v4(), 6081, b'GET / HTTP/1.0\r\n\r\n'))
    t('geneve_unknown_payload', 'geneve arp (0x0806)', udp_tun(
        v4(), 6081, geneve_hdr(3, 0x0806) + bytes(ARP())))
    t('geneve_unknown_payload', 'geneve mpls (0x8847) with options',
      udp_tun(v4(), 6081, geneve_hdr(3, 0x8847, geneve_opt(1, 1, b'')) +
              b'\x00\x01\x01\x40' + bytes(v4() / UDP())))

    # the inner packet
    t('eth_truncated', 'vxlan inner eth 10 bytes', vx(b'\x02' * 10))
    t('eth_truncated', 'vxlan inner eth 0 bytes', vx(b''))
    t('eth_truncated', 'geneve 0x6558 inner eth 0 bytes', udp_tun(
        v4(), 6081, geneve_hdr(1, 0x6558)))
    t('vlan_truncated', 'vxlan inner 802.1Q tag 2 bytes',
      vx(bytes(inner_eth() / Dot1Q(vlan=5) / v4())[:16]))
    t('vlan_too_many_tags', 'vxlan inner 3 tags', vx(
        inner_eth() / Dot1Q(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3) / v4()))
    t('ipv4_bad_ihl', 'vxlan inner ihl 3', vx(with_byte(
        bytes(inner_eth() / v4() / UDP()), 14, 0x43)))
    t('ipv4_bad_total_length', 'vxlan inner total length beyond udp',
      vx(inner_eth() / v4(len=200) / UDP()))
    t('ipv6_truncated', 'geneve 0x86dd inner 20 bytes', udp_tun(
        v4(), 6081, geneve_hdr(2, 0x86dd) + bytes(v6())[:20]))
    t('ipv6_bad_version', 'geneve 0x86dd carrying ipv4', udp_tun(
        v6(), 6081, geneve_hdr(2, 0x86dd) + bytes(v4() / UDP() /
                                                  Raw(b'\x00' * 20))))
    t('ipv6_ext_truncated', 'vxlan inner routing header cut', vx(
        inner_eth() / v6(nh=43, plen=8) / Raw(b'\x11\x01\x00\x00' +
                                              b'\x00' * 4)))
    t('tcp_truncated', 'vxlan inner tcp 12 bytes', vx(
        inner_eth() / v4(proto=6) / Raw(bytes(TCP())[:12])))
    t('tcp_bad_data_offset', 'geneve 0x0800 inner tcp data offset 3',
      udp_tun(v4(), 6081, geneve_hdr(4, 0x0800) +
              bytes(v4() / TCP(dataofs=3))))
    t('udp_bad_length', 'vxlan inner udp length 100', vx(
        inner_eth() / v4() / UDP(len=100)))
    t('icmp_truncated', 'vxlan over ipv6, inner icmpv6 4 bytes', vx(
        inner_eth() / v6(nh=58) / Raw(b'\x80\x00\x00\x00'), outer=v6()))
    return Capture('tun_invalid', LINKTYPE_ETHERNET, c)


def cap_fuzz(bases, count=1500, seed=20240101):
    """Seeded random corruptions of the well-formed Ethernet cases: a cut
    at a random length, or 1 to 3 random bytes (after the MAC addresses,
    within the first 120) set to random values. Their expected objects come
    from tshark alone (no label)."""
    rnd = random.Random(seed)
    base = [c for cap in bases for c in cap.cases]
    c = []
    for k in range(count):
        b = rnd.choice(base)
        d = bytearray(b.data)
        if rnd.random() < 0.4:
            d = d[:rnd.randrange(0, len(d))]
            what = 'cut at %d' % len(d)
        else:
            pos = []
            for _ in range(rnd.randint(1, 3)):
                p = rnd.randrange(12, min(len(d), 120))
                d[p] = rnd.randrange(256)
                pos.append(p)
            what = 'bytes %s set' % ','.join(map(str, sorted(set(pos))))
        c.append(Case('%s, %s' % (b.label, what), bytes(d)))
    return Capture('fuzz', LINKTYPE_ETHERNET, c, fuzz=True)


def build():
    """Every capture, malformed and fuzz last."""
    caps = [cap_l2(), cap_jumbo(), cap_ipv4(), cap_ipv6(), cap_l4(),
            cap_vxlan(), cap_geneve(), cap_gre(), cap_ipip(), cap_sll(),
            cap_sll2(), cap_raw(), cap_null(), cap_loop(), cap_pcapng(),
            cap_malformed(), cap_tun_invalid()]
    caps.append(cap_fuzz([c for c in caps if c.linktype == LINKTYPE_ETHERNET
                          and c.fmt == 'pcap' and not c.malformed and
                          c.name not in ('jumbo', 'tun_invalid')]))
    return caps


# ---------------------------------------------------------------------------
# Writers

def write_pcap(path, linktype, cases):
    """Classic pcap in host byte order (so DLT_NULL's host-endian AF is the
    reader's too), microsecond stamps, packet i at i ms."""
    with open(path, 'wb') as f:
        f.write(struct.pack('=IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 262144,
                            linktype))
        for i, c in enumerate(cases):
            f.write(struct.pack('=IIII', 1700000000, i * 1000, len(c.data),
                                c.wirelen))
            f.write(c.data)


def write_pcapng(path, linktype, cases):
    if PcapNgWriter is not None and linktype == LINKTYPE_ETHERNET and \
            all(c.wirelen == len(c.data) for c in cases):
        w = PcapNgWriter(path)
        for i, c in enumerate(cases):
            p = Ether(c.data)
            p.time = 1700000000 + i / 1000.0
            w.write(p)
        w.close()
        return
    # By hand: SHB, one IDB, one EPB per packet (host byte order).
    def block(btype, body):
        body += b'\x00' * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack('=II', btype, n) + body + struct.pack('=I', n)
    with open(path, 'wb') as f:
        f.write(block(0x0a0d0d0a, struct.pack('=IHHq', 0x1a2b3c4d, 1, 0,
                                              -1)))
        f.write(block(0x00000001, struct.pack('=HHI', linktype, 0, 262144)))
        for i, c in enumerate(cases):
            ts = (1700000000 * 1000000) + i * 1000
            f.write(block(0x00000006, struct.pack(
                '=IIIII', 0, ts >> 32, ts & 0xffffffff, len(c.data),
                c.wirelen) + c.data))


def write(cap, directory):
    path = os.path.join(directory, cap.filename)
    if cap.fmt == 'pcapng':
        write_pcapng(path, cap.linktype, cap.cases)
    else:
        write_pcap(path, cap.linktype, cap.cases)
    return path


def main(argv):
    if len(argv) != 1:
        sys.stderr.write('usage: edge_cases.py DIR\n')
        return 2
    os.makedirs(argv[0], exist_ok=True)
    for cap in build():
        path = write(cap, argv[0])
        print('%s: %d packets%s' % (path, len(cap.cases),
                                    ' (malformed)' if cap.malformed else ''))
        for i, c in enumerate(cap.cases):
            print('  %3d %-24s %s' % (i, c.drop or c.tun_invalid or '-',
                                      c.label))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
