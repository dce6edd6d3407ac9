#!/usr/bin/python3
"""tshark-parser: the independent-reference test of dpflow's parser (TAP).

Usage: run.py DPFLOW [--keep DIR] [--jobs N]

Writes the scapy edge-case captures (edge_cases.py) and `dpflow gen`
captures to a temporary directory (DIR with --keep, which is kept), then
compares `DPFLOW inspect` with tshark on every one of them (compare.py),
and checks the drop reason of every labelled malformed packet by name.

TAP on stdout: one test point per capture, one per malformed expectation
group (per parser drop reason, and `dpflow gen --malformed`'s manifest),
one for the UDP packets to a tunnel port whose payload is no tunnel;
'# ' lines after a failing point give its first mismatches as
"packet I field F: dpflow=... tshark=...". Exits 1 when a point fails.
See docs/testing-parser.md.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True      # no __pycache__ in the source tree

import compare  # noqa: E402

MAX_DIAG = 20

# `dpflow gen` captures: (test name, arguments, packets). Small counts: the
# whole test must stay well under a minute on two cores.
GEN_RUNS = [
    ('gen all', ['all'], 1000),
    ('gen default', ['default'], 300),
    ('gen imix', ['imix'], 300),
    ('gen vxlan', ['vxlan'], 300),
    ('gen all --malformed', ['all', '--malformed'], 1000),
]


class Point(object):
    def __init__(self, name):
        self.name = name
        self.ok = None
        self.diag = []

    def result(self, ok, name=None, diag=()):
        self.ok = ok
        if name:
            self.name = name
        self.diag = list(diag)
        return self


def diag_lines(lines):
    out = list(lines[:MAX_DIAG])
    if len(lines) > MAX_DIAG:
        out.append('... %d more' % (len(lines) - MAX_DIAG))
    return out


def check_capture(dpflow, point, path, labels=None, fuzz=False):
    r = compare.compare_file(dpflow, path, labels, skip_unverifiable=fuzz)
    bad = r['mismatches']
    skipped = r['skipped']
    desc = '%s: %d packets, %d dropped, %s%s' % (
        point.name, r['packets'], r['dropped'],
        'all fields match tshark' if not bad else
        '%d mismatches with tshark' % len(bad),
        ', %d not comparable (skipped)' % len(skipped) if skipped else '')
    if not bad and r['packets'] == 0:
        bad = ['no packet in %s' % path]
    point.result(not bad, desc, diag_lines(bad) + diag_lines(
        ['skipped ' + x for x in skipped]))
    return r


def run_gen(dpflow, args, count, path, manifest):
    cmd = [dpflow, 'gen'] + args + ['--count', str(count), '-o', path]
    if manifest:
        cmd += ['--manifest', manifest]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 'cannot run `%s`: %s' % (' '.join(cmd), e)
    if r.returncode != 0:
        return '`%s` exited %d: %s' % (
            ' '.join(cmd), r.returncode,
            (r.stderr or r.stdout).decode('utf-8', 'replace').strip()[-300:])
    if not os.path.exists(path) or os.path.getsize(path) <= 24:
        return '`%s` wrote no packet' % ' '.join(cmd)
    return None


def manifest_check(point, manifest, objs):
    """dpflow's drop against `dpflow gen --malformed --manifest`'s
    expect_drop ("any": not checked)."""
    try:
        with open(manifest) as f:
            man = [json.loads(ln) for ln in f if ln.strip()]
    except (OSError, ValueError) as e:
        return point.result(False, diag=['cannot read the manifest: %s' % e])
    by_i = {o.get('i'): o for o in objs if isinstance(o, dict)}
    bad = []
    n = 0
    for m in man:
        exp = m.get('expect_drop')
        if exp == 'any':
            continue
        n += 1
        got = by_i.get(m.get('i'))
        if got is None:
            bad.append('packet %s (%s): dpflow printed no object for it' %
                       (m.get('i'), m.get('variant')))
        elif got.get('drop') != exp:
            bad.append('packet %s (%s) field drop: dpflow=%s manifest=%s' %
                       (m.get('i'), m.get('variant'),
                        compare.show(got.get('drop')), compare.show(exp)))
    if n == 0:
        bad.append('the manifest has no packet with an expected drop')
    return point.result(not bad, '%s: %d packets with an expected drop '
                        'reason, %d differ' % (point.name, n, len(bad)),
                        diag_lines(bad))


def reason_check(point, reason, cases, objs):
    by_i = {o.get('i'): o for o in objs if isinstance(o, dict)}
    idx = [i for i, c in enumerate(cases) if c.drop == reason]
    bad = []
    for i in idx:
        got = by_i.get(i)
        if got is None:
            bad.append('packet %d (%s): dpflow printed no object for it' %
                       (i, cases[i].label))
        elif got.get('drop') != reason:
            bad.append('packet %d (%s) field drop: dpflow=%s expected=%s' %
                       (i, cases[i].label, compare.show(got.get('drop')),
                        compare.show(reason)))
    if not idx:
        bad.append('no edge case for this drop reason')
    return point.result(not bad, '%s: %d packets dropped as %s' %
                        (point.name, len(idx) - len(bad), reason),
                        diag_lines(bad))


def tun_invalid_check(point, cases, res):
    """Every case of the tun_invalid capture: dpflow forwards it as plain
    UDP (no drop, no tunnel, `tun_invalid` true), and the reason its label
    gives is the one derived from tshark's fields (so the case tests what
    it says)."""
    objs = res['objs'] if res else []
    fails = res['tun_fail'] if res else {}
    by_i = {o.get('i'): o for o in objs if isinstance(o, dict)}
    bad = []
    for i, c in enumerate(cases):
        got = by_i.get(i)
        if got is None:
            bad.append('packet %d (%s): dpflow printed no object for it' %
                       (i, c.label))
            continue
        for k, want in (('drop', None), ('tun', None), ('inner', None),
                        ('l4', 'udp'), ('tun_invalid', True)):
            if not compare.same(got.get(k), want):
                bad.append('packet %d (%s) field %s: dpflow=%s expected=%s'
                           % (i, c.label, k, compare.show(got.get(k)),
                              compare.show(want)))
        if fails.get(i) != c.tun_invalid:
            bad.append('packet %d (%s): tshark makes it %s, labelled %s' %
                       (i, c.label, fails.get(i), c.tun_invalid))
    if not cases:
        bad.append('no case in the tun_invalid capture')
    return point.result(not bad, '%s: %d UDP packets to 4789/6081 with no '
                        'tunnel in them, %d not plain UDP with tun_invalid'
                        % (point.name, len(cases), len(bad)),
                        diag_lines(bad))


def main(argv):
    ap = argparse.ArgumentParser(description='tshark reference test (TAP)')
    ap.add_argument('dpflow')
    ap.add_argument('--keep', metavar='DIR',
                    help='write the captures to DIR and keep them')
    ap.add_argument('--jobs', type=int, default=min(4, os.cpu_count() or 2))
    a = ap.parse_args(argv)
    dpflow = os.path.abspath(a.dpflow)

    if not shutil.which('tshark'):
        print('Bail out! tshark not found')
        return 1
    try:
        import edge_cases
    except ImportError as e:
        print('Bail out! scapy is needed for the edge cases: %s' % e)
        return 1

    caps = edge_cases.build()
    malformed = [c for c in caps if c.malformed]
    points = []
    cap_points = [(Point('edge %s' % c.filename), c) for c in caps]
    gen_points = [(Point(name), args, n) for name, args, n in GEN_RUNS]
    man_point = Point('gen all --malformed manifest')
    reason_points = [(Point('malformed %s' % r), r)
                     for r in compare.PARSER_DROPS]
    tun_point = Point('tunnel ports, no tunnel')
    points = [p for p, _ in cap_points] + [p for p, _, _ in gen_points] + \
        [man_point] + [p for p, _ in reason_points] + [tun_point]
    print('1..%d' % len(points))
    sys.stdout.flush()

    tmp = a.keep or tempfile.mkdtemp(prefix='dpflow-tshark-')
    os.makedirs(tmp, exist_ok=True)
    results = {}
    try:
        jobs = []
        for p, cap in cap_points:
            path = edge_cases.write(cap, tmp)
            jobs.append((p, path, cap.labels, cap.fuzz))
        gen_errors = {}
        for p, args, n in gen_points:
            slug = '_'.join(x.strip('-') for x in args)
            path = os.path.join(tmp, 'gen_%s.pcap' % slug)
            manifest = os.path.join(tmp, 'gen_%s.json' % slug) \
                if '--malformed' in args else None
            err = run_gen(dpflow, args, n, path, manifest)
            if err:
                gen_errors[p] = err
                p.result(False, diag=[err])
            else:
                jobs.append((p, path, None, False))
                if manifest:
                    results['manifest'] = (manifest, p)

        compare.tshark_config_dir()
        with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as ex:
            futs = {p: ex.submit(check_capture, dpflow, p, path, labels,
                                 fuzz)
                    for p, path, labels, fuzz in jobs}
            for p, f in futs.items():
                try:
                    results[p] = f.result()
                except Exception as e:   # a bug here must fail, not hang
                    p.result(False, diag=['%s: %r' % (type(e).__name__, e)])
                    results[p] = None

        if 'manifest' in results:
            manifest, gp = results['manifest']
            r = results.get(gp)
            manifest_check(man_point, manifest, r['objs'] if r else [])
        else:
            man_point.result(False, diag=['`dpflow gen all --malformed` '
                                          'failed: no manifest to check'])

        mal_objs = []
        for p, cap in cap_points:
            if cap.malformed and results.get(p):
                mal_objs = results[p]['objs']
        mal_cases = [c for cap in malformed for c in cap.cases]
        for p, reason in reason_points:
            reason_check(p, reason, mal_cases, mal_objs)
        tun_cases, tun_res = [], None
        for p, cap in cap_points:
            if cap.name == 'tun_invalid':
                tun_cases, tun_res = cap.cases, results.get(p)
        tun_invalid_check(tun_point, tun_cases, tun_res)
    finally:
        compare.tshark_cleanup()
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    failed = 0
    for k, p in enumerate(points, 1):
        ok = bool(p.ok)
        failed += not ok
        print('%s %d - %s' % ('ok' if ok else 'not ok', k, p.name))
        for d in p.diag:
            print('# ' + d)
    print('# %d of %d test points failed%s' % (
        failed, len(points), '; captures kept in %s' % tmp if a.keep else
        ''))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
