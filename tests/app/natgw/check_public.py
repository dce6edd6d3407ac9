#!/usr/bin/python3
"""The natgw app needs no internal header (TAP).

Usage: check_public.py APP_DIR SOURCE_ROOT COMPILE_COMMANDS

1. Every #include of APP_DIR's .c and .h files is a system header that
   does not resolve under SOURCE_ROOT/lib, a "dpflow/NAME.h" that exists
   in SOURCE_ROOT/include, or a file of APP_DIR itself.
2. The compile command of each of APP_DIR's .c files has no include
   directory under SOURCE_ROOT/lib (or its build twin).
"""
import json
import os
import re
import shlex
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def include_problems(app, root, path):
    bad = []
    with open(path, encoding='utf-8') as f:
        text = f.read()
    for m in INCLUDE.finditer(text):
        kind, name = m.group(1), m.group(2)
        line = text.count('\n', 0, m.start()) + 1
        where = '%s:%d' % (os.path.basename(path), line)
        if os.path.exists(os.path.join(root, 'lib', name)):
            bad.append('%s: %s is an internal header (lib/%s)'
                       % (where, name, name))
        elif kind == '"' and name.startswith('dpflow/'):
            if not os.path.exists(os.path.join(root, 'include', name)):
                bad.append('%s: %s is not a public header' % (where, name))
        elif kind == '"' and not os.path.exists(os.path.join(app, name)):
            bad.append('%s: "%s" is neither public nor the app\'s own'
                       % (where, name))
    return bad


def command_problems(app, root, commands):
    lib = os.path.realpath(os.path.join(root, 'lib'))
    with open(commands, encoding='utf-8') as f:
        entries = json.load(f)
    found, bad = 0, []
    for e in entries:
        src = os.path.realpath(os.path.join(e['directory'], e['file']))
        if os.path.dirname(src) != os.path.realpath(app):
            continue
        if os.path.basename(src).startswith('test_'):
            continue
        found += 1
        args = e.get('arguments') or shlex.split(e['command'])
        for i, a in enumerate(args):
            d = None
            if a == '-I' and i + 1 < len(args):
                d = args[i + 1]
            elif a.startswith('-I') and len(a) > 2:
                d = a[2:]
            if d is None:
                continue
            d = os.path.realpath(os.path.join(e['directory'], d))
            rel = os.path.relpath(d, os.path.realpath(e['directory']))
            if d == lib or d.startswith(lib + os.sep) or \
                    rel == 'lib' or rel.startswith('lib' + os.sep):
                bad.append('%s compiles with -I%s'
                           % (os.path.basename(src), a[2:] or args[i + 1]))
    if not found:
        bad.append('no compile command for the app\'s sources')
    return bad


def main():
    app, root, commands = sys.argv[1:4]
    files = sorted(f for f in os.listdir(app)
                   if f.endswith(('.c', '.h')) and not f.startswith('test_'))
    checks = [('includes of %s' % f,
               include_problems(app, root, os.path.join(app, f)))
              for f in files]
    checks.append(('include path of the compile commands',
                   command_problems(app, root, commands)))
    print('1..%d' % len(checks))
    failed = 0
    for i, (name, bad) in enumerate(checks, 1):
        print('%s %d - %s' % ('not ok' if bad else 'ok', i, name))
        for b in bad:
            print('# ' + b)
        failed += bool(bad)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
