#!/usr/bin/env python3
"""Clang's thread-safety analysis of the libraries that own locks.

  thread_safety_test.py [--all] BUILD_DIR TARGET...

Runs `clang++ -fsyntax-only -Wthread-safety -Werror` on the translation
units of the TARGETs that hold locks, with the flags the build compiles
them with (BUILD_DIR/compile_commands.json; the build's own warnings are
replaced by the thread-safety ones). A unit holds locks when it or a
strata header it includes mentions common/mutex.h or ABSL_GUARDED_BY: the
only code that can touch a guarded member (members are private to their
class, whose .cc includes its header). The other units have nothing to
analyse; --all checks them too (about 3x the time). -fsyntax-only is enough: the analysis runs on the
parsed code, no object is made. The locks are strata::Mutex
(common/mutex.h), std::mutex with annotations; members they protect are
ABSL_GUARDED_BY, functions that need them ABSL_EXCLUSIVE_LOCKS_REQUIRED.
Exit 77 (ctest skip) without clang++ (Debian: apt-get install clang);
STRATA_TSA_CXX overrides the compiler.
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

FLAGS = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror"]


def clang_command(entry, cxx):
    args = shlex.split(entry["command"])[1:]  # without the compiler
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c" or a == "-w" or a.startswith("-W") or a == entry["file"]:
            continue
        out.append(a)
    return [cxx] + out + FLAGS + [entry["file"]]


def mentions_locks(path):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    return "common/mutex.h" in text or "ABSL_GUARDED_BY" in text


def holds_locks(source, root):
    if mentions_locks(source):
        return True
    with open(source, errors="replace") as f:
        includes = re.findall(r'#include "([^"]+)"', f.read())
    return any(mentions_locks(os.path.join(root, i)) for i in includes)


def main():
    args = sys.argv[1:]
    every_unit = "--all" in args
    args = [a for a in args if a != "--all"]
    if len(args) < 2:
        print(__doc__)
        return 2
    build, targets = args[0], args[1:]
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    cxx = os.environ.get("STRATA_TSA_CXX", "clang++")
    if shutil.which(cxx) is None:
        print(f"SKIP: {cxx} not found (Debian: apt-get install clang)")
        return 77
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    units = {}
    for e in entries:
        m = re.search(r"CMakeFiles/([^/ ]+)\.dir/", e["command"])
        if m and m.group(1) in targets:
            units.setdefault(m.group(1), []).append(e)
    missing = [t for t in targets if t not in units]
    if missing:
        print("thread_safety_test: no translation units for " +
              ", ".join(missing) + " in compile_commands.json")
        return 1
    jobs = [(t, e) for t in targets for e in units[t]
            if every_unit or holds_locks(e["file"], root)]
    skipped = sum(len(u) for u in units.values()) - len(jobs)
    start = time.monotonic()

    def check(job):
        target, e = job
        p = subprocess.run(clang_command(e, cxx), cwd=e["directory"],
                           capture_output=True, text=True)
        return target, e["file"], p.returncode, p.stdout + p.stderr

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for target, path, rc, text in pool.map(check, jobs):
            if rc != 0:
                failed += 1
                print(f"--- {target}: {path}\n{text}")
    seconds = time.monotonic() - start
    print(f"thread_safety_test: {len(jobs)} translation units of "
          f"{len(targets)} targets ({skipped} without locks not checked), "
          f"{failed} failed, {seconds:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
