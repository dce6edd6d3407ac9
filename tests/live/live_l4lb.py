#!/usr/bin/python3
"""The L4 load balancer (apps/l4lb) live, in full NAT mode (TAP).

usage: live_l4lb.py DPFLOW DPFLOWCTL [WORKERS]

With WORKERS > 1, dpflow runs that many workers on ports of as many
queues: the connection table is shared, and a NAT reply is run by
whichever worker its own hash picks.

Namespaces made here (named from the pid): cli (the client, 10.89.N.2 on
c0), lb (dpflow, with AF_PACKET ports on c1 toward the client and s1
toward the backends), sw (a bridge br0 joining s0 and p1..p3) and b1, b2,
b3 (the backends, 10.88.N.K on e0, each running python3's http.server,
HTTP/1.1 with keep-alive, on port 8080 that serves a file `who` holding
its name). The balancer's connection table is small (conn_table 4096,
NAT takes two entries a flow) for the whole test. The service `web`
(VIP 10.89.N.10, TCP port 80, weights 1, 1, 2, HTTP health checks of
/who every 200 ms) DNATs to the backends and SNATs to 10.88.N.100; the
replies are translated back. Neither the VIP nor the SNAT address belongs
to a kernel: static neighbour entries send them to dpflow's ports, and
lb's kernel, which does not forward, ignores them; its own addresses
(10.89.N.1, 10.88.N.254) only carry the health checks. Checked:

- 2000 HTTP requests from cli to the VIP, one TCP connection each (from
  a local port of its own), all answer 200 with b1, b2 or b3, spread by
  weight (b3 0.40-0.60, b1 and b2 0.15-0.35 each);
- failover: with requests running, b2's server is killed (SIGKILL); the
  health checks mark it down (seen through `dpflowctl l4lb services
  --json`, or without that command, from the requests: the end of the
  last failed one, once 0.5 s of requests passed without a failure); the
  detection comes within 3 s, and from it on every request succeeds and
  none goes to b2; b2's server restarted, requests reach b2 again within
  3 s;
- SYN flood: 8 persistent (keep-alive) connections from cli to the VIP
  are opened and used once each; then 60000 TCP SYNs to VIP:80 from
  random sources of the client's /24 (random source ports), raw frames
  on c0, as fast as Python sends them (at most 10 s): far more half-open
  flows than the table holds (dpflow counts at least 8 x conn_table new
  flows, 16 times what the table holds). Every 2000 SYNs, and after the
  flood, one request on each persistent connection: all answer 200 from
  the backend that answered first, on the same local port (no
  reconnection). The table was full (`dpflowctl l4lb services --json`:
  entries replaced or refused during the flood) and its capacity did not
  change; dpflow's VmRSS grew less than 16 MB; after the flood 50 new
  connections all answer 200;
- on SIGTERM dpflow exits 0 within 5 s, and its exit report adds up: the
  backends' new flows sum to the service's, which is the connections
  made (the flood's new flows, as dpflowctl counted them, included) plus
  the flows rescheduled; those are at most the failover requests begun
  before b2 was marked down (a packet of a flow tracked to b2 that comes
  after, such as a SYN retransmitted across the detection, moves the
  flow to another backend); the backends' forwarded packets add up to
  the service's, replies were sent, every backend is up again.

Bounded: every wait has a timeout, the client loops are bounded by count
and time, dpflow runs with --duration 180 as a backstop; the namespaces,
processes and files are removed at the end, whatever happens. Without
root or namespaces the test reports itself skipped. Only addresses inside
the namespaces are used.
"""
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from livelib import Tap, mac_of, netns_unavailable, sh

DPFLOW, DPFLOWCTL = sys.argv[1], sys.argv[2]
WORKERS = int(sys.argv[3]) if len(sys.argv) > 3 else 1
QUEUES = ",queues=%d" % WORKERS if WORKERS > 1 else ""
TAG = "l4l%d" % (os.getpid() % 100000)
NS_CLI, NS_LB, NS_SW = TAG + "cli", TAG + "lb", TAG + "sw"
NS_B = [TAG + "b1", TAG + "b2", TAG + "b3"]
N = os.getpid() % 250 + 1
BNET, CNET = "10.88.%d" % N, "10.89.%d" % N
IP_B = [BNET + ".1", BNET + ".2", BNET + ".3"]
IP_LB_B, SNAT = BNET + ".254", BNET + ".100"
IP_CLI, IP_LB_C, VIP = CNET + ".2", CNET + ".1", CNET + ".10"
WEIGHTS = [1, 1, 2]
REQUESTS = 2000
FAILOVER_MAX = 8000  # requests of the failover run, at most
PORT_BASE = 20000  # the client's local ports: 20000-29999
CONN_TABLE = 4096  # the balancer's connection table (entries)
KEEP = 8  # persistent connections through the SYN flood
KEEP_BASE = 30000  # their local ports
FLOOD = 60000  # SYNs of the flood, at most
FLOOD_SECS = 10.0  # the flood's duration, at most
FLOOD_EVERY = 2000  # SYNs between rounds of requests on the persistent ones
FRESH = 50  # new connections after the flood
FRESH_BASE = 30100  # their local ports
RSS_GROWTH_MAX = 16 << 20  # bytes
PY = "/usr/bin/python3"

T = Tap()
results = T.results
tap = T.ok
note = T.note
BACKENDS = []  # the backends' http.server processes, b1..b3




def setup():
    for ns in [NS_CLI, NS_LB, NS_SW] + NS_B:
        sh("ip", "netns", "add", ns)
    nq = ["numtxqueues", str(WORKERS), "numrxqueues", str(WORKERS)]
    sh("ip", "link", "add", "c0", "netns", NS_CLI, *nq, "type", "veth",
       "peer", "name", "c1", "netns", NS_LB, *nq)
    sh("ip", "link", "add", "s1", "netns", NS_LB, *nq, "type", "veth",
       "peer", "name", "s0", "netns", NS_SW, *nq)
    devs = [(NS_CLI, "c0"), (NS_LB, "c1"), (NS_LB, "s1"), (NS_SW, "s0")]
    for k, ns in enumerate(NS_B):
        sh("ip", "link", "add", "e0", "netns", ns, "type", "veth", "peer",
           "name", "p%d" % (k + 1), "netns", NS_SW)
        devs += [(ns, "e0"), (NS_SW, "p%d" % (k + 1))]
    sh("ip", "-n", NS_SW, "link", "add", "br0", "type", "bridge",
       "forward_delay", "0", "stp_state", "0")
    for ns, dev in devs:
        # wire-sized frames: no TCP segmentation offload super-frames
        sh("ip", "-n", ns, "link", "set", dev, "gso_max_size", "1500")
        if ns == NS_SW:
            sh("ip", "-n", ns, "link", "set", dev, "master", "br0")
        sh("ip", "-n", ns, "link", "set", dev, "up")
    for ns in [NS_CLI, NS_LB, NS_SW] + NS_B:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "-n", NS_SW, "link", "set", "br0", "up")
    # lb's kernel does not forward: frames to the VIP and the SNAT address,
    # not its own, are dropped there (dpflow's ports see them all the same)
    sh("sysctl", "-qw", "net.ipv4.ip_forward=0", ns=NS_LB)
    # nor does cli's: the flood's SYN-ACKs, to addresses not its own, end
    # there
    sh("sysctl", "-qw", "net.ipv4.ip_forward=0", ns=NS_CLI)
    sh("ip", "-n", NS_CLI, "addr", "add", IP_CLI + "/24", "dev", "c0")
    sh("ip", "-n", NS_LB, "addr", "add", IP_LB_C + "/24", "dev", "c1")
    sh("ip", "-n", NS_LB, "addr", "add", IP_LB_B + "/24", "dev", "s1")
    for ns, ip in zip(NS_B, IP_B):
        sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", "e0")
    macs = {"c0": mac_of(NS_CLI, "c0"), "c1": mac_of(NS_LB, "c1"),
            "s1": mac_of(NS_LB, "s1"),
            "e0": [mac_of(ns, "e0") for ns in NS_B]}
    # dpflow answers no ARP: the VIP and the SNAT address by static entries
    sh("ip", "-n", NS_CLI, "neigh", "replace", VIP, "lladdr", macs["c1"],
       "dev", "c0", "nud", "permanent")
    for ns in NS_B:
        sh("ip", "-n", ns, "neigh", "replace", SNAT, "lladdr", macs["s1"],
           "dev", "e0", "nud", "permanent")
    return macs


def teardown(procs, tmp):
    for p in procs:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    for ns in [NS_CLI, NS_LB, NS_SW] + NS_B:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True,
                       timeout=20)
    shutil.rmtree(tmp, ignore_errors=True)


CONFIG = """ports:
  - {name: client, uri: 'afpacket:c1%(queues)s'}
  - {name: backend, uri: 'afpacket:s1%(queues)s'}
apps:
  l4lb:
    client_port: client
    backend_port: backend
    client_mac: '%(c1)s'
    backend_mac: '%(s1)s'
    client_gateway_mac: '%(c0)s'
    conn_table: %(conn_table)d
    services:
      - name: web
        vip: %(vip)s
        proto: tcp
        port: 80
        mode: nat
        snat: %(snat)s
        health: {type: http, path: /who, interval_ms: 200, timeout_ms: 300,
                 fall: 2, rise: 2}
        backends:
%(backends)s
"""

# The client, run in cli: GET /who from the VIP, a new TCP connection per
# request, sequentially, from local ports BASE, BASE + 1, ... (below the
# ephemeral range: the kernel reuses its ports within seconds, and a
# reused 5-tuple finds its old flow in the balancer's table, which is not
# a new flow); one JSON line per request: [start, end (monotonic clock,
# shared by the namespaces), status or -1, body or error, local port].
# Stops after COUNT requests, SECS seconds, or when the file STOP exists.
CLIENT = r"""
import http.client, json, os, sys, time
host, count, secs, stop, base = sys.argv[1], int(sys.argv[2]), \
    float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
end = time.monotonic() + secs
for i in range(count):
    if time.monotonic() > end or (stop and os.path.exists(stop)):
        break
    t0 = time.monotonic()
    c = http.client.HTTPConnection(host, 80, timeout=2,
                                   source_address=("0.0.0.0", base + i))
    try:
        c.connect()
        c.request("GET", "/who")
        r = c.getresponse()
        rec = [t0, 0, r.status, r.read().decode(errors="replace").strip()]
    except Exception as e:
        rec = [t0, 0, -1, type(e).__name__ + ": " + str(e)]
    finally:
        c.close()
    rec[1] = time.monotonic()
    rec.append(base + i)
    print(json.dumps(rec), flush=True)
"""


# A backend: python3's http.server (threads, as `python3 -m http.server`)
# speaking HTTP/1.1, so that a client's connection stays open between
# requests (HTTP/1.0 requests, the health checks', are still closed).
# Written out rather than `-m http.server --protocol HTTP/1.1`, which
# Python before 3.11 lacks. Serves directory DIR on ADDR:8080.
BACKEND = r"""
import functools, http.server, sys
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(
    (sys.argv[1], 8080), functools.partial(H, directory=sys.argv[2])
).serve_forever()
"""


def start_backend(k, tmp):
    return subprocess.Popen(
        ["ip", "netns", "exec", NS_B[k], PY, "-c", BACKEND, IP_B[k],
         os.path.join(tmp, "b%d" % (k + 1))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_listening(k, timeout=10):
    """Until backend k's server accepts a connection (from its own
    namespace); True if it did within @timeout seconds."""
    probe = ("import socket,sys\ns=socket.create_connection((sys.argv[1],"
             "8080),timeout=1)\n")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if sh(PY, "-c", probe, IP_B[k], ns=NS_B[k], check=False,
              timeout=5).returncode == 0:
            return True
        time.sleep(0.1)
    return False


class Client:
    """The client running in cli; its records collected by a thread."""

    def __init__(self, count, secs, base, stop=""):
        self.recs = []
        self.lock = threading.Lock()
        self.p = subprocess.Popen(
            ["ip", "netns", "exec", NS_CLI, PY, "-c", CLIENT, VIP,
             str(count), str(secs), stop, str(base)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.recs.append(rec)

    def snapshot(self):
        with self.lock:
            return list(self.recs)

    def wait(self, timeout):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(timeout=5)
        self.t.join(timeout=5)
        return self.snapshot()


def ok_rec(r):
    return r[2] == 200 and r[3] in ("b1", "b2", "b3")


def have_l4lb_ctl():
    try:
        r = subprocess.run([DPFLOWCTL, "l4lb", "--help"], capture_output=True,
                           text=True, timeout=10)
    except (subprocess.SubprocessError, OSError):
        return False
    return r.returncode == 0 and "unknown command" not in r.stderr


def backend_states(sock):
    """{address: up (bool)} of service web's backends as `dpflowctl l4lb
    services --json` reports them, or None."""
    try:
        r = subprocess.run([DPFLOWCTL, "-s", sock, "-t", "2", "l4lb",
                            "services", "--json"], capture_output=True,
                           text=True, timeout=5)
        doc = json.loads(r.stdout)
        return {b["addr"]: b["up"] for svc in doc["services"]
                if svc["name"] == "web" for b in svc["backends"]}
    except (subprocess.SubprocessError, OSError, ValueError, KeyError,
            TypeError):
        return None


def failover(sock, tmp, procs, use_ctl):
    """Check 3: kill b2's server while requests run, then restart it."""
    stop = os.path.join(tmp, "stop")
    cl = Client(FAILOVER_MAX, 40, PORT_BASE + REQUESTS, stop)
    procs.append(cl.p)
    ctl_log = []  # (time, b2 up or None)

    def poll_b2():
        st = backend_states(sock) if use_ctl else None
        v = st.get(IP_B[1]) if st else None
        ctl_log.append((time.monotonic(), v))
        return v

    # b2 takes traffic first
    end = time.monotonic() + 10
    while time.monotonic() < end and \
            sum(1 for r in cl.snapshot() if r[3] == "b2") < 20:
        time.sleep(0.05)
    before = cl.snapshot()
    t_kill = time.monotonic()
    procs[procs.index(BACKENDS[1])].kill()
    BACKENDS[1].wait(timeout=5)

    # detection: dpflowctl reports b2 down; without the command, the end
    # of the last failed request once 0.5 s of requests passed with no
    # failure (bounded at 6 s)
    t_det = None
    end = t_kill + 6
    while time.monotonic() < end:
        if use_ctl:
            if poll_b2() is False:
                t_det = ctl_log[-1][0]
                break
        else:
            recs = [r for r in cl.snapshot() if r[0] >= t_kill]
            fails = [r for r in recs if not ok_rec(r)]
            if recs and recs[-1][0] - (fails[-1][1] if fails else t_kill) \
                    >= 0.5:
                t_det = fails[-1][1] if fails else t_kill
                break
        time.sleep(0.05)
    # a while with b2 down and requests running
    time.sleep(1.5)
    t_restart = time.monotonic()
    b2 = start_backend(1, tmp)
    BACKENDS[1] = b2
    procs.append(b2)
    t_back = t_up = None
    end = t_restart + 8
    while time.monotonic() < end and (t_back is None or
                                      (use_ctl and t_up is None)):
        if use_ctl and t_up is None and poll_b2() is True:
            t_up = ctl_log[-1][0]
        if t_back is None:
            back = [r for r in cl.snapshot()
                    if r[0] >= t_restart and r[3] == "b2"]
            if back:
                t_back = back[0][1]
        time.sleep(0.05)
    time.sleep(1.0)
    with open(stop, "w"):
        pass
    recs = cl.wait(15)
    procs.remove(cl.p)
    return dict(recs=recs, before=before, t_kill=t_kill, t_det=t_det,
                t_restart=t_restart, t_back=t_back, t_up=t_up)


# The SYN flood, run in cli. Opens K persistent connections to the VIP
# (local ports KBASE, KBASE + 1, ...) and makes a request on each; prints
# {"kind": "open", "recs": [...]} and waits for a line on stdin. Then
# sends COUNT TCP SYN frames (at most SECS seconds) to VIP:80 on c0 from
# random sources NET.11-254, random ports, and between them, every EVERY
# SYNs and 0.5 s after the last, a round: one request on each persistent
# connection; prints {"kind": "flood", ...} and waits for a line again;
# then a last round, {"kind": "end", ...}, and closes. A request's record:
# [status or -1, body or error, local port or null, seconds]. A failed
# connection is not reopened (http.client would, silently: auto_open is
# off); rounds stop at the DEADLINE (seconds from the start).
FLOOD_SCRIPT = r"""
import errno, http.client, json, random, socket, struct, sys, time
(vip, net, smac, dmac, count, secs, every, k, kbase,
 deadline) = sys.argv[1:]
count, secs, every, k, kbase = int(count), float(secs), int(every), \
    int(k), int(kbase)
deadline = time.monotonic() + float(deadline)

def out(**kw):
    print(json.dumps(kw), flush=True)

def get(c):
    t0 = time.monotonic()
    try:
        if c is None or c.sock is None:
            raise ConnectionError("not connected")
        if time.monotonic() > deadline:
            raise TimeoutError("deadline passed")
        c.request("GET", "/who")
        r = c.getresponse()
        body = r.read().decode(errors="replace").strip()
        port = c.sock.getsockname()[1] if c.sock else None
        return [r.status, body, port, round(time.monotonic() - t0, 4)]
    except Exception as e:
        if c is not None:
            c.close()
        return [-1, type(e).__name__ + ": " + str(e), None,
                round(time.monotonic() - t0, 4)]

conns, recs = [], []
for i in range(k):
    c = http.client.HTTPConnection(vip, 80, timeout=5,
                                   source_address=("0.0.0.0", kbase + i))
    try:
        c.connect()
        c.auto_open = 0
    except OSError:
        c.close()
    conns.append(c)
    recs.append(get(c))
out(kind="open", recs=recs)
if not sys.stdin.readline():
    sys.exit(1)

rounds = []
def round_(when):
    t0 = time.monotonic()
    rounds.append([when, t0, [get(c) for c in conns]])

mac = lambda m: bytes.fromhex(m.replace(":", ""))
frame = bytearray(54)
frame[0:14] = mac(dmac) + mac(smac) + b"\x08\x00"
dst = socket.inet_aton(vip)
struct.pack_into("!BBHHHBBH4s4s", frame, 14, 0x45, 0, 40, 0, 0x4000, 64, 6,
                 0, bytes(4), dst)
struct.pack_into("!HHIIHHHH", frame, 34, 0, 80, 0, 0, 0x5002, 64240, 0, 0)
wsum = lambda b: sum(struct.unpack("!%dH" % (len(b) // 2), b))
ip_base = wsum(frame[14:34])
tcp_base = wsum(frame[34:54]) + wsum(dst) + 6 + 20
n0, n1, n2 = (int(x) for x in net.split("."))
hi = n0 << 8 | n1
rnd = random.Random()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("c0", 0))
sent = enobufs = 0
t_start = time.monotonic()
end = t_start + secs
while sent < count and time.monotonic() < end:
    h = rnd.randrange(11, 255)
    sport = rnd.randrange(1024, 65536)
    seq = rnd.getrandbits(32)
    lo = n2 << 8 | h
    x = ip_base + hi + lo
    x = (x & 0xffff) + (x >> 16)
    x = (x & 0xffff) + (x >> 16)
    struct.pack_into("!HBBBB", frame, 24, ~x & 0xffff, n0, n1, n2, h)
    x = tcp_base + hi + lo + sport + (seq >> 16) + (seq & 0xffff)
    x = (x & 0xffff) + (x >> 16)
    x = (x & 0xffff) + (x >> 16)
    struct.pack_into("!HHI", frame, 34, sport, 80, seq)
    struct.pack_into("!H", frame, 50, ~x & 0xffff)
    while time.monotonic() < end:
        try:
            s.send(frame)
            break
        except OSError as e:  # the veth's backlog is full: a moment
            if e.errno != errno.ENOBUFS:
                raise
            enobufs += 1
            time.sleep(0.0002)
    else:
        break
    sent += 1
    if sent % every == 0 and sent < count:
        round_(sent)
t_flood = time.monotonic() - t_start
s.close()
time.sleep(0.5)
round_(-1)
out(kind="flood", sent=sent, secs=t_flood, enobufs=enobufs, rounds=rounds)
if not sys.stdin.readline():
    sys.exit(1)
rounds = []
round_(-2)
out(kind="end", rounds=rounds)
for c in conns:
    c.close()
"""


class Lines:
    """A process's stdout, JSON line by line, through a thread."""

    def __init__(self, p):
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._read, args=(p,), daemon=True)
        self.t.start()

    def _read(self, p):
        for line in p.stdout:
            try:
                self.q.put(json.loads(line))
            except ValueError:
                pass
        self.q.put(None)

    def get(self, timeout):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None


def services_doc(sock):
    """`dpflowctl l4lb services --json` as a dict, or None."""
    try:
        r = subprocess.run([DPFLOWCTL, "-s", sock, "-t", "2", "l4lb",
                            "services", "--json"], capture_output=True,
                           text=True, timeout=5)
        doc = json.loads(r.stdout)
        return doc if isinstance(doc, dict) and "conns" in doc else None
    except (subprocess.SubprocessError, OSError, ValueError):
        return None


def web_new_flows(doc):
    for svc in doc["services"]:
        if svc["name"] == "web":
            return svc["new_flows"]
    return None


def proc_pid(run):
    """The pid of dpflow itself (`ip netns exec` execs it; else a child)."""
    try:
        if os.path.basename(os.readlink("/proc/%d/exe" % run.pid)) == \
                "dpflow":
            return run.pid
        with open("/proc/%d/task/%d/children" % (run.pid, run.pid)) as f:
            kids = [int(x) for x in f.read().split()]
        return kids[0] if kids else run.pid
    except (OSError, ValueError):
        return run.pid


def vm_kb(pid, field="VmRSS"):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def syn_flood(sock, macs, pid, procs):
    """Checks 8-12: persistent connections through a SYN flood."""
    r = dict(open=None, flood=None, end=None, doc0=None, doc1=None,
             rss0=None, rss1=None, rss_max=None, fresh=[], err="")
    p = subprocess.Popen(
        ["ip", "netns", "exec", NS_CLI, PY, "-c", FLOOD_SCRIPT, VIP, CNET,
         macs["c0"], macs["c1"], str(FLOOD), str(FLOOD_SECS),
         str(FLOOD_EVERY), str(KEEP), str(KEEP_BASE), "50"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    procs.append(p)
    lines = Lines(p)
    try:
        r["open"] = lines.get(30)
        if r["open"] is None:
            return r
        r["doc0"] = services_doc(sock)
        r["rss0"] = vm_kb(pid)
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                v = vm_kb(pid)
                if v is not None:
                    samples.append(v)
                stop.wait(0.02)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        p.stdin.write("go\n")
        p.stdin.flush()
        r["flood"] = lines.get(90)
        stop.set()
        th.join(timeout=5)
        r["rss1"] = vm_kb(pid)
        r["rss_max"] = max(samples + [r["rss1"] or 0])
        r["doc1"] = services_doc(sock)
        if r["flood"] is None:
            return r
        cl = Client(FRESH, 30, FRESH_BASE)
        procs.append(cl.p)
        r["fresh"] = cl.wait(40)
        procs.remove(cl.p)
        p.stdin.write("go\n")
        p.stdin.flush()
        r["end"] = lines.get(30)
        p.wait(timeout=10)
    except (OSError, subprocess.SubprocessError) as e:
        r["err"] = "%s: %s" % (type(e).__name__, e)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=5)
        if not r["err"]:
            r["err"] = p.stderr.read()[-1500:]
        procs.remove(p)
    return r


def parse_report(text):
    svc = re.search(r"^l4lb service web tcp \S+ nat: fwd (\d+) pkts (\d+) "
                    r"bytes, reply (\d+) pkts, icmp (\d+), new flows (\d+), "
                    r"untracked (\d+), rescheduled (\d+)$", text, re.M)
    bes = {m.group(1): dict(weight=int(m.group(2)), up=m.group(3) == "up",
                            slots=int(m.group(4)), fwd=int(m.group(5)),
                            new=int(m.group(6)))
           for m in re.finditer(r"^\s+backend ([\d.]+):8080 weight (\d+) "
                                r"(up|down) slots (\d+): fwd (\d+) pkts, "
                                r"new flows (\d+)$", text, re.M)}
    conns = re.search(r"^l4lb connections: created (\d+), replaced (\d+), "
                      r"refused (\d+), expired (\d+)$", text, re.M)
    return svc, bes, conns


def check_flood(fl):
    """TAP points 6-10 from syn_flood()'s results; sets fl["flood_new"]
    (the service's new flows during the flood, by dpflowctl)."""
    opened, flood, end = fl["open"], fl["flood"], fl["end"]
    d0, d1 = fl["doc0"], fl["doc1"]
    cap = 1 << (CONN_TABLE - 1).bit_length()
    first = [r[1] if r[0] == 200 and r[1] in ("b1", "b2", "b3") and
             r[2] == KEEP_BASE + i else None
             for i, r in enumerate(opened["recs"] if opened else [])]
    new = None
    if d0 and d1:
        new = web_new_flows(d1) - web_new_flows(d0)
        fl["flood_new"] = new
    # 6: the flood
    if flood:
        sent, secs = flood["sent"], flood["secs"]
        note("flood: %d SYNs sent in %.2f s, send() answered ENOBUFS %d "
             "times (retried)" % (sent, secs, flood["enobufs"]))
    ok = (len(first) == KEEP and None not in first and flood is not None and
          new is not None and new >= 8 * cap)
    tap(ok, "SYN flood: %s SYNs in %s to VIP:80 from random sources of "
        "%s.0/24; dpflow counted %s new flows, %s the %d-entry table's "
        "%d flows (NAT: two entries a flow)" % (
            flood["sent"] if flood else "no", "%.2f s (%d/s)" % (
                flood["secs"], flood["sent"] / max(flood["secs"], 1e-3))
            if flood else "-", CNET, new, "%.1fx" % (new / (cap // 2))
            if new is not None else "?", cap, cap // 2),
        "persistent connections: %s\nflood: %s\ndpflowctl: %s %s\n%s" % (
            opened, flood and {k: v for k, v in flood.items()
                               if k != "rounds"}, d0 is not None,
            d1 is not None, fl["err"]))
    # 7: the persistent connections, during and after the flood
    rounds = (flood["rounds"] if flood else []) + (end["rounds"] if end
                                                   else [])
    during = after = 0
    bad = []
    for when, t, recs in rounds:
        for i, r in enumerate(recs):
            if when >= 0:
                during += 1
            else:
                after += 1
            if i >= len(first) or first[i] is None or r[0] != 200 or \
                    r[1] != first[i] or r[2] != KEEP_BASE + i:
                bad.append([when, i, r])
    slow = max([r[3] for _, _, recs in rounds for r in recs] or [0])
    want = KEEP * ((flood["sent"] - 1) // FLOOD_EVERY + 2 if flood else 0)
    tap(bool(first) and None not in first and flood is not None and
        end is not None and not bad and during + after == want and during,
        "%d persistent connections (backends %s): %d requests during the "
        "flood, %d after, all 200 from the same backend on the same "
        "connection (slowest %.3f s)" % (
            KEEP, " ".join(str(b) for b in first), during, after, slow),
        "first: %s\nbad (SYNs sent, connection, record): %s\n%d of %d "
        "requests made" % (opened, bad[:8], during + after, want))
    # 8: the table was full, and its size stayed
    if d0 and d1:
        c0, c1 = d0["conns"], d1["conns"]
        drep = c1["replaced"] - c0["replaced"]
        dref = c1["refused"] - c0["refused"]
        dfull = d1["drops"].get("conn_table_full", 0) - \
            d0["drops"].get("conn_table_full", 0)
        tap(c0["capacity"] == c1["capacity"] == cap and drep + dref > 0,
            "connection table full during the flood: capacity %d before and "
            "after (conn_table %d), replaced +%d, refused +%d, created +%d, "
            "expired +%d, conn_table_full drops +%d" % (
                c1["capacity"], CONN_TABLE, drep, dref,
                c1["created"] - c0["created"], c1["expired"] - c0["expired"],
                dfull), "before %s\nafter %s" % (c0, c1))
    else:
        tap(False, "connection table full during the flood: no `dpflowctl "
            "l4lb services --json`")
    # 9: memory
    r0, r1, rm = fl["rss0"], fl["rss1"], fl["rss_max"]
    ok = None not in (r0, r1, rm) and max(r1, rm) - r0 < \
        RSS_GROWTH_MAX // 1024
    tap(ok, "dpflow's VmRSS: %s kB before the flood, %s kB at most during "
        "it, %s kB after: %s (limit +%d MB)" % (
            r0, rm, r1, "%+.2f MB" % ((max(r1, rm) - r0) / 1024.0)
            if ok is not None and None not in (r0, r1, rm) else "?",
            RSS_GROWTH_MAX >> 20))
    # 10: new connections after the flood
    fresh = fl["fresh"]
    badf = [r for r in fresh if not ok_rec(r)]
    tap(len(fresh) == FRESH and not badf,
        "after the flood: %d new connections, %d answered 200 with "
        "b1/b2/b3" % (len(fresh), len(fresh) - len(badf)),
        "bad: %s" % badf[:5])


def main():
    why = netns_unavailable(TAG)
    if why:
        print("1..0 # SKIP " + why)
        return 0
    print("1..12")
    tmp = tempfile.mkdtemp(prefix="dpflow-live-l4lb-")
    procs = []
    sock = os.path.join(tmp, "ctl.sock")
    connections = may_move = 0
    try:
        macs = setup()
        for k in range(3):
            d = os.path.join(tmp, "b%d" % (k + 1))
            os.mkdir(d)
            with open(os.path.join(d, "who"), "w") as f:
                f.write("b%d" % (k + 1))
        backends = "\n".join(
            "          - {addr: %s, port: 8080, weight: %d, mac: '%s'}"
            % (IP_B[k], WEIGHTS[k], macs["e0"][k]) for k in range(3))
        cfg = os.path.join(tmp, "l4lb.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG % dict(c0=macs["c0"], c1=macs["c1"],
                                  s1=macs["s1"], vip=VIP, snat=SNAT,
                                  conn_table=CONN_TABLE, queues=QUEUES,
                                  backends=backends))
        for k in range(3):
            BACKENDS.append(start_backend(k, tmp))
            procs.append(BACKENDS[-1])
        run = subprocess.Popen(["ip", "netns", "exec", NS_LB, DPFLOW, "run",
                                cfg, "--duration", "180", "--control", sock,
                                "--workers", str(WORKERS)],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        procs.append(run)
        ready = all(wait_listening(k) for k in range(3))
        end = time.monotonic() + 10
        while time.monotonic() < end and not os.path.exists(sock) and \
                run.poll() is None:
            time.sleep(0.05)
        if run.poll() is not None or not ready:
            text, _ = run.communicate(timeout=10)
            raise RuntimeError("dpflow (exit %s) or backends (%s) did not "
                               "start:\n%s" % (run.returncode, ready, text))
        # the health checks' first rise (2 x 200 ms) before traffic
        use_ctl = have_l4lb_ctl()
        end = time.monotonic() + 5
        while use_ctl and time.monotonic() < end and \
                backend_states(sock) != dict.fromkeys(IP_B, True):
            time.sleep(0.05)
        time.sleep(0.2 if use_ctl else 1.0)

        # 1, 2: requests through the VIP, spread by weight
        t0 = time.monotonic()
        cl = Client(REQUESTS, 60, PORT_BASE)
        procs.append(cl.p)
        recs = cl.wait(70)
        procs.remove(cl.p)
        took = time.monotonic() - t0
        connections += len(recs)
        allrecs = list(recs)
        bad = [r for r in recs if not ok_rec(r)]
        tap(len(recs) == REQUESTS and not bad,
            "%d HTTP requests to the VIP, a connection each: %d answered "
            "200 with b1/b2/b3 (%.1f s)" % (REQUESTS, len(recs) - len(bad),
                                             took),
            "%d records, %d bad, first bad: %s\n%s" % (
                len(recs), len(bad), bad[:5], cl.p.stderr.read()[-1500:]))
        share = {b: sum(1 for r in recs if r[3] == b) / max(1, len(recs))
                 for b in ("b1", "b2", "b3")}
        tap(0.40 <= share["b3"] <= 0.60 and 0.15 <= share["b1"] <= 0.35
            and 0.15 <= share["b2"] <= 0.35,
            "spread by weight 1:1:2: b1 %.3f, b2 %.3f, b3 %.3f"
            % (share["b1"], share["b2"], share["b3"]), str(share))

        # 3, 4, 5: failover of b2 and its return
        note("failover detection: %s" % (
            "dpflowctl l4lb services --json" if use_ctl else
            "no `dpflowctl l4lb`: the last failed request"))
        fo = failover(sock, tmp, procs, use_ctl)
        recs = fo["recs"]
        connections += len(recs)
        allrecs += recs
        tk, td, tr = fo["t_kill"], fo["t_det"], fo["t_restart"]
        # only a flow begun before b2 was marked down can be tracked to
        # b2 and then moved off it: at most that many are rescheduled
        may_move = sum(1 for r in recs if r[0] < td) if td is not None \
            else 0
        lost = [r for r in recs if tk <= r[1] and (td is None or r[0] < td)
                and not ok_rec(r)]
        pre = [r for r in fo["before"] if r[0] < tk and not ok_rec(r)]
        tap(td is not None and td - tk <= 3.0 and not pre,
            "b2's server killed: marked down (%s) %s; %d requests failed "
            "in between (%d requests before the kill, all ok)"
            % ("dpflowctl" if use_ctl else "requests",
               "after %.2f s" % (td - tk) if td is not None else
               "never (6 s)", len(lost), len(fo["before"])),
            "failed before the kill: %s\nfailed after: %s" % (
                pre[:3], [r for r in recs if r[1] >= tk and not ok_rec(r)]
                [-5:]))
        after = [r for r in recs if td is not None and r[0] >= td]
        bad = [r for r in after if not ok_rec(r)]
        to_b2 = [r for r in after if r[3] == "b2" and r[0] < tr]
        tap(td is not None and after and not bad and not to_b2,
            "after detection: %d requests, all ok, none to b2 while down "
            "(%d failed, %d to b2)" % (len(after), len(bad), len(to_b2)),
            "failed: %s\nto b2: %s" % (bad[:5], to_b2[:5]))
        tb = fo["t_back"]
        tap(tb is not None and tb - tr <= 3.0,
            "b2's server restarted: requests reach b2 again after %s s%s"
            % ("%.2f" % (tb - tr) if tb is not None else "never (8 s)",
               "" if fo["t_up"] is None else
               " (dpflowctl: up after %.2f s)" % (fo["t_up"] - tr)))
        note("failover run: %d requests over %.1f s, %d failed in all" % (
            len(recs), (recs[-1][1] - recs[0][0]) if recs else 0,
            sum(1 for r in recs if not ok_rec(r))))

        # 6-10: persistent connections through a SYN flood
        pid = proc_pid(run)
        fl = syn_flood(sock, macs, pid, procs)
        check_flood(fl)
        connections += KEEP + len(fl["fresh"]) + fl.get("flood_new", 0)
        allrecs += fl["fresh"]

        # 11, 12: clean stop, then the exit report
        t_term = time.monotonic()
        run.send_signal(signal.SIGTERM)
        try:
            text, _ = run.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            run.kill()
            text, _ = run.communicate(timeout=10)
        took = time.monotonic() - t_term
        tap(run.returncode == 0 and took <= 5.0,
            "dpflow stops on SIGTERM with exit 0 (%.2f s)" % took,
            "exit %s after %.2f s\n%s" % (run.returncode, took, text))
        svc, bes, conns = parse_report(text)
        ok = svc is not None and sorted(bes) == sorted(IP_B)
        if ok:
            fwd, _, reply, _, new, _, moved = (int(x) for x in svc.groups())
            sum_new = sum(b["new"] for b in bes.values())
            sum_fwd = sum(b["fwd"] for b in bes.values())
            good = sum(1 for r in allrecs if ok_rec(r))
            ok = (sum_new == new and new == connections + moved and
                  moved <= may_move and
                  sum_fwd == fwd and fwd >= 4 * good and
                  reply >= 3 * good and
                  [bes[ip]["weight"] for ip in IP_B] == WEIGHTS and
                  all(bes[ip]["up"] for ip in IP_B))
            if conns:
                note("report: l4lb connections: created %s, replaced %s, "
                     "refused %s, expired %s" % conns.groups())
            note("report: service fwd %d pkts, reply %d, new flows %d "
                 "(backends: %s), connections made %d, rescheduled %d "
                 "(at most %d)" % (
                     fwd, reply, new, ", ".join(
                         "%s %d" % (ip, bes[ip]["new"]) for ip in IP_B),
                     connections, moved, may_move))
        tap(ok, "exit report adds up: backends' new flows = service's = %d "
            "connections made + flows rescheduled (at most %d), backends' "
            "fwd = service's, replies sent, all backends up"
            % (connections, may_move), text)
    finally:
        teardown(procs, tmp)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
