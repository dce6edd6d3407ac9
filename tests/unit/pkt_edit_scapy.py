#!/usr/bin/python3
"""NAT cases for tests/unit/test_pkt_edit_api.c, built by scapy.

Prints one case a line: MODE V6 PROTO IN_HEX SRC SPORT DST DPORT OUT_HEX.
IN is an IP packet (IPv4, with or without options, or IPv6) carrying TCP
or UDP with valid checksums (or a UDP checksum of 0: none); OUT is what a
NAT must make of it, built by scapy from the same fields with the new
addresses and ports and its checksums computed from scratch (a UDP
checksum of 0 stays 0). MODE 0 rewrites source and destination (both
addresses and ports), 1 the source only, 2 the destination only. A
quarter of the cases have a payload word chosen so that OUT's L4 checksum
computes to 0 (TCP: 0x0000; UDP: sent as 0xffff). Seeded: the same cases
every run. Usage: pkt_edit_scapy.py [COUNT]
"""
import ipaddress
import random
import sys

from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw


def rand_addr(rng, v6):
    if v6:
        return ":".join("%x" % rng.randrange(65536) for _ in range(8))
    return ".".join(str(rng.randrange(256)) for _ in range(4))


def addr_hex(a):
    return ipaddress.ip_address(a).packed.hex()


def build(v6, proto, src, dst, sport, dport, payload, ip_fields, no_csum):
    if v6:
        ip = IPv6(src=src, dst=dst, hlim=ip_fields["ttl"], tc=ip_fields["tos"],
                  fl=ip_fields["fl"])
    else:
        opts = [IPOption_NOP()] * ip_fields["opt_words"] * 4
        ip = IP(src=src, dst=dst, ttl=ip_fields["ttl"], tos=ip_fields["tos"],
                id=ip_fields["id"], flags=ip_fields["flags"], options=opts)
    if proto == 6:
        l4 = TCP(sport=sport, dport=dport, seq=ip_fields["seq"],
                 ack=ip_fields["ack"], flags=ip_fields["tcp_flags"],
                 window=ip_fields["win"])
    else:
        l4 = UDP(sport=sport, dport=dport)
        if no_csum:
            l4.chksum = 0
    return bytearray(bytes(ip / l4 / Raw(payload)))


def l4_off(pkt, v6):
    return 40 if v6 else (pkt[0] & 15) * 4


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    rng = random.Random(20261207)
    for n in range(count):
        v6 = rng.random() < 0.5
        proto = rng.choice((6, 17))
        mode = n % 3
        no_csum = proto == 17 and rng.random() < 0.2
        force_zero = not no_csum and n % 4 == 1
        fields = {
            "ttl": rng.randrange(1, 256), "tos": rng.randrange(256),
            "fl": rng.randrange(1 << 20), "id": rng.randrange(65536),
            "flags": rng.choice((0, 2)), "opt_words": rng.randrange(3),
            "seq": rng.randrange(1 << 32), "ack": rng.randrange(1 << 32),
            "tcp_flags": rng.randrange(256), "win": rng.randrange(65536),
        }
        plen = 2 * rng.randrange(1, 40) + rng.randrange(2)
        payload = bytearray(rng.randrange(256) for _ in range(plen))
        src, dst = rand_addr(rng, v6), rand_addr(rng, v6)
        sport, dport = rng.randrange(65536), rng.randrange(65536)
        nsrc, ndst = rand_addr(rng, v6), rand_addr(rng, v6)
        nsport, ndport = rng.randrange(65536), rng.randrange(65536)
        osrc, osport = (nsrc, nsport) if mode in (0, 1) else (src, sport)
        odst, odport = (ndst, ndport) if mode in (0, 2) else (dst, dport)

        out = build(v6, proto, osrc, odst, osport, odport, bytes(payload),
                    fields, no_csum)
        if force_zero:
            # add the checksum to the first payload word: the sum becomes
            # 0xffff, the checksum 0 (UDP: 0xffff on the wire)
            off = l4_off(out, v6) + (20 if proto == 6 else 8)
            ck = out[off - (4 if proto == 6 else 2)] << 8 | \
                out[off - (3 if proto == 6 else 1)]
            w = (payload[0] << 8 | payload[1]) + ck
            w = (w & 0xffff) + (w >> 16)
            payload[0], payload[1] = w >> 8, w & 0xff
            out = build(v6, proto, osrc, odst, osport, odport,
                        bytes(payload), fields, no_csum)
            cko = l4_off(out, v6) + (16 if proto == 6 else 6)
            got = out[cko] << 8 | out[cko + 1]
            assert got == (0 if proto == 6 else 0xffff), (n, hex(got))
        inp = build(v6, proto, src, dst, sport, dport, bytes(payload),
                    fields, no_csum)
        print(mode, int(v6), proto, inp.hex(), addr_hex(nsrc), nsport,
              addr_hex(ndst), ndport, out.hex())


if __name__ == "__main__":
    main()
