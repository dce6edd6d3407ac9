#!/usr/bin/python3
"""Client traffic for examples/l4lb.yaml (`make demo`): TCP connections to
the NAT and DSR VIPs (a SYN and three ACKs each), DNS over IPv6, and a
reply from each NAT backend for the first connection it gets.

usage: l4lb_traffic.py DIR   (writes DIR/clients.pcap, DIR/backends.pcap)
"""
import random
import sys

from scapy.all import IP, TCP, UDP, Ether, IPv6, wrpcap

GW, LB_C = "02:00:00:00:00:fe", "02:00:00:00:00:01"


def main():
    out = sys.argv[1]
    rnd = random.Random(7)
    pkts = []
    for vip, dport, n in (("192.0.2.10", 80, 600), ("192.0.2.20", 443, 200)):
        for i in range(n):
            c = "203.0.%d.%d" % (113 + i // 250, 1 + i % 250)
            sport = rnd.randrange(1024, 65535)
            base = Ether(src=GW, dst=LB_C) / IP(src=c, dst=vip)
            pkts.append(base / TCP(sport=sport, dport=dport, flags="S"))
            for _ in range(3):
                pkts.append(base / TCP(sport=sport, dport=dport, flags="A"))
    for i in range(100):
        pkts.append(Ether(src=GW, dst=LB_C) /
                    IPv6(src="2001:db8:9::%x" % (i + 1), dst="2001:db8::53") /
                    UDP(sport=rnd.randrange(1024, 65535), dport=53) / b"q")
    wrpcap(out + "/clients.pcap", pkts)
    # one stray packet on the backend side (no connection): counted drop
    wrpcap(out + "/backends.pcap",
           [Ether(src="02:00:00:00:00:fd", dst="02:00:00:00:00:02") /
            IP(src="10.0.1.1", dst="198.51.100.1") /
            TCP(sport=8080, dport=4242, flags="SA")])


if __name__ == "__main__":
    main()
