#!/usr/bin/python3
"""`dpflow run` with DPDK ports, end to end, on net_pcap virtual devices.

Each case is {description, input port URI, output port URI}: scapy writes
the input (UDP and TCP frames), a basic pipe forwards UDP to the output port
and drops the rest, and the output file must hold exactly the UDP frames,
byte for byte, in order. The dpdk net_pcap input is finite (the port reports
the end of its file), so `dpflow run` stops by itself. TAP on stdout, one
point per case; a machine where the EAL cannot start skips them.

usage: run_dpdk.py DPFLOW
"""
import os
import subprocess
import sys
import tempfile

from scapy.all import Ether, IP, TCP, UDP, Raw, rdpcap, wrpcap

CONFIG = """
ports:
  - name: in
    uri: "{rx}"
  - name: out
    uri: "{tx}"
pipes:
  - name: p
    type: basic
    root: in
    match: [outer.ip.proto]
    fwd: {{port: out}}
    miss: drop
    entries:
      - match: {{outer.ip.proto: 17}}
"""

CASES = [
    ("dpdk net_pcap in, pcap port out",
     "dpdk:net_pcap0;rx_pcap={input}", "pcap:tx={output}"),
    ("pcap port in, dpdk net_pcap out",
     "pcap:rx={input}", "dpdk:net_pcap0;tx_pcap={output}"),
    ("dpdk in and dpdk out (two vdevs, one EAL)",
     "dpdk:net_pcap0;rx_pcap={input}", "dpdk:net_pcap1;tx_pcap={output}"),
]


def frames():
    out = []
    for i in range(40):
        size = 20 + (i * 37) % 1200
        ip = IP(src="10.0.0.%d" % (i + 1), dst="192.168.0.1")
        l4 = UDP(sport=1000 + i, dport=53) if i % 3 else \
            TCP(sport=2000 + i, dport=80, flags="S")
        out.append(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") /
                   ip / l4 / Raw(bytes((i + j) & 0xff for j in range(size))))
    return out


def eal_unavailable(text):
    """The EAL could not start for want of something (not our arguments)."""
    return ("EAL initialisation failed" in text and
            "Invalid argument" not in text)


def run_case(dpflow, desc, rx, tx, tmp, pkts):
    inp, outp = os.path.join(tmp, "in.pcap"), os.path.join(tmp, "out.pcap")
    for f in (inp, outp):
        if os.path.exists(f):
            os.unlink(f)
    wrpcap(inp, pkts)
    cfg = os.path.join(tmp, "run.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(rx=rx.format(input=inp),
                              tx=tx.format(output=outp)))
    try:
        p = subprocess.run([dpflow, "run", cfg], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120)
    except subprocess.TimeoutExpired:
        return "fail", "dpflow run did not stop by itself within 120 s"
    text = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        if eal_unavailable(text):
            return "skip", "the EAL cannot start here"
        return "fail", "exit %d:\n%s" % (p.returncode, text[-2000:])
    want = [bytes(x) for x in pkts if UDP in x]
    got = [bytes(x) for x in rdpcap(outp)] if os.path.exists(outp) else []
    if got != want:
        diff = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                    min(len(got), len(want)))
        return "fail", "output: %d frames, want %d; first difference at " \
            "frame %d" % (len(got), len(want), diff)
    return "pass", ""


def main():
    dpflow = sys.argv[1]
    pkts = frames()
    print("1..%d" % len(CASES))
    failed = 0
    with tempfile.TemporaryDirectory(prefix="dpflow-dpdk-run-") as tmp:
        for n, (desc, rx, tx) in enumerate(CASES, 1):
            status, why = run_case(dpflow, desc, rx, tx, tmp, pkts)
            if status == "pass":
                print("ok %d - %s" % (n, desc))
            elif status == "skip":
                print("ok %d - %s # SKIP %s" % (n, desc, why))
            else:
                failed += 1
                print("not ok %d - %s" % (n, desc))
                for line in why.splitlines():
                    print("# " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
