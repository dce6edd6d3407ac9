#!/usr/bin/python3
"""Connection values of ct pipes, end to end through `dpflow run`: source
NAT from a pool (both directions), saved registers, LRU replacement, and
the config's errors.

scapy builds the inputs and the expected outputs; a translated packet must
equal, byte for byte, the input with the translated addresses and ports
put in by scapy (which computes every checksum itself). Where dpflow picks
the binding out of a pool, the test checks what the docs promise of it
(inside the pool, unique among live connections, the same for every
packet of the flow, undone on the replies) and then the bytes with the
binding dpflow chose. TAP on stdout, one point per case.

usage: ct_nat_fixtures.py DPFLOW
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipe_fixtures as pf  # noqa: E402

from scapy.all import Ether, IP, IPv6, TCP, UDP, Raw, rdpcap  # noqa: E402

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def tcp(src, dst, flags, payload=b""):
    ip = IPv6 if ":" in src[0] else IP
    p = pf.eth() / ip(src=src[0], dst=dst[0]) / \
        TCP(sport=src[1], dport=dst[1], flags=flags)
    return p / Raw(payload) if payload else p


def udp(src, dst, payload=b"q"):
    ip = IPv6 if ":" in src[0] else IP
    return pf.eth() / ip(src=src[0], dst=dst[0]) / \
        UDP(sport=src[1], dport=dst[1]) / Raw(payload)


def translated(p, src=None, dst=None):
    """@p with its source and/or destination (addr, port) replaced, every
    checksum recomputed by scapy."""
    q = p.copy()
    ip = q[IPv6] if q.haslayer(IPv6) else q[IP]
    l4 = q[TCP] if q.haslayer(TCP) else q[UDP]
    if src:
        ip.src, l4.sport = src
    if dst:
        ip.dst, l4.dport = dst
    if q.haslayer(IP):
        del q[IP].chksum
    del l4.chksum
    return pf.rebuilt(q)


def endpoints(raw):
    p = Ether(raw)
    ip = p[IPv6] if p.haslayer(IPv6) else p[IP]
    l4 = p[TCP] if p.haslayer(TCP) else p[UDP]
    return (ip.src, l4.sport), (ip.dst, l4.dport)


PORTS = """ports:
  - {name: in, uri: 'pcap:rx=%(tmp)s/in.pcap'}
  - {name: out, uri: 'pcap:tx=%(tmp)s/out.pcap'}
  - {name: back, uri: 'pcap:tx=%(tmp)s/back.pcap'}
"""

# Out of `out` go the initiators' packets, out of `back` the replies;
# packets that get no connection are dropped (flow_miss_drop).
NAT = """pipes:
  - name: nat
    type: ct
    root: in
    size: %(size)d
    ct: %(ct)s
    fwd: {pipe: side}
    miss: drop
  - name: side
    type: acl
    match: [meta.ct_flags]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {meta.ct_flags: 0x02/0x02}, priority: 1, fwd: {port: back}}
      - {match: {meta.ct_flags: 0/0}, priority: 2, fwd: {port: out}}
"""


def run(dpflow, config, inputs, tmp):
    """Run @config on @inputs: (exit code, report text, {port: [bytes]})."""
    pf.wrpcap(os.path.join(tmp, "in.pcap"), inputs)
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write(PORTS % {"tmp": tmp} + config)
    p = subprocess.run([dpflow, "run", cfg], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    out = p.stdout.decode(errors="replace")
    got = {}
    for name in ("out", "back"):
        path = os.path.join(tmp, name + ".pcap")
        got[name] = [bytes(x) for x in rdpcap(path)] \
            if os.path.exists(path) and os.path.getsize(path) > 24 else []
    return p.returncode, out, got


def drops(out):
    return {k: int(v) for k, v in re.findall(r"^\s+([a-z0-9_]+)\s+(\d+)$",
                                             out.split("drops:")[-1], re.M)}


def same(got, want, what):
    if len(got) != len(want):
        return ["%s: %d packets, expected %d" % (what, len(got), len(want))]
    return ["%s packet %d differs:\n  got  %s\n  want %s" %
            (what, i, g.hex(), w.hex())
            for i, (g, w) in enumerate(zip(got, want)) if g != w]


def nat_config(ct, size=1024):
    return NAT % {"ct": ct, "size": size}


C1, C2 = ("10.0.0.1", 40001), ("10.0.0.2", 40001)
S1, S2 = ("203.0.113.5", 80), ("203.0.113.6", 80)
P1 = ("198.51.100.1", 20000)


@case
def one_binding(dpflow, tmp):
    """snat with one address and one port: the binding, its replies, and
    a second flow whose only candidate would clash (refused, counted)
    while the same binding serves another destination"""
    syn, ack = tcp(C1, S1, "S"), tcp(C1, S1, "A", b"GET /")
    synack = tcp(S1, P1, "SA")
    clash = tcp(C2, S1, "S")
    other = tcp(C2, S2, "S")
    other_reply = tcp(S2, P1, "SA")
    dns = udp(C1, ("203.0.113.5", 53))
    rc, out, got = run(dpflow, nat_config(
        "{snat: {addrs: [198.51.100.1], ports: [20000, 20000]}}"),
        [syn, synack, ack, clash, other, other_reply, dns], tmp)
    if rc:
        return ["exit %d: %s" % (rc, out[-800:])]
    problems = same(got["out"], [translated(syn, src=P1),
                                 translated(ack, src=P1),
                                 translated(other, src=P1),
                                 translated(dns, src=P1)], "out")
    problems += same(got["back"], [translated(synack, dst=C1),
                                   translated(other_reply, dst=C2)], "back")
    if drops(out) != {"flow_miss_drop": 1}:
        problems.append("drops %s, expected flow_miss_drop 1" % drops(out))
    if not re.search(r"\s0 replaced\s+1 nat_exhausted", out):
        problems.append("no 'nat_exhausted 1' in the report:\n" + out[-600:])
    return problems


@case
def pool_unique(dpflow, tmp):
    """snat over 2 addresses x 4 ports: 12 clients with the same port to
    one server get 8 distinct bindings from the pool, 4 are refused; a
    second packet of each flow keeps its binding"""
    addrs = ["198.51.100.1", "198.51.100.2"]
    clients = [("10.0.1.%d" % i, 5555) for i in range(1, 13)]
    # the payload names the client: its address is translated away
    first = [udp(c, ("203.0.113.9", 443), b"q%d" % i)
             for i, c in enumerate(clients)]
    again = [udp(c, ("203.0.113.9", 443), b"again%d" % i)
             for i, c in enumerate(clients)]
    rc, out, got = run(dpflow, nat_config(
        "{snat: {addrs: [%s], ports: [1024, 1027]}}" % ", ".join(addrs)),
        first + again, tmp)
    if rc:
        return ["exit %d: %s" % (rc, out[-800:])]
    problems = []
    if len(got["out"]) != 16:
        return ["out: %d packets, expected 16 (8 flows x 2)" %
                len(got["out"])]
    bound = {}
    for raw in got["out"]:
        src, _ = endpoints(raw)
        payload = bytes(Ether(raw)[UDP].payload)
        if src[0] not in addrs or not 1024 <= src[1] <= 1027:
            problems.append("binding %s outside the pool" % (src,))
        # which client: the packet otherwise equals one input
        for i, p in enumerate(first if payload.startswith(b"q")
                              else again):
            if translated(p, src=src) == raw:
                bound.setdefault(i, set()).add(src)
                break
        else:
            problems.append("a packet that is no input translated: %s" %
                            raw.hex())
    if len(bound) != 8:
        problems.append("%d flows translated, expected 8" % len(bound))
    if any(len(v) != 1 for v in bound.values()):
        problems.append("a flow changed its binding: %s" % bound)
    pairs = [next(iter(v)) for v in bound.values()]
    if len(set(pairs)) != len(pairs):
        problems.append("bindings not unique: %s" % sorted(pairs))
    if sorted(bound) != list(range(8)):
        problems.append("the first 8 flows should be bound, got %s" %
                        sorted(bound))
    if drops(out) != {"flow_miss_drop": 8}:
        problems.append("drops %s, expected flow_miss_drop 8 (4 flows x 2)"
                        % drops(out))
    # each packet of a refused flow asks for a binding again: 4 x 2
    if not re.search(r"\s0 replaced\s+8 nat_exhausted", out):
        problems.append("report lacks the nat counters:\n" + out[-600:])
    return problems


@case
def ipv6_only_pool(dpflow, tmp):
    """a pool of one family translates that family only: IPv6 flows get
    the IPv6 binding (and their replies the way back), IPv4 flows pass
    untranslated but tracked"""
    c6, s6, p6 = ("2001:db8::1", 33000), ("2001:db8:1::5", 80), \
        ("2001:db8:ff::1", 30000)
    syn6, synack6 = tcp(c6, s6, "S"), tcp(s6, p6, "SA")
    syn4, synack4 = tcp(C1, S1, "S"), tcp(S1, C1, "SA")
    rc, out, got = run(dpflow, nat_config(
        "{snat: {addrs: ['2001:db8:ff::1'], ports: [30000, 30000]}}"),
        [syn6, synack6, syn4, synack4], tmp)
    if rc:
        return ["exit %d: %s" % (rc, out[-800:])]
    problems = same(got["out"], [translated(syn6, src=p6), bytes(syn4)],
                    "out")
    problems += same(got["back"], [translated(synack6, dst=c6),
                                   bytes(synack4)], "back")
    if drops(out):
        problems.append("unexpected drops %s" % drops(out))
    return problems


@case
def saved_registers(dpflow, tmp):
    """ct.save: the register the opening packet carried comes back on
    every packet of the connection, replies included; a connection the
    server opens carries none and is dropped by the policy"""
    config = """pipes:
  - name: mark
    type: lpm
    root: in
    match: [outer.ipv4.src]
    actions:
      - [{set: {field: meta.reg2, value: 5}}]
    fwd: {pipe: conn}
    miss: {pipe: conn}
    entries:
      - {match: {outer.ipv4.src: 10.0.0.0/8}}
  - name: conn
    type: ct
    size: 64
    ct: {save: [meta.reg2]}
    fwd: {pipe: policy}
    miss: drop
  - name: policy
    type: basic
    match: [meta.reg2]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {meta.reg2: 5}, fwd: {port: out}}
"""
    syn, synack, ack = tcp(C1, S1, "S"), tcp(S1, C1, "SA"), tcp(C1, S1, "A")
    stranger = tcp(S2, C2, "S")
    rc, out, got = run(dpflow, config, [syn, synack, ack, stranger], tmp)
    if rc:
        return ["exit %d: %s" % (rc, out[-800:])]
    problems = same(got["out"], [bytes(syn), bytes(synack), bytes(ack)],
                    "out")
    if drops(out) != {"flow_miss_drop": 1}:
        problems.append("drops %s, expected flow_miss_drop 1" % drops(out))
    return problems


@case
def replace_lru(dpflow, tmp):
    """ct.replace: a full table gives the least recently used half-open
    connection to a new one (counted replaced), never an established one;
    without it the new connection is refused"""
    # size 8: one bucket-sized table; 8 established flows fill it
    est = []
    for i in range(8):
        c = ("10.0.2.%d" % (i + 1), 1000)
        est += [tcp(c, S1, "S"), tcp(S1, c, "SA"), tcp(c, S1, "A")]
    late = [tcp(("10.0.3.%d" % (i + 1), 1000), S1, "S") for i in range(3)]
    problems = []
    for replace in (True, False):
        with tempfile.TemporaryDirectory() as t:
            rc, out, got = run(dpflow, nat_config(
                "{replace: %s}" % ("true" if replace else "false"), size=8),
                est + late, t)
        if rc:
            return ["exit %d: %s" % (rc, out[-800:])]
        m = re.search(r"(\d+) created\s+(\d+) expired", out)
        created = int(m.group(1)) if m else -1
        if replace:
            # the established ones stay; no half-open one is there to
            # replace, so the late SYNs are refused all the same
            if created != 8 or drops(out) != {"flow_miss_drop": 3}:
                problems.append("replace: created %d, drops %s; expected "
                                "8 and flow_miss_drop 3" %
                                (created, drops(out)))
        elif created != 8 or drops(out) != {"flow_miss_drop": 3}:
            problems.append("no replace: created %d, drops %s" %
                            (created, drops(out)))
    # half-open flows do replace one another
    syns = [tcp(("10.0.4.%d" % (i + 1), 1000), S1, "S") for i in range(11)]
    rc, out, got = run(dpflow, nat_config("{replace: true}", size=8), syns,
                       tmp)
    if rc:
        return problems + ["exit %d: %s" % (rc, out[-800:])]
    if len(got["out"]) != 11 or drops(out):
        problems.append("replace with half-open flows: %d forwarded, drops "
                        "%s; expected 11 and none" %
                        (len(got["out"]), drops(out)))
    if not re.search(r"\s3 replaced\s+0 nat_exhausted", out):
        problems.append("no '3 replaced' in the report:\n" + out[-600:])
    return problems


FULL_NAT = """pipes:
  - name: vip
    type: basic
    root: in
    match: [outer.ipv4.dst]
    actions:
      - [{set: {field: meta.reg0, value: per-entry}}]
    fwd: {pipe: conn}
    miss: {pipe: conn}
    entries:
      - {match: {outer.ipv4.dst: 192.0.2.10}, values: [1]}
      - {match: {outer.ipv4.dst: 192.0.2.11}, values: [2]}
      - {match: {outer.ipv4.dst: 192.0.2.12}, values: [3]}
      - {match: {outer.ipv4.dst: 192.0.2.13}, values: [4]}
  - name: backends
    type: basic
    match: [meta.reg0]
    actions:
      - [{nat_dst_ip: per-entry}, {nat_dst_port: per-entry}]
      - [{nat_dst_ip: per-entry}]
    fwd: drop
    entries:
      - {match: {meta.reg0: 1}, values: [10.0.1.1, 8080]}
      - {match: {meta.reg0: 2}, action: 1, values: [10.0.1.2]}
      - {match: {meta.reg0: 4}, values: ['2001:db8::4', 8080]}
  - name: conn
    type: ct
    size: 64
    ct:
      save: [meta.reg0]
      snat: {addrs: [198.51.100.1], ports: [20000, 20000]}
      dnat: {pipe: backends, reg: meta.reg0}
    fwd: {pipe: side}
    miss: drop
  - name: side
    type: acl
    match: [meta.ct_flags]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {meta.ct_flags: 0x02/0x02}, priority: 1, fwd: {port: back}}
      - {match: {meta.ct_flags: 0/0}, priority: 2, fwd: {port: out}}
"""


@case
def full_nat(dpflow, tmp):
    """dnat from a table pipe by register plus snat (a load balancer's full
    NAT): the client's packets go to the backend from the pool binding,
    the backend's replies come back from the VIP to the client; a backend
    without a port keeps the VIP's port; a register with no entry, or an
    entry of the other family, opens no connection"""
    vip1, vip2 = ("192.0.2.10", 80), ("192.0.2.11", 443)
    b1, b2 = ("10.0.1.1", 8080), ("10.0.1.2", 443)
    syn, ack = tcp(C1, vip1, "S"), tcp(C1, vip1, "A", b"GET /")
    synack = tcp(b1, P1, "SA")
    syn2 = tcp(C2, vip2, "S")
    synack2 = tcp(b2, P1, "SA")
    nobackend = tcp(C2, ("192.0.2.12", 80), "S")  # reg0 3: no entry
    wrongfam = tcp(C2, ("192.0.2.13", 80), "S")   # an IPv6 backend
    stray = tcp(b1, P1, "A")  # to the binding's port, wrong flow state
    rc, out, got = run(dpflow, FULL_NAT,
                       [syn, synack, ack, syn2, synack2, nobackend,
                        wrongfam], tmp)
    if rc:
        return ["exit %d: %s" % (rc, out[-800:])]
    problems = same(got["out"], [translated(syn, src=P1, dst=b1),
                                 translated(ack, src=P1, dst=b1),
                                 translated(syn2, src=P1, dst=b2)], "out")
    problems += same(got["back"], [translated(synack, src=vip1, dst=C1),
                                   translated(synack2, src=vip2, dst=C2)],
                     "back")
    if drops(out) != {"flow_miss_drop": 2}:
        problems.append("drops %s, expected flow_miss_drop 2" % drops(out))
    del stray
    return problems


@case
def full_nat_trace(dpflow, tmp):
    """dpflow trace names the reason a packet without a destination opened
    no connection (no_target), and shows a translated packet's bytes"""
    pf.wrpcap(os.path.join(tmp, "in.pcap"),
              [tcp(C2, ("192.0.2.12", 80), "S"), tcp(C1, ("192.0.2.10", 80),
                                                     "S")])
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write(PORTS % {"tmp": tmp} + FULL_NAT)
    problems = []
    p = subprocess.run([dpflow, "trace", cfg, "--pcap",
                        os.path.join(tmp, "in.pcap"), "--index", "0"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    out = p.stdout.decode(errors="replace")
    if "no_target" not in out or "flow_miss_drop" not in out:
        problems.append("trace of a packet without a backend:\n" + out)
    p = subprocess.run([dpflow, "trace", cfg, "--pcap",
                        os.path.join(tmp, "in.pcap"), "--index", "1"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    out = p.stdout.decode(errors="replace")
    want = translated(tcp(C1, ("192.0.2.10", 80), "S"), src=P1,
                      dst=("10.0.1.1", 8080)).hex()
    if want not in out.replace(" ", ""):
        problems.append("trace lacks the translated packet %s:\n%s" %
                        (want, out))
    return problems



@case
def opens_register(dpflow, tmp):
    """ct.opens: packets from the inside (register set) open connections
    and their replies are tracked; a packet from outside to a pool address
    opens nothing, binds nothing and is dropped"""
    config = """pipes:
  - name: mark
    type: lpm
    root: in
    match: [outer.ipv4.src]
    actions:
      - [{set: {field: meta.reg1, value: 1}}]
    fwd: {pipe: nat}
    miss: {pipe: nat}
    entries:
      - {match: {outer.ipv4.src: 10.0.0.0/8}}
  - name: nat
    type: ct
    size: 64
    ct:
      snat: {addrs: [198.51.100.1], ports: [20000, 20000]}
      opens: meta.reg1
    fwd: {pipe: side}
    miss: drop
  - name: side
    type: acl
    match: [meta.ct_flags]
    fwd: per-entry
    miss: drop
    entries:
      - {match: {meta.ct_flags: 0x02/0x02}, priority: 1, fwd: {port: back}}
      - {match: {meta.ct_flags: 0/0}, priority: 2, fwd: {port: out}}
"""
    probe = tcp(S2, P1, "S")       # from outside to the binding: nothing
    syn, synack = tcp(C1, S1, "S"), tcp(S1, P1, "SA")
    rc, out, got = run(dpflow, config, [probe, syn, synack], tmp)
    if rc:
        return ["exit %d: %s" % (rc, out[-800:])]
    # the probe opened nothing, so the one binding is free for C1
    problems = same(got["out"], [translated(syn, src=P1)], "out")
    problems += same(got["back"], [translated(synack, dst=C1)], "back")
    if drops(out) != {"flow_miss_drop": 1}:
        problems.append("drops %s, expected flow_miss_drop 1" % drops(out))
    m = re.search(r"(\d+) live\s+(\d+) created", out)
    if not m or m.group(2) != "1":
        problems.append("connections created: %s, expected 1" %
                        (m.group(2) if m else "?"))
    return problems



ERRORS = [
    ("{snat: {addrs: [198.51.100.1]}, inner: true}",
     "not with 'inner'"),
    ("{evict: true, replace: true}", "exclude each other"),
    ("{snat: {addrs: [198.51.100]}}",
     "'198.51.100' is not an IPv4 or IPv6 address"),
    ("{snat: {addrs: [198.51.100.1], ports: [2000, 1000]}}",
     "first port 2000 is above the last, 1000"),
    ("{snat: {ports: [1, 2]}}", "'addrs' is missing"),
    ("{snat: {addrs: [198.51.100.1, 198.51.100.1]}}",
     "'198.51.100.1' is there already"),
    ("{save: [meta.reg0, meta.reg0]}", "meta.reg0 is there already"),
    ("{save: [outer.ipv4.src]}", "expected meta.reg0 .. meta.reg3"),
    ("{snat: {addrs: [198.51.100.1], bogus: 1}}", "bogus"),
    ("{dnat: {pipe: nope, reg: meta.reg0}}", "pipe 'nope' does not exist"),
    ("{dnat: {pipe: side, reg: meta.reg0}}",
     "must be a basic pipe matching meta.reg0 alone, with a nat_dst_ip"),
    ("{dnat: {pipe: side}}", "'reg' is missing"),
    ("{dnat: {pipe: side, reg: meta.reg0}, lookup_only: true}",
     "not with 'lookup_only'"),
    ("{lookup_only: true, opens: meta.reg1}",
     "a lookup_only pipe opens no connections"),
    ("{opens: meta.reg7}", "meta.reg7"),
]


@case
def config_errors(dpflow, tmp):
    """invalid ct values settings are refused with the key's line and a
    message that names the problem; nothing runs"""
    problems = []
    for ct, want in ERRORS:
        rc, out, _ = run(dpflow, nat_config(ct), [tcp(C1, S1, "S")], tmp)
        if rc == 0 or want not in out or "config.yaml:" not in out:
            problems.append("ct %s: exit %d, expected an error with %r:\n%s"
                            % (ct, rc, want, out[-400:]))
        if os.path.exists(os.path.join(tmp, "out.pcap")) and \
                os.path.getsize(os.path.join(tmp, "out.pcap")) > 24:
            problems.append("ct %s: packets were sent" % ct)
    return problems


def main():
    dpflow = sys.argv[1]
    print("1..%d" % len(CASES))
    failed = 0
    for i, fn in enumerate(CASES, 1):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                problems = fn(dpflow, tmp)
            except Exception as e:  # a crash of the test is a failure
                problems = ["exception: %r" % e]
        desc = fn.__doc__.split("\n")[0] if fn.__doc__ else fn.__name__
        if problems:
            failed += 1
            print("not ok %d - %s: %s" % (i, fn.__name__, desc))
            for p in problems:
                for line in p.splitlines():
                    print("#   " + line)
        else:
            print("ok %d - %s: %s" % (i, fn.__name__, desc))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
