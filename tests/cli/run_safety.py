#!/usr/bin/python3
"""Data safety of `dpflow run` and `dpflow inspect` as an operator meets it
(issue 22), one TAP point a case:

- a run that fails to start (bad option, config error, unusable --control,
  --cpus out of range, a bad or busy --metrics, --target gpu without a
  usable GPU) leaves every existing file byte for byte as it was, and no
  temporary file behind; a run that works replaces its output whole,
  keeping the target's mode; /dev/null is written, never replaced;
- a transmit path equal to a receive path or to another port's transmit
  path (through ./ and symlinks) is refused naming both ports; a directory
  is refused with "is a directory";
- a capture cut short is exit 1 with the file and the packet number, in
  `dpflow run` (whose outputs are then discarded) and `dpflow inspect`; a
  failed write (/dev/full) likewise; the report ends with a status line;
- --control makes missing parent directories; a second instance on a live
  socket is refused before any port opens; a stale socket is taken over;
- --cpus: a CPU that does not exist or is outside the affinity mask is
  refused, naming it;
- the banner, --stats-interval, duration and pps in the report;
- --check prints what would run and opens no port;
- the review's holes: a failed commit (a rename refused) is exit 1 with
  the output kept and named; regular files under /dev are replaced, never
  truncated by a failed start; where a rename cannot keep the file (a
  directory we cannot write, a sticky one, hard links, another user's
  file as root) the target is written in place, truncated only when the
  run writes, or its owner kept; SIGTERM during start-up fails the start
  and leaves nothing behind; messages say each thing once, a failed
  write counts nothing as sent, "1 entry";
- `dpflow gen -o` keeps an existing file when the gen fails.

Cases that act as an ordinary user run dpflow through setpriv as nobody;
they skip where the test is not root or setpriv is missing.

usage: run_safety.py DPFLOW
"""
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

ROUTER = """ports:
  - {name: in, uri: 'pcap:rx=%(inp)s'}
  - {name: lan, uri: 'pcap:tx=%(out)s'}
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
"""

# Traffic that never ends, at a pace that keeps a run alive for the
# control socket and the rates.
LIVE = """ports:
  - {name: in, uri: 'gen:default,loop,rate=2000'}
  - {name: lan, uri: 'pcap:tx=%(out)s'}
pipes:
  - {name: p, type: basic, root: in, match: [outer.ipv4.dst],
     fwd: {port: lan}, miss: {port: lan}}
"""

# 1000 packets of 64 bytes: a 24-byte file header, then 80 bytes a record.
PCAP_BYTES = 24 + 1000 * 80


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, desc, cond, detail=""):
        self.n += 1
        if not cond:
            self.failed += 1
        print("%s %d - %s" % ("ok" if cond else "not ok", self.n, desc))
        if not cond and detail:
            for line in str(detail)[-2500:].splitlines():
                print("#   " + line)
        sys.stdout.flush()

    def skip(self, desc, why):
        self.n += 1
        print("ok %d - %s # skip %s" % (self.n, desc, why))

    def done(self):
        print("1..%d" % self.n)
        return 1 if self.failed else 0


# Acting as an ordinary user (nobody) where the test runs as root.
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def can_be_nobody():
    """None when dpflow can run as nobody, else why not."""
    if not shutil.which("setpriv"):
        return "setpriv missing"
    if os.geteuid() != 0:
        return "not root: cannot act as another user"
    return None


def run(dpflow, *args, cwd=None, timeout=60, preexec=None, nobody=False):
    p = subprocess.run((NOBODY if nobody else []) + [dpflow, *args],
                       capture_output=True, text=True, timeout=timeout,
                       cwd=cwd, preexec_fn=preexec)
    return p.returncode, p.stdout, p.stderr


def read(path):
    with open(path, "rb") as f:
        return f.read()


def strays(d):
    """Temporary outputs left in @d (".NAME.XXXXXX")."""
    return [n for n in os.listdir(d) if re.match(r"^\..+\.[A-Za-z0-9]{6}$", n)]


class Dir:
    """A temporary directory with in.pcap and a config writing lan.pcap,
    where lan.pcap already holds something that must survive."""

    def __init__(self, dpflow, config=ROUTER):
        self.t = tempfile.TemporaryDirectory(prefix="dpflow-safety-")
        self.d = self.t.name
        self.inp = self.path("in.pcap")
        self.out = self.path("lan.pcap")
        rc, _, err = run(dpflow, "gen", "default", "--count", "1000", "-o",
                         self.inp)
        if rc:
            raise RuntimeError("dpflow gen: " + err)
        self.cfg = self.write("router.yaml",
                              config % {"inp": self.inp, "out": self.out})
        self.old = b"precious bytes of an earlier capture\n" * 100
        self.reset()
        self.in_bytes = read(self.inp)

    def reset(self):
        """lan.pcap holds the earlier bytes again."""
        with open(self.out, "wb") as f:
            f.write(self.old)

    def path(self, name):
        return os.path.join(self.d, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def untouched(self):
        return (read(self.out) == self.old and
                read(self.inp) == self.in_bytes and not strays(self.d))

    def close(self):
        self.t.cleanup()


def failed_starts(tap, dpflow):
    """Item 1: a run that fails to start changes no file."""
    d = Dir(dpflow)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    notdir = d.write("plain-file", "not a directory\n")
    bad_cfg = d.write("bad.yaml", (ROUTER % {"inp": d.inp, "out": d.out})
                      .replace("type: lpm", "type: nosuchtype"))
    cases = [
        ("--metrics 127.0.0.1:99999 (README's router example)",
         ["run", d.cfg, "--metrics", "127.0.0.1:99999"], (1,),
         "port 99999 is out of range"),
        ("--metrics on a port in use",
         ["run", d.cfg, "--metrics",
          "127.0.0.1:%d" % busy.getsockname()[1]], (1,), "cannot listen"),
        ("a bad option value (--workers 0)",
         ["run", d.cfg, "--workers", "0"], (2,), "--workers '0'"),
        ("a config error after the ports section",
         ["run", bad_cfg], (1,), "nosuchtype"),
        ("an unusable --control path (a file in the way)",
         ["run", d.cfg, "--control", os.path.join(notdir, "s.sock")], (1,),
         "is not a directory"),
        ("--cpus out of range (CPU 4000)",
         ["run", d.cfg, "--cpus", "4000"], (2,), "CPU 4000"),
        ("--target gpu where no GPU is usable",
         ["run", d.cfg, "--target", "gpu"], (1, 2), "--target gpu"),
    ]
    for desc, args, codes, msg in cases:
        d.reset()
        rc, out, err = run(dpflow, *args)
        if desc.startswith("--target gpu") and rc == 0:
            tap.skip("failed start leaves files as they were: " + desc,
                     "a GPU is usable here")
            continue
        tap.ok("failed start leaves files as they were: " + desc,
               rc in codes and msg in err and d.untouched() and
               "status:" not in out,
               "rc %d\nstdout %s\nstderr %s\nlan.pcap %d bytes, strays %s" %
               (rc, out, err, len(read(d.out)), strays(d.d)))
    busy.close()
    d.close()


def good_runs(tap, dpflow):
    """Item 1: a run that works replaces the output whole, mode kept;
    devices are written, never replaced."""
    d = Dir(dpflow)
    os.chmod(d.out, 0o640)
    rc, out, err = run(dpflow, "run", d.cfg)
    got = read(d.out)
    tap.ok("a run replaces an existing output whole (1000 packets), "
           "keeps its mode, leaves no temporary file",
           rc == 0 and len(got) == PCAP_BYTES and
           got[:4] == b"\x4d\x3c\xb2\xa1" and
           stat.S_IMODE(os.stat(d.out).st_mode) == 0o640 and
           not strays(d.d),
           "rc %d, %d bytes, mode %o, strays %s\n%s" %
           (rc, len(got), os.stat(d.out).st_mode, strays(d.d), err))
    tap.ok("the report ends with 'status: ok'",
           rc == 0 and out.rstrip("\n").splitlines()[-1] == "status: ok",
           out)

    cfg = d.write("null.yaml", ROUTER % {"inp": d.inp, "out": "/dev/null"})
    rc, out, err = run(dpflow, "run", cfg)
    tap.ok("tx=/dev/null is written directly, never replaced",
           rc == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode) and
           not strays("/dev") and "status: ok" in out, err)

    fifo = d.path("fifo")
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(read(fifo)))
    reader.start()
    cfg = d.write("fifo.yaml", ROUTER % {"inp": d.inp, "out": fifo})
    rc, out, err = run(dpflow, "run", cfg)
    reader.join(30)
    tap.ok("a FIFO target is written directly",
           rc == 0 and got and len(got[0]) == PCAP_BYTES and
           stat.S_ISFIFO(os.stat(fifo).st_mode), err)
    d.close()


def collisions(tap, dpflow):
    """Item 2: two ports on one file, a port on its own file, a
    directory."""
    d = Dir(dpflow)
    os.symlink("lan.pcap", d.path("link.pcap"))
    os.symlink("in.pcap", d.path("in-link.pcap"))
    os.mkdir(d.path("dir"))
    drop = "pipes:\n  - {name: p, type: basic, root: in, " \
           "match: [outer.ipv4.dst], fwd: {port: out}, miss: drop}\n"
    cases = [
        ("a tx path equal to another port's rx path (./in.pcap)",
         "ports:\n  - {name: in, uri: 'pcap:rx=in.pcap'}\n"
         "  - {name: out, uri: 'pcap:tx=./in.pcap'}\n" + drop,
         ["port 'out' writes", "which port 'in' reads"]),
        ("an rx path equal to another port's tx path (through a symlink)",
         "ports:\n  - {name: out, uri: 'pcap:tx=in-link.pcap'}\n"
         "  - {name: in, uri: 'pcap:rx=in.pcap'}\n" + drop,
         ["port 'in' reads", "which port 'out' writes"]),
        ("two ports writing one file (one through a symlink)",
         "ports:\n  - {name: in, uri: 'pcap:rx=in.pcap'}\n"
         "  - {name: a, uri: 'pcap:tx=lan.pcap'}\n"
         "  - {name: b, uri: 'pcap:tx=link.pcap'}\n",
         ["port 'b' writes", "which port 'a' also writes"]),
        ("one port with rx and tx on one file (through a symlink)",
         "ports:\n  - {name: in, uri: 'pcap:rx=in.pcap,tx=in-link.pcap'}\n",
         ["is the rx file"]),
        ("a tx path that is a directory",
         "ports:\n  - {name: in, uri: 'pcap:rx=in.pcap'}\n"
         "  - {name: out, uri: 'pcap:tx=dir'}\n",
         ["is a directory"]),
        ("an rx path that is a directory",
         "ports:\n  - {name: in, uri: 'pcap:rx=dir'}\n",
         ["is a directory"]),
    ]
    for i, (desc, cfg, msgs) in enumerate(cases):
        d.reset()
        path = d.write("c%d.yaml" % i, cfg)
        rc, out, err = run(dpflow, "run", path, cwd=d.d)
        tap.ok("refused at load: " + desc,
               rc == 1 and all(m in err for m in msgs) and d.untouched(),
               "rc %d\n%s\n%s" % (rc, out, err))
    rc, out, err = run(dpflow, "inspect", "pcap:" + d.path("dir"))
    tap.ok("inspect refuses a directory",
           rc == 1 and "is a directory" in err, err)
    d.close()


def cut_captures(tap, dpflow):
    """Item 3: captures cut short, failed writes, the status line."""
    d = Dir(dpflow)
    cut = d.path("cut.pcap")
    with open(cut, "wb") as f:
        f.write(d.in_bytes[:24 + 500 * 80 + 26])  # packet 501 cut
    cfg = d.write("cut.yaml", ROUTER % {"inp": cut, "out": d.out})
    rc, out, err = run(dpflow, "run", cfg)
    last = out.rstrip("\n").splitlines()[-1] if out.strip() else ""
    tap.ok("run: a capture cut short is exit 1 naming the file and packet",
           rc == 1 and "'%s': packet 501:" % cut in err, err)
    tap.ok("run: the report ends with 'status: error: ...' and the outputs "
           "are discarded",
           last.startswith("status: error: port in: reading '%s': "
                           "packet 501:" % cut) and
           "outputs discarded" in last and d.untouched(),
           "%s\nlan.pcap %d bytes" % (out, len(read(d.out))))
    rc, out, err = run(dpflow, "inspect", cut)
    tap.ok("inspect: a capture cut short is exit 1 naming the file and "
           "packet, after the 500 packets before it",
           rc == 1 and "'%s': packet 501:" % cut in err and
           len(out.splitlines()) == 500, "rc %d\n%s" % (rc, err))
    with open(cut, "wb") as f:
        f.write(d.in_bytes[:30])  # a record header cut short
    rc, out, err = run(dpflow, "inspect", "--summary", cut)
    tap.ok("inspect --summary: a record header cut short is exit 1 at "
           "packet 1", rc == 1 and "packet 1:" in err, err)
    if os.path.exists("/dev/full"):
        cfg = d.write("full.yaml", ROUTER % {"inp": d.inp,
                                             "out": "/dev/full"})
        rc, out, err = run(dpflow, "run", cfg)
        tap.ok("run: a failed write (tx=/dev/full) is exit 1 naming the "
               "port and the file",
               rc == 1 and "port lan: writing '/dev/full'" in err and
               out.rstrip("\n").splitlines()[-1].startswith(
                   "status: error: port lan: writing '/dev/full'"),
               "rc %d\n%s\n%s" % (rc, out, err))
    else:
        tap.skip("run: a failed write (tx=/dev/full)", "no /dev/full")
    d.close()


def control(tap, dpflow):
    """Item 4: --control makes its directories; one instance a socket."""
    d = Dir(dpflow, LIVE)
    sock = d.path("run/a/b/dpflow.sock")
    first = subprocess.Popen([dpflow, "run", d.cfg, "--control", sock,
                              "--duration", "20"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    modes = [stat.S_IMODE(os.stat(d.path(p)).st_mode)
             if os.path.exists(d.path(p)) else None
             for p in ("run", "run/a", "run/a/b")]
    tap.ok("--control makes missing parent directories (mode 0700)",
           os.path.exists(sock) and stat.S_ISSOCK(os.stat(sock).st_mode) and
           modes == [0o700] * 3, "modes %s" % modes)
    second_out = d.path("second.pcap")
    with open(second_out, "wb") as f:
        f.write(d.old)
    cfg2 = d.write("second.yaml", LIVE % {"out": second_out})
    rc, out, err = run(dpflow, "run", cfg2, "--control", sock)
    tap.ok("a second instance on a live socket fails before any port opens",
           rc == 1 and "another server listens there" in err and
           "port   in" not in err and read(second_out) == d.old and
           not [n for n in strays(d.d) if n.startswith(".second.pcap.")],
           "rc %d\n%s\n%s" % (rc, out, err))
    first.terminate()
    fout, ferr = first.communicate(timeout=30)
    tap.ok("the first instance goes on and ends well on SIGTERM",
           first.returncode == 0 and "status: ok" in fout and
           not os.path.exists(sock), "%s\n%s" % (fout, ferr))

    os.makedirs(os.path.dirname(sock), exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(sock)
    stale.close()  # the file stays, nobody listens
    rc, out, err = run(dpflow, "run", cfg2, "--control", sock,
                       "--duration", "0.3")
    tap.ok("a stale socket file is taken over", rc == 0 and
           "status: ok" in out, err)
    d.close()


def cpus(tap, dpflow):
    """Item 5: --cpus names the CPU it refuses."""
    d = Dir(dpflow)
    n = os.cpu_count() or 1
    d.reset()
    rc, out, err = run(dpflow, "run", d.cfg, "--cpus", str(n))
    tap.ok("--cpus: a CPU that does not exist is refused before start",
           rc == 2 and "CPU %d does not exist" % n in err and d.untouched(),
           err)
    allowed = sorted(os.sched_getaffinity(0))
    if n < 2 or len(allowed) < 2:
        tap.skip("--cpus: a CPU outside the affinity mask is refused",
                 "fewer than 2 CPUs")
    else:
        d.reset()
        rc, out, err = run(dpflow, "run", d.cfg, "--cpus", str(allowed[1]),
                           preexec=lambda: os.sched_setaffinity(
                               0, {allowed[0]}))
        tap.ok("--cpus: a CPU outside the affinity mask is refused",
               rc == 2 and "CPU %d is not one this process may run on" %
               allowed[1] in err and d.untouched(), err)
    d.close()


def banner_and_rates(tap, dpflow):
    """Item 6: banner, --stats-interval, duration and pps."""
    d = Dir(dpflow)
    rc, out, err = run(dpflow, "run", d.cfg)
    tap.ok("the banner lists ports with URIs, workers, pipes",
           rc == 0 and re.search(r"port +in +pcap:rx=", err) and
           re.search(r"port +lan +pcap:tx=", err) and
           re.search(r"worker 0 +any cpu", err) and
           re.search(r"pipe +routes +lpm", err), err)
    tap.ok("the report gives the duration and pps",
           re.search(r"^duration: [0-9.]+ s +rx 1000 pkts [0-9]+ pps +"
                     r"tx 1000 pkts [0-9]+ pps$", out, re.M), out)
    live = d.write("live.yaml", LIVE % {"out": d.path("live.pcap")})
    rc, out, err = run(dpflow, "run", live, "--stats-interval", "0.2",
                       "--duration", "1.5")
    lines = re.findall(r"^dpflow run: [0-9.]+ s: in rx [0-9]+ pps tx [0-9]+ "
                       r"pps, lan rx [0-9]+ pps tx [0-9]+ pps$", err, re.M)
    tap.ok("--stats-interval prints per-port rates while running",
           rc == 0 and len(lines) >= 3, err)
    before = read(d.out)
    rc, out, err = run(dpflow, "run", d.cfg, "--stats-interval", "0")
    tap.ok("--stats-interval 0 is refused",
           rc == 2 and "--stats-interval '0'" in err and
           read(d.out) == before, err)
    rc, out, err = run(dpflow, "run", "--help")
    tap.ok("--help describes --stats-interval, --check and the status line",
           rc == 0 and "--stats-interval" in out and "--check" in out and
           "status: ok" in out, out)
    d.close()


def check(tap, dpflow):
    """Item 7: --check loads, prints, opens nothing."""
    d = Dir(dpflow)
    rc, out, err = run(dpflow, "run", "--check", d.cfg)
    tap.ok("--check prints what would run and opens no port",
           rc == 0 and "routes" in out and d.untouched(), out + err)
    bad = d.write("bad.yaml", (ROUTER % {"inp": d.inp, "out": d.out})
                  .replace("type: lpm", "type: nosuchtype"))
    rc, out, err = run(dpflow, "run", "--check", bad)
    tap.ok("--check of a bad config is exit 1", rc == 1 and
           "nosuchtype" in err and d.untouched(), err)
    d.close()

def last_line(out):
    return out.rstrip("\n").splitlines()[-1] if out.strip() else ""


def open_to_nobody(d):
    """@d (a temporary directory of ours) searchable and its files
    readable by nobody."""
    os.chmod(d, 0o755)
    for n in os.listdir(d):
        if os.path.isfile(os.path.join(d, n)):
            os.chmod(os.path.join(d, n), 0o644)


def failed_commits(tap, dpflow):
    """Review item 1: the commit happens before the report, and a commit
    that fails is an error that keeps the output."""
    why = can_be_nobody()
    if why:
        tap.skip("sticky directory, another user's file: written", why)
        tap.skip("directory made read-only mid-run: exit 1, output kept",
                 why)
        return
    d = Dir(dpflow)
    ref = d.path("ref.pcap")
    run(dpflow, "run", d.write("ref.yaml", ROUTER % {"inp": d.inp,
                                                     "out": ref}))
    want = read(ref)
    os.remove(ref)
    sticky = d.path("sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    out = os.path.join(sticky, "out.pcap")
    with open(out, "wb") as f:
        f.write(d.old)
    os.chmod(out, 0o666)
    cfg = d.write("sticky.yaml", ROUTER % {"inp": d.inp, "out": out})
    open_to_nobody(d.d)
    rc, so, err = run(dpflow, "run", cfg, nobody=True)
    tap.ok("sticky directory, root's file (mode 666), run as nobody: the "
           "output is written (in place), status ok",
           rc == 0 and last_line(so) == "status: ok" and
           read(out) == want and os.stat(out).st_uid == 0 and
           not strays(sticky),
           "rc %d\n%s\n%s\nout.pcap %d bytes, strays %s" %
           (rc, so, err, len(read(out)), strays(sticky)))

    w = d.path("w")
    os.mkdir(w)
    out = os.path.join(w, "out.pcap")
    with open(out, "wb") as f:
        f.write(d.old)
    os.chown(w, 65534, 65534)
    os.chown(out, 65534, 65534)
    cfg = d.write("live.yaml", LIVE % {"out": out})
    os.chmod(cfg, 0o644)
    p = subprocess.Popen(NOBODY + [dpflow, "run", cfg, "--duration", "1.5"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    for _ in range(200):
        if strays(w):
            break
        time.sleep(0.05)
    os.chmod(w, 0o555)
    so, err = p.communicate(timeout=60)
    os.chmod(w, 0o755)
    kept = strays(w)
    tmp = os.path.join(w, kept[0]) if len(kept) == 1 else "?"
    tap.ok("directory made read-only mid-run (nobody): exit 1, status "
           "error, the output kept in its temporary file and named",
           p.returncode == 1 and
           last_line(so).startswith("status: error: port lan: writing '%s'"
                                    ": cannot rename" % out) and
           ("output kept in %s" % tmp) in err and read(out) == d.old and
           read(tmp)[:4] == b"\x4d\x3c\xb2\xa1",
           "rc %d\n%s\n%s\nstrays %s" % (p.returncode, so, err, kept))
    d.close()


def dev_files(tap, dpflow):
    """Review item 2: a regular file under /dev is a file like any
    other."""
    if not os.access("/dev/shm", os.W_OK):
        tap.skip("a regular file under /dev/shm", "no writable /dev/shm")
        return
    d = Dir(dpflow)
    with tempfile.TemporaryDirectory(dir="/dev/shm",
                                     prefix="dpflow-safety-") as shm:
        out = os.path.join(shm, "x.pcap")
        with open(out, "wb") as f:
            f.write(d.old)
        cfg = d.write("shm.yaml", ROUTER % {"inp": d.inp, "out": out})
        rc, so, err = run(dpflow, "run", cfg, "--metrics",
                          "127.0.0.1:99999")
        tap.ok("a failed start leaves a regular file under /dev/shm as it "
               "was", rc == 1 and read(out) == d.old and not strays(shm),
               "rc %d, %d bytes\n%s" % (rc, len(read(out)), err))
        rc, so, err = run(dpflow, "run", cfg)
        tap.ok("a run replaces a regular file under /dev/shm whole",
               rc == 0 and len(read(out)) == PCAP_BYTES and
               not strays(shm), err)
    d.close()


def in_place(tap, dpflow):
    """Review item 3: where a rename cannot keep the file, it is written
    in place, truncated only once the run writes; root keeps the owner."""
    d = Dir(dpflow)
    ref = d.path("ref.pcap")
    run(dpflow, "run", d.write("ref.yaml", ROUTER % {"inp": d.inp,
                                                     "out": ref}))
    want = read(ref)
    os.remove(ref)

    link = d.path("link.pcap")
    os.link(d.out, link)
    rc, so, err = run(dpflow, "run", d.cfg, "--metrics", "127.0.0.1:99999")
    tap.ok("a target with two hard links: a failed start leaves it as it "
           "was", rc == 1 and d.untouched() and read(link) == d.old,
           "rc %d\n%s" % (rc, err))
    rc, so, err = run(dpflow, "run", d.cfg)
    tap.ok("a target with two hard links is written in place: both names "
           "hold the output",
           rc == 0 and read(d.out) == want and read(link) == want and
           os.stat(d.out).st_ino == os.stat(link).st_ino and
           not strays(d.d), "rc %d\n%s" % (rc, err))
    os.remove(link)

    if os.geteuid() != 0:
        tap.skip("root replacing another user's file keeps its owner",
                 "not root")
    else:
        d.reset()
        os.chown(d.out, 65534, 65534)
        os.chmod(d.out, 0o640)
        rc, so, err = run(dpflow, "run", d.cfg)
        st = os.stat(d.out)
        tap.ok("root replacing another user's file keeps its owner, group "
               "and mode",
               rc == 0 and read(d.out) == want and st.st_uid == 65534 and
               st.st_gid == 65534 and stat.S_IMODE(st.st_mode) == 0o640 and
               not strays(d.d),
               "rc %d, uid %d gid %d mode %o\n%s" %
               (rc, st.st_uid, st.st_gid, st.st_mode, err))

    why = can_be_nobody()
    if why:
        for c in ("a failed start", "a run", "a run that sends nothing"):
            tap.skip("a writable file in a read-only directory: " + c, why)
        d.close()
        return
    ro = d.path("ro")
    os.mkdir(ro)
    out = os.path.join(ro, "out.pcap")
    with open(out, "wb") as f:
        f.write(d.old)
    cfg = d.write("ro.yaml", ROUTER % {"inp": d.inp, "out": out})
    quiet = d.write("quiet.yaml", (ROUTER % {"inp": d.inp, "out": out})
                    .replace("10.0.0.0/8", "10.0.0.0/32"))
    open_to_nobody(d.d)
    os.chmod(out, 0o666)
    rc, so, err = run(dpflow, "run", cfg, "--metrics", "127.0.0.1:99999",
                      nobody=True)
    tap.ok("a writable file in a read-only directory (nobody): a failed "
           "start leaves it as it was",
           rc == 1 and read(out) == d.old, "rc %d\n%s" % (rc, err))
    rc, so, err = run(dpflow, "run", cfg, nobody=True)
    tap.ok("a writable file in a read-only directory (nobody): a run "
           "writes it in place",
           rc == 0 and last_line(so) == "status: ok" and read(out) == want
           and not strays(ro), "rc %d\n%s\n%s" % (rc, so, err))
    with open(out, "wb") as f:
        f.write(d.old)
    rc, so, err = run(dpflow, "run", quiet, nobody=True)
    tap.ok("a writable file in a read-only directory (nobody): a run that "
           "sends nothing leaves an empty capture (the header)",
           rc == 0 and read(out) == want[:24],
           "rc %d, %d bytes\n%s" % (rc, len(read(out)), err))
    d.close()


def signals(tap, dpflow):
    """Review item 4: a signal during start-up fails the start cleanly;
    SIGINT mid-run is a normal stop."""
    d = Dir(dpflow)
    fifo = d.path("fifo")
    os.mkfifo(fifo)
    # lan's temporary file is made, then the load waits for the FIFO
    cfg = d.write("slow.yaml", ROUTER.replace(
        "  - {name: in, uri: 'pcap:rx=%(inp)s'}\n"
        "  - {name: lan, uri: 'pcap:tx=%(out)s'}\n",
        "  - {name: lan, uri: 'pcap:tx=%(out)s'}\n"
        "  - {name: in, uri: 'pcap:rx=%(inp)s'}\n") %
        {"inp": fifo, "out": d.out})
    p = subprocess.Popen([dpflow, "run", cfg], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if strays(d.d):
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        os.write(fd, d.in_bytes)
        os.close(fd)
    except OSError:
        pass  # the process is gone: nobody reads
    so, err = p.communicate(timeout=30)
    tap.ok("SIGTERM during a config load: exit 1, the start fails, the "
           "output's temporary file removed, the target as it was",
           p.returncode == 1 and "SIGTERM during start-up" in err and
           d.untouched() and "status:" not in so,
           "rc %d\n%s\n%s\nstrays %s" % (p.returncode, so, err,
                                         strays(d.d)))

    for n in strays(d.d):
        os.remove(d.path(n))  # what a killed run left
    live = d.write("live.yaml", LIVE % {"out": d.out})
    p = subprocess.Popen([dpflow, "run", live], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if strays(d.d):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    so, err = p.communicate(timeout=30)
    got = read(d.out)
    tap.ok("SIGINT mid-run is a normal stop: exit 0, status ok, the "
           "output committed",
           p.returncode == 0 and last_line(so) == "status: ok" and
           got[:4] == b"\x4d\x3c\xb2\xa1" and (len(got) - 24) % 80 == 0
           and not strays(d.d), "rc %d\n%s\n%s" % (p.returncode, so, err))
    d.close()


def messages(tap, dpflow):
    """Review item 6: each thing said once; a failed write counts nothing
    as sent; singular."""
    d = Dir(dpflow)
    missing = d.path("missing.pcap")
    cfg = d.write("missing.yaml", ROUTER % {"inp": missing, "out": d.out})
    rc, so, err = run(dpflow, "run", cfg)
    tap.ok("a missing capture: 'cannot read' names the file once",
           rc == 1 and "cannot read '%s': No such file or directory" %
           missing in err and err.count(missing) == 1, err)
    cut = d.path("cut.pcap")
    with open(cut, "wb") as f:
        f.write(d.in_bytes[:24 + 500 * 80 + 26])  # packet 501 cut
    cfg = d.write("cut.yaml", ROUTER % {"inp": cut, "out": d.out})
    rc, so, err = run(dpflow, "run", cfg)
    tap.ok("run: a capture cut short is reported once on stderr",
           rc == 1 and err.count("packet 501") == 1, err)
    rc, so, err = run(dpflow, "inspect", "--summary", cut)
    tap.ok("inspect: a capture cut short is reported once",
           rc == 1 and err.count("packet 501") == 1, err)
    if os.path.exists("/dev/full"):
        cfg = d.write("full.yaml", ROUTER % {"inp": d.inp,
                                             "out": "/dev/full"})
        rc, so, err = run(dpflow, "run", cfg)
        tap.ok("tx=/dev/full: no packet counted as sent, all 1000 as "
               "tx_errors",
               rc == 1 and re.search(r"^  lan +rx +0 pkts +0 bytes +tx +0 "
                                     r"pkts +0 bytes$", so, re.M) and
               "tx_errors 1000" in so and "tx 0 pkts" in so, so)
    else:
        tap.skip("tx=/dev/full counts nothing as sent", "no /dev/full")
    rc, so, err = run(dpflow, "run", d.cfg)
    tap.ok("the banner: '1 entry'",
           rc == 0 and re.search(r"pipe +routes +lpm, 1 entry, root of "
                                 r"port in$", err, re.M), err)
    d.close()


def gen_outputs(tap, dpflow):
    """dpflow gen writes -o the same way: a failed gen leaves the file."""
    d = Dir(dpflow)
    rc, so, err = run(dpflow, "gen", "default", "--count", "10", "-o",
                      d.out, "--manifest", d.path("no/such/dir/m.jsonl"))
    tap.ok("gen: a bad --manifest leaves an existing -o file as it was",
           rc == 1 and "--manifest" in err and d.untouched(), err)
    if os.path.exists("/dev/full"):
        rc, so, err = run(dpflow, "gen", "default", "--count", "10", "-o",
                          "/dev/full")
        tap.ok("gen: a failed write is exit 1 naming the file",
               rc == 1 and "writing '/dev/full'" in err, err)
    else:
        tap.skip("gen: a failed write is exit 1", "no /dev/full")
    d.close()


def main():
    dpflow = os.path.abspath(sys.argv[1])
    tap = Tap()
    failed_starts(tap, dpflow)
    good_runs(tap, dpflow)
    collisions(tap, dpflow)
    cut_captures(tap, dpflow)
    control(tap, dpflow)
    cpus(tap, dpflow)
    banner_and_rates(tap, dpflow)
    check(tap, dpflow)
    failed_commits(tap, dpflow)
    dev_files(tap, dpflow)
    in_place(tap, dpflow)
    signals(tap, dpflow)
    messages(tap, dpflow)
    gen_outputs(tap, dpflow)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
