#!/usr/bin/env python3
"""tests/warp_emu/hostsim16.py: lesson 16 (a paged KV cache) through the real decode runner, on the CPU.

    python3 tests/warp_emu/hostsim16.py solution [SRC]     grade SRC (default: the lesson 16 solution)
                                                           on the descriptor's emu_cases: `make hostsim-16`,
                                                           in make test
    python3 tests/warp_emu/hostsim16.py mutants [NAME...]  every tests/mutants/16/*.mut (or the NAMEs): each
                                                           must fail with its `expect:` diagnosis:
                                                           `make hostsim-mutants-16`, in make test-full

The binary is the one `make emu-solution16` grades (tests/emu/grade.py's build: the lesson's source,
host code included, compiled by g++ over the warp emulator, linked with the forward runner over the
fake CUDA runtime), so the page map the harness shuffles, the append it grades (attention_append_kv)
and its diagnoses all run for real. What this adds to `make mutants-emu LESSONS=16`, which asks only
that the emulator fail: each mutant's output must hold its `expect:` regex, the diagnosis the GPU
run must give too (the grader's code is the same; only the kernels run on the CPU). Built without
the emulator's performance report (EMU_REPORT=0): a build the report instruments takes longer.
"""
import glob
import os
import re
import subprocess
import sys

os.environ["EMU_REPORT"] = "0"  # before tests/emu/grade.py reads it
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "mutants"))
import run as mutants  # noqa: E402  (tests/mutants/run.py: the .mut format)
sys.path.insert(0, os.path.join(ROOT, "tests", "emu"))
import grade  # noqa: E402  (tests/emu/grade.py: the emulator build and the descriptor's cases)

N = 16
BUILD = os.path.join(ROOT, "build", "hostsim16")


def cases():
    return grade.LESSONS[N][2]


def run_all(binary):
    """[(case, exit status, output)] of --check-only --seed 1 runs of every case."""
    out = []
    for case in cases():
        p = subprocess.run([binary, "--check-only", "--seed", "1"] + case.split(), cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True, errors="replace")
        out.append((case, p.returncode, p.stdout))
    return out


def solution(src):
    src = src or sorted(glob.glob(os.path.join(ROOT, "solutions", "16-*", "*.cu")))[0]
    binary = os.path.join(BUILD, "solution16")
    err = grade.build(N, src, binary)
    if err:
        print(err)
        return 1
    bad = 0
    for case, rc, out in run_all(binary):
        ok = rc == 0 and "EMU ERROR" not in out
        bad += not ok
        lines = [l.strip()[:60] for l in out.splitlines() if l.strip().startswith(("pass", "FAIL"))]
        print("%s  %-80s %s" % ("ok  " if ok else "FAIL", case, " | ".join(lines)[:160]))
        if not ok:
            print(out)
    print("hostsim-16: %d of %d cases of %s pass through the decode runner on the CPU (paged: the append "
          "graded too)" % (len(cases()) - bad, len(cases()), os.path.relpath(src, ROOT)))
    return 1 if bad else 0


def mutant_run(names):
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "mutants", "%02d" % N, "*.mut")))
    if names:
        files = [f for f in files if os.path.splitext(os.path.basename(f))[0] in names]
    failed = 0
    for f in files:
        m = mutants.Mutant(f)
        binary = os.path.join(BUILD, "mutants", m.name)
        err = m.apply() or grade.build(N, m.src, binary)
        if err:
            print("ERROR     %-26s %s" % (m.name, err.strip()[:300]))
            failed += 1
            continue
        runs = run_all(binary)
        out = "\n".join(o for _, _, o in runs)
        found = re.search(m.meta["expect"], out, re.M)
        if any(rc == 1 for _, rc, _ in runs) and found:
            print("rejected  %-26s %s" % (m.name, mutants.trim(found.group(0), None, 100)))
        else:
            failed += 1
            print("%-9s %-26s expected /%s/; the runner said:" % ("ACCEPTED" if not any(rc for _, rc, _ in runs)
                                                                  else "wrong diagnosis", m.name, m.meta["expect"]))
            for case, rc, o in runs:
                for l in o.splitlines():
                    if "diagnosis" in l or "FAIL" in l:
                        print("            [%s] %s" % (case, l.strip()[:200]))
        with open(binary + ".log", "w") as fo:
            fo.write(out)
    print("hostsim-16 mutants: %d of %d rejected with the diagnosis their expect: names" % (len(files) - failed, len(files)))
    return 1 if failed else 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "solution"
    if mode == "solution":
        return solution(sys.argv[2] if len(sys.argv) > 2 else None)
    if mode == "mutants":
        return mutant_run(sys.argv[2:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
