#!/usr/bin/python3
"""dpflowctl as an operator uses it (issue 22), against two live `dpflow
run --control` instances (a pipeline fed from a pcap file, and the l4lb
app), each kept up by a ring port: --version and `version`; help at every
level (`help [COMMAND [SUB]]`, -h/--help after every command and
subcommand, l4lb's included) exits 0 with the usage on stdout; a usage
error exits 2 with one short line on stderr naming what is wrong and the
--help to try; every show command's --json output is one JSON document;
text output holds no JSON fragments and shows actions, forwarding, port
URIs and files, hex ethertypes and bracketed IPv6 endpoints (the
server's "endpoint" members); YAML nulls reach the server as nulls (a
constant action's values item) through entries add, update and batch,
quoted "null" as text; l4lb commands against a run without the app say
so. TAP on stdout, one point per case.

usage: dpflowctl_cli.py DPFLOW DPFLOWCTL
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

DPFLOW, DPFLOWCTL = (os.path.abspath(p) for p in sys.argv[1:3])

CONFIG = """
ports:
  - {name: in, uri: 'pcap:rx=in.pcap'}
  - {name: lan, uri: 'pcap:tx=lan.pcap'}
  - {name: sink, uri: 'null:'}
  - {name: idle, uri: 'ring:idle'}     # never done: the run stays up
pipes:
  - name: classify
    type: control
    root: in
    match: [{field: outer.eth.type, value: 0x0800}, outer.l4.dport]
    actions:
      - [{dec_ttl: true}, {set_mac_src: "02:00:00:00:00:01"},
         {set_mac_dst: per-entry}]
    monitor: {counter: true}
    fwd: {pipe: routes}
    miss: {pipe: etype}
    entries:
      - {match: {outer.l4.dport: 80}, priority: 1,
         values: [null, null, "02:00:00:00:0a:01"]}
  - name: routes
    type: lpm
    match: [outer.ipv4.dst]
    fwd: {port: lan}
    miss: drop
    entries:
      - {match: {outer.ipv4.dst: 10.0.0.0/8}}
  - name: etype
    type: basic
    match: [outer.eth.type]
    actions:
      - [{vlan_push: {vid: 7}}, {mirror: lan}]
    fwd: {port: sink}
    miss: {port: sink}
    entries:
      - {match: {outer.eth.type: 0x86dd}}
"""

LB_CONFIG = """
ports:
  - {name: client, uri: 'ring:c'}
  - {name: backend, uri: 'ring:b'}
apps:
  l4lb:
    client_port: client
    backend_port: backend
    client_mac: '02:00:00:00:00:01'
    conn_table: 1024
    maglev_size: 251
    services:
      - name: web
        vip: 192.0.2.10
        port: 80
        snat: 198.51.100.1
        backends:
          - {addr: 10.0.1.1, port: 8080}
      - name: dns6
        vip: '2001:db8::53'
        proto: udp
        port: 53
        mode: gue
        encap_src: '2001:db8:1::1'
        backends:
          - {addr: '2001:db8:2::1', port: 53}
"""

COMMANDS = ["ports", "pipes", "entries", "batch", "counters", "workers",
            "dump", "top", "trace", "l4lb", "version", "help"]
ENTRIES_SUBS = ["list", "add", "rm", "update"]
L4LB_SUBS = ["services", "backends", "service-add", "service-rm",
             "backend-add", "backend-rm", "weight", "drain"]


def ctl(*args, sock=None):
    cmd = [DPFLOWCTL] + (["-s", sock, "-t", "10"] if sock else []) + \
        list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def start(dpflow_dir, config, sock):
    path = os.path.join(dpflow_dir, os.path.basename(sock) + ".yaml")
    with open(path, "w") as f:
        f.write(config)
    proc = subprocess.Popen([DPFLOW, "run", path, "--control", sock,
                             "--duration", "120"], cwd=dpflow_dir,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for _ in range(200):
        if os.path.exists(sock) or proc.poll() is not None:
            break
        time.sleep(0.05)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def main():
    cases = []

    def case(name, ok, diag=""):
        cases.append((name, bool(ok), diag))

    # no server needed: version, help, usage errors
    for args in (["--version"], ["-V"], ["version"]):
        rc, out, err = ctl(*args)
        case("%s prints the version, exit 0" % " ".join(args),
             rc == 0 and re.fullmatch(r"dpflowctl \d+\.\d+\.\d+\n", out)
             and not err, "rc %d out %r err %r" % (rc, out, err))

    helps = [(["--help"], "usage: dpflowctl "), (["-h"], "usage: dpflowctl "),
             (["help"], "usage: dpflowctl ")]
    for c in COMMANDS:
        helps.append(([c, "--help"], "usage: dpflowctl %s" % c))
        helps.append(([c, "-h"], "usage: dpflowctl %s" % c))
        helps.append((["help", c], "usage: dpflowctl %s" % c))
    for s in ENTRIES_SUBS:
        want = "usage: dpflowctl entries %s" % s
        helps += [(["entries", s, "--help"], want),
                  (["entries", s, "fw", "--help"], want),
                  (["help", "entries", s], want)]
    for s in L4LB_SUBS:
        want = "usage: dpflowctl l4lb %s" % s
        helps += [(["l4lb", s, "--help"], want),
                  (["l4lb", s, "web", "-h"], want),
                  (["help", "l4lb", s], want)]
    for args, want in helps:
        rc, out, err = ctl(*args)
        case("%s: usage on stdout, exit 0" % " ".join(args),
             rc == 0 and out.startswith(want) and not err,
             "rc %d out %r err %r" % (rc, out[:200], err))

    bad = [(["frobnicate"], "unknown command 'frobnicate'", None),
           (["--frob"], "unknown option '--frob'", None),
           ([], "which command?", None),
           (["ports", "--frob"], "unknown argument '--frob'", "ports"),
           (["pipes", "x"], "unknown argument 'x'", "pipes"),
           (["dump", "--svg"], "unknown argument '--svg'", "dump"),
           (["dump", "--dot", "--json"], "exclude each other", "dump"),
           (["top", "--count", "0"], "--count", "top"),
           (["batch"], "which FILE?", "batch"),
           (["entries"], "list, add, rm or update", "entries"),
           (["entries", "frob"], "unknown entries command 'frob'",
            "entries"),
           (["entries", "list"], "which pipe?", "entries list"),
           (["entries", "add", "fw"], "give ENTRY arguments",
            "entries add"),
           (["entries", "rm", "fw", "--slot", "x"], "--slot takes a number",
            "entries rm"),
           (["l4lb"], "which l4lb command?", "l4lb"),
           (["l4lb", "frob"], "unknown l4lb command 'frob'", "l4lb"),
           (["l4lb", "services", "x"], "unknown argument 'x'",
            "l4lb services"),
           (["l4lb", "weight", "web"], "too few arguments", "l4lb weight"),
           (["l4lb", "weight", "web", "10.0.0.1:80", "x"],
            "W 'x' is not 0..1000000", "l4lb weight"),
           (["l4lb", "drain", "web", "[::1"], "is not ADDR[:PORT]",
            "l4lb drain"),
           (["help", "frob"], "unknown command 'frob'", None)]
    for args, why, cmd in bad:
        rc, out, err = ctl(*args)
        hint = "try 'dpflowctl %s--help'" % (cmd + " " if cmd else "")
        case("%r: one line naming the error and %s, exit 2" % (args, hint),
             rc == 2 and not out and err.count("\n") == 1 and why in err
             and hint in err, "rc %d out %r err %r" % (rc, out[:200], err))

    with tempfile.TemporaryDirectory() as d:
        sock, lb_sock = os.path.join(d, "ctl.sock"), os.path.join(d, "lb.sock")
        gen = subprocess.run([DPFLOW, "gen", "default", "--count", "100",
                              "-o", os.path.join(d, "in.pcap")],
                             capture_output=True, text=True, timeout=60)
        if gen.returncode:
            print("Bail out! dpflow gen: %s" % gen.stderr)
            return 1
        run = start(d, CONFIG, sock)
        lb = start(d, LB_CONFIG, lb_sock)
        try:
            if not os.path.exists(sock) or not os.path.exists(lb_sock):
                stop(run)
                stop(lb)
                print("Bail out! dpflow run did not serve its socket: %s %s"
                      % (run.communicate()[1], lb.communicate()[1]))
                return 1
            check_live(case, sock, lb_sock)
        finally:
            stop(run)
            stop(lb)

    print("1..%d" % len(cases))
    for i, (name, ok, diag) in enumerate(cases, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if not ok and diag:
            for line in str(diag).splitlines()[:20]:
                print("# " + line)
    return 0


def check_live(case, sock, lb_sock):
    shows = [(["ports"], sock), (["pipes"], sock), (["counters"], sock),
             (["counters", "--entries"], sock), (["workers"], sock),
             (["entries", "list", "classify"], sock),
             (["entries", "list", "etype"], sock), (["dump"], sock),
             (["l4lb", "services"], lb_sock),
             (["l4lb", "backends", "dns6"], lb_sock)]
    text = {}
    for args, s in shows:
        rc, out, err = ctl(*args, sock=s)
        text[" ".join(args)] = out
        case("%s: text without JSON fragments" % " ".join(args),
             rc == 0 and out and '{"' not in out and '":' not in out,
             "rc %d err %r\n%s" % (rc, err, out))
        rc, out, err = ctl(*(args + ["--json"]), sock=s)
        try:
            doc = json.loads(out)
        except ValueError as e:
            doc = None
            err += " (%s)" % e
        case("%s --json: one JSON document" % " ".join(args),
             rc == 0 and isinstance(doc, dict),
             "rc %d err %r out %r" % (rc, err, out[:300]))

    pipes = text["pipes"]
    case("pipes shows each pipe's actions, readable",
         "actions dec_ttl, set_mac_src 02:00:00:00:00:01, set_mac_dst "
         "per-entry" in pipes and
         "actions vlan_push vid=7 pcp=0 tpid=0x8100, mirror lan" in pipes,
         pipes)
    case("pipes shows forwarding: hit and miss targets",
         re.search(r"hit +pipe routes", pipes) and
         re.search(r"miss +pipe etype", pipes) and
         re.search(r"hit +port lan", pipes) and
         re.search(r"miss +drop", pipes), pipes)
    case("pipes and dump write the ethertype in hex",
         "outer.eth.type=0x0800" in pipes and
         "outer.eth.type=0x0800" in text["dump"] and "2048" not in pipes,
         pipes + text["dump"])
    case("entries list writes an entry's ethertype in hex",
         "match outer.eth.type=0x86dd" in text["entries list etype"],
         text["entries list etype"])
    case("entries list writes match, priority, values readably",
         "match outer.l4.dport=80  priority 1  values -, -, "
         "02:00:00:00:0a:01" in text["entries list classify"],
         text["entries list classify"])
    ports = text["ports"]
    case("ports shows each port's URI and its file",
         "uri pcap:rx=in.pcap, rx file in.pcap" in ports and
         "uri pcap:tx=lan.pcap, tx file lan.pcap" in ports and
         "uri ring:idle" in ports, ports)
    case("l4lb services writes an IPv6 VIP as [addr]:port",
         "[2001:db8::53]:53" in text["l4lb services"] and
         "[2001:db8:2::1]:53" in text["l4lb backends dns6"],
         text["l4lb services"] + text["l4lb backends dns6"])

    rc, out, _ = ctl("l4lb", "services", "--json", sock=lb_sock)
    doc = json.loads(out) if rc == 0 else {}
    svcs = {s["name"]: s for s in doc.get("services", [])}
    case("l4lb services --json: each service's and backend's endpoint, "
         "as the text shows it",
         svcs.get("web", {}).get("endpoint") == "192.0.2.10:80" and
         svcs.get("dns6", {}).get("endpoint") == "[2001:db8::53]:53" and
         [b.get("endpoint") for b in svcs.get("web", {}).get("backends",
                                                             [])] ==
         ["10.0.1.1:8080"] and
         [b.get("endpoint") for b in svcs.get("dns6", {}).get("backends",
                                                              [])] ==
         ["[2001:db8:2::1]:53"], out)
    rc, out, _ = ctl("ports", "--json", sock=sock)
    doc = json.loads(out) if rc == 0 else {}
    p0 = (doc.get("ports") or [{}])[0]
    case("ports --json: uri and rx_file",
         p0.get("uri") == "pcap:rx=in.pcap" and
         p0.get("rx_file") == "in.pcap", out)
    rc, out, _ = ctl("pipes", "--json", sock=sock)
    doc = json.loads(out) if rc == 0 else {}
    acts = {p["name"]: p.get("actions") for p in doc.get("pipes", [])}
    case("pipes --json: actions in config syntax",
         acts.get("classify") == [[{"dec_ttl": True},
                                   {"set_mac_src": "02:00:00:00:00:01"},
                                   {"set_mac_dst": "per-entry"}]], out)
    rc, out, _ = ctl("dump", "--json", sock=sock)
    doc = json.loads(out) if rc == 0 else {}
    edges = {p["name"]: p["edges"]
             for p in doc.get("graph", {}).get("pipes", [])}
    case("dump --json: the graph's edges",
         edges.get("classify") == [{"on": "hit", "to": {"pipe": "routes"}},
                                   {"on": "miss", "to": {"pipe": "etype"}}],
         out)

    # an entry listed with a hex ethertype goes back as it came
    rc, out, err = ctl("entries", "list", "etype", "--json", sock=sock)
    entry = json.dumps(json.loads(out)["entries"][0]["entry"]) if rc == 0 \
        else "{}"
    rc1, _, err1 = ctl("entries", "rm", "etype", entry, sock=sock)
    rc2, _, err2 = ctl("entries", "add", "etype", entry, sock=sock)
    rc3, out3, _ = ctl("entries", "list", "etype", sock=sock)
    case("an entry listed as JSON is removed and added back as it is",
         rc1 == 0 and rc2 == 0 and "outer.eth.type=0x86dd" in out3,
         "%s\n%s %s\n%s" % (entry, err1, err2, out3))

    check_null_values(case, sock)
    check_no_app(case, sock)


def check_null_values(case, sock):
    """A constant action's item is a YAML null however it is written,
    through entries add, update and batch (dec_ttl is classify's action 0:
    its item must be null); a quoted "null" is text."""
    mac = '"02:00:00:00:0a:%02x"'
    for port, values in ((81, "[null, null, %s]"), (82, "[~, Null, %s]"),
                         (83, "[NULL, ~, %s]")):
        entry = "{match: {outer.l4.dport: %d}, priority: 1, values: %s}" % (
            port, values % (mac % port))
        rc, out, err = ctl("entries", "add", "classify", entry, sock=sock)
        case("entries add: %s as a constant action's item" % values,
             rc == 0 and "added 1 entry to pipe classify" in out,
             "rc %d out %r err %r" % (rc, out, err))
    entry = json.dumps({"match": {"outer.l4.dport": 84}, "priority": 1,
                        "values": [None, None, "02:00:00:00:0a:54"]})
    rc, out, err = ctl("entries", "add", "classify", entry, sock=sock)
    case("entries add: JSON null as a constant action's item",
         rc == 0 and "added 1 entry" in out,
         "rc %d out %r err %r" % (rc, out, err))
    rc, out, err = ctl("entries", "update", "classify",
                       '{match: {outer.l4.dport: 81}, priority: 1, '
                       'values: [~, null, "02:00:00:00:0b:51"]}', sock=sock)
    rc2, out2, _ = ctl("entries", "list", "classify", sock=sock)
    case("entries update: null items; the new value is listed",
         rc == 0 and "updated 1 entry of pipe classify" in out and
         "match outer.l4.dport=81  priority 1  values -, -, "
         "02:00:00:00:0b:51" in out2,
         "rc %d out %r err %r\n%s" % (rc, out, err, out2))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ops.yaml")
        with open(path, "w") as f:
            f.write("- op: add\n"
                    "  pipe: classify\n"
                    "  entries:\n"
                    "    - match: {outer.l4.dport: 85}\n"
                    "      priority: 1\n"
                    "      values: [null, ~, '02:00:00:00:0a:55']\n"
                    "    - match: {outer.l4.dport: 86}\n"
                    "      priority: 1\n"
                    "      values:\n"
                    "        -\n"
                    "        - NULL\n"
                    "        - '02:00:00:00:0a:56'\n"
                    "- {op: add, pipe: etype, entries: "
                    "[{match: {outer.eth.type: 0x88cc}}]}\n")
        rc, out, err = ctl("batch", path, sock=sock)
    case("batch: null items, a hex number as before",
         rc == 0 and "applied 2 ops, 3 entries, as one batch" in out,
         "rc %d out %r err %r" % (rc, out, err))
    rc, out, err = ctl("entries", "list", "etype", sock=sock)
    case("batch: the hex ethertype read as a number",
         rc == 0 and "match outer.eth.type=0x88cc" in out, out + err)
    slot = re.search(r"slot (\d+) +id \d+ +match outer.eth.type=0x88cc", out)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rm.yaml")
        with open(path, "w") as f:
            f.write("- {op: rm, pipe: etype, entries: [{slot: %s}]}\n" %
                    (slot.group(1) if slot else "0"))
        rc, out, err = ctl("batch", path, sock=sock)
    rc2, out2, _ = ctl("entries", "list", "etype", sock=sock)
    case("batch: an rm op by slot, as the usage says",
         slot is not None and rc == 0 and
         "outer.eth.type=0x88cc" not in out2,
         "rc %d out %r err %r\n%s" % (rc, out, err, out2))
    for q in ('"null"', "'null'", '"~"'):
        rc, out, err = ctl("entries", "add", "classify",
                           "{match: {outer.l4.dport: 87}, priority: 1, "
                           "values: [%s, null, '02:00:00:00:0a:57']}" % q,
                           sock=sock)
        case("entries add: a quoted %s is text, not null" % q,
             rc == 1 and "action 0 ('dec_ttl') takes no value from the "
             "entry: write null" in err,
             "rc %d out %r err %r" % (rc, out, err))
    # an entry with null items listed as JSON goes back as it came
    rc, out, err = ctl("entries", "list", "classify", "--json", sock=sock)
    entry = "{}"
    if rc == 0:
        for e in json.loads(out)["entries"]:
            if e["entry"]["match"].get("outer.l4.dport") in (80, "80"):
                entry = json.dumps(e["entry"])
    rc1, _, err1 = ctl("entries", "rm", "classify", entry, sock=sock)
    rc2, _, err2 = ctl("entries", "add", "classify", entry, sock=sock)
    rc3, out3, _ = ctl("entries", "list", "classify", sock=sock)
    case("an entry with null values listed as JSON is removed and added "
         "back as it is",
         '"values": [null, null, "02:00:00:00:0a:01"]' in entry and
         rc1 == 0 and rc2 == 0 and "match outer.l4.dport=80  priority 1  "
         "values -, -, 02:00:00:00:0a:01" in out3,
         "%s\n%s %s\n%s" % (entry, err1, err2, out3))


def check_no_app(case, sock):
    """l4lb commands against a run without the app say so."""
    for args in (["l4lb", "services"], ["l4lb", "backends", "web"],
                 ["l4lb", "weight", "web", "10.0.1.1:8080", "5"]):
        rc, out, err = ctl(*args, sock=sock)
        case("%s without the l4lb app: says so, exit 1" % " ".join(args),
             rc == 1 and not out and
             "no l4lb app in this run (apps.l4lb in the config)" in err and
             "unknown cmd" not in err,
             "rc %d out %r err %r" % (rc, out, err))


if __name__ == "__main__":
    sys.exit(main())
