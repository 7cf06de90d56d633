#!/usr/bin/env python3
"""tests/emu/grade.py: the student's CPU path, `make emu-lessonN` / `make emu-solutionN`.

    python3 tests/emu/grade.py N SRC [NAME]   build SRC (lesson N's file) over a CPU emulator and the
                                              real runner, grade it on the lesson's small case list

The binary is the lesson's own runner (reference/harness/runner_main.cu with runner_attention.cu or
runner_backward.cu, compiled by g++ over tests/hostsim/fake_device.cpp, a CUDA runtime on host
memory) linked with the lesson's source, host code included, compiled by g++ over the emulator
of its kind: only its kernel<<<grid, block, smem, stream>>>(args) launches are rewritten as
emulated launches. So the report, the diagnoses, the re-run and the causal tests are the
grader's own; the emulator adds its checks (bank conflicts, cp.async and shared-memory hazards:
any is a failure). Every case runs with --check-only --seed 1 (the shapes the emulator can afford,
one command line each); the output is the runner's, one block per case.
Exit status: 0 every case passes, 1 a case fails (or the emulator reports a problem), 2 the
build failed, 3 the file says it is not implemented (the runner's exit status).

Once every case is graded correct, the performance report follows (tests/emu/report.py: bank conflicts
by line, copies in flight, wgmma overlap, spills); EMU_REPORT=0 leaves it out, EMU_REPORT=full also
compiles nvcc's register report. The warp emulator's report build instruments the file's ordinary
shared-memory accesses (tests/emu/perf_hooks.h), which costs a few seconds of build.

Lessons 09 and 13 run on their own emulator drivers (make emu-09 / emu-13 with the file as the
source), graded against float64 by the driver; their starters, as shipped, are
reported as not implemented from the file's own switch (STARTER_NOT_DONE, STARTER_DONE_STEP),
as the runner would report them. Both are built in steps (the descriptor's `steps`): a file is
graded at the step its STARTER_DONE_STEP has reached (or EMU_STEP), a solution at every step. 09's
driver runs the step it is asked for; 13's steps are builds, each a worklog variant (the
descriptor's emu_step_variant), so a solution is built once per step. The objects come from make
(mk/emu.mk).
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prep import launch_rewrite  # noqa: E402  (tests/emu/prep.py)
import report as perf  # noqa: E402  (tests/emu/report.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CXX = os.environ.get("EMU_CXX", "g++")
CUDA_INC = os.environ.get("CUDA_INC", "/usr/local/cuda/include")

# Per lesson, from its descriptor (lessons/NN-*/lesson.mk, read by reference/tools/lessons.py):
# LESSONS: the emulator (fp32: tests/fp32_emu; wmma: tests/wmma_emu; warp: tests/warp_emu), the
# runner (fwd, bwd) and the cases, each a command line of the runner (emulator, runner, emu_cases);
# BUILDS: a file that builds several designs by a macro the text teaches is graded in each, the
# first on every case, the others on the first and the last (emu_builds); DRIVERS: the lessons graded by
# their emulator's own driver (emulator := driver, emu_driver); DRIVER_AFTER: lessons whose driver
# checks more than the runner's cases can (x30 logits, other tile configurations, copies landing
# at the retiring wait, forced split counts): once the cases pass, make emu-NN runs the file too.
# A driver takes the file as EMU<NN>_SRC.
sys.path.insert(0, os.path.join(ROOT, "reference", "tools"))
from lessons import lessons, split  # noqa: E402
DESCRIPTORS = lessons(ROOT)
LESSONS = {n: (d["emulator"], "bwd" if d["runner"] == "backward" else "fwd", split(d["emu_cases"]))
           for n, d in DESCRIPTORS.items() if d["emulator"] in ("fp32", "wmma", "warp")}
BUILDS = {n: [tuple(x.strip() for x in b.split(":", 1)) for b in split(d["emu_builds"])]
          for n, d in DESCRIPTORS.items() if d["emu_builds"]}
DRIVERS = {n: d["emu_driver"] for n, d in DESCRIPTORS.items() if d["emulator"] == "driver"}
DRIVER_AFTER = {n: d["emu_driver"] for n, d in DESCRIPTORS.items() if d["emulator"] != "driver" and d["emu_driver"]}
DRIVER_VAR = {d["emu_driver"]: "EMU%s_SRC" % d["emu_driver"][4:].upper() for d in DESCRIPTORS.values() if d["emu_driver"]}
CANNOT = {
    "fp32": "speed, and races that only real hardware shows (blocks run one after another here)",
    "wmma": "speed, and races that only real hardware shows (blocks run one after another here); a wmma call "
            "inside a branch that some lanes skip is reported as a contract error (\"not every lane of the warp "
            "made this call\") or a hang (EMU HANG), not as a wrong result",
    "warp": "speed, your PTX wrappers where the lesson has you write them (the emulator brings its own), "
            "and races that only real hardware shows (blocks run one after another here)",
    "driver": "speed, the host code of your file (the driver launches the kernel itself), "
              "and races that only real hardware shows",
}


# The performance report: EMU_REPORT=0 off, 1 (the default) after every case is graded correct, full
# with nvcc's register report compiled when it is not built yet. The emulator writes its counts to
# the file EMU_REPORT_OUT names (tests/emu/perf_report.h); the warp emulator's report build also
# sees the file's ordinary shared-memory loads and stores: g++'s address instrumentation, whose
# calls tests/emu/perf_hooks.h receives, and line tables for addr2line.
REPORT = os.environ.get("EMU_REPORT", "1")
REPORT_FLAGS = ["-g1", "-no-pie", "-fno-tree-sra", "-DEMU_PERF_HOOKS", "-fsanitize=kernel-address",
                "--param", "asan-instrumentation-with-call-threshold=0", "--param", "asan-stack=0",
                "--param", "asan-globals=0", "--param", "asan-memintrin=0"]


def report_file(name):
    return os.path.join(ROOT, "build", "emu-grade", name + ".perf")


def report_env(name, on=True):
    """The environment of an emulator run: its counts to the lesson's report file, or to none."""
    env = dict(os.environ)
    env.pop("EMU_REPORT_OUT", None)
    if on and REPORT != "0":
        env["EMU_REPORT_OUT"] = report_file(name)
    return env


def print_report(n, src, name):
    if REPORT == "0":
        return
    lines, _ = perf.report(src, [report_file(name)], n, REPORT == "full")
    print("\n".join(lines))
    print("  (EMU_REPORT=0 leaves this report out; what a flagged line means: your lesson's text, \"How to check\")")


def sh(cmd, cwd=ROOT, env=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       errors="replace", env=env)
    return p.returncode, p.stdout


def build(n, src, out, defines=()):
    """The emulator build of src (with -D defines) linked with the lesson's runner; an error text or None."""
    emu, runner, _ = LESSONS[n]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    kcpp = out + ".kernel.cpp"
    if emu == "fp32":  # tests/fp32_emu/prep.py: its launch form, and the dynamic shared memory
        rc, log = sh(["python3", "tests/fp32_emu/prep.py", src, kcpp])
        if rc:
            return log
    else:
        try:
            open(kcpp, "w").write(launch_rewrite(src))
        except ValueError as e:
            return str(e)
    objs = os.environ.get("EMU_FWD_OBJ" if runner == "fwd" else "EMU_BWD_OBJ", "").split()
    if not objs:
        return "EMU_FWD_OBJ / EMU_BWD_OBJ are empty: run through make (make emu-lesson%d)" % n
    # EMU_OPT (make emu-starters: -O0) replaces the optimisation level: a starter that stops at
    # "not implemented" runs no kernel worth optimising, and -O0 compiles it several times faster
    opt = os.environ.get("EMU_OPT")
    if emu == "fp32":
        flags = [opt or "-O2", "-Itests/fp32_emu", "-include", "emu_host.h"]
        flags += REPORT_FLAGS if REPORT != "0" else []
    elif emu == "wmma":
        flags = [opt or "-O2", "-Itests/wmma_emu", "-I" + CUDA_INC, "-include", "emu_host.h"]
    else:
        flags = [opt or "-O1", "-DFA_EMULATOR", "-DFA_SM80=1", "-I" + CUDA_INC, "-Itests/warp_emu", "-include", "emu_host.h"]
        flags += REPORT_FLAGS if REPORT != "0" else []
    rc, log = sh([CXX, "-std=c++20", "-fopenmp", "-w"] + flags + list(defines) + ["-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu",
                 "-x", "c++", kcpp, "-x", "none"] + objs + ["-o", out, "-lpthread", "-lm"])
    return log if rc else None


def run_cases(n, binary, name, cases=None, label=""):
    """Every case; (exit status, whether the runner graded every case correct)."""
    cases = cases or LESSONS[n][2]
    passed = graded = 0
    outcomes = []  # "pass ARGS" / "fail ARGS", for the runner's cross-case diagnosis
    sys.stdout.flush()
    for k, case in enumerate(cases):
        rc, out = sh(["./" + os.path.basename(binary), "--check-only", "--seed", "1"] + case.split(),
                     cwd=os.path.dirname(binary), env=report_env(name))
        lines = perf.runner_lines(out, os.path.relpath(binary, ROOT))
        if k:  # the banner once
            lines = [l for l in lines if not re.match(r"(Lesson \d\d: |seed \d+|GPU: host simulation)", l)]
        print("== %s%s %s" % (name, label, case))
        print("\n".join(lines))
        sys.stdout.flush()
        if rc == 3:
            print("  (no GPU: make emu-%s runs it on the CPU again)" % name)
            return 3, False
        ok = rc == 0 and "EMU ERROR" not in out
        if rc == 0 and not ok:
            print("FAIL: the values above pass, but the emulator reported a problem (EMU ERROR above: a bank conflict, "
                  "a hazard or a read of unwritten memory): this case does not pass")
        passed += ok
        graded += rc == 0
        outcomes.append("%s %s" % ("pass" if ok else "fail", case))
    print("%s%s on the CPU emulator: %d of %d cases passed (%s)" % (name, label, passed, len(cases),
                                                                     "PASS" if passed == len(cases) else "FAIL"))
    perf.case_pattern(binary, outcomes, report_env(name, False))  # as a GPU run of the same cases says it
    return (0 if passed == len(cases) else 1), graded == len(cases)


def run_driver(target, src, name, step=None, report=False):
    """make TARGET with the file as its source (and EMU_STEP=step: that step of the ladder
    alone; report: its counts to the lesson's report file): 0 when it passes, else 1."""
    extra = ["EMU_STEP=%d" % step] if step else []
    print("== %s: make %s %s=%s%s (the emulator's own driver)" % (name, target, DRIVER_VAR[target],
          os.path.relpath(src, ROOT), "".join(" " + e for e in extra)))
    sys.stdout.flush()
    env = report_env(name, report)
    if step:
        env["EMU_STEP"] = str(step)
    p = subprocess.run([os.environ.get("MAKE", "make"), "--no-print-directory", target,
                        "%s=%s" % (DRIVER_VAR[target], os.path.relpath(src, ROOT))] + extra, cwd=ROOT, env=env)
    print("%s, the emulator's driver: %s" % (name, "PASS" if p.returncode == 0 else "FAIL"))
    return 0 if p.returncode == 0 else 1


def starter_switch(n, src):
    """True when the file, as the runner would see it, says it is not implemented yet."""
    text = open(src).read()
    if re.search(r"^#define STARTER_NOT_DONE 1\b", text, re.M):
        return True
    m = re.search(r"^#define STARTER_DONE_STEP (\d+)", text, re.M)
    return bool(m and int(m.group(1)) == 0)


def ladder_steps(n):
    """The steps of lesson n's ladder (its descriptor's `steps`, "STEP:LAST_TODO ...")."""
    return [int(s.split(":")[0]) for s in split(DESCRIPTORS[n]["steps"], " ")]


def step_to_grade(n, src):
    """For a lesson with a ladder of steps (its descriptor's `steps`, "STEP:LAST_TODO ..."): the
    step to grade and why, or (None, why) when there is nothing to grade. The step is the one
    the file says it has reached (STARTER_DONE_STEP), or EMU_STEP when that is not above it; a
    file with no STARTER_DONE_STEP (a solution) is graded at every step, or at EMU_STEP."""
    steps = ladder_steps(n)
    asked = os.environ.get("EMU_STEP", "")
    asked = int(asked) if asked.isdigit() and int(asked) > 0 else None
    if asked is not None and asked not in steps:
        return None, "EMU_STEP=%d is not a step of lesson %02d's ladder (%s)" % (asked, n, " ".join(map(str, steps)))
    m = re.search(r"^#define STARTER_DONE_STEP (\d+)", open(src).read(), re.M)
    if not m:
        return asked, ("step %d (EMU_STEP)" % asked) if asked else "every step"
    done = int(m.group(1))
    reached = max([s for s in steps if s <= done], default=0)
    if not reached:
        return None, "STARTER_DONE_STEP is %d: no step reached yet" % done
    if asked is not None and asked <= reached:
        return asked, "step %d (EMU_STEP; your file says STARTER_DONE_STEP %d)" % (asked, done)
    why = "step %d, the one your file says it has reached (STARTER_DONE_STEP %d)" % (reached, done)
    if asked is not None:
        why += "; EMU_STEP=%d is above it: write its TODOs and raise STARTER_DONE_STEP first" % asked
    return reached, why


def lesson_dir(n):
    return DESCRIPTORS[n]["name"] if n in DESCRIPTORS else "%02d" % n


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    n, src = int(sys.argv[1]), sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else "lesson%d" % n
    kind = LESSONS[n][0] if n in LESSONS else "driver"
    print("%s: %s on the CPU emulator (%s), graded on small shapes" % (name, os.path.relpath(src, ROOT),
          {"fp32": "tests/fp32_emu", "wmma": "tests/wmma_emu", "warp": "tests/warp_emu",
           "driver": "make " + DRIVERS.get(n, "?")}[kind]))
    rc, graded = None, False
    os.makedirs(os.path.dirname(report_file(name)), exist_ok=True)
    open(report_file(name), "w").close()  # empty: the runs append their counts (none: a kernel without any)
    if n in DRIVERS:
        if starter_switch(n, src):
            print("NOT IMPLEMENTED: lesson %02d's file says it is not written yet.\n"
                  "  Open lessons/%s/ and work through TODO(1), TODO(2), ... then run make emu-%s again." %
                  (n, lesson_dir(n), name))
            rc = 3
        elif DESCRIPTORS[n]["steps"]:
            step, why = step_to_grade(n, src)
            if step is None and why != "every step":
                print("%s: %s" % (name, why))
                return 2
            print("%s: grading %s" % (name, why))
            if step is None and DESCRIPTORS[n]["emu_step_variant"]:
                # each step is a build of its own (emu_step_variant): one driver run per step
                rc = 0
                for s in ladder_steps(n):
                    rc = rc or run_driver(DRIVERS[n], src, name, s, report=True)
            else:
                rc = run_driver(DRIVERS[n], src, name, step, report=True)
            label = why.split(" (")[0].split(",")[0]
            if rc != 0 and label == "every step":  # not "every step FAIL": some steps may have passed
                print("%s: FAIL at one step or more (each step's verdict is above)" % name)
            else:
                print("%s: %s %s" % (name, label, "PASS" if rc == 0 else "FAIL"))
        else:
            rc = run_driver(DRIVERS[n], src, name, report=True)
        graded = rc == 0
    elif n in LESSONS:
        rc, graded = 0, True
        for k, (what, defines) in enumerate(BUILDS.get(n, [("", "")])):
            binary = os.path.join(ROOT, "build", "emu-grade", name + ("-%d" % k if k else ""))
            err = build(n, os.path.abspath(src), binary, defines.split())
            if err:
                print(err.rstrip())
                print("%s: the emulator build of %s %s failed (the messages above; a GPU build may say more: make %s)" %
                      (name, os.path.relpath(src, ROOT), defines, name))
                return 2
            label = " (%s, %s)" % (what, defines) if what else ""
            # the other builds: the first case and the last (the largest head dimension), not every case
            cases = LESSONS[n][2] if k == 0 or len(LESSONS[n][2]) < 3 else [LESSONS[n][2][0], LESSONS[n][2][-1]]
            rc, ok = run_cases(n, binary, name, cases, label)
            graded = graded and ok
            if rc:
                break
        if rc == 0 and n in DRIVER_AFTER:
            rc = run_driver(DRIVER_AFTER[n], src, name)
    else:
        print("lesson %d has no emulator path here (its descriptor's emulator: %s; lesson 01 runs on the CPU: "
              "make lesson1 && ./lesson1)" % (n, DESCRIPTORS[n]["emulator"] if n in DESCRIPTORS else "no lesson"))
        return 2
    if graded:  # the counts of a file that computes the right answer (bank conflicts alone may fail it)
        if rc:
            print("%s: FAIL stands (the emulator's error above); the performance report below is about speed "
                  "only, and its \"Nothing flagged\" does not clear that error" % name)
        print_report(n, src, name)
    print("What the emulator cannot check: %s." % CANNOT[kind])
    return rc


if __name__ == "__main__":
    sys.exit(main())
