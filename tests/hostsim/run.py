#!/usr/bin/env python3
"""tests/hostsim/run.py: the backward runner on the CPU (no GPU), for lesson 10.

    python3 tests/hostsim/run.py solution [SRC]     grade SRC (default: the lesson 10 solution) on a
                                                    few small shapes; exit 0 when every one passes
    python3 tests/hostsim/run.py mutants [NAME...]  every tests/mutants/10/*.mut (or the NAMEs): must
                                                    fail with its expect: diagnosis

The binary is the backward runner itself (reference/harness/runner_main.cu with runner_backward.cu, the
backward kind), compiled with g++ against tests/hostsim/fake_device.cpp (a CUDA runtime on host
memory, the float64 forward on the CPU) and the lesson's kernels run through the fp32 emulator
(tests/fp32_emu: one fiber per CUDA thread, blocks one after another: tests/emu/core.h). So the runner's
grading, diagnoses, re-run and causal tests are exercised for real, on shapes small enough for the
emulator; what needs concurrent blocks (a lost atomic update) or the hardware (timing) is not, and
mutants marked "# hostsim: no" are skipped. The objects come from
make (mk/emu.mk: make hostsim-10, make hostsim-mutants-10), which passes them in HOSTSIM_OBJ.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "mutants"))
import run as mutants  # noqa: E402  (tests/mutants/run.py: the .mut format)

SHAPES = ["-b 2 -H 3 -n 77 -d 64", "-b 1 -H 2 -n 77 -d 64 --causal", "-b 1 -H 1 -n 130 -d 128 --causal"]
BUILD = os.path.join(ROOT, "build", "hostsim")
CXX = os.environ.get("CXX_BWD", "g++")


def sh(cmd):
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       errors="replace")
    return p.returncode, p.stdout


def build(src, out):
    """Emulator build of src linked with the hostsim runner; returns an error text or None."""
    os.makedirs(os.path.dirname(out), exist_ok=True)
    kcpp = out + ".kernel.cpp"
    rc, log = sh(["python3", "tests/fp32_emu/prep.py", src, kcpp])
    if rc:
        return log
    objs = os.environ.get("HOSTSIM_OBJ", "").split()
    rc, log = sh([CXX, "-O2", "-std=c++20", "-fopenmp", "-w", "-Itests/fp32_emu", "-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu", "-include",
                  "emu_bwd_runtime.h", "-x", "c++", kcpp, "-x", "none"] + objs + ["-o", out, "-lpthread", "-lm"])
    return log if rc else None


def grade(binary, shapes=SHAPES):
    """[(shape, exit status, output)] of --check-only --seed 1 runs."""
    res = []
    for s in shapes:
        rc, out = sh([binary, "--check-only", "--seed", "1"] + s.split())
        res.append((s, rc, out))
    return res


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "solution"
    if mode == "solution":
        src = sys.argv[2] if len(sys.argv) > 2 else None
        if not src:
            import glob
            src = sorted(glob.glob(os.path.join(ROOT, "solutions", "10-*", "*.cu")))[0]
        binary = os.path.join(BUILD, "solution10")
        err = build(src, binary)
        if err:
            print(err)
            return 1
        bad = 0
        for shape, rc, out in grade(binary):
            ok = rc == 0 and "1 of 1 cases passed" in out
            bad += not ok
            line = next((l for l in out.splitlines() if l.strip().startswith(("pass", "FAIL"))), out[-300:])
            print("%s  %-34s %s" % ("ok  " if ok else "FAIL", shape, line.strip()[:150]))
            if not ok:
                print(out)
        print("hostsim: %d of %d shapes of %s pass through the backward runner on the CPU" %
              (len(SHAPES) - bad, len(SHAPES), os.path.relpath(src, ROOT)))
        # the runner's 16-bit paths, with the plain same-precision backward as the "lesson"
        lowp = os.path.join(BUILD, "lowp")
        rc, log = sh([CXX, "-O2", "-std=c++17", "-fopenmp", "-w", "-I" + os.environ.get("CUDA_INC", "/usr/local/cuda/include"),
                      "-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu", "tests/hostsim/lowp_lesson.cpp"] + os.environ.get("HOSTSIM_OBJ", "").split() +
                     ["-o", lowp, "-lm"])
        if rc:
            print(log)
            return 1
        lowp_shapes = ["--dtype fp16 -b 2 -H 3 -n 77 -d 64", "--dtype bf16 -b 1 -H 2 -n 130 -d 128 --causal",
                       "--dtype fp16 -b 1 -H 1 -n 1 -d 64 --causal"]
        lbad = 0
        for shape, rc, out in grade(lowp, lowp_shapes):
            ok = rc == 0 and "1 of 1 cases passed" in out
            lbad += not ok
            line = next((l for l in out.splitlines() if l.strip().startswith(("pass", "FAIL"))), out[-300:])
            print("%s  %-44s %s" % ("ok  " if ok else "FAIL", shape, line.strip()[:140]))
            if not ok:
                print(out)
        print("hostsim: %d of %d shapes of the plain 16-bit backward pass the 16-bit rule" %
              (len(lowp_shapes) - lbad, len(lowp_shapes)))
        return 1 if bad or lbad else 0
    names = sys.argv[2:]
    import glob
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "mutants", "10", "*.mut")))
    if names:
        files = [f for f in files if os.path.splitext(os.path.basename(f))[0] in names]
    failed = skipped = 0
    for f in files:
        m = mutants.Mutant(f)
        if re.search(r"^# hostsim: no", open(f).read(), re.M):
            print("skip      %-24s %s" % (m.name, re.search(r"^# hostsim: no ?(.*)$", open(f).read(), re.M).group(1)))
            skipped += 1
            continue
        err = m.apply()
        binary = os.path.join(BUILD, "mutants", m.name)
        err = err or build(m.src, binary)
        if err:
            print("ERROR     %-24s %s" % (m.name, err.strip()[:300]))
            failed += 1
            continue
        runs = grade(binary, [m.meta["args"]] if "args" in m.meta else SHAPES)  # what the GPU run will run
        out = "\n".join(o for _, _, o in runs)
        failed_runs = [r for r in runs if r[1] not in (0, 2, 3, 4)]
        found = re.search(m.meta["expect"], out, re.M)
        if failed_runs and found:
            print("rejected  %-24s %s" % (m.name, mutants.trim(found.group(0), None, 90)))
        else:
            failed += 1
            verdict = "ACCEPTED" if not failed_runs else "wrong diagnosis"
            print("%-9s %-24s expected /%s/; the runner said:" % (verdict, m.name, m.meta["expect"]))
            for shape, rc, o in runs:
                for l in o.splitlines():
                    if "diagnosis" in l or "FAIL" in l or "where:" in l:
                        print("            [%s] %s" % (shape, l.strip()[:200]))
        with open(binary + ".log", "w") as fo:
            fo.write(out)
    print("hostsim mutants: %d of %d rejected as expected, %d failed, %d skipped" %
          (len(files) - failed - skipped, len(files) - skipped, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
