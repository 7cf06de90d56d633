#!/usr/bin/env python3
"""tests/hopper_emu/grade_host.py: a Hopper lesson's file on the CPU Hopper emulator, graded by the real runner
(lessons 14 and 17: make emu-NN, emu-lessonNN, emu-solutionNN; mk/emu.mk; the descriptor's emu_grader).

    python3 tests/hopper_emu/grade_host.py SRC NAME [quick|full]

The binary is the forward runner (reference/harness/runner_main.cu + runner_attention.cu, objects from make:
EMU_FWD_OBJ) over tests/hostsim/fake_device.cpp, linked with SRC compiled whole by g++ over the
Hopper emulator (tests/hopper_emu/emu_host.h, force-included; its launches rewritten by
tests/emu/prep.py). Each case is one runner command line with --check-only --seed 1: the runner's
own inputs, references and diagnoses (lesson 14: FP8 scales, the rotation, outliers; lesson 17: packed
batches). A case passes when the runner passes it and the emulator reports no error. The lesson is the
one NAME ends with (emu-14, emu-lesson17, ...); its descriptor gives the cases: emu_cases (make test),
emu_cases_full (added by make test-full), emu_late_cases (how many of emu_cases make test runs a second
time with operands and copies landing as late as the PTX rules allow, EMU_WGMMA=late EMU_TMA=late;
make test-full runs every case both ways).
Two knobs for a worklog variant: EMU_DEFS, -D flags for the build (make passes a variant's `defines:`
and EMUNN_DEFS); EMU_CASES, cases separated by '|' that replace the descriptor's (e.g. per-tensor scales
only, for a variant that refuses block scales); every EMU_CASES case also runs late.
Exit status: 0 all pass, 1 a case fails, 2 the build failed, 3 the file says it is not implemented.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "emu"))
from prep import launch_rewrite  # noqa: E402  (tests/emu/prep.py)
import report as perf  # noqa: E402  (tests/emu/report.py: the performance report, as make emu-lessonN prints it)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CXX = os.environ.get("EMU_CXX", "g++")
CUDA_INC = os.environ.get("CUDA_INC", "/usr/local/cuda/include")

MODES = [("", {}), (" (late)", {"EMU_WGMMA": "late", "EMU_TMA": "late"})]
sys.path.insert(0, os.path.join(ROOT, "reference", "tools"))
from lessons import lessons, split  # noqa: E402  (reference/tools/lessons.py: the descriptors)


def sh(cmd, cwd=ROOT, env=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       errors="replace", env=env)
    return p.returncode, p.stdout


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    src, name = os.path.abspath(sys.argv[1]), sys.argv[2]
    full = len(sys.argv) > 3 and sys.argv[3] == "full"
    m = re.search(r"(\d+)$", name)
    desc = lessons().get(int(m.group(1))) if m else None
    if not desc or not desc["emu_cases"]:
        print("%s: no lesson with emu_cases in its descriptor ends this name" % name)
        return 2
    num = int(m.group(1))
    cases, late_quick = split(desc["emu_cases"]), int(desc["emu_late_cases"] or 0)
    late_quick = cases[:late_quick]
    if os.environ.get("EMU_CASES", "").strip():
        cases = late_quick = split(os.environ["EMU_CASES"])
    out = os.path.join(ROOT, "build", "emu-grade", name)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    print("%s: %s on the CPU Hopper emulator (tests/hopper_emu), graded by the runner on small shapes"
          % (name, os.path.relpath(src, ROOT)))
    try:
        open(out + ".kernel.cpp", "w").write(launch_rewrite(src))
    except (ValueError, OSError) as e:
        print("%s: %s" % (name, e))
        return 2
    objs = os.environ.get("EMU_FWD_OBJ", "").split()
    if not objs:
        print("EMU_FWD_OBJ is empty: run through make (make emu-%d)" % num)
        return 2
    # EMU_OPT (make emu-starters: -O0) replaces -O1: the starter as shipped stops at "not implemented"
    rc, log = sh([CXX, "-std=c++20", "-fopenmp", "-w", os.environ.get("EMU_OPT") or "-O1", "-I" + CUDA_INC, "-Itests/hopper_emu", "-include",
                  "emu_host.h", "-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu"]
                 + os.environ.get("EMU_DEFS", "").split() + ["-x", "c++", out + ".kernel.cpp", "-x", "none"]
                 + objs + ["-o", out, "-lpthread", "-lm"])
    if rc:
        print(log.rstrip())
        print("%s: the emulator build of %s failed (the messages above; nvcc may say more: make %s)"
              % (name, os.path.relpath(src, ROOT), name.replace("emu-", "")))
        return 2
    if not os.environ.get("EMU_CASES", "").strip():
        cases = cases + (split(desc["emu_cases_full"]) if full else [])
    passed = total = graded = 0
    outcomes = []  # "pass ARGS" / "fail ARGS" of the normal-schedule runs, for the runner's cross-case diagnosis
    # the performance report (tests/emu/grade.py's; EMU_REPORT=0: none): the emulator's counts go here
    report = os.environ.get("EMU_REPORT", "1") != "0"
    perf_file = out + ".perf"
    if os.path.exists(perf_file):
        os.remove(perf_file)
    for mode, env in MODES:
        # the late run of the quick set: the cases with several key tiles (a ring that turns over)
        for k, case in enumerate(cases if full or not mode else [c for c in cases if c in late_quick]):
            e = dict(os.environ, **env)
            if report:
                e["EMU_REPORT_OUT"] = perf_file
            rc, text = sh(["./" + os.path.basename(out), "--check-only", "--seed", "1"] + case.split(),
                          cwd=os.path.dirname(out), env=e)
            lines = perf.runner_lines(text, os.path.relpath(out, ROOT) if os.path.isabs(out) else out)
            if k or mode:  # the banner once
                lines = [l for l in lines if not re.match(r"(Lesson \d\d: |seed \d+|GPU: host simulation)", l)]
            print("== %s%s %s" % (name, mode, case))
            print("\n".join(lines))
            sys.stdout.flush()
            if rc == 3:
                print("  (no GPU needed: make %s runs it on the CPU again once you have written the TODOs)" % name)
                return 3
            ok = rc == 0 and "EMU ERROR" not in text
            if rc == 0 and not ok:
                print("FAIL: the emulator reported a problem (EMU ERROR above): this case does not pass")
            passed += ok
            graded += rc == 0
            total += 1
            if not mode:
                outcomes.append("%s %s" % ("pass" if ok else "fail", case))
    print("%s on the CPU emulator: %d of %d runs passed (%s)" % (name, passed, total,
                                                                 "PASS" if passed == total else "FAIL"))
    perf.case_pattern(out, outcomes, os.environ)  # as a GPU run of the same cases says it
    if report and graded == total:
        print("\n".join(perf.report(src, [perf_file], num, os.environ.get("EMU_REPORT") == "full")[0]))
    print("What the emulator cannot check: speed, the PTX wrappers of your file (the emulator brings its own), "
          "and races that only real hardware shows.")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
