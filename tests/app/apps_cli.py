#!/usr/bin/python3
"""Apps as plugins, as an operator and a reviewer meet them (dpflow/app.h):
`dpflow apps` lists every app folder of apps/ with its config section;
a config naming an app that is not built in fails `dpflow validate` and
`dpflow run` with FILE:LINE, the app's name and the known apps; an app's
config errors read as the loader's (the public config nodes keep its
messages); `dpflowctl --help` and `dpflow bench --help` list the apps'
commands and workloads from the registry, and the bash completion offers
them by asking the binaries; tools/ and lib/ name no app, and apps/
include nothing from lib/. TAP on stdout, one point a case.

usage: apps_cli.py DPFLOW DPFLOWCTL SOURCE_ROOT
"""
import os
import re
import subprocess
import sys
import tempfile

DPFLOW, DPFLOWCTL, SRC = sys.argv[1:4]

# A config whose ports load anywhere (ring ports open nothing outside).
PORTS = """ports:
  - {name: client, uri: 'ring:c'}
  - {name: backend, uri: 'ring:b'}
"""
LB = PORTS + """apps:
  l4lb:
    client_port: client
"""

# l4lb config errors and the loader's words for them (the messages of
# the app before it read its section through dpflow/config_node.h).
LB_ERRORS = [
    (LB + "    services:\n      - {name: web, vip: '1.2.3', port: 80, "
     "snat: 198.51.100.1}\n",
     "8: apps.l4lb.services[0].vip: '1.2.3' is not an IPv4 or IPv6 "
     "address"),
    (LB + "    services:\n      - name: web\n        vip: 192.0.2.10\n"
     "        snat: 198.51.100.1\n        health: {type: tcp, bogus: 1}\n",
     "11: apps.l4lb.services[0].health.bogus: unknown key 'bogus'"),
    (PORTS + "apps:\n  l4lb:\n    client_port: nowhere\n",
     "6: apps.l4lb.client_port: no port named 'nowhere'"),
    (LB + "    conn_table: 99999999999\n",
     "7: apps.l4lb.conn_table: '99999999999' is out of range "
     "(max 268435456)"),
    (LB + "    backend_mtu: 1000\n",
     "6: apps.l4lb: backend_mtu: at least 1280 (IPv6's minimum), or 0 "
     "for no check"),
    (LB + "    frob: 1\n", "7: apps.l4lb.frob: unknown key 'frob'"),
    (PORTS + "apps:\n  l4lb:\n    backend_port: client\n",
     "6: apps.l4lb: 'client_port' is missing"),
    (LB + "    services: {a: 1}\n",
     "7: apps.l4lb.services: a list of services"),
    (LB + "    services:\n      - name: web\n        vip: 192.0.2.10\n"
     "        snat: 198.51.100.1\n        backends:\n"
     "          - {addr: 10.0.0.1, weight: -1}\n",
     "12: apps.l4lb.services[0].backends[0].weight: '-1' is out of range "
     "(0..1000000)"),
    (LB + "    client_mac: 'zz'\n",
     "7: apps.l4lb.client_mac: 'zz' is not a MAC address"),
    (LB + "    maglev_size: 100\n",
     "6: apps.l4lb: maglev_size: 100 is not a prime"),
    (LB + "    services:\n"
     "      - {name: web, vip: 192.0.2.10, snat: 198.51.100.1}\n"
     "      - {name: web, vip: 192.0.2.11, snat: 198.51.100.1}\n",
     "9: apps.l4lb.services[1]: name: service web exists"),
    (PORTS + "apps:\n  l4lb: 5\n",
     "5: apps.l4lb: a mapping (client_port: ...)"),
]


def sh(*argv, env=None):
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True,
                           timeout=60, env=env)
    except subprocess.TimeoutExpired:
        return -1, "", "(timed out)"
    return p.returncode, p.stdout, p.stderr


def app_folders():
    root = os.path.join(SRC, "apps")
    return sorted(d for d in os.listdir(root)
                  if os.path.isfile(os.path.join(root, d, "meson.build")))


def listed_apps():
    """`dpflow apps`: {name: (section, targets, workloads)}."""
    rc, out, _ = sh(DPFLOW, "apps")
    lines = out.splitlines()
    apps = {}
    for line in lines[1:]:
        f = line.split()
        if len(f) >= 4:
            apps[f[0]] = (f[1], f[2], f[3])
    return rc, lines[0].split() if lines else [], apps


def complete(script, func, words, path):
    words_q = " ".join("'%s'" % w for w in words)
    prog = ("source '%s'; COMP_WORDS=(%s); COMP_CWORD=%d; %s; "
            "printf '%%s\\n' \"${COMPREPLY[@]}\"" %
            (script, words_q, len(words) - 1, func))
    env = dict(os.environ, PATH=path + os.pathsep + os.environ["PATH"])
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog],
                       capture_output=True, text=True, timeout=60, env=env)
    return p.stdout.split()


def names_app(text, name):
    """Does @text name app @name (a word of letters and digits)?"""
    return re.search(r"(?<![a-z0-9])%s(?![a-z0-9])" % re.escape(name),
                     text, re.I) is not None


def main():
    cases = []

    def case(name, ok, diag=""):
        cases.append((name, bool(ok), diag))

    folders = app_folders()
    rc, head, apps = listed_apps()
    case("dpflow apps: a header and a line for each app of apps/ (%s)" %
         ", ".join(folders),
         rc == 0 and head[:2] == ["APP", "CONFIG"] and
         sorted(apps) == folders and
         all(apps[a][0] == "apps." + a for a in apps),
         "rc %d head %r apps %r folders %r" % (rc, head, apps, folders))
    case("dpflow apps: l4lb runs on the CPU target, workload l4lb",
         apps.get("l4lb", ("", "", ""))[1:] == ("cpu", "l4lb"),
         repr(apps.get("l4lb")))
    rc, out, err = sh(DPFLOW, "apps", "--frob")
    case("dpflow apps --frob: usage error, exit 2",
         rc == 2 and "unknown argument '--frob'" in err, err)
    rc, out, _ = sh(DPFLOW, "--help")
    case("dpflow --help lists the apps command",
         rc == 0 and re.search(r"^  apps ", out, re.M), out)

    with tempfile.TemporaryDirectory() as d:
        # an app that is not built in: named, with file and line, and the
        # apps that are
        path = os.path.join(d, "unknown.yaml")
        with open(path, "w") as f:
            f.write(PORTS + "apps:\n  frobnicator:\n    speed: 11\n")
        known = ", ".join(sorted(apps))
        want = ("%s:6: apps.frobnicator: no app named 'frobnicator' "
                "(apps: %s; `dpflow apps` lists them)" % (path, known))
        # (--duration: a dpflow that ignored the section would run on)
        for cmd in (["validate"], ["run", "--duration", "2"],
                    ["run", "--check"]):
            rc, out, err = sh(DPFLOW, *(cmd + [path]))
            prefix = "dpflow run: " if "--duration" in cmd else "dpflow: "
            case("dpflow %s with apps.frobnicator: exit 1, '%s'" %
                 (" ".join(cmd), want.split(": ", 1)[1]),
                 rc == 1 and err == prefix + want + "\n" and
                 "valid" not in out,
                 "rc %d out %r err %r" % (rc, out[-300:], err))

        # an empty apps section is no app; a list is refused
        path = os.path.join(d, "empty.yaml")
        with open(path, "w") as f:
            f.write(PORTS + "apps: {}\n")
        rc, out, err = sh(DPFLOW, "validate", path)
        case("dpflow validate with 'apps: {}': valid, no apps listed",
             rc == 0 and out.endswith(": valid\n") and "apps:" not in out,
             "rc %d out %r err %r" % (rc, out, err))
        path = os.path.join(d, "list.yaml")
        with open(path, "w") as f:
            f.write(PORTS + "apps: [l4lb]\n")
        rc, out, err = sh(DPFLOW, "validate", path)
        case("dpflow validate with 'apps: [l4lb]': refused, exit 1",
             rc == 1 and ("%s:4: apps: a mapping of app names" % path)
             in err, "rc %d err %r" % (rc, err))

        # the app's own errors, in the loader's words
        for i, (yaml, want) in enumerate(LB_ERRORS):
            path = os.path.join(d, "lb%d.yaml" % i)
            with open(path, "w") as f:
                f.write(yaml)
            rc, out, err = sh(DPFLOW, "validate", path)
            case("l4lb config error read through config nodes: %s" %
                 want.split(": ", 1)[1],
                 rc == 1 and err == "dpflow: %s:%s\n" % (path, want),
                 "rc %d err %r" % (rc, err))

        # a valid l4lb section: described under apps:
        path = os.path.join(d, "lb.yaml")
        with open(path, "w") as f:
            f.write(LB + "    services:\n      - {name: web, vip: "
                    "192.0.2.10, port: 80, snat: 198.51.100.1, backends: "
                    "[{addr: 10.0.1.1, port: 8080}]}\n")
        rc, out, err = sh(DPFLOW, "validate", path)
        case("dpflow validate: the app's section described under apps:",
             rc == 0 and "apps:\n  l4lb:\n    service web: tcp "
             "192.0.2.10:80, mode nat, snat 198.51.100.1\n      backend "
             "10.0.1.1:8080 weight 1\n" in out,
             "rc %d out %r err %r" % (rc, out[-400:], err))

    # dpflowctl: the apps' commands from the registry
    rc, out, _ = sh(DPFLOWCTL, "--help")
    sect = out.split("\napps", 1)[1] if "\napps" in out else ""
    listed = re.findall(r"^  ([a-z][a-z0-9_-]*) COMMAND \.\.\.", sect, re.M)
    case("dpflowctl --help: an apps section listing l4lb's commands",
         rc == 0 and "l4lb" in listed, out)
    for a in listed:
        rc, o, e = sh(DPFLOWCTL, a, "--help")
        case("dpflowctl %s --help: the app's usage, exit 0" % a,
             rc == 0 and o.startswith("usage: dpflowctl %s" % a) and not e,
             "rc %d out %r err %r" % (rc, o[:200], e))

    # dpflow bench: the apps' workloads from the registry
    rc, out, _ = sh(DPFLOW, "bench", "--help")
    case("dpflow bench --help lists the l4lb workload as the app's",
         rc == 0 and re.search(r"^  l4lb +.*\(app l4lb\)$", out, re.M) and
         "exact-1m, acl-10k and l4lb take --target gpu" in out, out)

    # completion: apps, their commands and workloads, asked of the binaries
    bindirs = os.pathsep.join(os.path.dirname(os.path.abspath(p))
                              for p in (DPFLOW, DPFLOWCTL))
    comp_ctl = os.path.join(SRC, "tools", "completion", "dpflowctl")
    comp_dp = os.path.join(SRC, "tools", "completion", "dpflow")
    got = complete(comp_ctl, "_dpflowctl", ["dpflowctl", ""], bindirs)
    case("completion offers every app of dpflowctl --help (%s)" %
         ", ".join(listed), listed and all(a in got for a in listed) and
         "ports" in got, got)
    rc, usage, _ = sh(DPFLOWCTL, "l4lb", "--help")
    verbs = re.findall(r"^  ([a-z][a-z-]*)", usage, re.M)
    got = complete(comp_ctl, "_dpflowctl", ["dpflowctl", "l4lb", ""],
                   bindirs)
    case("completion offers l4lb's commands from its usage (%d)" %
         len(verbs), verbs and all(v in got for v in verbs), (verbs, got))
    got = complete(comp_ctl, "_dpflowctl", ["dpflowctl", "help", "l4lb",
                                            ""], bindirs)
    case("completion after 'help l4lb' offers its commands",
         verbs and all(v in got for v in verbs), (verbs, got))
    got = complete(comp_ctl, "_dpflowctl",
                   ["dpflowctl", "l4lb", "services", "--"], bindirs)
    case("completion offers --json to l4lb services", "--json" in got, got)
    got = complete(comp_dp, "_dpflow", ["dpflow", "bench", ""], bindirs)
    case("completion offers dpflow bench's app workloads and its own",
         "l4lb" in got and "exact-1m" in got and "e2e" in got, got)
    got = complete(comp_dp, "_dpflow", ["dpflow", ""], bindirs)
    case("completion offers dpflow apps", "apps" in got, got)

    # tools/ and lib/ name no app; apps/ include nothing from lib/
    names = sorted(set(folders) | set(apps))
    hits = []
    for top in ("tools", "lib"):
        for dirpath, _, files in os.walk(os.path.join(SRC, top)):
            for fn in files:
                p = os.path.join(dirpath, fn)
                try:
                    with open(p, errors="replace") as f:
                        text = f.read()
                except OSError:
                    continue
                for n in names:
                    for no, line in enumerate(text.splitlines(), 1):
                        if names_app(line, n) or names_app(fn, n):
                            hits.append("%s:%d: %s" % (
                                os.path.relpath(p, SRC), no, line.strip()))
    case("tools/ and lib/ name no app (%s)" % ", ".join(names),
         names and not hits, "\n".join(hits[:20]))
    internal = re.compile(r'#\s*include\s+"(core|parse|io|flow|ctl|runtime|'
                          r'gpu|app)/')
    hits = []
    for dirpath, _, files in os.walk(os.path.join(SRC, "apps")):
        for fn in files:
            if fn.endswith((".c", ".h", ".cu", ".cuh")):
                p = os.path.join(dirpath, fn)
                with open(p, errors="replace") as f:
                    for no, line in enumerate(f, 1):
                        if internal.search(line):
                            hits.append("%s:%d: %s" % (
                                os.path.relpath(p, SRC), no, line.strip()))
    case("apps/ include only public headers (dpflow/...) and their own",
         not hits, "\n".join(hits[:20]))

    print("1..%d" % len(cases))
    for i, (name, ok, diag) in enumerate(cases, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if not ok and diag:
            for line in str(diag).splitlines()[:20]:
                print("# " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
