#!/usr/bin/env python3
"""tests/hostsim/forward.py: the forward runner on the CPU (no GPU): `make hostsim-forward`.

    python3 tests/hostsim/forward.py            build, run every check below; exit 0 when all hold
    python3 tests/hostsim/forward.py --dump DIR also write each run's output to DIR/NN.txt (to diff
                                                two versions of the runner)

The binaries are the forward runner itself (reference/harness/runner_main.cu, the skeleton, with
runner_attention.cu, the forward and decode kinds), compiled with g++ against tests/hostsim/
fake_device.cpp (a CUDA runtime on host memory), linked with
  - forward_lesson.cpp, a stand-in lesson computing the plain same-precision attention on the CPU,
    built as an ordinary lesson (lessons 02-08's options and matrix), as a decode lesson
    (LESSON_DECODE: lesson 12's) and as a lesson that runs over ranks (attention_ranks.h: lesson
    15's --ranks and its grading on 2, 3 and 4 ranks), with one bug planted per run by HOSTSIM_BUG;
  - fp8_lesson.cpp, a stand-in FP8 lesson (--dtype e4m3, lesson 14's interface) computing what
    lesson 14's kernel computes on the CPU, with its bugs planted the same way;
  - solutions 03 and 05, their kernels on the fp32 emulator (tests/fp32_emu).
Each check names a command line, the exit status it must end with and text its output must hold:
passes, refusals (exit 2 with the valid values), the CSV row, and the diagnosis of each planted
bug. The objects come from make (HOSTSIM_FWD_OBJ, mk/emu.mk).
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build", "hostsim")
CXX = os.environ.get("CXX_BWD", "g++")
CUDA_INC = os.environ.get("CUDA_INC", "/usr/local/cuda/include")
OBJ = os.environ.get("HOSTSIM_FWD_OBJ", "").split()

# (binary, HOSTSIM_BUG or "", arguments, exit status, regular expression the output must match[,
#  environment for that run])
CHECKS = [
    ("fwd", "", "-b 2 -H 3 -n 77 -d 64 --check-only", 0, r"3 of 3 cases passed"),
    ("fwd", "", "-b 1 -H 2 -n 130 -d 128 --causal --dtype bf16 --csv",
     0, r"hostsim-forward,pass,1,1,bf16,1,2,130,128,1,1\.0000,[0-9.]+,[0-9.]+,\d+,130,2,0,\n"),
    ("fwd", "", "--kv-seq 100", 2, r"does not take decode shapes .* lesson 12 \(flash decoding\) takes them"),
    ("fwd", "", "--varlen 100", 2, r"lesson 05 does not take packed batches \(--varlen, --seqlens\).*LESSON_VARLEN"),
    ("dec", "", "--paged 16", 2, r"lesson 12 does not read a paged KV cache \(--paged PAGE_SIZE, a power of two in 8\.\.1024\)"),
    ("fwd", "", "-d 96", 2, r"--dim 96 is not supported by lesson 05: expected one of 64, 128"),
    ("fwd", "causal", "-b 1 -H 2 -n 77 -d 64 --causal --dtype fp32 --check-only",
     1, r"future keys influence the output"),
    ("fwd", "tail", "-b 1 -H 2 -n 77 -d 64 --dtype fp32 --check-only", 1, r"wrong only in rows 76\.\.76 \(the last rows\)"),
    ("fwd", "L2", "-b 1 -H 2 -n 77 -d 64 --dtype fp16 --check-only", 1, r"O: passes[\s\S]*base 2"),
    ("fwd", "race", "-b 1 -H 2 -n 33 -d 64 --dtype fp16 --check-only", 1, r"race suspected"),
    ("fwd", "outside", "-b 1 -H 2 -n 33 -d 64 --dtype fp16 --check-only", 1, r"diagnosis: wrote outside O"),
    ("fwd", "unwritten", "-b 2 -H 1 -n 33 -d 64 --dtype fp32", 1, r"not written"),
    ("fwd", "notimpl", "--csv", 3, r"NOT IMPLEMENTED: lesson 05's attention_forward[\s\S]*hostsim-forward,not-implemented,0,"),
    ("fwd", "tail", "--fuzz 3 --seed 3 --dtype fp32", 1, r"rerun: \./fwd -b \d+ -H \d+ -n \d+ -d \d+ --dtype fp32 --seed 3 --check-only"),
    ("dec", "", "-b 2 -H 8 --kv-heads 2 -n 4 --kv-seq 300 -d 64 --causal --ragged --check-only", 0,
     r"pass  custom fp32  B=2 H=8 N=4 d=64 N_kv=300 H_kv=2 ragged causal"),
    ("dec", "", "-b 2 -H 8 --kv-heads 2 -n 1 --kv-seq 3000 -d 128 --ragged --dtype fp16 --csv",
     0, r"hostsim-decode,pass,1,1,fp16,2,8,1,128,0,1\.0000,[0-9.]+,[0-9.]+,\d+,3000,2,1,[0-9.]+\n", {"HOSTSIM_MEM_MIB": "512"}),
    ("dec", "", "-H 8 --kv-heads 3", 2, r"--kv-heads 3 does not divide --heads 8"),
    ("dec", "", "-n 16 --kv-seq 8 --causal", 2, r"give --kv-seq >= 16"),
    ("dec", "gqa", "-b 1 -H 8 --kv-heads 2 -n 1 --kv-seq 200 -d 64 --dtype fp16 --check-only", 1, r"FAIL  custom"),
    ("dec", "ragged", "-b 3 -H 2 --kv-heads 1 -n 1 --kv-seq 300 -d 64 --ragged --dtype fp16 --check-only", 1,
     r"diagnosis: overflow/NaN"),
    ("dec", "causal", "-b 1 -H 4 --kv-heads 1 -n 8 --kv-seq 100 -d 64 --causal --dtype bf16 --check-only", 1,
     r"changing the last \d+ keys of each sequence"),
    ("dec", "gqa", "--fuzz 6 --seed 1 --dtype fp16", 1,
     r"diagnosis: only the grouped-query cases \(H_kv < H\) fail"),
    # FP8 inputs (--dtype e4m3; lesson 14's interface): fp8_lesson.cpp computes what lesson 14's kernel does
    ("fp8", "", "-b 1 -H 2 -n 600 -d 128 --outliers --check-only",
     0, r"pass  custom e4m3  B=1 H=2 N=600 d=128 outliers .*plain FP8 reference's max error.*vs unquantized inputs \(block scales\): O rmse"),
    ("fp8", "", "-b 1 -H 2 -n 300 -d 128 --causal --hadamard --quant tensor --check-only",
     0, r"vs unquantized inputs \(per-tensor scales, Hadamard\)"),
    ("fp8", "", "-b 2 -H 3 -n 77 -d 64 --causal --check-only", 0, r"1 of 1 cases passed"),
    ("fp8", "", "--quant rows", 2, r"--quant 'rows' is not valid: expected block or tensor"),
    ("fwd", "", "--hadamard", 2, r"lesson 05 does not take FP8 inputs .* lesson 14 \(FP8 attention\) takes them"),
    ("fwd", "", "--dtype e4m3", 2, r"--dtype e4m3 is not supported by lesson 05: expected one of fp32, fp16, bf16"),
    ("fp8", "descale2", "-b 1 -H 2 -n 300 -d 128 --check-only", 1, r"every row is wrong"),
    ("fp8", "pscale", "-b 1 -H 2 -n 300 -d 128 --check-only", 1, r"L passes \(so m and l are right\); O is wrong"),
    ("fp8", "blockrow", "-b 1 -H 2 -n 300 -d 128 --outliers --check-only", 1, r"0 of 1 cases passed"),
    ("fp8", "hadamardq", "-b 1 -H 2 -n 300 -d 128 --hadamard --check-only", 1, r"0 of 1 cases passed"),
    ("fp8", "tensor", "-b 1 -H 2 -n 300 -d 128 --outliers --check-only", 1, r"0 of 1 cases passed"),
    ("fp8", "", "-b 1 -H 2 -n 300 -d 128 --causal --seed 5 --check-only --outliers", 0, r"PASS"),
    # P rounded without its scale: the peaked inputs see it, ordinary ones do not
    ("fp8", "", "-b 1 -H 1 -n 300 -d 128 --peaked --check-only", 0, r"pass  custom e4m3  B=1 H=1 N=300 d=128 peaked"),
    ("fp8", "", "-b 1 -H 1 -n 257 -d 64 --causal --peaked --check-only", 0, r"1 of 1 cases passed"),
    ("fp8", "punscaled", "-b 1 -H 1 -n 300 -d 128 --peaked --check-only", 1,
     r"rerun: \./fp8 -b 1 -H 1 -n 300 -d 128 --dtype e4m3 --peaked --seed \d+ --check-only[\s\S]*0 of 1 cases passed"),
    ("fp8", "punscaled", "-b 1 -H 1 -n 300 -d 128 --check-only", 0, r"1 of 1 cases passed"),
    ("fwd", "", "--peaked", 2, r"lesson 05 does not take FP8 inputs \(--quant, --hadamard, --outliers, --peaked\)"),
    # a lesson that runs over ranks (lesson 15's interface, attention_ranks.h): every case on 2, 3 and 4 ranks
    ("ring", "", "-b 1 -H 2 -n 48 -d 64 --causal --check-only", 0,
     r"\(1 cases x fp16, bf16, each on 2, 3 and 4 ranks\):\n    pass  custom fp16  B=1 H=2 N=48 d=64 causal on 2 ranks"
     r"[\s\S]*pass  custom bf16  B=1 H=2 N=48 d=64 causal on 4 ranks[\s\S]*6 of 6 cases passed"),
    ("ring", "", "-b 1 -H 2 -n 48 -d 64 --dtype fp16 --ranks 3 --check-only", 0,
     r"\(1 cases x fp16, on 3 ranks\):\n    pass  custom fp16  B=1 H=2 N=48 d=64 on 3 ranks[\s\S]*1 of 1 cases passed"),
    ("ring", "", "-b 1 -H 2 -n 48 -d 64 --dtype fp16 --bench-only", 0, r"Time: fp16 B=1 H=2 N=48 d=64 on 2 ranks: "),
    ("ring", "", "--ranks 9", 2, r"--ranks '9' is not valid: expected an integer in 1\.\.8"),
    ("ring", "", "--ranks 0", 2, r"--ranks '0' is not valid: expected an integer in 1\.\.8"),
    ("fwd", "", "--ranks 2", 2, r"lesson 05 does not run over ranks \(--ranks\): lesson 15 \(ring attention\) does"),
    ("ring", "ranks3", "-b 1 -H 2 -n 48 -d 64 --dtype fp16 --seed 1 --check-only", 1,
     r"pass  custom fp16  B=1 H=2 N=48 d=64 on 2 ranks[\s\S]*rerun: \./ring -b 1 -H 2 -n 48 -d 64 --dtype fp16 "
     r"--ranks 3 --seed 1 --check-only[\s\S]*1 of 3 cases passed\ndiagnosis: only the rings of 3 or more ranks fail"),
    ("ring", "ranks3", "--fuzz 3 --seed 1 --dtype fp16", 1,
     r"\(3 cases x fp16, on 2, 3 and 4 ranks in turn\)[\s\S]*--ranks 4 --seed 1 --check-only"),
    # its transport fixes the ranks (lesson 15's NCCL ring, one rank per GPU): graded once, --ranks refused
    ("ring", "", "-b 1 -H 2 -n 48 -d 64 --dtype fp16 --check-only", 0,
     r"\(1 cases x fp16, on 4 ranks, one per GPU\):\n    pass  custom fp16  B=1 H=2 N=48 d=64  ", {"HOSTSIM_RANKS_FIXED": "4"}),
    ("ring", "", "-b 1 -H 2 -n 48 -d 64 --ranks 3", 2, r"--ranks 3: lesson 15 runs here on 4 ranks, one per GPU; --ranks "
     r"sets the ranks of its virtual ring", {"HOSTSIM_RANKS_FIXED": "4"}),
    ("sol03", "", "-b 2 -H 3 -n 77 -d 64 --check-only", 0, r"1 of 1 cases passed"),
    ("sol03", "", "--causal", 2, r"lesson 03 does not support --causal \(causal masking starts in lesson 05\)"),
    ("sol05", "", "-b 1 -H 2 -n 130 -d 128 --causal --check-only", 0, r"1 of 1 cases passed"),
]


def sh(cmd, env=None):
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       errors="replace", env=env)
    return p.returncode, p.stdout


def build():
    """The six binaries in build/hostsim/forward/; an error text or None."""
    out = os.path.join(BUILD, "forward")
    os.makedirs(out, exist_ok=True)
    base = [CXX, "-O2", "-std=c++17", "-fopenmp", "-w", "-I" + CUDA_INC, "-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu"]
    for name, flag in (("fwd", "-DSTANDIN_DECODE=0"), ("dec", "-DSTANDIN_DECODE=1"), ("ring", "-DSTANDIN_RANKS=1")):
        rc, log = sh(base + [flag, "tests/hostsim/forward_lesson.cpp"] + OBJ +
                     ["-o", os.path.join(out, name), "-lm"])
        if rc:
            return log
    rc, log = sh(base + ["tests/hostsim/fp8_lesson.cpp"] + OBJ + ["-o", os.path.join(out, "fp8"), "-lm"])
    if rc:
        return log
    for n in ("03", "05"):
        src = sorted(glob.glob(os.path.join(ROOT, "solutions", n + "-*", "*.cu")))
        if not src:
            return "no solutions/%s-*/*.cu" % n
        kcpp = os.path.join(out, "kernel%s.cpp" % n)
        rc, log = sh(["python3", "tests/fp32_emu/prep.py", src[0], kcpp])
        if rc:
            return log
        rc, log = sh([CXX, "-O2", "-std=c++20", "-fopenmp", "-w", "-Itests/fp32_emu", "-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu", "-x", "c++", kcpp,
                      "-x", "none"] + OBJ + ["-o", os.path.join(out, "sol" + n), "-lpthread", "-lm"])
        if rc:
            return log
    return None


def run_checks(checks, folder, dump):
    """Runs each check (CHECKS' form) from folder, where its binary is, so that the rerun lines say
    ./NAME; prints a line per check (and the output of each that fails), writes each output to
    dump/NN.txt when dump is set. Returns how many failed."""
    if dump:
        os.makedirs(dump, exist_ok=True)
    bad = 0
    for k, (binary, bug, args, want_rc, want, *more_env) in enumerate(checks, 1):
        env = dict(os.environ)
        env.pop("HOSTSIM_BUG", None)
        env.update(*more_env)
        if bug:
            env["HOSTSIM_BUG"] = bug
        p = subprocess.run(["./" + binary] + args.split(), cwd=folder, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, errors="replace")
        ok = p.returncode == want_rc and re.search(want, p.stdout) is not None
        bad += not ok
        label = ("HOSTSIM_BUG=%s " % bug if bug else "") + binary + " " + args
        print("%s  %-84s exit %d" % ("ok  " if ok else "FAIL", label[:84], p.returncode))
        if not ok:
            print("      expected exit %d and /%s/; the output was:" % (want_rc, want))
            print("      " + p.stdout.replace("\n", "\n      "))
        if dump:
            with open(os.path.join(dump, "%02d.txt" % k), "w") as f:
                f.write("%s\n%s\nexit %d\n" % (label, p.stdout, p.returncode))
    return bad


def run_suite(name, build_fn, checks, what):
    """`make NAME`: build (an error text or None), then every check; the summary line names what the
    checks cover. Exit status 0 when all hold. Shared by the host simulations of this folder."""
    dump = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--dump" else None
    err = build_fn()
    if err:
        print(err)
        print("%s: the build failed" % name)
        return 1
    bad = run_checks(checks, os.path.join(BUILD, name.split("-", 1)[1]), dump)
    print("%s: %d of %d checks of %s hold" % (name, len(checks) - bad, len(checks), what))
    return 1 if bad else 0


def main():
    return run_suite("hostsim-forward", build, CHECKS,
                     "the forward runner (stand-in lessons and solutions 03, 05 over a fake CUDA runtime)")


if __name__ == "__main__":
    sys.exit(main())
