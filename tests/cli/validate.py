#!/usr/bin/python3
"""`dpflow validate CONFIG` as an operator runs it: a valid config prints
its ports, pipes (type, match, actions, forwarding, miss) and entries in
config syntax, and apps.l4lb's services and backends, with exit 0 and
every file of its folder byte for byte as it was (an existing transmit
capture untouched, nothing created); invalid configs exit 1 with the
loader's FILE:LINE message; a missing receive file and a missing
interface are errors, a URI key the backend refuses is refused with the
message `dpflow run` gives, a tx path that is the rx file by a symlink
is refused, a FIFO as rx is not read while a device such as /dev/null
is opened as run opens it (and refused alike), and messages name a file
once; --help exits 0, usage errors 2. TAP on stdout, one point per case.

usage: validate.py DPFLOW SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROUTER = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
  - {name: lan, uri: 'pcap:tx=lan.pcap'}
pipes:
  - name: routes
    type: lpm
    root: in
    match: [outer.ipv4.dst]
    actions:
      - [{dec_ttl: true}, {set_mac_src: "02:00:00:00:00:01"}, {set_mac_dst: per-entry}]
    monitor: {counter: true}
    fwd: {port: lan}
    miss: drop
    entries:
      - {match: {outer.ipv4.dst: 10.0.0.0/8}, values: [null, null, "02:00:00:00:0a:01"]}
      - {match: {outer.ipv4.dst: 192.168.1.0/24}, values: [null, null, "02:00:00:00:0a:02"]}
"""

# line 6 holds the unknown pipe type
BAD_TYPE = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
pipes:
  - name: p
    root: in
    type: nosuch
    match: [outer.ipv4.dst]
    fwd: drop
"""

# line 8: forwarding to a port that does not exist
BAD_FWD = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
pipes:
  - name: p
    type: basic
    root: in
    match: [outer.ipv4.dst]
    fwd: {port: nosuch}
"""

MISSING_RX = """\
ports:
  - {name: in, uri: 'pcap:rx=missing.pcap'}
  - {name: out, uri: 'pcap:tx=out.pcap'}
"""

# line 3: a transmit path that is another port's receive file
SAME_FILE = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
  - {name: lan, uri: 'pcap:tx=./in.pcap'}
"""

NO_IFACE = """\
ports:
  - {name: wire, uri: 'afpacket:dpfnosuch0'}
"""

# line 2: one port whose URI open refuses before touching anything; the
# backend's own parser must refuse it in validate too, in the same words
ONE_PORT = """\
ports:
  - {name: p, uri: '%s'}
"""

# (URI, a fragment of the message): keys and values only the backend knows
BAD_URIS = (
    ("afpacket:lo,bogus=1", "unknown key 'bogus' (value '1')"),
    ("afpacket:lo,block_size=5000", "a multiple of the page size"),
    ("afxdp:lo,mode=fast", "expected auto, native or skb"),
    ("afxdp:", "needs an interface name"),
    ("dpdk:net_null0,bogus=1", "dpdk:net_null0,bogus=1"),
)

# the same file by a symlink: tx of the port that reads it (line 2), and
# tx of another port (line 3)
LINK_SAME = ONE_PORT % "pcap:rx=in.pcap,tx=link.pcap"
LINK_OTHER = """\
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
  - {name: lan, uri: 'pcap:tx=link.pcap'}
"""


def run(dpflow, *args, cwd=None, timeout=60):
    p = subprocess.run([dpflow, *args], capture_output=True, text=True,
                       timeout=timeout, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def snapshot(d):
    """Every file of @d (name -> bytes)."""
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def main():
    dpflow, src = os.path.abspath(sys.argv[1]), sys.argv[2]
    cases = []
    with tempfile.TemporaryDirectory() as d:
        rc, out, err = run(dpflow, "gen", "default", "--count", "50", "-o",
                           os.path.join(d, "in.pcap"))
        if rc:
            print("Bail out! dpflow gen failed: " + err)
            return 1
        shutil.copy(os.path.join(d, "in.pcap"), os.path.join(d, "lan.pcap"))
        write(d, "router.yaml", ROUTER)
        before = snapshot(d)
        rc, out, err = run(dpflow, "validate", "router.yaml", cwd=d)
        cases.append(("a valid config exits 0", rc == 0, out + err))
        cases.append(("ports: name, kind, URI",
                      "  in: pcap pcap:rx=in.pcap\n" in out and
                      "  lan: pcap pcap:tx=lan.pcap\n" in out, out))
        cases.append(("the pipe: type, root, entries",
                      "  routes: type lpm, root of port in, 2 entries" in out,
                      out))
        cases.append(("match, actions, fwd and miss in config syntax",
                      '    match: ["outer.ipv4.dst"]\n' in out and
                      '    actions[0]: [{"dec_ttl":true},{"set_mac_src":'
                      '"02:00:00:00:00:01"},{"set_mac_dst":"per-entry"}]\n'
                      in out and '    fwd: {"port":"lan"}\n' in out and
                      '    miss: "drop"\n' in out, out))
        cases.append(("entries as `entries list` writes them",
                      '      - {"match":{"outer.ipv4.dst":"10.0.0.0/8"},'
                      '"values":[null,null,"02:00:00:00:0a:01"]}\n' in out
                      and '      - {"match":{"outer.ipv4.dst":'
                      '"192.168.1.0/24"},"values":[null,null,'
                      '"02:00:00:00:0a:02"]}\n' in out, out))
        cases.append(("the last line says valid",
                      out.endswith("router.yaml: valid\n"), out))
        after = snapshot(d)
        cases.append(("the existing tx capture is untouched",
                      after.get("lan.pcap") == before["lan.pcap"],
                      "lan.pcap %d bytes, was %d" %
                      (len(after.get("lan.pcap", b"")),
                       len(before["lan.pcap"]))))
        cases.append(("no file created, none changed", after == before,
                      "files %s, were %s" % (sorted(after), sorted(before))))

        os.remove(os.path.join(d, "lan.pcap"))
        before = snapshot(d)
        rc, out, err = run(dpflow, "validate", "router.yaml", cwd=d)
        cases.append(("a tx file that does not exist is not created",
                      rc == 0 and snapshot(d) == before, out + err))

        for name, text, line, frag in (
                ("bad_type.yaml", BAD_TYPE, 6, "pipes[0].type"),
                ("bad_fwd.yaml", BAD_FWD, 8, "nosuch")):
            write(d, name, text)
            rc, out, err = run(dpflow, "validate", name, cwd=d)
            cases.append(("%s exits 1 with %s:%d" % (name, name, line),
                          rc == 1 and ("%s:%d:" % (name, line)) in err and
                          frag in err and "valid" not in out, out + err))

        write(d, "missing_rx.yaml", MISSING_RX)
        before = snapshot(d)
        rc, out, err = run(dpflow, "validate", "missing_rx.yaml", cwd=d)
        cases.append(("a missing rx file: exit 1, FILE:LINE and the file",
                      rc == 1 and "missing_rx.yaml:2:" in err and
                      "cannot read 'missing.pcap'" in err, out + err))
        cases.append(("... named once: 'cannot read 'missing.pcap': No "
                      "such file or directory'",
                      "cannot read 'missing.pcap': No such file or "
                      "directory" in err and err.count("missing.pcap") == 1,
                      err))
        cases.append(("... and nothing created", snapshot(d) == before,
                      str(sorted(snapshot(d)))))

        write(d, "unreadable.yaml",
              MISSING_RX.replace("missing.pcap", "router.yaml"))
        rc, out, err = run(dpflow, "validate", "unreadable.yaml", cwd=d)
        cases.append(("an rx file that is no capture: exit 1",
                      rc == 1 and "cannot read 'router.yaml'" in err,
                      out + err))

        write(d, "same_file.yaml", SAME_FILE)
        before = snapshot(d)
        rc, out, err = run(dpflow, "validate", "same_file.yaml", cwd=d)
        cases.append(("tx = another port's rx: exit 1 naming both ports",
                      rc == 1 and "same_file.yaml:3:" in err and
                      "port 'lan' writes" in err and "port 'in' reads" in err
                      and snapshot(d) == before, out + err))

        write(d, "no_iface.yaml", NO_IFACE)
        rc, out, err = run(dpflow, "validate", "no_iface.yaml", cwd=d)
        cases.append(("an interface that does not exist: exit 1",
                      rc == 1 and "no_iface.yaml:2:" in err and
                      "no interface 'dpfnosuch0'" in err, out + err))

        for uri, frag in BAD_URIS:
            write(d, "bad_uri.yaml", ONE_PORT % uri)
            rc, out, err = run(dpflow, "validate", "bad_uri.yaml", cwd=d)
            rrc, rout, rerr = run(dpflow, "run", "bad_uri.yaml", cwd=d)
            msg, rmsg = ((e.partition("bad_uri.yaml:2:")[2] + "\n")
                         .splitlines()[0] for e in (err, rerr))
            cases.append(("%s: validate exits 1 with run's message" % uri,
                          rc == 1 and rrc == 1 and frag in msg and
                          msg == rmsg,
                          "validate: %s\nrun: %s" % (err, rerr)))

        os.symlink("in.pcap", os.path.join(d, "link.pcap"))
        for name, text, line, frag in (
                ("link_same.yaml", LINK_SAME, 2,
                 "tx 'link.pcap' is the rx file 'in.pcap'"),
                ("link_other.yaml", LINK_OTHER, 3,
                 "port 'lan' writes '%s', which port 'in' reads" %
                 os.path.join(os.path.realpath(d), "in.pcap"))):
            write(d, name, text)
            before = snapshot(d)
            rc, out, err = run(dpflow, "validate", name, cwd=d)
            cases.append(("%s: tx is the rx file by a symlink: exit 1" % name,
                          rc == 1 and ("%s:%d:" % (name, line)) in err and
                          frag in err and snapshot(d) == before, out + err))
        os.remove(os.path.join(d, "link.pcap"))

        # a FIFO as rx: validate must not read (or wait for) its writer
        os.mkfifo(os.path.join(d, "fifo"))
        write(d, "fifo.yaml", ONE_PORT % "pcap:rx=fifo")
        try:
            rc, out, err = run(dpflow, "validate", "fifo.yaml", cwd=d,
                               timeout=10)
        except subprocess.TimeoutExpired:
            rc, out, err = -1, "", "timed out: it opened the FIFO"
        cases.append(("a FIFO as rx is not read: exit 0 at once",
                      rc == 0 and out.endswith("fifo.yaml: valid\n"),
                      out + err))
        os.remove(os.path.join(d, "fifo"))

        # a device that is no stream (/dev/null) is opened as a capture,
        # as run opens it: both refuse it in the same words
        if os.path.exists("/dev/null"):
            write(d, "devnull.yaml", ONE_PORT % "pcap:rx=/dev/null")
            rc, out, err = run(dpflow, "validate", "devnull.yaml", cwd=d)
            rrc, rout, rerr = run(dpflow, "run", "devnull.yaml", cwd=d)
            msg, rmsg = ((e.partition("devnull.yaml:2:")[2] + "\n")
                         .splitlines()[0] for e in (err, rerr))
            cases.append(("rx=/dev/null: validate exits 1 with run's "
                          "message", rc == 1 and rrc == 1 and
                          "cannot read '/dev/null'" in msg and msg == rmsg,
                          "validate: %s\nrun: %s" % (out + err, rerr)))

        # apps.l4lb: examples/l4lb.yaml on captures dpflow gen writes
        shutil.copy(os.path.join(src, "examples", "l4lb.yaml"), d)
        for f in ("clients.pcap", "backends.pcap"):
            shutil.copy(os.path.join(d, "in.pcap"), os.path.join(d, f))
        before = snapshot(d)
        rc, out, err = run(dpflow, "validate", "--workers", "2",
                           "l4lb.yaml", cwd=d)
        cases.append(("examples/l4lb.yaml is valid", rc == 0, out + err))
        cases.append(("its services and backends are printed",
                      "    service web: tcp 192.0.2.10:80, mode nat, "
                      "snat 198.51.100.1\n" in out and
                      "      backend 10.0.1.3:8080 weight 2\n" in out and
                      "    service dns6: udp [2001:db8::53]:53, mode gue"
                      in out, out))
        cases.append(("... and its outputs are not created",
                      snapshot(d) == before, str(sorted(snapshot(d)))))

    rc, out, err = run(dpflow, "validate", "--help")
    cases.append(("--help exits 0 with the usage",
                  rc == 0 and out.startswith("usage: dpflow validate"), err))
    rc, out, err = run(dpflow, "validate")
    cases.append(("no CONFIG: exit 2", rc == 2 and "usage:" in err, err))
    rc, out, err = run(dpflow, "validate", "--workers", "0", "x.yaml")
    cases.append(("--workers 0: exit 2",
                  rc == 2 and "--workers '0'" in err, err))
    rc, out, err = run(dpflow, "validate", "/nonexistent/x.yaml")
    cases.append(("a config that does not exist: exit 1",
                  rc == 1 and "/nonexistent/x.yaml" in err, err))
    rc, out, err = run(dpflow, "--help")
    cases.append(("dpflow --help lists validate",
                  rc == 0 and "\n  validate " in out, out))

    print("1..%d" % len(cases))
    failed = 0
    for i, (name, ok, detail) in enumerate(cases, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if not ok:
            failed += 1
            for line in detail.splitlines()[:20]:
                print("# " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
