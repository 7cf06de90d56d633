#!/usr/bin/env python3
"""tests/emu/report_check.py: make test's check of the emulator's performance report (make emu-report-check).

    python3 tests/emu/report_check.py [rest]

Each planted slow variant (a worklog variant of its lesson, lessons/NN-*/worklog/variants/) must be
flagged, with the flag that names its slowness, and the solution must not be flagged at all:
  03 no-pad        shared rows of d floats, no pad: 8-way conflicts on the float4 loads of K
                   ("bank conflicts"; the fp32 emulator's report build)
  07 no-swizzle    the plain shared layout: ldmatrix bank conflicts ("bank conflicts")
  08 wait-all      every copy waited for at once: a one-stage pipeline ("stages in flight 1")
  09 wgmma-wait0   wgmma_wait<0> in place of wait<1>: no softmax during a GEMM ("overlap: none")
On one small case each (lessons 03, 07, 08: the runner's case below through tests/emu/grade.py's report
build; lesson 09: its driver's one-case build, emu9.cpp's EMU_REPORT_CASE), so that it stays a few
seconds a build. make test runs lessons 08 and 09 (one planted variant per emulator kind that reports
overlap: the warp emulator's cp.async stages, the Hopper emulator's wgmma groups); `rest` the other
two (make test-full runs both). Exit status 0 when every verdict is as expected, 1 otherwise. Run through make (the
objects, EMU_FWD_OBJ)."""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grade  # noqa: E402  (tests/emu/grade.py: the report build, the lesson's descriptor)
import report  # noqa: E402  (tests/emu/report.py)

ROOT = grade.ROOT
sys.path.insert(0, os.path.join(ROOT, "reference", "tools"))
import variant  # noqa: E402  (reference/tools/variant.py)

# lesson: the runner's case (a warp lesson) or None (lesson 09: its driver); then the variants, each
# with the flag it must raise ("" for the solution: none)
CASES = {3: "-b 1 -H 1 -n 64 -d 128", 7: "-b 1 -H 1 -n 64 -d 64 --dtype fp16", 8: "-b 1 -H 1 -n 256 -d 64 --dtype fp16",
         9: None}
CHECKS = [(3, "", ""), (3, "no-pad", "bank conflicts"),
          (7, "", ""), (7, "no-swizzle", "bank conflicts"),
          (8, "", ""), (8, "wait-all", "stages in flight 1"),
          (9, "", ""), (9, "wgmma-wait0", "overlap: none")]
QUICK = (8, 9)  # the lessons make test checks


def source(n, name, tmp):
    """The solution of lesson n with variant `name` applied (none: the solution itself), as a file."""
    d = grade.DESCRIPTORS[n]
    sol = os.path.join(ROOT, "solutions", d["name"], d["source"])
    if not name:
        return sol
    text, _, _ = variant.make(n, sol, [name])
    path = os.path.join(tmp, "src-%02d-%s" % (n, name), d["source"])
    os.makedirs(os.path.dirname(path))
    open(path, "w").write(text)
    return path


def run_runner(n, src, perf):
    """The runner's case over the lesson's emulator (fp32 or warp), its report build; None, or what went wrong."""
    binary = os.path.splitext(perf)[0]
    err = grade.build(n, src, binary)
    if err:
        return "the build failed:\n" + err
    env = dict(os.environ, EMU_REPORT_OUT=perf)
    p = subprocess.run([binary, "--check-only", "--seed", "1"] + CASES[n].split(), cwd=os.path.dirname(binary),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
    return None if p.returncode == 0 else "the case failed:\n" + p.stdout


def run_driver(n, src, perf):
    """Lesson n's driver, one case (EMU_REPORT_CASE); None, or what went wrong."""
    env = dict(os.environ, EMU_REPORT_OUT=perf)
    p = subprocess.run([os.environ.get("MAKE", "make"), "--no-print-directory", "emu-%02d" % n,
                        "EMU%02d_SRC=%s" % (n, src), "EMU%02d_DEFS=-DEMU_REPORT_CASE" % n], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
    return None if p.returncode == 0 else "the driver failed:\n" + p.stdout


def check(n, name, want, tmp):
    """One verdict line; True when the report flags what it must (and nothing for the solution)."""
    t0 = time.time()
    src = source(n, name, tmp)
    perf = os.path.join(tmp, "%02d-%s.perf" % (n, name or "solution"))
    err = (run_runner if CASES[n] else run_driver)(n, src, perf)
    what = "solution %02d%s" % (n, " + " + name if name else "")
    if err:
        print("%s: %s" % (what, err.rstrip()))
        return False
    lines, flags = report.report(src, [perf])
    ok = any(want in f for f in flags) if want else not flags
    print("%-28s %s (%.0f s): %s" % (what, "ok" if ok else "WRONG", time.time() - t0,
                                     "; ".join(flags) if flags else "nothing flagged"))
    if not ok:
        print("\n".join(lines))
    return ok


def main():
    if not os.environ.get("EMU_FWD_OBJ"):
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "build")) as tmp:
        rest = sys.argv[1:] == ["rest"]
        results = [check(n, name, want, tmp) for n, name, want in CHECKS if (n in QUICK) != rest]
    print("emu-report-check: %d of %d as expected (each planted slow variant flagged, no solution)"
          % (sum(results), len(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
