#!/usr/bin/env python3
"""tests/warp_emu/hostsim11.py: lesson 11 through the real backward runner, on the CPU.

    python3 tests/warp_emu/hostsim11.py solution [SRC]     grade SRC (default: the lesson 11
                                                           solution) on a few small shapes
    python3 tests/warp_emu/hostsim11.py mutants [NAME...]  every tests/mutants/11/*.mut (or the
                                                           NAMEs): each must fail with its expect:
    python3 tests/warp_emu/hostsim11.py prep SRC            print SRC as g++ compiles it over the
                                                           emulator (tests/emu/prep.py, which make uses)

The binary is reference/harness/runner_backward.cu compiled with g++ against tests/hostsim/
fake_device.cpp (a CUDA runtime on host memory; mk/emu.mk builds those objects and passes
them in HOSTSIM_OBJ), and the lesson's own source, host code included, compiled by g++ over the
warp emulator, whole: its #include "ptx_mma.h", "ptx_cp_async.h", "ptx_memory.h" find the
emulator's stand-ins first on the include path (tests/warp_emu: ldmatrix, mma, cp.async,
st/ld.shared, red.add as the PTX ISA defines them, one fiber per CUDA thread: tests/emu/core.h), and every
kernel<<<grid, block, smem, stream>>>(args) launch becomes an emulated one (prep). So attention_backward, its workspace and launch geometry, the
runner's grading, diagnoses, re-run and causal tests all run for real; the emulator adds its
own checks (bank conflicts, cp.async and shared-memory hazards), and any problem it reports
fails the run. What needs the hardware (timing, blocks running at the same time) is not
exercised. A mutant with a line "# hostsim: no" is skipped.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "mutants"))
import run as mutants  # noqa: E402  (tests/mutants/run.py: the .mut format)
sys.path.insert(0, os.path.join(ROOT, "tests", "emu"))
from prep import launch_rewrite  # noqa: E402  (tests/emu/prep.py: the launch rewrite)

# N = 150 at d = 128 (Br 64, Bc 128): the one non-causal shape with two K/V blocks, so the second
# starts at its diagonal query tile and wraps around to tile 0 (the schedule of the main kernel).
# Causal with two heads and three key tiles (N = 130, d = 64): a block that takes its (b, h) from
# the wrong order shows only with several of each; in fp16 alone (the other shapes grade both
# dtypes), since it is the longest run.
SHAPES = ["-b 2 -H 1 -n 77 -d 64", "-b 1 -H 2 -n 130 -d 64 --causal --dtype fp16", "-b 1 -H 1 -n 77 -d 128 --causal",
          "-b 1 -H 2 -n 150 -d 128"]
BUILD = os.path.join(ROOT, "build", "hostsim11")
CXX = os.environ.get("CXX_BWD", "g++")
NVCC = os.environ.get("NVCC", "nvcc")


def sh(cmd):
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       errors="replace")
    return p.returncode, p.stdout


def prep(src):
    """The lesson source for g++ over the emulator (tests/emu/prep.py); raises ValueError."""
    return launch_rewrite(src)


def build(src, out):
    """Emulator build of src linked with the hostsim runner; returns an error text or None."""
    os.makedirs(os.path.dirname(out), exist_ok=True)
    kcpp = out + ".kernel.cpp"
    try:
        open(kcpp, "w").write(prep(src))
    except ValueError as e:
        return str(e)
    objs = os.environ.get("HOSTSIM_OBJ", "").split()
    if not objs:
        return "HOSTSIM_OBJ is empty: run through make (make hostsim-11)"
    inc = os.environ.get("CUDA_INC") or os.path.join(os.path.dirname(NVCC), "..", "include")  # make exports CUDA_INC
    rc, log = sh([CXX, "-O1", "-std=c++20", "-fopenmp", "-w", "-I" + inc, "-Itests/warp_emu", "-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu",
                  "-include", "emu_host.h", "-x", "c++", kcpp, "-x", "none"] + objs +
                 ["-o", out, "-lpthread", "-lm"])
    return log if rc else None


def grade(binary, shapes=SHAPES):
    """[(shape, exit status, output)] of --check-only --seed 1 runs."""
    return [(s,) + sh([binary, "--check-only", "--seed", "1"] + s.split()) for s in shapes]


def solution(src):
    src = src or sorted(glob.glob(os.path.join(ROOT, "solutions", "11-*", "*.cu")))[0]
    binary = os.path.join(BUILD, "solution11")
    err = build(src, binary)
    if err:
        print(err)
        return 1
    bad = 0
    for shape, rc, out in grade(binary):
        ok = rc == 0 and "EMU ERROR" not in out
        bad += not ok
        lines = [l.strip() for l in out.splitlines() if l.strip().startswith(("pass", "FAIL", "emulator:"))]
        print("%s  %-34s %s" % ("ok  " if ok else "FAIL", shape, " | ".join(lines)[:220]))
        if not ok:
            print(out)
    print("hostsim-11: %d of %d shapes of %s pass through the backward runner on the CPU" %
          (len(SHAPES) - bad, len(SHAPES), os.path.relpath(src, ROOT)))
    return 1 if bad else 0


def mutant_run(names):
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "mutants", "11", "*.mut")))
    if names:
        files = [f for f in files if os.path.splitext(os.path.basename(f))[0] in names]
    failed = skipped = 0
    for f in files:
        m = mutants.Mutant(f)
        text = open(f).read()
        if re.search(r"^# hostsim: no", text, re.M):
            print("skip      %-28s" % m.name)
            skipped += 1
            continue
        err = m.apply()
        binary = os.path.join(BUILD, "mutants", m.name)
        err = err or build(m.src, binary)
        if err:
            print("ERROR     %-28s %s" % (m.name, err.strip()[:300]))
            failed += 1
            continue
        runs = grade(binary)
        out = "\n".join(o for _, _, o in runs)
        failed_runs = [r for r in runs if r[1] not in (0, 2, 3, 4) or "EMU ERROR" in r[2]]
        found = re.search(m.meta["expect"], out, re.M)
        # A race the GPU grader suspects from two runs that differ: the emulator core schedules the
        # threads the same way in both runs (tests/emu/core.h), so the runs agree, and the
        # emulator's hazard check names the race instead (a read with no barrier after the write).
        if not found and re.search(r"race suspected", m.meta["expect"]):
            found = re.search(r"^.*EMU ERROR: .*hazard.*$", out, re.M)
        ideal = m.meta.get("ideal")
        if failed_runs and found:
            note = "" if not ideal or re.search(ideal, out, re.M) else "  (ideal not seen: /%s/)" % ideal
            print("rejected  %-28s %s%s" % (m.name, mutants.trim(found.group(0), None, 90), note))
        else:
            failed += 1
            verdict = "ACCEPTED" if not failed_runs else "wrong diagnosis"
            print("%-9s %-28s expected /%s/; the runner said:" % (verdict, m.name, m.meta["expect"]))
        for shape, rc, o in runs:
            for l in o.splitlines():
                if "diagnosis" in l or "FAIL" in l or "EMU ERROR" in l:
                    print("            [%s] %s" % (shape, l.strip()[:200]))
        with open(binary + ".log", "w") as fo:
            fo.write(out)
    print("hostsim-11 mutants: %d of %d rejected as expected, %d failed, %d skipped" %
          (len(files) - failed - skipped, len(files) - skipped, failed, skipped))
    return 1 if failed else 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "solution"
    if mode == "solution":
        return solution(sys.argv[2] if len(sys.argv) > 2 else None)
    if mode == "mutants":
        return mutant_run(sys.argv[2:])
    if mode == "prep" and len(sys.argv) == 3:
        try:
            sys.stdout.write(prep(sys.argv[2]))
        except ValueError as e:
            print("hostsim11.py prep: %s" % e, file=sys.stderr)
            return 1
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
