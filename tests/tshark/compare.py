#!/usr/bin/python3
"""Compare `dpflow inspect` with tshark, packet by packet and field by field.

Usage: compare.py [--max N] DPFLOW FILE...
       compare.py --expected DPFLOW FILE...   (print the objects derived
                                             from tshark; DPFLOW unused)

For every packet of every FILE (pcap or pcapng), the expected `dpflow
inspect` object is derived from tshark's dissection (PDML) by applying the
rules of docs/inspect.md to tshark's field values and header offsets; every
key (outer, inner and `drop`) is then compared with what dpflow printed. A
packet that dpflow drops must also be one that tshark flags (malformed,
short, unreassembled, or an error/warning expert item of the Malformed or
Protocol group) whenever the drop reason is one tshark is expected to
complain about (COMPLAINS below). docs/testing-parser.md explains the
method and every tshark option used here.

UDP to port 4789 or 6081 whose payload is not the tunnel the port names
is plain UDP for dpflow (`tun_invalid` true, no drop): the reason the
tunnel failed is derived from tshark like a drop reason, and tshark must
flag the packet whenever that reason is one it complains about.

Prints one line per mismatch: packet index, field, dpflow value, tshark
value. Exits 0 when every file matches, 1 otherwise.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# Keys of an inspect object, in the order of docs/inspect.md.
KEYS = ['len', 'link', 'l2', 'vlan', 'ethertype', 'l3', 'src', 'dst', 'proto',
        'ttl', 'tos', 'frag', 'frag_kind', 'ipv6_ext', 'l4', 'sport', 'dport',
        'icmp_type', 'icmp_code', 'tcp_flags', 'tun', 'vni', 'key',
        'tun_invalid', 'inner', 'drop']
# Keys of the `inner` object ("the keys l2 to tcp_flags").
INNER_KEYS = KEYS[KEYS.index('l2'):KEYS.index('tcp_flags') + 1]

# Every drop reason the parser can give (docs/inspect.md, "Drop reasons").
PARSER_DROPS = [
    'eth_truncated', 'vlan_truncated', 'vlan_too_many_tags',
    'ipv4_truncated', 'ipv4_bad_version', 'ipv4_bad_ihl',
    'ipv4_bad_total_length', 'ipv6_truncated', 'ipv6_bad_version',
    'ipv6_bad_payload_length', 'ipv6_ext_truncated', 'ipv6_ext_too_many',
    'tcp_truncated', 'tcp_bad_data_offset', 'udp_truncated',
    'udp_bad_length', 'icmp_truncated', 'sctp_truncated', 'gre_truncated',
    'gre_bad_version', 'tunnel_unknown_payload',
]

# Why a VXLAN/GENEVE payload is not one (the packet is then plain UDP with
# `tun_invalid`): the tunnel header's own checks, or any parser drop reason
# of the inner packet. Not drop names: dpflow does not print them.
TUN_INVALID_REASONS = [
    'vxlan_truncated', 'vxlan_i_flag_clear', 'geneve_truncated',
    'geneve_bad_version', 'geneve_unknown_payload',
]

# Drop reasons for which tshark itself reports a problem (checked: a packet
# dpflow drops for one of these must carry a tshark complaint). The others
# describe packets tshark dissects without complaint, so they are verified
# from tshark's field values only (the expected reason is derived from them
# like every other key):
#   vlan_too_many_tags     tshark dissects any number of VLAN tags
#   ipv4_bad_version       reached through IP protocol 4 or GRE 0x0800,
#                          tshark picks IPv4 or IPv6 by the version nibble
#                          and dissects an IPv6 header there silently
#   ipv6_ext_too_many      tshark walks any number of extension headers
#   gre_bad_version        tshark dissects GRE version 1 (PPTP) silently;
#                          the routing bit alone does not make it complain
#   tunnel_unknown_payload tshark hands any GENEVE/GRE protocol type to its
#                          ethertype table (ARP, MPLS... are fine for it)
# Besides, tshark does not dissect an empty payload: a truncated header of
# which not one byte is present (TCP after an IPv4 header whose total length
# ends there, say) is not flagged, so no complaint is required then.
COMPLAINS = set(PARSER_DROPS) - {'vlan_too_many_tags', 'ipv4_bad_version',
                                 'ipv6_ext_too_many', 'gre_bad_version',
                                 'tunnel_unknown_payload'}
# The tunnel failures tshark complains about (a short header: Malformed; a
# GENEVE version: "Unknown version"), and those of the inner packet it
# complains about as drops. Not: a VXLAN I flag clear (tshark decodes the
# payload silently) and an unknown GENEVE protocol type (its ethertype
# table takes any).
TUN_COMPLAINS = {'vxlan_truncated', 'geneve_truncated',
                 'geneve_bad_version'} | COMPLAINS

# tshark encapsulation (frame.encap_type, WTAP_ENCAP_*) -> inspect `link`,
# with the length of the link header that dpflow replaces by a 14-byte
# Ethernet header.
ENCAP = {
    1: ('eth', 14),    # WTAP_ENCAP_ETHERNET
    25: ('sll', 16),   # WTAP_ENCAP_SLL
    210: ('sll2', 20),  # WTAP_ENCAP_SLL2
    7: ('raw', 0),     # WTAP_ENCAP_RAW_IP (DLT_RAW, linktype 101)
    15: ('null', 4),   # WTAP_ENCAP_NULL (BSD loopback, host-endian AF)
    174: ('loop', 4),  # WTAP_ENCAP_LOOP (OpenBSD loopback, network order)
}
# BSD address families: AF_INET everywhere, AF_INET6 on NetBSD/OpenBSD
# (24), FreeBSD (28) and macOS (30).
AF_ETHERTYPE = {2: 0x0800, 24: 0x86dd, 28: 0x86dd, 30: 0x86dd}

TUNNEL_PAYLOADS = (0x6558, 0x0800, 0x86dd)
VXLAN_PORT = 4789
GENEVE_PORT = 6081
IPV6_EXT = {0: 'ipv6.hopopts', 43: 'ipv6.routing', 44: 'ipv6.fraghdr',
            60: 'ipv6.dstopts'}
IPV6_MAX_EXT = 8

# ---------------------------------------------------------------------------
# tshark

# The only protocols tshark is allowed to dissect: those dpflow parses, the
# link layers it reads, and tshark's own bookkeeping. Everything else is
# disabled (their port registrations and heuristics with them), so tshark
# can neither give a payload to another dissector nor guess at one.
TSHARK_ENABLED = {
    'frame', 'eth', 'ethertype', 'vlan', 'ieee8021ad', 'sll', 'null', 'raw',
    'arp', 'ip', 'ipv6', 'ipv6.hopopts', 'ipv6.routing', 'ipv6.fraghdr',
    'ipv6.dstopts', 'tcp', 'udp', 'icmp', 'icmpv6', 'sctp', 'gre', 'vxlan',
    'geneve', 'data', '_ws.malformed', '_ws.expert', '_ws.short',
    '_ws.unreassembled', '_ws.type_length', '_ws.number_string.decoding_error',
    '_ws.string', '_ws.ftypes', '_ws.lua',
}
# Sub-protocols of enabled ones (option and routing-type decoders).
TSHARK_ENABLED_PREFIXES = ('ip.options.', 'tcp.options.',
                           'ipv6.routing.type.')

# Port registrations of enabled protocols that are not dpflow's: GRE over
# UDP (4754) and SCTP over UDP (9899) would take a VXLAN/GENEVE packet whose
# source port is one of them (tshark tries the lower port first).
TSHARK_DECODE_AS = """\
decode_as_entry: udp.port,4754,gre,(none)
decode_as_entry: udp.port,9899,sctp,(none)
"""

TSHARK_OPTS = [
    '-n',                                  # no name resolution
    '-o', 'ip.defragment:FALSE',           # each fragment on its own
    '-o', 'ipv6.defragment:FALSE',
    '-o', 'ip.tso_support:FALSE',          # total length 0 is an error,
                                           # not "the rest of the frame"
    '-o', 'ipv6.tso_support:FALSE',
    '-o', 'tcp.desegment_tcp_streams:FALSE',
    '-o', 'tcp.analyze_sequence_numbers:FALSE',  # no sequence experts
    '-o', 'tcp.calculate_timestamps:FALSE',
    '-o', 'udp.calculate_timestamps:FALSE',
    '-o', 'sctp.reassembly:FALSE',
    '-o', 'sctp.tsn_analysis:FALSE',
    '-d', 'udp.port==%d,vxlan' % VXLAN_PORT,    # the defaults, made explicit
    '-d', 'udp.port==%d,geneve' % GENEVE_PORT,
]

_tshark_cfg = None


def tshark_config_dir():
    """A private Wireshark configuration directory (WIRESHARK_CONFIG_DIR)
    with every protocol outside TSHARK_ENABLED disabled, so that the user's
    own profile cannot change the result either."""
    global _tshark_cfg
    if _tshark_cfg:
        return _tshark_cfg
    d = tempfile.mkdtemp(prefix='dpflow-tshark-cfg-')
    env = dict(os.environ, WIRESHARK_CONFIG_DIR=d)
    out = subprocess.run(['tshark', '-G', 'protocols'], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         universal_newlines=True, check=True).stdout
    names = sorted({ln.split('\t')[2] for ln in out.splitlines()
                    if ln.count('\t') >= 2})
    missing = [n for n in TSHARK_ENABLED if n not in names]
    if missing:
        raise RuntimeError('tshark lacks protocols: %s' % ' '.join(missing))
    with open(os.path.join(d, 'disabled_protos'), 'w') as f:
        for n in names:
            if n not in TSHARK_ENABLED and \
                    not n.startswith(TSHARK_ENABLED_PREFIXES):
                f.write(n + '\n')
    with open(os.path.join(d, 'decode_as_entries'), 'w') as f:
        f.write(TSHARK_DECODE_AS)
    _tshark_cfg = d
    return d


def tshark_cleanup():
    global _tshark_cfg
    if _tshark_cfg:
        shutil.rmtree(_tshark_cfg, ignore_errors=True)
        _tshark_cfg = None


def tshark_cmd(path):
    return ['tshark'] + TSHARK_OPTS + ['-r', path, '-T', 'pdml']


def tshark_env():
    return dict(os.environ, WIRESHARK_CONFIG_DIR=tshark_config_dir(),
                LC_ALL='C')


class TField(object):
    __slots__ = ('name', 'show', 'value', 'pos', 'size')

    def __init__(self, el):
        self.name = el.get('name')
        self.show = el.get('show')
        self.value = el.get('value')
        self.pos = _int_attr(el.get('pos'))
        self.size = _int_attr(el.get('size'))


def _int_attr(s):
    try:
        return int(s)
    except (TypeError, ValueError):
        return None


class Unverifiable(Exception):
    """tshark's dissection lacks what the expected value must come from."""


class TProto(object):
    def __init__(self, el):
        self.name = el.get('name')
        self.pos = _int_attr(el.get('pos'))
        self.size = _int_attr(el.get('size'))
        self.fields = []
        self._collect(el)

    def _collect(self, el):
        for c in el:
            if c.tag == 'field':
                self.fields.append(TField(c))
                self._collect(c)

    def field(self, name, pos=None):
        for f in self.fields:
            if f.name == name and (pos is None or f.pos == pos):
                return f
        return None

    def int(self, name, pos=None):
        f = self.field(name, pos)
        if f is None or f.show is None:
            raise Unverifiable('tshark gives no %s in %s at offset %s' %
                               (name, self.name, self.pos))
        try:
            return int(f.show, 0)
        except ValueError:
            raise Unverifiable('tshark %s is %r, not a number' %
                               (name, f.show))

    def str(self, name):
        f = self.field(name)
        if f is None or f.show is None:
            raise Unverifiable('tshark gives no %s in %s at offset %s' %
                               (name, self.name, self.pos))
        return f.show

    def raw16(self, pos):
        """The 16-bit field at frame offset @pos, from its bytes."""
        for f in self.fields:
            if f.pos == pos and f.size == 2 and f.value and \
                    len(f.value) == 4:
                return int(f.value, 16)
        raise Unverifiable('tshark gives no 16-bit field at offset %d in %s'
                           % (pos, self.name))


TAG_ID_FIELDS = ('vlan.id', 'ieee8021ad.id', 'ieee8021ad.svid',
                 'ieee8021ad.cvid')

EXPERT_RE = re.compile(r'Expert Info \(([^/]+)/([^)]+)\): (.*)')


class TPacket(object):
    def __init__(self, el):
        self.protos = []
        self.complaints = []
        self.notes = []
        self.encap = self.caplen = self.wirelen = None
        self._walk(el)
        if self.caplen is None:
            raise Unverifiable('tshark gives no frame.cap_len')

    def _walk(self, el):
        for c in el:
            if c.tag == 'proto':
                name = c.get('name')
                if name == 'frame':
                    p = TProto(c)
                    self.encap = p.int('frame.encap_type')
                    self.caplen = p.int('frame.cap_len')
                    self.wirelen = p.int('frame.len')
                    continue
                if name == 'geninfo':
                    continue
                if name in ('_ws.malformed', '_ws.short',
                            '_ws.unreassembled'):
                    self.complaints.append('%s at offset %s' %
                                           (name, c.get('pos')))
                self.protos.append(TProto(c))
                self._walk(c)
            elif c.tag == 'field':
                if c.get('name') == '_ws.expert':
                    m = EXPERT_RE.match(c.get('showname') or '')
                    if m:
                        sev, group, msg = m.groups()
                        text = '%s/%s: %s' % (sev, group, msg)
                        if sev in ('Error', 'Warning') and \
                                group in ('Malformed', 'Protocol',
                                          'Reassemble'):
                            self.complaints.append(text)
                        else:
                            self.notes.append(text)
                self._walk(c)

    def tag(self, off, name):
        """(VLAN id, next ethertype) of the tag at @off, whose TPID said
        @name ('vlan' for 0x8100, 'ieee8021ad' for 0x88a8)."""
        for p in self.protos:
            # (tshark's 802.1ad header for two 0x88a8 tags is 4 bytes long
            # but holds the fields of both)
            if p.name != name:
                continue
            vid = None
            for f in p.fields:
                if f.pos == off and f.size == 2 and f.name in TAG_ID_FIELDS:
                    vid = int(f.show, 0)
                    break
            if vid is None:
                continue
            for f in p.fields:
                if f.pos == off + 2 and f.size == 2 and f.value and \
                        len(f.value) == 4:
                    return vid, int(f.value, 16)
            # tshark shows two 0x88a8 tags as one 802.1ad header (S-VID,
            # then C-VID at off + 4) without a field for the second TPID.
            for f in p.fields:
                if f.pos == off + 4 and f.name == 'ieee8021ad.cvid':
                    return vid, 0x88a8
            raise Unverifiable('tshark gives no ethertype after the tag at '
                               'offset %d' % off)
        raise Unverifiable('tshark has no %s tag at offset %d' % (name, off))

    def ip_version(self, off):
        """The IP version nibble at @off, as tshark decoded it (it picks
        IPv4 or IPv6 by this nibble on some paths, not by what led there)."""
        for p in self.protos:
            if p.pos == off and p.name == 'ip':
                f = p.field('ip.version', off)
                if f is not None:
                    return int(f.show, 0)
        for p in self.protos:
            if p.pos == off and p.name == 'ipv6':
                return p.int('ipv6.version')
        raise Unverifiable('tshark has no IP header at offset %d' % off)

    def get(self, names, pos):
        if isinstance(names, str):
            names = (names,)
        for p in self.protos:
            if p.pos == pos and p.name in names:
                return p
        raise Unverifiable('tshark has no %s header at offset %d' %
                           ('/'.join(names), pos))


def tshark_packets(path):
    """Yield (TPacket or Unverifiable) for each packet of @path."""
    errf = tempfile.TemporaryFile()
    proc = subprocess.Popen(tshark_cmd(path), stdout=subprocess.PIPE,
                            stderr=errf, env=tshark_env())
    try:
        for _, el in ET.iterparse(proc.stdout):
            if el.tag != 'packet':
                continue
            try:
                yield TPacket(el)
            except Unverifiable as e:
                yield e
            el.clear()
    finally:
        proc.stdout.close()
        rc = proc.wait()
        errf.seek(0)
        err = errf.read().decode('utf-8', 'replace')
        errf.close()
        if rc != 0:
            raise RuntimeError('tshark exited %d on %s: %s' %
                               (rc, path, err.strip()[-500:]))


# ---------------------------------------------------------------------------
# The expected inspect object, from tshark's fields and docs/inspect.md.

class Drop(Exception):
    def __init__(self, reason, avail=None):
        Exception.__init__(self, reason)
        self.reason = reason
        self.avail = avail      # bytes of a truncated header present


def empty_hdr():
    h = {k: None for k in INNER_KEYS}
    h['vlan'] = []      # "list" in docs/inspect.md, never null
    return h


class Model(object):
    """Derive the inspect object of one packet from tshark's dissection.

    Values are committed layer by layer (L2: l2/vlan/ethertype; L3: l3 to
    ipv6_ext; L4: l4 to tcp_flags; tunnel: tun/vni/key, then `inner`), each
    only once all its headers passed every check, so that when a check
    fails the keys of that layer and of those after it stay null
    (docs/inspect.md: "A layer's keys are filled only when its header
    passed every check").
    """

    def __init__(self, tp):
        self.tp = tp
        self.out = {k: None for k in KEYS}
        self.out['tun_invalid'] = False
        self.empty = False      # dropped for a header with no byte at all
        self.tun_fail = None    # Drop: why a VXLAN/GENEVE payload is none

    def run(self):
        tp = self.tp
        out = self.out
        if tp.encap not in ENCAP:
            raise Unverifiable('link type (tshark encapsulation %s) is not '
                               'one dpflow reads' % tp.encap)
        link, hlen = ENCAP[tp.encap]
        out['link'] = link
        out['len'] = tp.caplen - hlen + 14
        outer = empty_hdr()
        try:
            self.frame(outer, link, hlen)
        except Drop as d:
            out['drop'] = d.reason
            self.empty = d.avail == 0
        for k in INNER_KEYS:
            out[k] = outer[k]
        return out

    # -- link and L2 --

    def frame(self, h, link, hlen):
        tp = self.tp
        end = tp.caplen
        if link == 'eth':
            et, off = self.eth(h, 0, end)
        else:
            if end < hlen:
                raise Unverifiable('frame shorter than its %s header' % link)
            if link in ('sll', 'sll2'):
                p = tp.get('sll', 0)
                et = p.raw16(14 if link == 'sll' else 0)
            elif link == 'raw':
                p = tp.get(('ip', 'ipv6'), 0)
                ver = p.int('ip.version') if p.name == 'ip' else \
                    p.int('ipv6.version')
                et = {4: 0x0800, 6: 0x86dd}.get(ver)
                if et is None:
                    raise Unverifiable('raw IP version %d' % ver)
            else:
                fam = tp.get('null', 0).int('null.family')
                et = AF_ETHERTYPE.get(fam)
                if et is None:
                    raise Unverifiable('loopback address family %d' % fam)
            et, off = self.tags(h, et, hlen, end)
        self.l3(h, et, off, end, outer=True)

    def eth(self, h, off, end):
        if end - off < 14:
            raise Drop('eth_truncated', end - off)
        p = self.tp.get('eth', off)
        et = p.raw16(off + 12)   # eth.type, or eth.len of an 802.3 frame
        return self.tags(h, et, off + 14, end)

    def tags(self, h, et, off, end):
        vlans = []
        while et in (0x8100, 0x88a8):
            if len(vlans) == 2:
                raise Drop('vlan_too_many_tags')
            if end - off < 4:
                raise Drop('vlan_truncated', end - off)
            vid, et = self.tp.tag(off, 'vlan' if et == 0x8100 else
                                  'ieee8021ad')
            vlans.append(vid)
            off += 4
        h['l2'] = 'eth'
        h['vlan'] = vlans
        h['ethertype'] = et
        return et, off

    # -- L3 --

    def l3(self, h, et, off, end, outer):
        if et == 0x0800:
            r = self.ipv4(h, off, end)
        elif et == 0x86dd:
            r = self.ipv6(h, off, end)
        else:
            h['l3'] = 'other'
            return
        self.l4(h, *r, outer=outer)

    def ipv4(self, h, off, end):
        avail = end - off
        if avail < 20:
            raise Drop('ipv4_truncated', avail)
        if self.tp.ip_version(off) != 4:
            raise Drop('ipv4_bad_version')
        p = self.tp.get('ip', off)
        ihl = p.int('ip.hdr_len')            # bytes
        if ihl < 20 or ihl > avail:
            raise Drop('ipv4_bad_ihl')
        tot = p.int('ip.len')
        if tot < ihl or tot > avail:
            raise Drop('ipv4_bad_total_length')
        mf = p.int('ip.flags.mf')
        fo = p.int('ip.frag_offset')
        kind = 'later' if fo else ('first' if mf else None)
        proto = p.int('ip.proto')
        h.update(l3='ipv4', src=p.str('ip.src'), dst=p.str('ip.dst'),
                 proto=proto, ttl=p.int('ip.ttl'), tos=p.int('ip.dsfield'),
                 frag=kind is not None, frag_kind=kind, ipv6_ext=None)
        return proto, off + ihl, off + tot, kind

    def ipv6(self, h, off, end):
        avail = end - off
        if avail < 40:
            raise Drop('ipv6_truncated', avail)
        if self.tp.ip_version(off) != 6:
            raise Drop('ipv6_bad_version')
        p = self.tp.get('ipv6', off)
        plen = p.int('ipv6.plen')
        if 40 + plen > avail:
            raise Drop('ipv6_bad_payload_length')
        dend = off + 40 + plen
        nh = p.int('ipv6.nxt')
        cur = off + 40
        n = 0
        kind = None
        while nh in IPV6_EXT:
            if n == IPV6_MAX_EXT:
                raise Drop('ipv6_ext_too_many')
            if dend - cur < 8:
                raise Drop('ipv6_ext_truncated', dend - cur)
            name = IPV6_EXT[nh]
            e = self.tp.get(name, cur)
            hl = 8 if nh == 44 else (e.int(name + '.len') + 1) * 8
            if dend - cur < hl:
                raise Drop('ipv6_ext_truncated')
            n += 1
            nxt = e.int(name + '.nxt')
            if nh == 44:
                fo = e.int('ipv6.fraghdr.offset')
                if fo:
                    kind = 'later'
                    nh = nxt
                    cur += hl
                    break
                if e.int('ipv6.fraghdr.more'):
                    kind = 'first'
            nh = nxt
            cur += hl
        h.update(l3='ipv6', src=p.str('ipv6.src'), dst=p.str('ipv6.dst'),
                 proto=nh, ttl=p.int('ipv6.hlim'), tos=p.int('ipv6.tclass'),
                 frag=kind is not None, frag_kind=kind, ipv6_ext=n)
        return nh, cur, dend, kind

    # -- L4 and tunnels --

    def l4(self, h, proto, off, dend, kind, outer):
        tp = self.tp
        if kind == 'later':
            return                      # no L4 header in a later fragment
        avail = dend - off
        if proto == 6:
            if avail < 20:
                raise Drop('tcp_truncated', avail)
            p = tp.get('tcp', off)
            doff = p.int('tcp.hdr_len')
            if doff < 20 or doff > avail:
                raise Drop('tcp_bad_data_offset')
            h.update(l4='tcp', sport=p.int('tcp.srcport'),
                     dport=p.int('tcp.dstport'),
                     tcp_flags=p.int('tcp.flags') & 0xff)
        elif proto == 17:
            if avail < 8:
                raise Drop('udp_truncated', avail)
            p = tp.get('udp', off)
            ulen = p.int('udp.length')
            # The UDP length of a first fragment counts the whole datagram:
            # tshark does not flag it as exceeding the fragment (see
            # docs/testing-parser.md), neither is it a parser error here.
            if ulen < 8 or (ulen > avail and kind != 'first'):
                raise Drop('udp_bad_length')
            dport = p.int('udp.dstport')
            h.update(l4='udp', sport=p.int('udp.srcport'), dport=dport)
            uend = off + min(ulen, avail)
            if outer and kind is None and dport in (VXLAN_PORT, GENEVE_PORT):
                self.udp_tunnel(dport, off + 8, uend)
        elif proto in (1, 58):
            if avail < 8:
                raise Drop('icmp_truncated', avail)
            name = 'icmp' if proto == 1 else 'icmpv6'
            p = tp.get(name, off)
            h.update(l4=name, icmp_type=p.int(name + '.type'),
                     icmp_code=p.int(name + '.code'))
        elif proto == 132:
            if avail < 12:
                raise Drop('sctp_truncated', avail)
            p = tp.get('sctp', off)
            h.update(l4='sctp', sport=p.int('sctp.srcport'),
                     dport=p.int('sctp.dstport'))
        elif proto == 59:
            if h['l3'] == 'ipv4':
                raise Unverifiable('IPv4 protocol 59: docs/inspect.md does '
                                   'not say whether "no next header" (an '
                                   'IPv6 notion) applies to IPv4')
            return                      # no next header: no L4
        else:
            h['l4'] = 'other'
            if outer and proto in (4, 41):
                self.tunnel('ipip', None, None)
                self.inner_ip(0x0800 if proto == 4 else 0x86dd, off, dend)
            elif outer and proto == 47:
                self.gre(off, dend)

    def tunnel(self, tun, vni, key):
        self.out.update(tun=tun, vni=vni, key=key)
        self.out['inner'] = empty_hdr()

    def inner_eth(self, off, end):
        h = self.out['inner']
        et, off = self.eth(h, off, end)
        self.l3(h, et, off, end, outer=False)

    def inner_ip(self, et, off, end):
        self.l3(self.out['inner'], et, off, end, outer=False)

    def udp_tunnel(self, dport, off, end):
        """The tunnel UDP destination port @dport names, from @off to the
        end of the UDP datagram. docs/inspect.md: when its header or its
        inner packet fails, the packet is plain UDP with `tun_invalid`
        (no drop, no tunnel keys)."""
        try:
            if dport == VXLAN_PORT:
                self.vxlan(off, end)
            else:
                self.geneve(off, end)
        except Drop as d:
            self.tun_fail = d
            self.out.update(tun=None, vni=None, key=None, inner=None,
                            tun_invalid=True)

    def vxlan(self, off, end):
        if end - off < 8:
            raise Drop('vxlan_truncated', end - off)
        p = self.tp.get('vxlan', off)
        if not p.int('vxlan.flag_i'):
            raise Drop('vxlan_i_flag_clear')
        self.tunnel('vxlan', p.int('vxlan.vni'), None)
        self.inner_eth(off + 8, end)

    def geneve(self, off, end):
        if end - off < 8:
            raise Drop('geneve_truncated', end - off)
        p = self.tp.get('geneve', off)
        if p.int('geneve.version') != 0:
            raise Drop('geneve_bad_version')
        optlen = p.int('geneve.option.length', pos=off)   # bytes
        if end - off < 8 + optlen:
            raise Drop('geneve_truncated')
        pt = p.int('geneve.proto_type')
        if pt not in TUNNEL_PAYLOADS:
            raise Drop('geneve_unknown_payload')
        self.tunnel('geneve', p.int('geneve.vni'), None)
        self.payload(pt, off + 8 + optlen, end)

    def gre(self, off, end):
        if end - off < 4:
            raise Drop('gre_truncated', end - off)
        p = self.tp.get('gre', off)
        if p.int('gre.flags.version') != 0 or p.int('gre.flags.routing'):
            raise Drop('gre_bad_version')
        has_key = p.int('gre.flags.key')
        hl = 4 + 4 * (p.int('gre.flags.checksum') + has_key +
                       p.int('gre.flags.sequence_number'))
        if end - off < hl:
            raise Drop('gre_truncated')
        pt = p.int('gre.proto')
        if pt not in TUNNEL_PAYLOADS:
            raise Drop('tunnel_unknown_payload')
        self.tunnel('gre', None, p.int('gre.key') if has_key else None)
        self.payload(pt, off + hl, end)

    def payload(self, pt, off, end):
        if pt == 0x6558:
            self.inner_eth(off, end)
        else:
            self.inner_ip(pt, off, end)


def expected(tp):
    """(expected inspect object, whether tshark must complain about it,
    why the payload of a tunnel port is no tunnel or None)."""
    m = Model(tp)
    out = m.run()
    t = m.tun_fail
    must = out['drop'] in COMPLAINS and not m.empty
    if t is not None and out['drop'] is None:
        must = t.reason in TUN_COMPLAINS and t.avail != 0
    return out, must, t.reason if t is not None else None


# ---------------------------------------------------------------------------
# dpflow

def dpflow_inspect(dpflow, path):
    """Run `dpflow inspect pcap:PATH`; returns (objects, error or None)."""
    try:
        r = subprocess.run([dpflow, 'inspect', 'pcap:' + path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], 'cannot run dpflow inspect: %s' % e
    objs = []
    for n, line in enumerate(r.stdout.decode('utf-8', 'replace')
                             .splitlines()):
        if not line.strip():
            continue
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            return objs, 'dpflow inspect line %d is not JSON (%s): %s' % (
                n + 1, e, line[:200])
    if r.returncode != 0:
        return objs, 'dpflow inspect exited %d: %s' % (
            r.returncode, r.stderr.decode('utf-8', 'replace').strip()[-300:])
    return objs, None


# ---------------------------------------------------------------------------
# Comparison

def show(v):
    return json.dumps(v, sort_keys=True)


def same(a, b):
    # json.dumps tells false from 0 and 1 from 1.0.
    return show(a) == show(b)


def compare_obj(i, got, exp, must_complain, tp, label=None, tun_fail=None):
    """Mismatch lines for packet @i: dpflow object @got vs expected @exp.
    @tun_fail: why tshark's fields make the tunnel port's payload none."""
    pfx = 'packet %d%s' % (i, ' (%s)' % label if label else '')
    bad = []
    if not isinstance(got, dict):
        return ['%s: dpflow output is not an object: %s' % (pfx, show(got))]
    if got.get('i') != i:
        bad.append('%s field i: dpflow=%s tshark=%d' %
                   (pfx, show(got.get('i')), i))
    for k in KEYS:
        if k not in got:
            bad.append('%s field %s: dpflow=<missing> tshark=%s' %
                       (pfx, k, show(exp[k])))
            continue
        g, e = got[k], exp[k]
        if k == 'inner' and isinstance(g, dict) and isinstance(e, dict):
            for ik in INNER_KEYS:
                if ik not in g:
                    bad.append('%s field inner.%s: dpflow=<missing> '
                               'tshark=%s' % (pfx, ik, show(e[ik])))
                elif not same(g[ik], e[ik]):
                    bad.append('%s field inner.%s: dpflow=%s tshark=%s' %
                               (pfx, ik, show(g[ik]), show(e[ik])))
        elif not same(g, e):
            bad.append('%s field %s: dpflow=%s tshark=%s' %
                       (pfx, k, show(g), show(e)))
    drop = got.get('drop')
    if drop in COMPLAINS and not tp.complaints and \
            (must_complain or drop != exp['drop']):
        bad.append('%s field drop: dpflow=%s tshark=<no error, warning or '
                   'malformed mark on this packet>' % (pfx, show(drop)))
    if got.get('tun_invalid') is True and exp['tun_invalid'] and \
            must_complain and not tp.complaints:
        bad.append('%s field tun_invalid: dpflow=true (%s) tshark=<no '
                   'error, warning or malformed mark on this packet>' %
                   (pfx, tun_fail))
    return bad


def compare_file(dpflow, path, labels=None, skip_unverifiable=False):
    """Compare one capture. Returns a dict: packets, dropped, mismatches
    (list of lines), skipped (list of lines), objs (dpflow's objects),
    tun_fail (packet index -> why tshark's fields make the payload of its
    UDP tunnel port no tunnel).

    A packet whose expected object cannot be derived from tshark's
    dissection (tshark stopped early, or docs/inspect.md leaves the case
    open) is a mismatch, or, with @skip_unverifiable (random corruptions),
    skipped with its reason."""
    objs, err = dpflow_inspect(dpflow, path)
    res = {'packets': 0, 'dropped': 0, 'mismatches': [], 'skipped': [],
           'objs': objs, 'tun_fail': {}}
    bad = res['mismatches']
    if err:
        bad.append(err)
    # Objects are matched to packets by their `i` (a packet dpflow skipped
    # must not shift the others); positionally if `i` is unusable.
    by_i = {}
    for pos, o in enumerate(objs):
        k = o.get('i') if isinstance(o, dict) else None
        if not isinstance(k, int) or isinstance(k, bool) or k in by_i:
            by_i = dict(enumerate(objs))
            break
        by_i[k] = o
    n = 0
    try:
        for n, tp in enumerate(tshark_packets(path), 1):
            i = n - 1
            label = labels[i] if labels and i < len(labels) else None
            got = by_i.get(i)
            if got is None and not err:
                bad.append('packet %d%s: dpflow printed no object for it' %
                           (i, ' (%s)' % label if label else ''))
            try:
                if isinstance(tp, Unverifiable):
                    raise tp
                exp, must_complain, tun_fail = expected(tp)
                if tun_fail is not None:
                    res['tun_fail'][i] = tun_fail
            except Unverifiable as e:
                (res['skipped'] if skip_unverifiable else bad).append(
                    'packet %d%s: cannot derive the expected object: %s '
                    '(dpflow: %s)' % (i, ' (%s)' % label if label else '',
                                      e, show(got)))
                continue
            if got is None:
                continue
            if isinstance(got, dict) and got.get('drop') is not None:
                res['dropped'] += 1
            bad.extend(compare_obj(i, got, exp, must_complain, tp, label,
                                   tun_fail))
    except RuntimeError as e:
        bad.append(str(e))
    res['packets'] = n
    extra = sorted(k for k in by_i if not (isinstance(k, int) and
                                          0 <= k < n))
    if extra:
        bad.append('dpflow printed %d objects for packets tshark does not '
                   'have (i=%s)' % (len(extra), extra[:5]))
    return res


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--max', type=int, default=50,
                    help='mismatch lines to print per file (0: all)')
    ap.add_argument('--expected', action='store_true',
                    help='print the expected objects (from tshark) instead '
                         'of comparing; DPFLOW is ignored')
    ap.add_argument('dpflow')
    ap.add_argument('files', nargs='+')
    a = ap.parse_args(argv)
    try:
        if a.expected:
            for f in a.files:
                for i, tp in enumerate(tshark_packets(f)):
                    try:
                        e = expected(tp)[0] if not isinstance(tp, Exception) \
                            else {'error': str(tp)}
                    except Unverifiable as x:
                        e = {'error': str(x)}
                    e = dict(i=i, **e)
                    print(json.dumps(e))
            return 0
        failed = False
        for f in a.files:
            r = compare_file(a.dpflow, f)
            bad = r['mismatches']
            print('%s: %d packets, %d dropped, %d mismatches' %
                  (f, r['packets'], r['dropped'], len(bad)))
            for ln in bad[:a.max or None]:
                print('  ' + ln)
            if a.max and len(bad) > a.max:
                print('  ... %d more' % (len(bad) - a.max))
            failed |= bool(bad)
        return 1 if failed else 0
    finally:
        tshark_cleanup()


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
