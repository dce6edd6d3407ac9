#!/usr/bin/python3
"""Independent check of `dpflow gen` with scapy.

usage: check_gen.py DPFLOW_EXE

Runs `dpflow gen` for several profiles with --manifest, reads each pcap with
scapy and checks every packet against its manifest line: the header fields
scapy dissects must equal what the manifest says was built, and every length
and checksum must equal what scapy computes when the packet is rebuilt with
that field deleted. Prints TAP: one test point per check group per file.
Run it with Debian's interpreter (/usr/bin/python3), which has python3-scapy.
"""

import ipaddress
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

from scapy.all import (
    GRE, ICMP, IP, SCTP, UDP, VXLAN, Dot1AD, Dot1Q, Ether, ICMPv6EchoRequest,
    IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting, Padding, Raw, SCTPChunkData, TCP, load_contrib, raw,
    rdpcap)

load_contrib("geneve")
from scapy.contrib.geneve import GENEVE  # noqa: E402

EPOCH_S = 1704067200  # 2024-01-01 UTC: packet i is stamped EPOCH + i us
EXT_NUM = {IPv6ExtHdrHopByHop: 0, IPv6ExtHdrRouting: 43,
           IPv6ExtHdrFragment: 44, IPv6ExtHdrDestOpt: 60}

# Length and checksum fields, per group: (layer class, fields to delete).
# Deleting a field makes scapy compute it when the packet is rebuilt.
CSUM_GROUPS = [
    ("IPv4 ihl/len/chksum", [(IP, ("ihl", "len", "chksum"))]),
    ("IPv6 plen", [(IPv6, ("plen",))]),
    ("TCP chksum", [(TCP, ("chksum",))]),
    ("UDP len/chksum", [(UDP, ("len", "chksum"))]),
    ("ICMP chksum", [(ICMP, ("chksum",))]),
    ("ICMPv6 cksum", [(ICMPv6EchoRequest, ("cksum",))]),
    ("SCTP chksum", [(SCTP, ("chksum",))]),
    ("GRE chksum", [(GRE, ("chksum",))]),
]


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
                    print("# %s%s" % (where, msg))
                if len(diag) > 5:
                    print("# ... %d more" % (len(diag) - 5))
        return 1 if bad else 0


def layers(p):
    """@p and the layers under it, Ethernet padding left out."""
    while p is not None:
        yield p
        if not p.payload or isinstance(p.payload, Padding):
            break
        p = p.payload


def norm_addr(a):
    return str(ipaddress.ip_address(a))


def raw_payload(layer):
    """Bytes of the first Raw layer under @layer (not Ethernet padding)."""
    for lay in layers(layer.payload) if layer.payload else []:
        if type(lay) is Raw:
            return bytes(lay.load)
    return b""


def fragment_data(ip, hdr):
    """The data of a later fragment: what follows @hdr (the IPv4 header or
    the IPv6 fragment header) up to the datagram's end. scapy dissects some
    protocols (SCTP) even in later fragments, so read the bytes."""
    b = raw(ip)
    end = ip.len if isinstance(ip, IP) else 40 + ip.plen
    start = ip.ihl * 4 if hdr is ip else len(b) - len(raw(hdr)) + 8
    return b[start:end]


def describe_l4(d, l4):
    """Fill the L4 keys of @d from the layer after IP; returns it."""
    keys = dict(l4=None, sport=None, dport=None, icmp_type=None,
                icmp_code=None, tcp_flags=None)
    d.update(keys)
    if isinstance(l4, TCP):
        d.update(l4="tcp", sport=l4.sport, dport=l4.dport,
                 tcp_flags=int(l4.flags), payload=raw_payload(l4))
    elif isinstance(l4, UDP):
        d.update(l4="udp", sport=l4.sport, dport=l4.dport,
                 payload=raw_payload(l4))
    elif isinstance(l4, ICMP):
        d.update(l4="icmp", icmp_type=l4.type, icmp_code=l4.code,
                 payload=raw_payload(l4))
    elif isinstance(l4, ICMPv6EchoRequest):
        d.update(l4="icmpv6", icmp_type=l4.type, icmp_code=l4.code,
                 payload=bytes(l4.data))
    elif isinstance(l4, SCTP):
        chunk = l4.getlayer(SCTPChunkData)
        d.update(l4="sctp", sport=l4.sport, dport=l4.dport,
                 payload=bytes(chunk.data) if chunk else None)
    elif l4 is not None:
        d["l4"] = "other"
    return l4


def describe_ip(ip, d):
    """Fill the L3/L4 keys of @d from an IP/IPv6 layer; returns the L4."""
    if isinstance(ip, IP):
        mf = bool(int(ip.flags) & 1)
        d.update(l3="ipv4", src=ip.src, dst=ip.dst, proto=ip.proto,
                 ttl=ip.ttl, tos=ip.tos, ip_id=ip.id,
                 ipv4_opt_len=ip.ihl * 4 - 20, ipv6_ext_hdrs=None,
                 frag=mf or ip.frag > 0,
                 frag_kind="later" if ip.frag else "first" if mf else None,
                 frag_off=ip.frag)
        if ip.frag > 0:
            d.update(l4=None, sport=None, dport=None, icmp_type=None,
                     icmp_code=None, tcp_flags=None,
                     payload=fragment_data(ip, ip))
            return None
        return describe_l4(d, ip.payload)
    d.update(l3="ipv6", src=norm_addr(ip.src), dst=norm_addr(ip.dst),
             ttl=ip.hlim, tos=ip.tc, ipv4_opt_len=None, frag=False,
             frag_kind=None, frag_off=0)
    ext, nh, lay = [], ip.nh, ip.payload
    later = False
    while type(lay) in EXT_NUM:
        ext.append(EXT_NUM[type(lay)])
        if isinstance(lay, IPv6ExtHdrFragment):
            d.update(frag=True, ip_id=lay.id, frag_off=lay.offset,
                     frag_kind="later" if lay.offset else
                     "first" if lay.m else None)
            later = lay.offset > 0
        nh = lay.nh
        if later:
            break
        lay = lay.payload
    d.update(ipv6_ext_hdrs=ext, proto=nh)
    if later:
        d.update(l4=None, sport=None, dport=None, icmp_type=None,
                 icmp_code=None, tcp_flags=None,
                 payload=fragment_data(ip, lay))
        return None
    return describe_l4(d, lay)


def describe(p):
    """The manifest keys as scapy reads the packet."""
    d = {}
    if isinstance(p, Ether):
        d.update(l2="eth", src_mac=p.src, dst_mac=p.dst)
    vlan, lay = [], p.payload
    while isinstance(lay, (Dot1Q, Dot1AD)):
        vlan.append(lay.vlan)
        lay = lay.payload
    d["vlan"] = vlan
    if not isinstance(lay, (IP, IPv6)):
        return d
    l4 = describe_ip(lay, d)
    d.update(tun=None, vni=None, key=None, tun_proto=None, gre_csum=None,
             gre_seq=None, geneve_opt_len=None, inner=None)
    inner = None
    if isinstance(l4, UDP) and isinstance(l4.payload, VXLAN):
        d.update(tun="vxlan", vni=l4.payload.vni)
        inner = l4.payload.payload
    elif isinstance(l4, UDP) and isinstance(l4.payload, GENEVE):
        g = l4.payload
        d.update(tun="geneve", vni=g.vni, tun_proto=g.proto,
                 geneve_opt_len=g.optionlen * 4)
        inner = g.payload
    elif isinstance(l4, GRE):
        g = l4
        d.update(tun="gre", tun_proto=g.proto,
                 gre_csum=bool(g.chksum_present),
                 key=g.key if g.key_present else None,
                 gre_seq=g.sequence_number if g.seqnum_present else None)
        inner = g.payload
    elif d.get("proto") in (4, 41) and isinstance(l4, (IP, IPv6)):
        d["tun"] = "ipip"
        inner = l4
    if d["tun"]:
        d["payload"] = None
        sub = {}
        if isinstance(inner, Ether):
            sub.update(l2="eth", src_mac=inner.src, dst_mac=inner.dst)
            inner = inner.payload
        else:
            sub["l2"] = None
        if isinstance(inner, (IP, IPv6)):
            describe_ip(inner, sub)
        d["inner"] = sub
    return d


# Keys compared between the manifest and scapy's reading.
LAYER_KEYS = ("l3", "src", "dst", "proto", "ttl", "tos", "ipv4_opt_len",
              "ipv6_ext_hdrs", "frag", "frag_kind", "frag_off", "l4",
              "sport", "dport", "icmp_type", "icmp_code", "tcp_flags")
TOP_KEYS = ("l2", "src_mac", "dst_mac", "vlan", "tun", "vni", "key",
            "tun_proto", "gre_csum", "gre_seq", "geneve_opt_len")
INNER_KEYS = ("l2", "src_mac", "dst_mac")


def pattern(n):
    return bytes(i & 0xff for i in range(n))


def compare_layer(m, d, keys, where, errs):
    for k in keys:
        mv, dv = m.get(k), d.get(k)
        if k in ("src", "dst") and mv is not None and dv is not None:
            mv, dv = norm_addr(mv), norm_addr(dv)
        if mv != dv:
            errs.append("%s%s: manifest %r, scapy %r" % (where, k, mv, dv))
    if m.get("l3") == "ipv4" or m.get("frag"):
        if m.get("ip_id") != d.get("ip_id"):
            errs.append("%sip_id: manifest %r, scapy %r"
                        % (where, m.get("ip_id"), d.get("ip_id")))
    if m.get("payload_len") is not None:
        got = d.get("payload")
        if got != pattern(m["payload_len"]):
            errs.append("%spayload: %s, not the %d-byte pattern"
                        % (where, "missing" if got is None else
                           "%d bytes %s" % (len(got), got[:16].hex()),
                           m["payload_len"]))


def compare(m, p):
    """Field mismatches between manifest line @m and packet @p."""
    d = describe(p)
    errs = []
    for k in TOP_KEYS:
        if m.get(k) != d.get(k):
            errs.append("%s: manifest %r, scapy %r" % (k, m.get(k), d.get(k)))
    compare_layer(m, d, LAYER_KEYS, "", errs)
    mi, di = m.get("inner"), d.get("inner")
    if (mi is None) != (di is None):
        errs.append("inner: manifest %r, scapy %r" % (mi, di))
    elif mi is not None:
        for k in INNER_KEYS:
            if mi.get(k) != di.get(k):
                errs.append("inner.%s: manifest %r, scapy %r"
                            % (k, mi.get(k), di.get(k)))
        compare_layer(mi, di, LAYER_KEYS, "inner.", errs)
    return errs


def rebuild_check(p, dels):
    """None if @p has no layer of @dels, else the rebuilt bytes == p's."""
    q = p.copy()
    n = 0
    for lay in layers(q):
        under = lay.underlayer
        if isinstance(under, IP) and under.frag > 0:
            break  # a later fragment: what scapy sees here is no header
        for cls, fields in dels:
            if type(lay) is cls:
                if cls is GRE and not lay.chksum_present:
                    continue
                for f in fields:
                    delattr(lay, f)
                n += 1
    if not n:
        return None
    return raw(q) == raw(p)


def features(m):
    """Coverage labels of one manifest line (checked against scapy)."""
    out = set()
    out.add("vlan%d" % len(m["vlan"]))
    for where, lay in (("outer", m), ("inner", m.get("inner"))):
        if not lay:
            continue
        v = lay["l3"]
        if lay.get("l4"):
            out.add("%s/%s" % (v, lay["l4"]))
        if lay.get("frag_kind"):
            out.add("%s frag %s" % (v, lay["frag_kind"]))
        if lay.get("ipv4_opt_len"):
            out.add("ipv4 options")
        for e in lay.get("ipv6_ext_hdrs") or []:
            out.add("ipv6 ext %d" % e)
    if m["tun"]:
        out.add("%s %s-in-%s" % (m["tun"], m["inner"]["l3"], m["l3"]))
        if m["tun"] in ("geneve", "gre"):
            out.add("%s inner %s" % (m["tun"],
                                     "eth" if m["inner"]["l2"] else "ip"))
        if m["tun"] == "geneve" and m["geneve_opt_len"]:
            out.add("geneve options")
        if m["tun"] == "gre":
            for k, lab in (("gre_csum", "csum"), ("key", "key"),
                           ("gre_seq", "seq")):
                if m[k] not in (None, False):
                    out.add("gre " + lab)
    return out


def all_features():
    want = {"vlan0", "vlan1", "vlan2", "ipv4 options"}
    for v in ("ipv4", "ipv6"):
        for l4 in ("tcp", "udp", "sctp", "icmp" if v == "ipv4" else "icmpv6"):
            want.add("%s/%s" % (v, l4))
        want.add("%s frag first" % v)
        want.add("%s frag later" % v)
    for e in (0, 43, 44, 60):
        want.add("ipv6 ext %d" % e)
    for t in ("vxlan", "geneve", "gre", "ipip"):
        for o in ("ipv4", "ipv6"):
            for i in ("ipv4", "ipv6"):
                want.add("%s %s-in-%s" % (t, i, o))
    for t in ("geneve", "gre"):
        want.add("%s inner eth" % t)
        want.add("%s inner ip" % t)
    want |= {"geneve options", "gre csum", "gre key", "gre seq"}
    return want


def gen(dpflow, tmp, name, args):
    pcap = os.path.join(tmp, name + ".pcap")
    man = os.path.join(tmp, name + ".json")
    cmd = [dpflow, "gen"] + args + ["--manifest", man, "-o", pcap]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        return None, None, "%s: exit %d: %s" % (" ".join(cmd), r.returncode,
                                                r.stderr.strip())
    with open(man) as f:
        manifest = [json.loads(line) for line in f]
    return rdpcap(pcap), manifest, None


def check_file(tap, dpflow, tmp, name, args, count, size=None, cover=False):
    pkts, man, err = gen(dpflow, tmp, name, args)
    if err:
        tap.check("%s: dpflow gen runs" % name, [(None, err)])
        return
    tap.check("%s: %d packets, one manifest line each" % (name, count),
              [] if len(pkts) == count and len(man) == count else
              [(None, "%d packets, %d manifest lines" % (len(pkts), len(man)))])
    pairs = list(zip(man, pkts))

    errs = []
    for i, (m, p) in enumerate(pairs):
        want = EPOCH_S * 10**9 + i * 1000
        got = int(round(p.time * 10**9))
        if m["i"] != i or got != want or m["len"] != len(raw(p)):
            errs.append((i, "index %r, stamp %d (want %d), len %d (manifest"
                         " %r)" % (m["i"], got, want, len(raw(p)), m["len"])))
    tap.check("%s: index, length and timestamp i us" % name, errs)

    errs = []
    for i, (m, p) in enumerate(pairs):
        if raw(p) != bytes(p.original):
            errs.append((i, "scapy does not rebuild the same bytes"))
    tap.check("%s: scapy dissects and rebuilds every packet" % name, errs)

    if size is not None:
        errs = []
        seen = Counter()
        for i, (m, p) in enumerate(pairs):
            n = len(raw(p))
            seen[n] += 1
            if size == "imix":
                if n not in (64, 576, 1500) and n <= 1500:
                    errs.append((i, "length %d is no IMIX size" % n))
            elif n != size and m["frame_len"] == size:
                errs.append((i, "length %d, not %d" % (n, size)))
        if size == "imix":
            r = (seen[64], seen[576], seen[1500])
            if count % 12 == 0 and r != (count // 12 * 7, count // 12 * 4,
                                         count // 12):
                errs.append((None, "64/576/1500 counts %r, not 7:4:1" % (r,)))
        tap.check("%s: frame sizes %s" % (name, size), errs)

    errs = []
    for i, (m, p) in enumerate(pairs):
        for e in compare(m, p):
            errs.append((i, e))
    tap.check("%s: header fields equal the manifest" % name, errs)

    for gname, dels in CSUM_GROUPS:
        errs, checked = [], 0
        for i, (m, p) in enumerate(pairs):
            r = rebuild_check(p, dels)
            if r is None:
                continue
            checked += 1
            if not r:
                errs.append((i, "%s differs from scapy's" % gname))
        tap.check("%s: %s as scapy computes (%d packets)"
                  % (name, gname, checked), errs, checked,
                  skip_empty=not cover)

    if cover:
        seen = set()
        for m, p in pairs:
            seen |= features(m)
        missing = sorted(all_features() - seen)
        tap.check("%s: covers every protocol, tunnel and option" % name,
                  [(None, "missing: " + ", ".join(missing))] if missing
                  else [])


def check_malformed(tap, dpflow, tmp):
    name = "malformed"
    pkts, man, err = gen(dpflow, tmp, name,
                         ["default", "--malformed", "--count", "136"])
    if err:
        tap.check("%s: dpflow gen runs" % name, [(None, err)])
        return
    errs = []
    if len(pkts) != len(man):
        errs.append((None, "%d packets, %d lines" % (len(pkts), len(man))))
    for i, (m, p) in enumerate(zip(man, pkts)):
        if m["len"] != len(raw(p)):
            errs.append((i, "length %d, manifest %d" % (len(raw(p)), m["len"])))
        if m["variant"] == "ok":
            errs.append((i, "a valid packet in malformed mode"))
        want_any = m["variant"].startswith("random_")
        if want_any != (m["expect_drop"] == "any"):
            errs.append((i, "variant %s expects %r"
                         % (m["variant"], m["expect_drop"])))
    variants = Counter(m["variant"] for m in man)
    if len(variants) < 30 or len(set(variants.values())) != 1:
        errs.append((None, "variants not cycled evenly: %r" % variants))
    tap.check("%s: every variant cycles, lengths match" % name, errs)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    dpflow = sys.argv[1]
    tap = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        check_file(tap, dpflow, tmp, "all", ["all"], 3000, cover=True)
        check_file(tap, dpflow, tmp, "imix", ["imix"], 1200, size="imix")
        check_file(tap, dpflow, tmp, "vxlan", ["vxlan", "--count", "600"],
                   600)
        check_file(tap, dpflow, tmp, "mixed",
                   ["default", "--count", "800", "--flows", "97", "--size",
                    "300", "--mix", "tcp:25,udp:25,icmp:25,sctp:25",
                    "--ipv6", "50", "--vlan", "10:70", "--qinq", "20:50",
                    "--tunnel", "gre:30,ipip:20,geneve:20", "--frag", "30",
                    "--ipv4-opt", "50", "--ipv6-ext", "50", "--seed", "7"],
                   800, size=300)
        check_malformed(tap, dpflow, tmp)
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
