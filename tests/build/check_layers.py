#!/usr/bin/python3
"""The layers of lib/ as the build declares them (lib/MODULE/meson.build's
layer_deps, lib/gpu/meson.build's gpu_layer_deps): every include of a
module's internal header ("MODULE/...") in lib/ comes from that module or
one it declares, and apps/ and tools/ include no module's internals.
TAP, one point per module and one for apps/ and tools/.

usage: check_layers.py SOURCE_ROOT
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def declared(root):
    deps = {}
    lib = os.path.join(root, "lib")
    for m in sorted(os.listdir(lib)):
        build = os.path.join(lib, m, "meson.build")
        if not os.path.isfile(build):
            continue
        text = open(build).read()
        found = re.search(r"^(?:gpu_)?layer_deps = \[([^\]]*)\]", text, re.M)
        deps[m] = None if not found else \
            re.findall(r"'([a-z_]+)'", found.group(1))
    return deps


def includes(folder):
    for base, _, files in os.walk(folder):
        for f in sorted(files):
            if f.endswith((".c", ".h", ".cu", ".cuh")):
                path = os.path.join(base, f)
                for m in INCLUDE.finditer(open(path, errors="replace").read()):
                    yield path, m.group(1)


def main():
    root = sys.argv[1]
    deps = declared(root)
    modules = set(deps)
    points = []
    for m in sorted(deps):
        problems = []
        if deps[m] is None:
            problems.append("lib/%s/meson.build declares no layer_deps" % m)
        else:
            allowed = {m, "dpflow"} | set(deps[m])
            for path, inc in includes(os.path.join(root, "lib", m)):
                if inc in modules and inc not in allowed:
                    problems.append("%s includes %s/... (not in %s's "
                                    "layer_deps)" % (
                                        os.path.relpath(path, root), inc, m))
        points.append(("module %s: includes only %s" % (
            m, ", ".join([m] + (deps[m] or []))), problems))
    problems = []
    for top in ("apps", "tools"):
        for path, inc in includes(os.path.join(root, top)):
            if inc in modules:
                problems.append("%s includes %s/..., a module's internals" %
                                (os.path.relpath(path, root), inc))
    points.append(("apps/ and tools/ include no module's internals",
                   problems))
    print("1..%d" % len(points))
    failed = 0
    for i, (name, problems) in enumerate(points, 1):
        if problems:
            failed += 1
            print("not ok %d - %s" % (i, name))
            for p in problems[:20]:
                print("#   " + p)
        else:
            print("ok %d - %s" % (i, name))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
