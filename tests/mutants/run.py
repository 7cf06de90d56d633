#!/usr/bin/env python3
"""tests/mutants/run.py: does the grader reject wrong kernels?

Every file tests/mutants/NN/<name>.mut plants one classic bug in lesson NN's
solution by exact text substitution (format: tests/mutants/README.md). For each
mutant this script copies the solution to build/mutants/NN-<name>/, applies the
substitution (the `from` text must occur exactly once, else "does not apply",
a failure: mutants must follow the solutions), links it exactly like the
Makefile's link_lesson, runs it with --check-only, and requires
    exit status != 0  and  the `expect` regex (Python re, ERE-like) in its output.
Mutants marked `emu: N` (lesson 07 or 08) that pass on the GPU are run through the CPU
warp emulator (`make emu-0N EMU0N_SRC=...`), whose cp.async hazard tracking rejects bugs
the hardware's timing hides.
Mutants marked `racecheck:` may instead be rejected by compute-sanitizer's
racecheck on the given small shape: an output race does not always show in the
outputs or in the grader's determinism re-run.

Usage (normally through make, which passes the compiler flags in the environment):
    run.py cpu|gpu|all|build [--equiv] [--md FILE]
  cpu    lesson 01's mutants (no GPU needed)
  gpu    lessons 02+ (needs a GPU), plus the check that `make grade` reports the
         hang mutant as a timeout and goes on with the next lesson
  all    both
  apply  check that every mutant still applies to its solution (nothing is built)
  emu    the mutants marked `emu: N` on the CPU emulator alone (`make emu-NN EMUNN_SRC=...`;
         `emu: cases`: the lesson's CPU path, `make emu-solutionN EMU_FILE=...`,
         no GPU needed): each must make the emulator fail (exit status != 0); its first
         EMU ERROR / EMU HANG / EMU FAILED line is the diagnosis shown (MUTANTS="a b": those)
  build  apply and compile the GPU mutants only (no GPU needed); with --equiv
         also compare each mutant's machine code, kernels and host code, with the solution's (the same = the
         planted bug changes nothing = a useless mutant), each source padded with blank lines so that
         a substitution that adds or drops lines moves no __LINE__ of the host code
Environment: CC CFLAGS NVCC NVCC_FLAGS ARCH_FLAGS SM90A_FLAGS ARCH_TAG HARNESS_C_OBJ
HARNESS_CU_OBJ HARNESS_BWD_CU_OBJ (from make), LESSONS="2 7" (subset), MUTANTS_SEED (default 1),
MUTANTS_JOBS (parallel builds, default: CPU count), MUTANTS_RUN_JOBS (mutants graded at
the same time, default 1; each is its own process, so a few can share a GPU),
MUTANTS_STRICT=1 (known grader gaps count as failures).
Exit status: 0 every mutant rejected with the expected diagnosis, 1 otherwise,
4 gpu mode without a GPU.
"""
import concurrent.futures as cf
import datetime
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "mutants")
SEED = os.environ.get("MUTANTS_SEED", "1")
STRICT = os.environ.get("MUTANTS_STRICT") == "1"
RUN_LIMIT_S = 900  # whole-process safety net; the harness's own --timeout stops hung kernels
KNOWN_KEYS = {"what", "expect", "ideal", "gap", "racecheck", "emu", "exit", "args"}
# Lines that carry a diagnosis, in the order we prefer to show them.
DIAG_RE = re.compile(r"diagnosis:|race suspected|causal: future|TIMEOUT|CUDA error|attention_forward returned|"
                     r"m: expected|l: expected|y: \d+ of|hint:|not supported|out of memory")
RACE_RE = re.compile(r"Race reported|RACECHECK SUMMARY: [1-9]\d* hazards? displayed|Potential \w+ hazard")


def env(name, default=""):
    return os.environ.get(name, default)


class Mutant:
    def __init__(self, path):
        self.path = path
        self.lesson = int(os.path.basename(os.path.dirname(path)))
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.id = "%02d/%s" % (self.lesson, self.name)
        self.meta = {}
        self.subs = []  # [(from, to)]
        self.error = None
        self._parse()
        sol = sorted(glob.glob(os.path.join(ROOT, "solutions", "%02d-*" % self.lesson, "*.cu")) +
                     glob.glob(os.path.join(ROOT, "solutions", "%02d-*" % self.lesson, "*.c")))
        self.solution = sol[0] if sol else None
        self.gpu = self.solution is None or self.solution.endswith(".cu")
        self.dir = os.path.join(ROOT, "build", "mutants", "%02d-%s" % (self.lesson, self.name))
        self.binary = os.path.join(self.dir, "bin")

    def _parse(self):
        with open(self.path) as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        block, buf, cur_from = None, [], None

        def close():
            nonlocal cur_from
            text = "".join(l + "\n" for l in buf)
            if block == "from":
                cur_from = text
            elif block == "to":
                self.subs.append((cur_from, text))
                cur_from = None

        for ln in lines:
            if ln in ("@@ from", "@@ to", "@@ end"):
                if block is not None:
                    close()
                elif ln != "@@ from":
                    self.error = "bad format: '%s' before '@@ from'" % ln
                block, buf = ln[3:], []
                if block == "to" and cur_from is None:
                    self.error = "bad format: '@@ to' without '@@ from'"
                if block == "end":
                    block = None
                continue
            if block is not None:
                buf.append(ln)
            elif ln.strip() and not ln.startswith("#"):
                k, sep, v = ln.partition(":")
                if not sep or k.strip() not in KNOWN_KEYS:
                    self.error = "bad header line: %r" % ln
                else:
                    self.meta[k.strip()] = v.strip()
        if block is not None:
            self.error = "bad format: missing '@@ end'"
        if not self.subs and not self.error:
            self.error = "no substitution"
        for k in ("what", "expect"):
            if k not in self.meta and not self.error:
                self.error = "missing '%s:' line" % k

    def apply(self):
        """Writes the mutated solution into self.dir; returns an error string or None."""
        if self.error:
            return self.error
        if not self.solution:
            return "no solution file in solutions/%02d-*/" % self.lesson
        with open(self.solution) as f:
            text = f.read()
        for k, (a, b) in enumerate(self.subs):
            n = text.count(a)
            if n != 1:
                first = a.strip().split("\n")[0][:60]
                return "does not apply: substitution %d's from-text ('%s...') occurs %d times in %s" % (
                    k + 1, first, n, os.path.relpath(self.solution, ROOT))
            text = text.replace(a, b)
        os.makedirs(self.dir, exist_ok=True)
        self.src = os.path.join(self.dir, os.path.basename(self.solution))
        old = open(self.src).read() if os.path.exists(self.src) else None
        if old != text:  # unchanged text keeps its time stamp: no rebuild
            with open(self.src, "w") as f:
                f.write(text)
        return None

    def line_aligned(self):
        """For the machine-code comparison (build --equiv): the mutant's and the solution's
        sources written with the same number of lines at every substitution (blank lines after
        the shorter text), as (mutant path, solution path or None when the solution needs no
        padding). Host code holds __LINE__ (a CUDA check's message), so a substitution that
        adds or drops lines would otherwise move every later line and never compare equal.
        Each is written in a folder beside self.dir, under the solution's file name, so that
        the source's relative includes and the compiled names stay those of the solution."""
        sol = text = mut = open(self.solution).read()
        for a, b in self.subs:
            na, nb = a.count("\n"), b.count("\n")
            mut = mut.replace(a, b + "\n" * max(0, na - nb))
            text = text.replace(a, a + "\n" * max(0, nb - na))
        out = []
        for suffix, body in (("lines", mut), ("solution-lines", text if text != sol else None)):
            if body is None:
                out.append(None)
                continue
            path = os.path.join(self.dir + "." + suffix, os.path.basename(self.solution))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(body)
            out.append(path)
        return tuple(out)


def sh(cmd, cwd=ROOT, timeout=None):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                       universal_newlines=True, errors="replace")
    return p.returncode, p.stdout


def link_cmd(src, out):
    """The Makefile's link_lesson, with the flags make passed in the environment."""
    c_obj = shlex.split(env("HARNESS_C_OBJ"))
    if src.endswith(".c"):
        return [env("CC", "cc")] + shlex.split(env("CFLAGS")) + ["-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu", src, "build/host/runner_softmax.o"] + \
            c_obj + ["-o", out, "-lm"]
    runner = env("HARNESS_BWD_CU_OBJ") if descriptor(src)["runner"] == "backward" else env("HARNESS_CU_OBJ")
    return [env("NVCC", "nvcc")] + shlex.split(env("NVCC_FLAGS")) + arch_flags(src) + \
        ["-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu", src] + \
        library_objects(src) + shlex.split(runner) + c_obj + ["-o", out, "-lgomp"]


LIBRARY_OBJECTS, LIBRARY_LOCK = {}, threading.Lock()


def library_objects(src):
    """The objects of the libraries src uses besides the runner: where a header it includes names
    another source as its implementation (`[implemented in PATH]`, reference/tools/source_hash.py;
    lesson 15: reference/include/hopper_attention.h, lesson 09's kernel), `make link-objects-N`
    builds them and prints their paths (the Makefile). Once per lesson."""
    d = descriptor(src)
    sol = os.path.join(ROOT, "solutions", d["name"], d["source"])  # src's includes, found from its folder
    n = int(d["name"][:2])
    with LIBRARY_LOCK:
        if n not in LIBRARY_OBJECTS:
            impls = [os.path.realpath(os.path.join(ROOT, p)) for h in headers_of(sol, [sol])[1:]
                     for p in IMPLEMENTED_RE.findall(open(h, errors="replace").read())]
            uses = any(p != os.path.realpath(sol) for p in impls)
            rc, log = sh(["make", "-s", "--no-print-directory", "link-objects-%d" % n]) if uses else (0, "")
            if rc:
                print("library objects of lesson %d: make link-objects-%d failed:\n%s" % (n, n, log), flush=True)
            LIBRARY_OBJECTS[n] = [w for w in log.split() if w.endswith(".o") and os.path.isfile(os.path.join(ROOT, w))]
        return LIBRARY_OBJECTS[n]


sys.path.insert(0, os.path.join(ROOT, "reference", "tools"))
from lessons import lessons  # noqa: E402  (reference/tools/lessons.py: the lessons' descriptors)
from source_hash import headers_of, IMPLEMENTED_RE  # noqa: E402  (the files a source includes)
DESCRIPTORS = lessons(ROOT)


def descriptor(src):
    """The descriptor (lessons/NN-*/lesson.mk) of the lesson whose folder holds src."""
    return DESCRIPTORS[int(os.path.basename(os.path.dirname(os.path.abspath(src)))[:2])]


def arch_flags(src):
    """The Makefile's arch_of: a lesson whose descriptor says arch := sm_90a gets SM90A_FLAGS."""
    if descriptor(src)["arch"] == "sm_90a":
        return shlex.split(env("SM90A_FLAGS", "-gencode arch=compute_90a,code=sm_90a"))
    return shlex.split(env("ARCH_FLAGS"))


def elf_text(path, host=False):
    """Bytes of every .text.* section (the kernels' machine code) of an ELF cubin, by name; with
    host, of every .text and .text.* section of a host object (its functions' machine code)."""
    import struct
    with open(path, "rb") as f:
        b = f.read()
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + k * shentsize) for k in range(shnum)]
    stroff = secs[shstrndx][4]
    out = {}
    for name, _typ, _fl, _addr, off, size, *_ in secs:
        nm = b[stroff + name:b.index(b"\0", stroff + name)].decode()
        if nm.startswith(".text.") or (host and nm == ".text"):
            out[nm] = b[off:off + size]
    return out


def sass(src, out):
    """Machine code of one .cu: its kernels compiled for the single target arch (no line info) and
    its host functions, or None. A bug in host code (the launch, the ring's bookkeeping) changes
    only the second."""
    cubin, obj = out + ".cubin", out + ".host.o"
    flags = [f for f in shlex.split(env("NVCC_FLAGS")) if f != "-lineinfo"]
    base = [env("NVCC", "nvcc")] + flags + arch_flags(src) + ["-Ireference/include", "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu"]
    rc, log = sh(base + ["-cubin", "-o", cubin, src])
    if rc == 0:
        rc, log = sh(base + ["-c", "-o", obj, src])
    if rc:
        return None
    try:
        return elf_text(cubin), elf_text(obj, host=True)
    except Exception:
        return None


SASS_OF, SASS_LOCK = {}, threading.Lock()


def build(m, equiv=False):
    """Returns (ok, message)."""
    err = m.apply()
    if err:
        return False, err
    cmd = link_cmd(m.src, m.binary)
    deps = [m.src] + [a for a in cmd if a.endswith((".o", ".c")) and os.path.exists(os.path.join(ROOT, a))] + \
        glob.glob(os.path.join(ROOT, "reference", "*", "*.h"))
    stamp = os.path.join(m.dir, "build.cmd")
    same_cmd = os.path.exists(stamp) and open(stamp).read() == " ".join(cmd)
    if same_cmd and os.path.exists(m.binary) and \
            os.path.getmtime(m.binary) > max(os.path.getmtime(os.path.join(ROOT, d)) for d in deps):
        rc, log = 0, "(up to date)"
    else:
        if os.path.exists(m.binary):
            os.remove(m.binary)
        rc, log = sh(cmd)
        with open(stamp, "w") as f:
            f.write(" ".join(cmd) if rc == 0 else "")
    with open(os.path.join(m.dir, "build.log"), "w") as f:
        f.write(log)
    if rc:
        errs = [l for l in log.split("\n") if "error" in l]
        return False, "build error: " + (errs[0].strip() if errs else log.strip()[-200:])
    if equiv and m.gpu:
        mut_src, sol_src = m.line_aligned()
        if sol_src:  # the mutant adds lines: the solution padded to match, compiled for it alone
            b = sass(sol_src, os.path.join(os.path.dirname(sol_src), "solution"))
        else:
            with SASS_LOCK:  # the solution's SASS once per solution
                if m.solution not in SASS_OF:
                    d = os.path.join(ROOT, "build", "mutants", "solution-%02d" % m.lesson)
                    os.makedirs(d, exist_ok=True)
                    SASS_OF[m.solution] = sass(m.solution, os.path.join(d, "solution"))
            b = SASS_OF[m.solution]
        a = sass(mut_src, os.path.join(os.path.dirname(mut_src), "mutant"))
        if a is None or b is None:
            return False, "machine-code comparison failed (needs GPU_ARCH=<one arch>)"
        if a == b:
            return False, "EQUIVALENT: the mutant compiles to the solution's machine code, kernels and host code (the planted bug changes nothing)"
    return True, "builds"


def trim(line, expect=None, width=110):
    line = re.sub(r"\s+", " ", line.strip())
    if line.startswith("diagnosis: "):
        line = line[len("diagnosis: "):]
    m = re.search(expect, line) if expect else None
    start = 0
    if m is not None and len(line) > width:
        start = max(0, min(m.start() - 25, len(line) - width))
    out = line[start:start + width]
    return ("..." if start else "") + out + ("..." if start + width < len(line) else "")


def given(output, expect=None):
    """The line that carries the diagnosis: the expected one if present, else the first diagnosis-like line."""
    lines = output.split("\n")
    if expect:
        for ln in lines:
            if re.search(expect, ln):
                return trim(ln, expect)
        m = re.search(expect, output, re.M)  # a match over several lines: show its last line
        if m:
            return trim(output[output.rfind("\n", 0, m.end() - 1) + 1:].split("\n")[0])
    for pattern in (DIAG_RE, re.compile("FAIL")):
        for ln in lines:
            if pattern.search(ln):
                return trim(ln)
    rest = [l for l in lines if l.strip()]
    return trim(rest[-1]) if rest else "(no output)"


def run_one(m):
    """Returns (verdict, ok, diagnosis given)."""
    cmd = [m.binary, "--check-only", "--seed", SEED] + (["--timeout", "5"] if m.gpu else []) + \
        shlex.split(m.meta.get("args", ""))
    t0 = time.time()
    try:
        rc, out = sh(cmd, timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired:
        return "runner did not finish in %d s" % RUN_LIMIT_S, False, ""
    m.seconds = time.time() - t0
    with open(os.path.join(m.dir, "run.log"), "w") as f:
        f.write("$ %s\n%s\nexit status %d\n" % (" ".join(cmd), out, rc))
    expect = m.meta["expect"]
    gap = m.meta.get("gap")
    found = rc not in (0, 2, 3, 4) and re.search(expect, out, re.M)
    if found and "exit" in m.meta and rc != int(m.meta["exit"]):
        return "wrong exit status %d (expected %s)" % (rc, m.meta["exit"]), False, given(out)
    if not found and "racecheck" in m.meta:
        # the race did not show in the outputs: ask racecheck on a small shape
        sanitizer = shutil.which("compute-sanitizer") or next(
            (p for p in (os.path.join(os.path.dirname(shutil.which(env("NVCC", "nvcc")) or ""), "compute-sanitizer"),
                         "/usr/local/cuda/bin/compute-sanitizer") if os.path.exists(p)), None)
        if not sanitizer:
            return "race not seen, no compute-sanitizer", False, given(out)
        rcmd = [sanitizer, "--tool", "racecheck", "--racecheck-report", "hazard", m.binary,
                "--check-only", "--seed", SEED, "--timeout", "120"] + shlex.split(m.meta["racecheck"])
        try:
            _, rout = sh(rcmd, timeout=RUN_LIMIT_S)
        except subprocess.TimeoutExpired:
            rout = ""
        with open(os.path.join(m.dir, "racecheck.log"), "w") as f:
            f.write("$ %s\n%s\n" % (" ".join(rcmd), rout))
        rm = RACE_RE.search(rout)
        if rm:
            line = rout[rout.rfind("\n", 0, rm.start()) + 1:].split("\n")[0]
            return "rejected (racecheck)", True, "racecheck: " + trim(line.lstrip("= "))
    if not found and "emu" in m.meta:
        # a bug whose window the hardware never opens (e.g. a missing cp.async wait that
        # the copy engine always beats): the CPU warp emulator lands copies as late as
        # the PTX rules allow and tracks every cp.async hazard (tests/warp_emu)
        ecmd = emu_command(m)
        try:
            erc, eout = sh(ecmd, timeout=RUN_LIMIT_S)
        except subprocess.TimeoutExpired:
            erc, eout = 0, ""
        with open(os.path.join(m.dir, "emu.log"), "w") as f:
            f.write("$ %s\n%s\nexit status %d\n" % (" ".join(ecmd), eout, erc))
        hz = re.search(r"^.*(hazard|HAZARD).*$", eout, re.M)
        if erc != 0:
            return "rejected (emulator)", True, "emulator: " + trim(hz.group(0) if hz else "EMU FAILED")
    if rc == 0:
        if gap:
            return "ACCEPTED (known gap)", not STRICT, "gap: " + gap
        return "ACCEPTED", False, given(out)
    if rc in (2, 3, 4):
        return "not graded (exit %d)" % rc, False, given(out)
    if not found:
        return "wrong diagnosis", False, given(out)
    diag = given(out, expect)
    ideal = m.meta.get("ideal")
    verdict = "rejected"
    if ideal and not re.search(ideal, out, re.M):
        verdict = "rejected (gap: weak diagnosis)"
        if STRICT:
            return verdict, False, diag
    elif ideal:
        verdict = "rejected (ideal met: make it the expect)"
    elif gap:
        verdict = "rejected (gap not seen this run)"
    return verdict, True, diag


def grade_moves_on(hang):
    """`make grade` on a scratch tree whose lesson 02 hangs: the row must say timeout and the
    next lesson must still be graded. Returns (verdict, ok, given)."""
    nxt = sorted(d for d in glob.glob(os.path.join(ROOT, "solutions", "[0-9][0-9]-*"))
                 if int(os.path.basename(d)[:2]) > hang.lesson and glob.glob(os.path.join(d, "*.cu")))
    if not nxt:
        return "skipped: no solution after lesson %02d" % hang.lesson, True, ""
    tree = os.path.join(ROOT, "build", "mutants", "grade-tree")
    shutil.rmtree(tree, ignore_errors=True)
    for sub in ("reference", "mk"):
        shutil.copytree(os.path.join(ROOT, sub), os.path.join(tree, sub))
    shutil.copy2(os.path.join(ROOT, "Makefile"), tree)
    # the two lessons' folders: their descriptors (lesson.mk) say how the Makefile builds them
    for sol in (os.path.dirname(hang.solution), nxt[0]):
        name = os.path.basename(sol)
        shutil.copytree(os.path.join(ROOT, "lessons", name), os.path.join(tree, "lessons", name))
    for sub in ("host", env("ARCH_TAG")):
        if sub and os.path.isdir(os.path.join(ROOT, "build", sub)):
            shutil.copytree(os.path.join(ROOT, "build", sub), os.path.join(tree, "build", sub))
    if os.path.exists(os.path.join(ROOT, "build", "arch-stamp")):
        shutil.copy2(os.path.join(ROOT, "build", "arch-stamp"), os.path.join(tree, "build"))
    hdir = os.path.join(tree, "solutions", os.path.basename(os.path.dirname(hang.solution)))
    os.makedirs(hdir)
    shutil.copy2(hang.src, hdir)
    shutil.copytree(nxt[0], os.path.join(tree, "solutions", os.path.basename(nxt[0])))
    rc, out = sh(["bash", "reference/tools/grade.sh", "solutions"], cwd=tree, timeout=RUN_LIMIT_S)
    with open(os.path.join(ROOT, "build", "mutants", "grade-tree.log"), "w") as f:
        f.write(out)
    hname, nname = os.path.basename(hdir), os.path.basename(nxt[0])
    hrow = [l for l in out.split("\n") if l.startswith(hname)]
    nrow = [l for l in out.split("\n") if l.startswith(nname)]
    ok = bool(hrow) and re.search(r"\btimeout\b", hrow[0]) is not None and bool(nrow)
    shown = " / ".join(re.sub(r"\s+", " ", r) for r in hrow[:1] + nrow[:1]) or trim(out)
    return ("rejected (timeout; next lesson graded)" if ok else "FAILED: see build/mutants/grade-tree.log"), ok, shown


def apply_all():
    """`run.py apply`: every mutant's substitutions still apply to its solution (each from-text
    occurs exactly once), without building anything; a mutant that no longer applies is a
    mutant that silently stopped testing the grader."""
    want = set(int(x) for x in env("LESSONS").replace(",", " ").split())
    mutants = [Mutant(p) for p in sorted(glob.glob(os.path.join(HERE, "[0-9][0-9]", "*.mut")))]
    mutants = [m for m in mutants if not want or m.lesson in want]
    bad = [(m, m.apply()) for m in mutants]
    bad = [(m, e) for m, e in bad if e]
    for m, e in bad:
        print("  %-34s %s" % (m.id, e))
    print("mutants-apply: %d of %d mutants apply to their solutions" % (len(mutants) - len(bad), len(mutants)))
    return 1 if bad else 0


def emu_command(m):
    """The emulator run of mutant m: `emu: N`, lesson N's emulator driver (make emu-NN
    EMUNN_SRC=...); `emu: cases`, the lesson's CPU path with its descriptor's runner cases
    (make emu-solutionN EMU_FILE=...), which is what a student's make emu-lessonN runs."""
    n = m.meta["emu"].strip()
    if n == "cases":
        return ["make", "-s", "--no-print-directory", "emu-solution%d" % m.lesson,
                "EMU_FILE=%s" % os.path.relpath(m.src, ROOT)]
    return ["make", "-s", "--no-print-directory", "emu-%02d" % int(n), "EMU%02d_SRC=%s" % (int(n), os.path.relpath(m.src, ROOT))]


def emu_diagnosis(out):
    """The emulator's verdict in one line: its hang report or first error, else the first failed case."""
    for pattern in (r"^EMU HANG.*$", r"^EMU ERROR.*$", r"^.*\bFAIL\b.*$", r"^EMU FAILED.*$"):
        line = re.search(pattern, out, re.M)
        if line:
            return trim(line.group(0))
    return None


def emu_one(m):
    """`run.py emu`, one mutant: (verdict, ok, diagnosis) from its lesson's emulator target."""
    err = m.apply()
    if err:
        return "does not apply", False, err
    ecmd = emu_command(m)
    try:
        erc, eout = sh(ecmd, timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired:
        erc, eout = 124, "TIMEOUT after %d s" % RUN_LIMIT_S
    with open(os.path.join(m.dir, "emu.log"), "w") as f:
        f.write("$ %s\n%s\nexit status %d\n" % (" ".join(ecmd), eout, erc))
    diag = emu_diagnosis(eout) or "exit status %d" % erc
    if erc != 0:
        # a CPU path that runs the real grader (lesson 15's) prints its diagnosis: show the expected one
        found = re.search(m.meta["expect"], eout, re.M)
        return "rejected (emulator)", True, given(eout, m.meta["expect"]) if found else diag
    return "ACCEPTED by the emulator", False, diag


def emu_all():
    """`run.py emu`: every `emu:` mutant (LESSONS picks lessons) through its emulator."""
    want = set(int(x) for x in env("LESSONS").replace(",", " ").split())
    mutants = [Mutant(p) for p in sorted(glob.glob(os.path.join(HERE, "[0-9][0-9]", "*.mut")))]
    mutants = [m for m in mutants if "emu" in m.meta and (not want or m.lesson in want)]
    names = env("MUTANTS").split()  # MUTANTS="ring-overrun wrong-phase": those only
    mutants = [m for m in mutants if not names or m.name in names]
    rows = []
    for m in mutants:
        t0 = time.time()
        verdict, ok, diag = emu_one(m)
        rows.append((m, verdict, ok, diag))
        print("  %-34s %-24s %5.0f s  %s" % (m.id, verdict if ok else "!! " + verdict, time.time() - t0, diag[:110]),
              flush=True)
    bad = [r for r in rows if not r[2]]
    print("mutants-emu: %d of %d emulator mutants rejected by the emulator" % (len(rows) - len(bad), len(rows)))
    return 1 if bad else 0


def md_escape(s):
    return s.replace("|", "\\|")


def main():
    args = sys.argv[1:]
    mode = args[0] if args else "all"
    equiv = "--equiv" in args
    md = args[args.index("--md") + 1] if "--md" in args else None
    if mode == "apply":
        return apply_all()
    if mode == "emu":
        return emu_all()
    if mode not in ("cpu", "gpu", "all", "build"):
        print(__doc__)
        return 2
    want = set(int(x) for x in env("LESSONS").replace(",", " ").split())
    mutants = [Mutant(p) for p in sorted(glob.glob(os.path.join(HERE, "[0-9][0-9]", "*.mut")))]
    mutants = [m for m in mutants if not want or m.lesson in want]
    names = env("MUTANTS").split()  # MUTANTS="causal-bh-remap ...": those only
    mutants = [m for m in mutants if not names or m.name in names]
    if mode == "cpu":
        mutants = [m for m in mutants if not m.gpu]
    elif mode in ("gpu", "build"):
        mutants = [m for m in mutants if m.gpu]
    has_gpu = subprocess.run("nvidia-smi -L", shell=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode == 0
    if mode in ("gpu", "all") and any(m.gpu for m in mutants) and not has_gpu:
        if mode == "gpu":
            print("make mutants: the mutants of lessons 02+ need an NVIDIA GPU (nvidia-smi found none).\n"
                  "  Without one, `make mutants-build GPU_ARCH=90` checks that they still apply and compile.")
            return 4
        print("note: no NVIDIA GPU: only the CPU mutants run here (`make mutants-gpu` on a GPU for the rest)")
        mutants = [m for m in mutants if not m.gpu]
    os.makedirs(os.path.join(ROOT, "build", "mutants"), exist_ok=True)
    jobs = int(env("MUTANTS_JOBS", str(os.cpu_count() or 2)))
    print("== %d mutants: building (%d at a time)" % (len(mutants), jobs), flush=True)
    with cf.ThreadPoolExecutor(max_workers=jobs) as ex:
        built = dict(zip([m.id for m in mutants], ex.map(lambda m: build(m, equiv), mutants)))
    def outcome(m):
        ok, msg = built[m.id]
        if not ok:
            return (m, msg.split(":")[0], False, msg)
        if mode == "build":
            return (m, "builds", True, "")
        return (m,) + run_one(m)

    # Each mutant is its own process with its own inputs: several can share the GPU without
    # changing a verdict (a hang is stopped by its own --timeout); rows print in order.
    run_jobs = int(env("MUTANTS_RUN_JOBS", "1"))
    rows = []
    with cf.ThreadPoolExecutor(max_workers=max(1, run_jobs)) as ex:
        for row in ex.map(outcome, mutants):
            rows.append(row)
            print("  %-34s %-14s %s" % (row[0].id, row[1] if row[2] else "!! " + row[1], row[3][:90]), flush=True)
    hang = [m for m in mutants if m.name == "hang" and built[m.id][0]]
    extra = None
    if mode in ("gpu", "all") and hang and has_gpu:
        print("== make grade with the hang mutant as lesson %02d (20 s default --timeout)" % hang[0].lesson, flush=True)
        extra = grade_moves_on(hang[0])
    # the table
    w = max([len(m.id) for m in mutants] + [22])
    head = "%-*s | %-42s | %-26s | %s" % (w, "mutant", "expected diagnosis (regex)", "verdict", "diagnosis given")
    print("\n" + head + "\n" + "-" * len(head))
    for m, verdict, good, diag in rows:
        print("%-*s | %-42s | %-26s | %s" % (w, m.id, m.meta.get("expect", "")[:42], verdict, diag))
    if extra:
        print("%-*s | %-42s | %-26s | %s" % (w, "make grade + 02/hang", "timeout row, next lesson graded", extra[0], extra[2]))
    bad = [r for r in rows if not r[2]] + ([extra] if extra and not extra[1] else [])
    gaps = [r for r in rows if r[1] in ("ACCEPTED (known gap)", "rejected (gap: weak diagnosis)")]
    nbad = len([r for r in rows if not r[2]])
    if mode == "build":
        print("\n%d mutants: %d apply and build, %d do not (build only: nothing was run)" % (
            len(rows), len(rows) - nbad, nbad))
    else:
        print("\n%d mutants: %d rejected as expected, %d not%s" % (
            len(rows), len(rows) - nbad, nbad,
            "; %d known grader gaps (tests/mutants/README.md)" % len(gaps) if gaps else ""))
    if md or (mode in ("gpu", "all") and has_gpu and mode != "build"):
        write_md(md, rows, extra)
    return 1 if bad else 0


def write_md(path, rows, extra):
    """docs/results/mutants-<gpu>.md: one row per mutant. A run of some lessons (LESSONS=...)
    replaces their rows and keeps the others' rows from earlier runs; the last column says
    which run (date, commit) each row comes from."""
    gpu = subprocess.run("nvidia-smi --query-gpu=name --format=csv,noheader", shell=True, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True).stdout.strip().split("\n")[0]
    slug = re.sub(r"[^a-z0-9-]", "", gpu.lower().replace(" ", "-")) or "no-gpu"
    path = path or os.path.join(ROOT, "docs", "results", "mutants-%s.md" % slug)
    commit = os.environ.get("GIT_COMMIT") or sh(["git", "rev-parse", "--short", "HEAD"])[1].strip()
    dirty = "" if os.environ.get("GIT_COMMIT") else sh(["git", "status", "--porcelain", "--", "solutions", "reference", "tests/mutants"])[1].strip()
    run = "%s %s%s" % (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), commit, "+" if dirty else "")
    table = {}
    if os.path.exists(path):  # rows of mutants not run this time (other lessons) stay
        with open(path) as f:
            for ln in f:
                mm = re.match(r"\| (\d\d/[\w.-]+|make grade \+ 02/hang) \|", ln)
                if mm:
                    table[mm.group(1)] = ln.rstrip("\n")
    for m, verdict, good, diag in rows:
        table[m.id] = "| %s | %s | `%s` | %s | %s | %s |" % (
            m.id, md_escape(m.meta.get("what", "")), md_escape(m.meta.get("expect", "")),
            verdict if good else "**%s**" % verdict, md_escape(diag), run)
    if extra:
        table["make grade + 02/hang"] = ("| make grade + 02/hang | `make grade` with lesson 02 hanging | timeout row, "
                                         "next lesson graded | %s | %s | %s |" % (
                                             extra[0] if extra[1] else "**%s**" % extra[0], md_escape(extra[2]), run))
    have = set(glob.glob(os.path.join(HERE, "[0-9][0-9]", "*.mut")))
    for k in list(table):  # mutants deleted since an earlier run
        if k[2:3] == "/" and os.path.join(HERE, k + ".mut") not in have:
            del table[k]
    lines = ["# Mutant testing of the grader", "",
             "Every row is a solution with one planted bug (`tests/mutants/NN/NAME.mut`); the grader must reject "
             "it with a diagnosis that names the bug's class. Generated by `make mutants` (tests/mutants/README.md).",
             "", "- GPU: %s" % (gpu or "none"),
             "- seed %s, per-launch `--timeout 5`; the last column is the run (UTC date, commit; + = uncommitted "
             "changes) each row comes from" % SEED, "",
             "| mutant | what | expected diagnosis (regex) | verdict | diagnosis given | run |",
             "|---|---|---|---|---|---|"]
    lines += [table[k] for k in sorted(table)]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s" % os.path.relpath(path, ROOT))


if __name__ == "__main__":
    sys.exit(main())
