#!/usr/bin/env python3
"""tests/emu/report.py: the performance report of an emulator run, from the records the emulator wrote
(tests/emu/perf_report.h: EMU_REPORT_OUT), by line of the graded file.

    python3 tests/emu/report.py SRC RECORDS... [--lesson N]

Printed by tests/emu/grade.py after `make emu-lessonN` has graded every case correct (EMU_REPORT=0:
not at all; EMU_REPORT=full: nvcc's register report compiled here too). What it says:
  - shared memory, for each line of SRC that reads or writes it: requests (warp-wide instructions),
    wavefronts per request as Nsight Compute counts them and the ideal; a line with more wavefronts
    than the ideal has bank conflicts and is flagged, with its n-way (wavefronts / ideal);
  - cp.async (a pipeline of copies): the copies in flight while the kernel read a tile with
    ldmatrix; none ever in flight is flagged (a one-stage pipeline: no load overlaps any math);
  - TMA: the tiles landed (or landing) and not yet read when a wgmma read one;
  - wgmma: for each wait_group line, the groups it retired and how many had the kernel's other work
    (ex2, shuffles) run while they were in flight; none anywhere is flagged ("overlap: none");
  - register spills, from nvcc's report (make ptxas-lessonN) when it is already built.
Each flag is a line starting "FLAGGED:". Exit status 0 (2: bad command line)."""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
Site = collections.namedtuple("Site", "line kind requests wavefronts ideal text")


def case_pattern(binary, outcomes, env):
    """What the failing cases share, in the runner's own words (runner_main.cu, EMU_CASE_OUTCOMES):
    `outcomes` are "pass ARGS" / "fail ARGS" lines of cases an emulator grader ran one per run;
    prints the runner's diagnosis when some passed and some failed and a pattern fits."""
    if not (any(o.startswith("pass") for o in outcomes) and any(o.startswith("fail") for o in outcomes)):
        return
    p = subprocess.run(["./" + os.path.basename(binary)], cwd=os.path.dirname(binary), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, errors="replace",
                       env=dict(env, EMU_CASE_OUTCOMES="\n".join(outcomes)))
    if p.stdout.strip():
        print(p.stdout.rstrip())


def runner_lines(text, binary):
    """The real runner's output as an emulator grader shows it (tests/emu/grade.py,
    tests/hopper_emu/grade_host.py): a rerun line names `binary`, the emulator's build that ran the
    case (runnable as printed, where ./lessonN is a GPU build), and the banner's seed is the one
    every case of the emulator run uses, not a rerun hint for ./lessonN."""
    lines = [re.sub(r"rerun: \./\S+", "rerun: " + binary, l) for l in text.splitlines()]
    return [re.sub(r"^seed (\d+) \(rerun with --seed \d+\)$", r"seed \1 (every case of this emulator run)", l)
            for l in lines]


def parse(paths):
    """The records of the files, as lists of fields by record type (missing files are skipped)."""
    recs = collections.defaultdict(list)
    for p in paths:
        if os.path.exists(p):
            for row in open(p, errors="replace"):
                f = row.rstrip("\n").split("\t")
                recs[f[0]].append(f[1:])
    return recs


def addr2line(binary, pcs):
    """{pc: (file, line)} of return addresses in binary: the innermost inlined frame of the call's
    instruction (pc - 1)."""
    out = {}
    if not pcs:
        return out
    try:
        p = subprocess.run(["addr2line", "-a", "-p", "-i", "-e", binary] + ["%#x" % (pc - 1) for pc in pcs],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True)
    except OSError:
        return out
    # -a -p: "0xADDR: FILE:LINE" (the innermost frame), then " (inlined by) ..." lines for its callers
    for row in p.stdout.splitlines():
        m = re.match(r"0x([0-9a-f]+): (.*):(\d+)", row)
        if m:
            out[int(m.group(1), 16) + 1] = (m.group(2), int(m.group(3)))
    return out


class Source:
    """The graded file: its lines, and a record's (file, line, text) mapped to a line of it."""

    def __init__(self, path):
        self.path = os.path.realpath(path)
        self.lines = open(path, errors="replace").read().split("\n")
        self.index = collections.defaultdict(list)
        for k, l in enumerate(self.lines):
            self.index[l.strip()].append(k + 1)

    def text(self, n):
        return self.lines[n - 1].strip() if 1 <= n <= len(self.lines) else ""

    def locate(self, file, line, context=None):
        """The line of this file, or None: the same file, or (a build of it with variants applied,
        lines moved) the one line with the same text and the same three lines above it (context:
        those four texts, separated by \\x1f); a line a variant wrote matches none."""
        if os.path.realpath(file) == self.path:
            return line
        if not context:
            return None
        texts = [t.strip() for t in context.split("\x1f")]
        candidates = self.index.get(texts[-1], []) if texts[-1] else []
        same = [n for n in candidates if all(self.text(n - k) == texts[-1 - k] for k in range(1, len(texts)))]
        return same[0] if len(same) == 1 else None


def bank_sites(recs, src):
    """Shared-memory sites of the graded file, summed by (line, kind)."""
    total = collections.defaultdict(lambda: [0, 0, 0])
    for f in recs["smem"]:
        n = src.locate(f[0], int(f[1]), f[6] if len(f) > 6 else None)
        if n:
            t = total[(n, f[2])]
            for i in range(3):
                t[i] += int(f[3 + i])
    by_bin = collections.defaultdict(list)
    for f in recs["smempc"]:
        by_bin[f[0]].append(f)
    for binary, rows in by_bin.items():
        where = addr2line(binary, sorted({int(f[1], 16) for f in rows}))
        for f in rows:
            loc = where.get(int(f[1], 16))
            n = loc and src.locate(loc[0], loc[1])
            if n:
                t = total[(n, f[2])]
                for i in range(3):
                    t[i] += int(f[3 + i])
    return [Site(n, kind, r, w, i, src.text(n)) for (n, kind), (r, w, i) in sorted(total.items())]


def bank_report(sites):
    """Lines of the shared-memory table, and the flags."""
    out, flags = [], []
    if not sites:
        return out, flags
    out.append("  shared memory, by line (a request: one warp-wide instruction; wavefronts as Nsight Compute counts"
               " them, ideal: one per 128 bytes a phase moves):")
    out.append("    %5s  %-18s %9s %12s %7s %7s" % ("line", "access", "requests", "wavefr./req", "ideal", "ways"))
    for s in sites:
        per, ideal = s.wavefronts / s.requests, s.ideal / s.requests
        ways = s.wavefronts / s.ideal if s.ideal else 1.0
        mark = "  <- %.1f-way bank conflicts" % ways if s.wavefronts > s.ideal else ""
        out.append("    %5d  %-18s %9d %12.2f %7.2f %7.2f  %s%s" % (s.line, s.kind, s.requests, per, ideal, ways,
                                                                    s.text[:70], mark))
        if s.wavefronts > s.ideal:
            flags.append("line %d (%s): %.1f-way bank conflicts, %.2f extra wavefronts per request" %
                         (s.line, s.kind, ways, (s.wavefronts - s.ideal) / s.requests))
    if not flags:
        out.append("    no bank conflicts: every request took its ideal number of wavefronts")
    return out, flags


def ranges(recs, kind, src):
    """{line: [count, sum, min, max, text]} of the flight or tma records of the graded file."""
    total = {}
    for f in recs[kind]:
        n = src.locate(f[0], int(f[1]), f[6] if len(f) > 6 else None)
        if not n:
            continue
        c, s, lo, hi = (int(x) for x in f[2:6])
        t = total.setdefault(n, [0, 0, lo, hi])
        t[0] += c
        t[1] += s
        t[2], t[3] = min(t[2], lo), max(t[3], hi)
    return total


def range_table(total, src, head, what, plus=0):
    """A table of min / mean / max by line, each value + plus."""
    out = [head, "    %5s %8s %5s %6s %5s" % ("line", what, "min", "mean", "max")]
    for n, (c, s, lo, hi) in sorted(total.items()):
        out.append("    %5d %8d %5d %6.2f %5d  %s" % (n, c, lo + plus, s / c + plus, hi + plus, src.text(n)[:70]))
    return out


def flight_report(recs, src):
    total = ranges(recs, "flight", src)
    if not total:
        return [], []
    out = range_table(total, src, "  cp.async pipeline: stages in flight when a tile was read (the tile read, plus this"
                                  " thread's cp.async groups not yet waited for), by line of the ldmatrix:", "reads", 1)
    most = max(t[3] for t in total.values())
    flags = []
    if most == 0:
        flags.append("cp.async: stages in flight 1: no copy was ever in flight while the kernel read a tile, so no load"
                     " overlaps any math (a one-stage pipeline)")
    else:
        c, s = sum(t[0] for t in total.values()), sum(t[1] for t in total.values())
        out.append("    while the math read a tile, %.2f other tiles' copies were in flight on average (at most %d)"
                   % (s / c, most))
    return out, flags


def tma_report(recs, src):
    total = ranges(recs, "tma", src)
    if not total:
        return [], []
    out = range_table(total, src, "  TMA ring: tiles landed or landing and not yet read (the one read included) when a"
                                  " wgmma read one, by line of the wgmma:", "wgmmas")
    flags = []
    if max(t[3] for t in total.values()) <= 1:
        flags.append("TMA: stages in flight 1: no other tile had landed or was landing when a wgmma read one")
    return out, flags


def overlap_report(recs, src):
    total = collections.OrderedDict()
    for f in recs["overlap"]:
        n = src.locate(f[0], int(f[1]), f[5] if len(f) > 5 else None)
        key = n or "%s:%s" % (os.path.basename(f[0]), f[1])
        t = total.setdefault(key, [0, 0, 0, f[5].split("\x1f")[-1] if len(f) > 5 else ""])
        for i in range(3):
            t[i] += int(f[2 + i])
    if not total:
        return [], []
    out = ["  wgmma: the kernel's own work (ex2, shuffles) done while a GEMM group was in flight, by the wait_group"
           " line that retired the group:",
           "    %5s %8s %10s %10s" % ("line", "groups", "with work", "ops/group")]
    for key, (g, busy, ops, text) in sorted(total.items(), key=lambda kv: str(kv[0]).zfill(8)):
        header = not isinstance(key, int) and key.split(":")[0].endswith(".h")  # a shared header's line (lesson 17)
        line = (src.text(key)[:70] if isinstance(key, int) else
                text.strip()[:40] + ("  (%s, an included header)" % key if header else "  (a line the driver's variant adds)"))
        out.append("    %5s %8d %10d %10.1f  %s" % (key if isinstance(key, int) else "-", g, busy, ops / g if g else 0,
                                                   line))
    groups, busy = sum(t[0] for t in total.values()), sum(t[1] for t in total.values())
    flags = []
    # waits only in lines a step's variant adds: the given loop of an early step (lesson 09, steps 1-4),
    # which waits for every GEMM by design; nothing in the student's file to change
    given = all(not isinstance(k, int) and not k.split(":")[0].endswith(".h") for k in total)
    if busy == 0 and given:
        out.append("    overlap: none, in the given loop of this step (the lines above are the driver's, not yours: "
                   "an early step waits for every GEMM; the overlap comes with the step that writes the loop)")
    elif busy == 0:
        flags.append("wgmma overlap: none: every GEMM group was waited for before any other work ran (a "
                     "wgmma_wait<0> where a wait<1> would let the softmax run during the GEMM)")
    else:
        out.append("    overlap: %d of %d groups (%.0f%%) had work run while in flight" % (busy, groups, 100.0 * busy / groups))
    return out, flags


def ptxas_log(src, archs):
    """nvcc's report for src as make lessonN / solutionN built it (build/ptxas/<binary>.log, the text
    of tests/checks/ptxas_report.sh's cache), or None when there is none, or it is older than the
    file, the files beside it or the shared headers, or of other flags or architectures."""
    rel = os.path.relpath(os.path.realpath(src), ROOT)
    m = re.match(r"(lesson|solution)s/0?(\d+)-[^/]*/[^/]*$", rel)
    log = m and os.path.join(ROOT, "build", "ptxas", "%s%s.log" % (m.group(1), m.group(2)))
    if not log or not os.path.exists(log):
        return None
    head = open(log, errors="replace").readline()
    if "ptxas -v of %s, default flags," % rel not in head or any("code=sm_%s" % a not in head for a in archs):
        return None
    when = os.path.getmtime(log)
    deps = [os.path.join(os.path.dirname(src), f) for f in os.listdir(os.path.dirname(src))]
    deps += [os.path.join(ROOT, "reference", d, f) for d in os.listdir(os.path.join(ROOT, "reference"))
             if os.path.isdir(os.path.join(ROOT, "reference", d)) for f in os.listdir(os.path.join(ROOT, "reference", d))
             if f.endswith(".h")]
    return None if any(os.path.isfile(d) and os.path.getmtime(d) > when for d in deps) else open(log, errors="replace").read()


def spills_of(text, arch):
    """(kernels, the largest spill stores of one kernel) in ptxas's report, for sm_<arch>."""
    kernels, worst, on = 0, 0, False
    for line in text.splitlines():
        m = re.search(r"Compiling entry function .* for 'sm_(\w+)'", line)
        if m:
            on = m.group(1) == arch
            kernels += on
        m = re.search(r"(\d+) bytes spill stores", line)
        if on and m:
            worst = max(worst, int(m.group(1)))
    return kernels, worst


def spill_report(src, lesson, compile_here):
    """nvcc's spills for the file: its report as make built it (make lessonN, make ptxas-lessonN), or,
    compile_here, compiled now (tests/checks/ptxas_report.sh); a hint otherwise."""
    sys.path.insert(0, os.path.join(ROOT, "reference", "tools"))
    try:
        from lessons import lessons
        archs = (lessons(ROOT).get(lesson, {}).get("ptxas") or "").split()
    except Exception:  # noqa: BLE001 -- the report goes on without the descriptor
        archs = []
    if not archs:
        return [], []
    rel = os.path.relpath(os.path.realpath(src), ROOT)
    binary = "%s%d" % ("solution" if rel.startswith("solutions/") else "lesson", lesson)
    target = "make ptxas-" + binary
    text = ptxas_log(src, archs)
    if text is None and compile_here:
        p = subprocess.run(["bash", "tests/checks/ptxas_report.sh", rel, archs[-1]], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode != 0:  # nvcc rejects the file the emulator ran (the emulator brings its own PTX wrappers)
            errors = [l.strip() for l in p.stdout.splitlines() if "error" in l.lower()]
            first = errors[0] if errors else (p.stdout.strip().splitlines() or ["(no output)"])[-1]
            return ["  register spills: not read: nvcc does not compile this file for sm_%s: %s" % (archs[-1], first)], \
                   ["nvcc does not compile this file (sm_%s): the emulator ran its own PTX wrappers, a GPU build would "
                    "fail: %s" % (archs[-1], first)]
        text = p.stdout
    if text is None:
        if not rel.startswith(("lessons/", "solutions/")):  # a copy (EMU_FILE): make lessonN compiles the tree's file
            return ["  register spills: not read (no nvcc report of this file: EMU_REPORT=full compiles it here, "
                    "no GPU needed)"], []
        return ["  register spills: not read (no fresh nvcc report of this file: make %s keeps one, "
                "EMU_REPORT=full compiles it here; neither needs a GPU)" % binary], []
    kernels, worst = spills_of(text, archs[-1])
    out = ["  register spills (nvcc, sm_%s): %d kernels, %s" % (archs[-1], kernels,
           "none" if worst == 0 else "up to %d bytes of spill stores in one kernel (%s)" % (worst, target))]
    flags = ["register spills: up to %d bytes of spill stores in one kernel" % worst] if worst else []
    return out, flags


def report(src_path, record_paths, lesson=None, compile_here=False):
    """The report's lines and its flags."""
    src, recs = Source(src_path), parse(record_paths)
    out = ["Performance report (what the emulator counted in the cases above; %s):" % os.path.relpath(src_path, ROOT)]
    if not any(os.path.exists(p) for p in record_paths):
        # nothing written: the emulator could not write its counts, so "Nothing flagged" would be a false all-clear
        out.append("  NO COUNTS: the emulator wrote none to %s (its message above says why); this run's report "
                   "is empty, not clean" % ", ".join(os.path.relpath(p, ROOT) for p in record_paths))
        return out, ["no counts recorded: the report could not be made"]
    flags = []
    for part in (bank_report(bank_sites(recs, src)), flight_report(recs, src), tma_report(recs, src),
                 overlap_report(recs, src), spill_report(src_path, lesson, compile_here) if lesson else ([], [])):
        out += part[0]
        flags += part[1]
    if len(out) == 1:
        out.append("  nothing to report: no shared-memory access, pipeline or wgmma the emulator counts")
    out += ["FLAGGED: " + f for f in flags]
    if not flags:
        out.append("Nothing flagged.")
    return out, flags


def main(argv):
    args = [a for a in argv if not a.startswith("--lesson")]
    lesson = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--lesson=")), None)
    if len(args) < 2:
        print(__doc__)
        return 2
    lines, _ = report(args[0], args[1:], lesson, os.environ.get("EMU_REPORT") == "full")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
