#!/usr/bin/python3
"""Live forwarding through `dpflow run` between network namespaces (TAP).

usage: live_forward.py DPFLOW PORTKIND [WORKERS]

Three namespaces made here: host A (10.77.N.1 on a0), host B (10.77.N.2 on
b0), and the middle one where dpflow runs with ports on a1 and b1 (the
other ends of the two veth pairs), of kind PORTKIND (afpacket, afxdp, or
dpdk: DPDK's net_af_packet virtual device on them). The config
forwards everything between the two ports, except UDP to port 9 from A,
which an ACL entry drops and counts. Checked:

- a 2 MB HTTP transfer from B's python3 http.server to A's curl arrives
  byte for byte;
- 20 frames built by scapy (UDP, VLAN-tagged TCP, IPv6 UDP) sent raw on a0
  arrive on b0 with the same bytes; 50 UDP datagrams to port 9 do not arrive, and the ACL entry counts
  exactly 50;
- the Prometheus endpoint (--metrics on 127.0.0.1 of the middle
  namespace) answers with the pipes' and workers' counters while traffic
  runs;
- on SIGTERM, dpflow exits 0 and prints counters that add up (port A's
  received packets = the a2b pipe's; port B's sent = its misses; no
  transmit errors; with WORKERS > 1, ports of WORKERS queues and every
  worker ran packets).

Bounded: every wait has a timeout, dpflow runs with --duration 60 as a
backstop; the namespaces, processes and files are removed at the end,
whatever happens. Without root or namespaces the test reports itself
skipped. Only addresses inside the namespaces are used.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from livelib import Tap, netns_unavailable, sh

DPFLOW, KIND = sys.argv[1], sys.argv[2]
WORKERS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
METRICS = "127.0.0.1:%d" % (19000 + os.getpid() % 1000)
TAG = "dpf%d" % (os.getpid() % 100000)
NS_A, NS_B, NS_M = TAG + "a", TAG + "b", TAG + "m"
NET = "10.77.%d" % (os.getpid() % 250 + 1)
IP_A, IP_B = NET + ".1", NET + ".2"
PY = "/usr/bin/python3"

T = Tap()
results = T.results
tap = T.ok




# Turn a legacy ethtool feature off (no ethtool binary here): run in the
# device's namespace. ETHTOOL_STXCSUM off also drops TSO and GSO.
ETHTOOL_OFF = r"""
import ctypes, fcntl, socket, struct, sys
dev, cmd = sys.argv[1], int(sys.argv[2], 0)
val = ctypes.create_string_buffer(struct.pack("II", cmd, 0))
ifr = struct.pack("16sP", dev.encode(), ctypes.addressof(val)) + bytes(16)
sock = socket.socket()
fcntl.ioctl(sock.fileno(), 0x8946, ifr)  # SIOCETHTOOL
"""
ETHTOOL_STXCSUM = "0x17"


def port_uri(dev, n):
    """The URI of a port of KIND on interface @dev."""
    opts = ",queues=%d" % WORKERS if WORKERS > 1 else ""
    if KIND == "dpdk":
        # DPDK's af_packet virtual device on the interface
        return "dpdk:net_af_packet%d;iface=%s;qpairs=%d%s" % (
            n, dev, WORKERS, opts)
    return "%s:%s%s" % (KIND, dev, opts)


def setup():
    for ns in (NS_A, NS_B, NS_M):
        sh("ip", "netns", "add", ns)
    # as many queues as workers: AF_XDP binds one socket per queue
    nq = ["numtxqueues", str(WORKERS), "numrxqueues", str(WORKERS)]
    sh("ip", "link", "add", "a0", "netns", NS_A, *nq, "type", "veth",
       "peer", "name", "a1", "netns", NS_M, *nq)
    sh("ip", "link", "add", "b0", "netns", NS_B, *nq, "type", "veth",
       "peer", "name", "b1", "netns", NS_M, *nq)
    sh("ip", "-n", NS_A, "addr", "add", IP_A + "/24", "dev", "a0")
    sh("ip", "-n", NS_B, "addr", "add", IP_B + "/24", "dev", "b0")
    for ns, dev in ((NS_A, "a0"), (NS_B, "b0"), (NS_M, "a1"), (NS_M, "b1")):
        # wire-sized frames: no TCP segmentation offload super-frames
        sh("ip", "-n", ns, "link", "set", dev, "gso_max_size", "1500")
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    if KIND in ("afxdp", "dpdk"):
        # the hosts' stacks would hand veth frames with checksums left to
        # an offload (CHECKSUM_PARTIAL); AF_XDP and DPDK's af_packet
        # device see no such flag (dpflow's AF_PACKET port does), and a
        # wire never carries such frames: compute them
        for ns, dev in ((NS_A, "a0"), (NS_B, "b0")):
            sh(PY, "-c", ETHTOOL_OFF, dev, ETHTOOL_STXCSUM, ns=ns)


def teardown(procs, tmp):
    for p in procs:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    for ns in (NS_A, NS_B, NS_M):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


CONFIG = """ports:
  - {name: pa, uri: '%(pa)s'}
  - {name: pb, uri: '%(pb)s'}
pipes:
  - name: a2b
    type: acl
    root: pa
    size: 16
    match: [outer.ip.proto, outer.l4.dport]
    monitor: {counter: true}
    fwd: per-entry
    miss: {port: pb}
    entries:
      - {match: {outer.ip.proto: 17, outer.l4.dport: 9}, priority: 1, fwd: drop}
  - name: b2a
    type: basic
    root: pb
    size: 16
    match: [outer.eth.type]
    miss: {port: pa}
"""

# A helper run in a namespace: receive raw frames on an interface, or
# UDP datagrams on a port, for a while; print them in hex, one a line.
SNIFF = r"""
import socket, struct, sys, time
mode, arg, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
if mode == "raw":
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((arg, 0))
    s.setsockopt(263, 8, 1)  # SOL_PACKET, PACKET_AUXDATA
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", int(arg)))
print("ready", flush=True)
end = time.time() + secs
while time.time() < end:
    s.settimeout(max(0.01, end - time.time()))
    try:
        d, anc, _, _ = s.recvmsg(65536, 64)
    except socket.timeout:
        break
    # a VLAN tag the kernel took off comes back from PACKET_AUXDATA
    for lvl, typ, data in anc:
        if mode == "raw" and lvl == 263 and typ == 8 and len(data) >= 20:
            st, _, _, _, _, tci, tpid = struct.unpack("IIIHHHH", data[:20])
            if st & 0x10:  # TP_STATUS_VLAN_VALID
                tpid = tpid if st & 0x40 else 0x8100
                d = d[:12] + struct.pack("!HH", tpid, tci) + d[12:]
    print(d.hex(), flush=True)
"""

SEND_RAW = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for line in sys.stdin:
    s.send(bytes.fromhex(line.strip()))
"""

SEND_UDP = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(int(sys.argv[3])):
    s.sendto(b"dpflow-live-%d" % i, (sys.argv[1], int(sys.argv[2])))
"""


def start_sniffer(ns, mode, arg, secs, tmp):
    p = subprocess.Popen(["ip", "netns", "exec", ns, PY, "-c", SNIFF, mode,
                          arg, str(secs)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def crafted_frames(n):
    """Frames built by scapy (an independent builder): Ethernet/IPv4/UDP,
    Ethernet/802.1Q/IPv4/TCP, Ethernet/IPv6/UDP, with distinct payloads."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    out = []
    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    for i in range(n):
        payload = Raw(b"dpflow-raw-%04d" % i + bytes(range(i % 7 + 20)))
        if i % 3 == 0:
            p = eth / IP(src=IP_A, dst=IP_B, id=1000 + i) / \
                UDP(sport=40000 + i, dport=7001) / payload
        elif i % 3 == 1:
            p = eth / Dot1Q(vlan=10) / IP(src=IP_A, dst=IP_B) / \
                TCP(sport=40000 + i, dport=7002, flags="S") / payload
        else:
            p = eth / IPv6(src="fd00::1", dst="fd00::2") / \
                UDP(sport=40000 + i, dport=7003) / payload
        out.append(bytes(p))
    return out


def main():
    why = netns_unavailable(TAG)
    if why:
        print("1..0 # SKIP " + why)
        return 0
    print("1..8")
    tmp = tempfile.mkdtemp(prefix="dpflow-live-")
    procs = []
    try:
        setup()
        cfg = os.path.join(tmp, "forward.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG % {"pa": port_uri("a1", 0), "pb": port_uri("b1", 1)})
        blob = os.urandom(2 << 20)
        with open(os.path.join(tmp, "blob.bin"), "wb") as f:
            f.write(blob)
        run = subprocess.Popen(["ip", "netns", "exec", NS_M, DPFLOW, "run",
                                cfg, "--duration", "60", "--workers",
                                str(WORKERS), "--metrics", METRICS],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        procs.append(run)
        http = subprocess.Popen(["ip", "netns", "exec", NS_B, PY, "-m",
                                 "http.server", "8080", "--bind", IP_B,
                                 "--directory", tmp],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        procs.append(http)
        time.sleep(1.0)

        # 1: TCP through the data plane
        got = None
        for _ in range(3):
            r = subprocess.run(
                ["ip", "netns", "exec", NS_A, "curl", "-s", "--max-time",
                 "10", "http://%s:8080/blob.bin" % IP_B],
                capture_output=True, timeout=15)
            got = r.stdout
            if got == blob:
                break
            time.sleep(0.5)
        tap(got == blob, "a 2 MB HTTP transfer B -> A through dpflow "
            "(%s ports) arrives intact" % KIND,
            "got %d bytes" % (len(got or b"")))

        # 2: crafted frames arrive with the same bytes
        frames = crafted_frames(20)
        sniff = start_sniffer(NS_B, "raw", "b0", 3, tmp)
        procs.append(sniff)
        subprocess.run(["ip", "netns", "exec", NS_A, PY, "-c", SEND_RAW,
                        "a0"], input="\n".join(f.hex() for f in frames),
                       text=True, timeout=10, check=True)
        out, _ = sniff.communicate(timeout=10)
        seen = set(bytes.fromhex(x) for x in out.split())
        missing = [i for i, f in enumerate(frames) if f not in seen]
        tap(not missing, "20 scapy-built frames (UDP, VLAN TCP, IPv6) sent "
            "on a0 arrive on b0 byte "
            "for byte", "missing: %s" % missing)

        # 3, 4: UDP to port 9 is dropped by the ACL, to 7000 forwarded
        sink9 = start_sniffer(NS_B, "udp", "9", 2, tmp)
        sink7 = start_sniffer(NS_B, "udp", "7000", 2, tmp)
        procs += [sink9, sink7]
        subprocess.run(["ip", "netns", "exec", NS_A, PY, "-c", SEND_UDP,
                        IP_B, "9", "50"], timeout=10, check=True)
        subprocess.run(["ip", "netns", "exec", NS_A, PY, "-c", SEND_UDP,
                        IP_B, "7000", "20"], timeout=10, check=True)
        out9, _ = sink9.communicate(timeout=10)
        out7, _ = sink7.communicate(timeout=10)
        n9, n7 = len(out9.split()), len(out7.split())
        tap(n9 == 0, "UDP to port 9: dropped by the ACL (%d arrived)" % n9)
        tap(n7 == 20, "UDP to port 7000: 20 of 20 forwarded (%d)" % n7)

        # 5: the metrics endpoint, scraped inside the middle namespace
        r = subprocess.run(["ip", "netns", "exec", NS_M, "curl", "-s",
                            "--max-time", "5", "http://%s/metrics" % METRICS],
                           capture_output=True, text=True, timeout=10)
        a2b = re.search(r'^dpflow_pipe_packets_total\{pipe="a2b"\} (\d+)$',
                        r.stdout, re.M)
        acl = re.search(r'^dpflow_entry_packets_total\{pipe="a2b",'
                        r'entry="0"\} (\d+)$', r.stdout, re.M)
        nw = len(re.findall(r'^dpflow_worker_packets_total\{worker="\d+"\} '
                            r'\d+$', r.stdout, re.M))
        tap(a2b is not None and int(a2b.group(1)) >= 90 and acl is not None
            and int(acl.group(1)) == 50 and nw == WORKERS,
            "metrics: a2b's packets, the ACL entry's 50 and %d worker(s)"
            % WORKERS, r.stdout[-2000:])

        # 6, 7, 8: clean stop and counters that add up
        run.send_signal(signal.SIGTERM)
        try:
            text, _ = run.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            run.kill()
            text, _ = run.communicate()
        tap(run.returncode == 0, "dpflow stops on SIGTERM with exit 0",
            "exit %s\n%s" % (run.returncode, text))
        ports = {m.group(1): (int(m.group(2)), int(m.group(3)))
                 for m in re.finditer(r"^\s+(\w+)\s+rx\s+(\d+) pkts.*tx\s+"
                                      r"(\d+) pkts", text, re.M)}
        pipes = {m.group(1): (int(m.group(2)), int(m.group(3)),
                              int(m.group(4)))
                 for m in re.finditer(r"^\s+(\w+)\s+\w+\s+(\d+) pkts\s+"
                                      r"(\d+) hits\s+(\d+) misses", text,
                                      re.M)}
        entry = re.search(r"^\s+entry 0\s+(\d+) pkts", text, re.M)
        ok = ("pa" in ports and "pb" in ports and "a2b" in pipes and
              "b2a" in pipes and entry is not None and
              ports["pa"][0] == pipes["a2b"][0] and
              ports["pb"][1] == pipes["a2b"][2] and
              ports["pb"][0] == pipes["b2a"][0] and
              ports["pa"][1] == pipes["b2a"][2] and
              int(entry.group(1)) == 50 and pipes["a2b"][1] == 50 and
              "tx_errors" not in text and
              ports["pb"][0] >= len(blob) // 1500)
        tap(ok, "counters add up: port A rx = a2b pkts, port B tx = a2b "
            "misses, the ACL entry counted the 50 dropped datagrams", text)
        ran = [int(m.group(1)) for m in
               re.finditer(r"^\s+worker \d+\s+rx\s+\d+ pkts in \d+ bursts\s+"
                           r"ran\s+(\d+)",
                           text, re.M)]
        tap(len(ran) == WORKERS and all(n > 0 for n in ran) and
            sum(ran) == sum(v[0] for v in ports.values()),
            "%d worker(s), each ran packets, together all received (%s)"
            % (WORKERS, ran), text)
    finally:
        teardown(procs, tmp)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
