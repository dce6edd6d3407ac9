"""Helpers shared by the live tests (tests/live/*.py): TAP points, commands
run in a network namespace, and the check that this machine can make
namespaces at all (root, iproute2, a kernel that allows it)."""

import json
import os
import shutil
import subprocess
import sys


class Tap:
    """TAP points numbered in order. Printed as they come, or, with
    buffered=True, kept in `lines` for a caller that decides at the end
    what to print (a test that may run twice)."""

    def __init__(self, buffered=False):
        self.results = []
        self.lines = []
        self.buffered = buffered

    def _out(self, line):
        if self.buffered:
            self.lines.append(line)
        else:
            print(line)
            sys.stdout.flush()

    def ok(self, ok, what, detail=""):
        """One point: @ok passed or not; @detail's last lines on failure."""
        self.results.append(bool(ok))
        self._out("%s %d - %s" % ("ok" if ok else "not ok",
                                  len(self.results), what))
        if detail and not ok:
            for line in str(detail).splitlines()[-15:]:
                self._out("#   " + line)

    def skip(self, what, why):
        self.results.append(True)
        self._out("ok %d - %s # SKIP %s" % (len(self.results), what, why))

    def note(self, msg):
        for line in str(msg).splitlines():
            self._out("# " + line)

    def reset(self):
        del self.results[:]
        del self.lines[:]

    def passed(self):
        return all(self.results)


def sh(*args, ns=None, check=True, timeout=20, **kw):
    """Run a command (in namespace @ns); its CompletedProcess, text out."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(cmd, check=check, timeout=timeout,
                          capture_output=True, text=True, **kw)


def mac_of(ns, dev):
    """The MAC address of device @dev in namespace @ns."""
    out = sh("ip", "-n", ns, "-j", "link", "show", "dev", dev).stdout
    return json.loads(out)[0]["address"]


def netns_unavailable(tag):
    """Why this machine cannot run a live test (a TAP skip reason), or
    None: a namespace named @tag + "probe" is made and removed."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "needs root and iproute2 to make namespaces"
    try:
        subprocess.run(["ip", "netns", "add", tag + "probe"], check=True,
                       capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", tag + "probe"],
                       capture_output=True, timeout=10)
    except (subprocess.SubprocessError, OSError) as e:
        return "this machine cannot make network namespaces (%s)" % e
    return None
