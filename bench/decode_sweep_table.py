#!/usr/bin/env python3
"""bench/decode_sweep_table.py: the tables of a decode sweep (bench/decode_sweep.sh).

    python3 bench/decode_sweep_table.py --csv build/decode-sweep/sweep-<gpu>.csv [--md FILE.md]

Reads the sweep's CSV (gpu,commit,kind,variant,dtype,B,H,H_kv,N,N_kv,d,status,ms,gbps,note) and
prints, in Markdown:
  1. rooflines per shape: the ideal time at the 1 GiB copy's bandwidth; a copy and a plain
     read of the shape's K/V bytes, each with an L2 flush that writes and with one that reads
     (the harness's); the write-back cost (read with the write flush minus read with the read flush);
     lesson 12 (base) as % of the 1 GiB copy, of the same-size copy and of the same-size read;
  2. lesson 12's variants per shape: microseconds, [the split count], change against base;
  3. forced split counts (-DFD_SPLITS) on the B H_kv = 8 shapes;
  4. the fd-trace line of each shape (the trace variant).
Plain Python, no packages.
"""
import argparse
import csv
import re
import sys

VARIANTS = ["base", "rule=resident", "rule=tiles", "rule=fill", "merge=kernel", "merge=pdl", "stages=2", "stages=4", "bc=alt",
            "evict=first"]
SPLITS = ["S=1", "S=8", "S=16", "S=33", "S=66", "S=132", "S=264"]


def name(k):
    dt, B, hkv, nkv, d = k
    n = f"{nkv // 1024}k" if nkv % 1024 == 0 else str(nkv)
    return f"{dt} d={d} B={B} H_kv={hkv} N_kv={n}"


def splits_of(note):
    m = re.search(r"(\d+) split\(s\) of", note or "")
    return m.group(1) if m else "?"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--csv", required=True)
    p.add_argument("--md", default="")
    a = p.parse_args()
    rows = list(csv.DictReader(open(a.csv, newline="")))
    if not rows:
        print(f"decode_sweep_table.py: {a.csv} has no rows", file=sys.stderr)
        return 2
    t = {}  # (kind, variant, shape) -> row
    shapes, copy1g = [], None
    for r in rows:
        if r["kind"] == "copy1g":
            copy1g = float(r["gbps"]) if r["status"] == "ok" else None
            continue
        k = (r["dtype"], int(r["B"]), int(r["H_kv"]), int(r["N_kv"]), int(r["d"]))
        if k not in shapes:
            shapes.append(k)
        t[r["kind"], r["variant"], k] = r

    def us(kind, var, k):
        r = t.get((kind, var, k))
        return float(r["ms"]) * 1e3 if r and r["status"] == "ok" and r["ms"] else None

    def gbps(kind, var, k):
        r = t.get((kind, var, k))
        return float(r["gbps"]) if r and r["status"] == "ok" and r["gbps"] else None

    f1 = lambda x: "-" if x is None else f"{x:.1f}"
    f0 = lambda x: "-" if x is None else f"{x:.0f}"
    out = [f"# Lesson 12 decode sweep on the {rows[0]['gpu']} (commit {rows[0]['commit']})", ""]
    out.append(f"1 GiB device-to-device copy: {f0(copy1g)} GB/s (read + write). Times in microseconds, CUDA "
               "events, median; the L2 flushed before every timed operation, by writing a 2 x L2 buffer "
               "(`write`, the harness's way before this sweep) or by reading it (`read`, the harness's way now; "
               "lesson 12's own times are the harness's).")
    out.append("")
    out.append("## 1. Rooflines of the same size")
    out.append("")
    out.append("| shape | K+V MiB | ideal at 1 GiB copy | copy, write flush (GB/s) | copy, read flush (GB/s) | "
               "read, write flush (GB/s) | read, read flush (GB/s) | write-back cost | lesson 12 (GB/s) | "
               "% of 1 GiB copy | % of same-size copy | % of same-size read |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in shapes:
        dt, B, hkv, nkv, d = k
        kv = 2.0 * B * hkv * nkv * d * 2
        ideal = kv / (copy1g * 1e9) * 1e6 if copy1g else None
        cw, cr, rw, rr = us("copy", "write-flush", k), us("copy", "read-flush", k), us("read", "write-flush", k), \
            us("read", "read-flush", k)
        L, Lg = us("lesson", "base", k), gbps("lesson", "base", k)
        cwg, rwg = gbps("copy", "write-flush", k), gbps("read", "write-flush", k)
        cell = lambda x, g: f"{f1(x)} ({f0(g)})"
        out.append(f"| {name(k)} | {kv / 2**20:.0f} | {f1(ideal)} | {cell(cw, cwg)} | "
                   f"{cell(cr, gbps('copy', 'read-flush', k))} | {cell(rw, rwg)} | "
                   f"{cell(rr, gbps('read', 'read-flush', k))} | {f1(rw - rr if rw and rr else None)} | "
                   f"{cell(L, Lg)} | {f1(100 * Lg / copy1g if Lg and copy1g else None)} | "
                   f"{f1(100 * Lg / cwg if Lg and cwg else None)} | {f1(100 * Lg / rwg if Lg and rwg else None)} |")
    out.append("")
    out.append("## 2. Variants (microseconds [splits], change against base)")
    out.append("")
    out.append("| shape | " + " | ".join(VARIANTS) + " |")
    out.append("|---|" + "---|" * len(VARIANTS))
    for k in shapes:
        base = us("lesson", "base", k)
        cells = []
        for v in VARIANTS:
            x, r = us("lesson", v, k), t.get(("lesson", v, k))
            if x is None:
                cells.append(r["status"] if r else "-")
                continue
            ch = f", {100 * (x / base - 1):+.0f}%" if base and v != "base" else ""
            cells.append(f"{x:.1f} [{splits_of(r['note'])}]{ch}")
        out.append(f"| {name(k)} | " + " | ".join(cells) + " |")
    out.append("")
    sp = [k for k in shapes if any(("splits", s, k) in t for s in SPLITS)]
    if sp:
        out.append("## 3. -DFD_SPLITS (microseconds [splits used]; base = the rule's choice)")
        out.append("")
        out.append("| shape | base | " + " | ".join(SPLITS) + " |")
        out.append("|---|---|" + "---|" * len(SPLITS))
        for k in sp:
            cells = []
            for v in SPLITS:
                x, r = us("splits", v, k), t.get(("splits", v, k))
                cells.append(f"{x:.1f} [{splits_of(r['note'])}]" if x is not None else (r["status"] if r else "-"))
            b, rb = us("lesson", "base", k), t.get(("lesson", "base", k))
            out.append(f"| {name(k)} | {f1(b)} [{splits_of(rb['note']) if rb else '?'}] | " + " | ".join(cells) + " |")
        out.append("")
    tr = [(k, t[("trace", "trace", k)]) for k in shapes if ("trace", "trace", k) in t]
    if tr:
        out.append("## 4. Where a launch's time goes (the trace variant, the last timed launch; %globaltimer, us from "
                   "the first block's start)")
        out.append("")
        for k, r in tr:
            x = us("trace", "trace", k)
            note = (r["note"] or "").replace("|", "; ")
            out.append(f"- {name(k)}: {f1(x)} us by the events. {note}")
        out.append("")
    text = "\n".join(out) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
