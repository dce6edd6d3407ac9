#!/usr/bin/python3
"""The man pages and bash completion agree with the tools' --help: every
option that `dpflow run|validate|inspect|gen --help` and `dpflowctl
--help` print appears in the man page's Markdown source (a dpflow
command's in its own section), every command of `dpflow --help` and
`dpflowctl --help` has a section and is offered by the completion
scripts (run in bash), as is every option of each command; the generated
roff has the expected sections and renders without groff warnings. The
options and commands are read from --help output, so new ones must be
documented. TAP on stdout, one point per case.

usage: docs_agree.py DPFLOW DPFLOWCTL SOURCE_ROOT DPFLOW.1 DPFLOWCTL.1
"""
import os
import re
import shutil
import subprocess
import sys

DPFLOW_CMDS_WITH_OPTIONS = ("run", "validate", "trace", "inspect", "gen")
SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "SEE ALSO")


def helptext(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stdout + p.stderr


def options(text):
    """The options a usage text offers: -x and --long-name tokens of its
    usage lines and of the first column of its indented lines (option
    and command lists), not of its prose."""
    found = set()
    for line in text.splitlines():
        if line.startswith("usage:") or line.startswith("       "):
            term = line
        elif line.startswith(" "):
            term = re.split(r"(?<=\S) {2,}", line.strip(), maxsplit=1)[0]
        else:
            continue
        found.update(re.findall(r"(?<![\w/-])(--?[A-Za-z][\w-]*)", term))
    return sorted(found)


def has_token(text, tok):
    return re.search(r"(?<![\w-])" + re.escape(tok) + r"(?![\w-])",
                     text) is not None


def commands(text):
    """The commands listed under 'commands:' in a usage text."""
    out, inside = [], False
    for line in text.splitlines():
        if line.strip() == "commands:":
            inside = True
            continue
        if inside:
            m = re.match(r"  ([a-z][a-z0-9-]*)(\s|$)", line)
            if m:
                out.append(m.group(1))
            elif line and not line.startswith(" "):
                inside = False
    return out


def sections(md):
    """### headings of a Markdown man page -> their text."""
    out, name = {}, None
    for line in md.splitlines():
        if line.startswith("### "):
            name = line[4:].strip()
            out[name] = ""
        elif line.startswith("## "):
            name = None
        elif name:
            out[name] += line + "\n"
    return out


def complete(script, func, words):
    """What bash completion function @func of @script offers after
    @words (the last one being completed)."""
    words_q = " ".join("'%s'" % w for w in words)
    prog = ("source '%s'; COMP_WORDS=(%s); COMP_CWORD=%d; %s; "
            "printf '%%s\\n' \"${COMPREPLY[@]}\"" %
            (script, words_q, len(words) - 1, func))
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog],
                       capture_output=True, text=True, timeout=30)
    return p.stdout.split()


def main():
    dpflow, dpflowctl, src, man1, man2 = sys.argv[1:6]
    cases = []
    md = {}
    for page in ("dpflow", "dpflowctl"):
        with open(os.path.join(src, "docs", "man", page + ".1.md")) as f:
            md[page] = f.read()
    secs = sections(md["dpflow"])
    ctl_secs = sections(md["dpflowctl"])
    comp_dpflow = os.path.join(src, "tools", "completion", "dpflow")
    comp_ctl = os.path.join(src, "tools", "completion", "dpflowctl")

    # dpflow: commands and each command's options
    rc, top = helptext(dpflow, "--help")
    cmds = commands(top)
    cases.append(("dpflow --help lists its commands",
                  rc == 0 and "run" in cmds and "validate" in cmds, top))
    missing = [c for c in cmds
               if not any(s.split()[:2] == ["dpflow", c] for s in secs)]
    cases.append(("dpflow.1.md has a section a command", not missing,
                  "no section for: %s" % missing))
    offered = complete(comp_dpflow, "_dpflow", ["dpflow", ""])
    missing = [c for c in cmds if c not in offered]
    cases.append(("completion offers every dpflow command", not missing,
                  "not offered: %s (offered %s)" % (missing, offered)))
    for cmd in DPFLOW_CMDS_WITH_OPTIONS:
        rc, text = helptext(dpflow, cmd, "--help")
        opts = options(text)
        body = next((v for k, v in secs.items()
                     if k.split()[:2] == ["dpflow", cmd]), "")
        missing = [o for o in opts if not has_token(body, o)]
        cases.append(("dpflow %s: its %d options in its man section" %
                      (cmd, len(opts)), rc == 0 and opts and not missing,
                      "missing: %s" % missing))
        offered = complete(comp_dpflow, "_dpflow", ["dpflow", cmd, "-"])
        missing = [o for o in opts if o.startswith("--") and
                   o not in offered]
        cases.append(("dpflow %s: completion offers its options" % cmd,
                      not missing, "not offered: %s" % missing))

    # dpflowctl: global options, commands and their options
    rc, ctl = helptext(dpflowctl, "--help")
    ctl_cmds = commands(ctl)
    cases.append(("dpflowctl --help lists its commands",
                  rc == 0 and "pipes" in ctl_cmds, ctl))
    opts = options(ctl)
    missing = [o for o in opts if not has_token(md["dpflowctl"], o)]
    cases.append(("dpflowctl: its %d options in the man page" % len(opts),
                  opts and not missing, "missing: %s" % missing))
    missing = [c for c in ctl_cmds
               if not any(s.split()[:1] == [c] for s in ctl_secs)]
    cases.append(("dpflowctl.1.md has a section a command", not missing,
                  "no section for: %s" % missing))
    offered = complete(comp_ctl, "_dpflowctl", ["dpflowctl", ""])
    missing = [c for c in ctl_cmds if c not in offered]
    cases.append(("completion offers every dpflowctl command",
                  not missing, "not offered: %s (offered %s)" %
                  (missing, offered)))
    head = ctl.split("commands:")[0]
    globals_ = [o for o in options(head) if o != "--control"]
    offered = complete(comp_ctl, "_dpflowctl", ["dpflowctl", "-"])
    missing = [o for o in globals_ if o not in offered]
    cases.append(("completion offers dpflowctl's options", not missing,
                  "not offered: %s" % missing))
    missing = []
    for line in ctl.split("commands:")[-1].splitlines():
        m = re.match(r"  ([a-z][a-z0-9-]*) (.*)", line)
        if not m:
            continue
        for o in options(m.group(2).split("  ")[0]):
            if o.startswith("--") and o not in complete(
                    comp_ctl, "_dpflowctl", ["dpflowctl", m.group(1), "-"]):
                missing.append(m.group(1) + " " + o)
    cases.append(("completion offers each dpflowctl command's options",
                  not missing, "not offered: %s" % missing))

    # the generated roff
    for path in (man1, man2):
        with open(path) as f:
            roff = f.read()
        name = os.path.basename(path)
        missing = [s for s in SECTIONS
                   if not re.search(r'^\.SH "?%s"?$' % s, roff, re.M)]
        cases.append(("%s: .TH and the sections %s" % (name, ", ".join(
            SECTIONS)), roff.startswith(".TH ") and not missing,
                      "missing: %s" % missing))
        if shutil.which("groff"):
            p = subprocess.run(["groff", "-man", "-ww", "-z", path],
                               capture_output=True, text=True, timeout=30)
            cases.append(("%s renders without groff warnings" % name,
                          p.returncode == 0 and not p.stderr, p.stderr))
            p = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou", path],
                               capture_output=True, text=True, timeout=30)
            cases.append(("%s renders its synopsis and options" % name,
                          "SYNOPSIS" in p.stdout and "--help" in p.stdout,
                          p.stdout[:500]))
        else:
            cases.append(("%s renders (skipped: no groff)" % name, None,
                          ""))

    print("1..%d" % len(cases))
    failed = 0
    for i, (name, ok, detail) in enumerate(cases, 1):
        if ok is None:
            print("ok %d - %s # skip" % (i, name))
            continue
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if not ok:
            failed += 1
            for line in str(detail).splitlines()[:20]:
                print("# " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
