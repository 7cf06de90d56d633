#!/usr/bin/env python3
"""tests/checks/compile_check.py N [--full]: make check-NN, lesson N's starter and solution
compiled as its descriptor says (keys ptxas, spill_budget, starter_spills, registers,
register_kernel, check_builds, check_builds_full with --full, check_flags, header_check:
CONTRIBUTING.md, "The lesson descriptor"): no ptxas warning (nor C7508 "setmaxnreg ignored",
C7519 "warpgroup.arrive injected"), spills within budget, no stack frame for sm_90a, the registers
the design assumes, every worklog variant applied (reference/tools/variant.py). ptxas's reports
come from tests/checks/ptxas_report.sh. Exit status 0, 1 (what failed); SKIP without nvcc."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "reference", "tools"))
import lessons  # noqa: E402
import variant  # noqa: E402

WARN = re.compile(r"warning|C7508|C7519", re.I)
NVCC = os.environ.get("NVCC", "nvcc")
DESC_FLAGS = []  # the descriptor's check_flags, on every compilation


class Fail(Exception):
    pass


def report(src, archs, flags=()):
    flags = list(flags) + DESC_FLAGS
    cmd = ["bash", "tests/checks/ptxas_report.sh", src] + archs + (["--"] + list(flags) if flags else [])
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise Fail("%s\n%s does not compile%s" % (p.stdout + p.stderr, src, " with " + " ".join(flags) if flags else ""))
    return p.stdout


def registers(out, kernel):
    regs, on = set(), not kernel
    for ln in out.splitlines():
        if "Compiling entry function" in ln:
            on = not kernel or kernel in ln
        m = re.search(r"Used (\d+) registers", ln)
        if on and m:
            regs.add(int(m.group(1)))
    return sorted(regs)


def judge(what, out, desc, expect, solution=True):
    """Checks one ptxas report; returns the line to print. A starter (solution=False) is held to
    the spill budget where the descriptor says starter_spills := yes (the text holds a student's
    finished TODOs to it), never to the registers."""
    if WARN.search(out):
        raise Fail("%s: ptxas warns:\n%s" % (what, "\n".join(l for l in out.splitlines() if WARN.search(l))))
    spills = [int(x) for x in re.findall(r"(\d+) bytes spill stores", out)]
    if not solution:
        if desc["starter_spills"] == "yes" and max(spills, default=0) > int(desc["spill_budget"] or 0):
            raise Fail("%s spills %d bytes (budget %d): see lesson 03, \"Registers, unrolling and spills\"" % (
                what, max(spills), int(desc["spill_budget"] or 0)))
        return "%s: builds, no warning, at most %d bytes spilled" % (what, max(spills, default=0))
    stacks = [int(x) for x in re.findall(r"(\d+) bytes stack frame", out)]
    expect = expect.split()
    if expect[:1] == ["stack"]:
        if not any(stacks):
            raise Fail("%s: no stack frame, which the lesson's text says this build gets" % what)
        return "%s: a stack frame (%d bytes), as the text says" % (what, max(stacks))
    budget = int(desc["spill_budget"] or 0)
    if max(spills, default=0) > budget:
        raise Fail("%s spills %d bytes (budget %d):\n%s" % (what, max(spills), budget,
                   "\n".join(l for l in out.splitlines() if "spill" in l or "entry" in l)))
    if desc["arch"] == "sm_90a" and any(stacks):
        raise Fail("%s has a stack frame of %d bytes (registers spilled or arrays in local memory)" % (what, max(stacks)))
    regs = registers(out, desc["register_kernel"])
    got = " ".join(map(str, regs))
    if expect[:1] == ["max"]:
        if not regs or max(regs) > int(expect[1]):
            raise Fail("%s: %s registers per thread; at most %s allowed" % (what, got, expect[1]))
    elif expect and expect != ["any"] and got != " ".join(expect):
        raise Fail("%s: %s registers per thread; setmaxnreg's split needs %s" % (what, got or "no", " ".join(expect)))
    if len(regs) > 3:
        got = "%d to %d" % (regs[0], regs[-1])
    return "%s: %s registers, at most %d bytes spilled, no warning" % (what, got or "no", max(spills, default=0))


def parse_build(spec):
    left, _, expect = spec.partition("->")
    words = left.split()
    return [w for w in words if not w.startswith("-")], [w for w in words if w.startswith("-")], expect.strip()


def main(argv):
    n = int(argv[0])
    full = "--full" in argv
    name = "check-%02d" % n
    if not shutil.which(NVCC) and not os.path.exists(NVCC):
        print("%s: SKIP (no nvcc)" % name)
        return 0
    desc = lessons.lessons().get(n)
    if not desc or not desc["ptxas"]:
        print("%s: no compile check: lesson %d's descriptor names no ptxas architectures" % (name, n))
        return 0
    DESC_FLAGS[:] = desc["check_flags"].split()
    sol = os.path.join("solutions", desc["name"], desc["source"])
    starter = os.path.join(desc["dir"], desc["source"])
    archs = desc["ptxas"].split()
    variant_arch = archs[-1:]
    lines = []
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "build")) as tmp:
        def source(src, vs, tag):
            if not vs:
                return src, []
            text, defs, applied = variant.make(n, os.path.join(ROOT, src), vs)
            path = os.path.join(tmp, "%s-%s.cu" % (tag, "+".join(vs)))
            open(path, "w").write(text)
            return os.path.relpath(path, ROOT), defs
        try:
            mine = "the lesson's file (the starter, with what you wrote) " + starter
            lines.append(judge(mine, report(starter, archs), desc, "", solution=False))
            lines.append(judge("the solution", report(sol, archs), desc, desc["registers"]))
            for v in variant.names(n):
                source(sol, [v], "sol")
                if variant.load(n, v)[1].get("starter") == "yes":
                    source(starter, [v], "starter")
            builds = lessons.split(desc["check_builds"]) + (lessons.split(desc["check_builds_full"]) if full else [])
            for spec in builds:
                vs, flags, expect = parse_build(spec)
                src, defs = source(sol, vs, "sol")
                if not expect:
                    heads = [variant.load(n, v)[1].get("registers", "") for v in variant.chain(n, vs)]
                    expect = ([h for h in heads if h] or [desc["registers"]])[-1]
                what = "solution" + "".join(" + " + v for v in vs) + "".join(" " + f for f in flags)
                lines.append(judge(what, report(src, variant_arch, defs + flags), desc, expect))
                if vs and not full and all(variant.load(n, v)[1].get("starter") == "yes" for v in variant.chain(n, vs)):
                    src, defs = source(starter, vs, "starter")
                    lines.append(judge("the starter + " + "+".join(vs), report(src, variant_arch, defs + flags), desc, "",
                                       solution=False))
            if desc["header_check"]:
                p = subprocess.run([NVCC, "-O3", "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a",
                                    "-Ireference/include", "-Xptxas", "-v", "-cubin", desc["header_check"], "-o", "/dev/null"],
                                   cwd=ROOT, capture_output=True, text=True)
                if p.returncode != 0 or WARN.search(p.stdout + p.stderr):
                    raise Fail("%s\n%s does not compile cleanly for sm_90a" % (p.stdout + p.stderr, desc["header_check"]))
                lines.append("%s compiles for sm_90a" % desc["header_check"])
        except (Fail, variant.VariantError) as e:
            for ln in lines:
                print("%s: %s" % (name, ln))
            print("%s: FAIL: %s" % (name, e))
            return 1
    for ln in lines:
        print("%s: %s" % (name, ln))
    print("%s: lesson %02d builds for %s as its descriptor says; %d worklog variants apply%s" % (
        name, n, " ".join("sm_" + a for a in archs), len(variant.names(n)), "" if full else " (more builds: make test-full)"
        if desc["check_builds_full"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
