#!/usr/bin/env python3
"""tests/hostsim/serving.py: the forward runner's serving layouts on the CPU (no GPU): `make hostsim-serving`.

    python3 tests/hostsim/serving.py            build, run every check below; exit 0 when all hold
    python3 tests/hostsim/serving.py --dump DIR also write each run's output to DIR/NN.txt

The binary is the forward runner itself (reference/harness/runner_main.cu with runner_attention.cu,
runner_serving.cu and runner_varlen.cu) compiled with g++ over the fake CUDA runtime, as
tests/hostsim/forward.py builds it, linked with serving_lesson.cpp: a stand-in lesson that declares a
paged KV cache (LESSON_PAGED_KV, with LESSON_DECODE) and packed batches (LESSON_VARLEN) and computes
the plain same-precision attention over them on the CPU, with one classic bug planted per run by
HOSTSIM_BUG (srv), and the same declaring packed batches alone (vlen: the runner's forward kind).
The checks: the stand-in passes paged and packed shapes (page sizes 8 to 1024, ragged lengths, GQA,
causal queries across pages, chunked prefill, --fuzz, the timed shapes and the CSV row), its append of
each step's keys graded in every paged case (attention_append_kv); the
command line refuses what it must, with the valid values; and the runner rejects every planted
bug with a diagnosis that names it. The objects come from make (HOSTSIM_FWD_OBJ, mk/emu.mk).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from forward import BUILD, CUDA_INC, CXX, OBJ, run_suite, sh  # noqa: E402  (the same build and runs)

SHAPE_PAGED = "-b 2 -H 8 --kv-heads 2 -n 1 --kv-seq 300 -d 64 --paged 16 --ragged"
CHECKS = [
    # the stand-in passes: paged decode shapes, packed batches, fuzz, timing, CSV
    ("srv", "", SHAPE_PAGED + " --check-only", 0,
     r"pass  custom fp32  B=2 H=8 N=1 d=64 N_kv=300 H_kv=2 ragged paged 16  [\s\S]*3 of 3 cases passed"),
    ("srv", "", "-b 2 -H 4 --kv-heads 1 -n 40 --kv-seq 200 -d 128 --paged 8 --causal --ragged --dtype bf16 --check-only",
     0, r"1 of 1 cases passed"),
    ("srv", "", "-b 3 -H 2 -n 1 --kv-seq 5000 -d 64 --paged 1024 --dtype fp16 --check-only", 0, r"1 of 1 cases passed"),
    ("srv", "", "--seqlens 77,1,130,16,300 -H 4 --kv-heads 2 -d 64 --causal --dtype fp16 --check-only", 0,
     r"pass  custom fp16  B=5 H=4 H_kv=2 d=64 packed: 524 queries, 524 keys, seqlens 77,1,130,16,300 causal"),
    ("srv", "", "--seqlens 16:200,1,100,7:300 -H 2 -d 128 --causal --dtype bf16 --check-only", 0,
     r"1 of 1 cases passed"),
    ("srv", "", "--varlen 300 -b 4 -n 200 -H 2 -d 64 --dtype fp32 --seed 4 --check-only", 0,
     r"pass  custom fp32  B=\d+ H=2 d=64 packed: 800 queries, 800 keys"),
    ("srv", "", "--fuzz 6 --seed 10 --dtype fp16", 0, r"paged 128 causal [\s\S]*packed: [\s\S]*6 of 6 cases passed"),
    ("srv", "", "--seqlens 300,17:40 -H 2 -d 64 --dtype fp16 --bench-only --csv", 0,
     r"hostsim-serving,pass,0,0,fp16,2,2,300,64,0,1\.0000,[0-9.]+,[0-9.]+,\d+,300,2,0,[0-9.]+\n"),
    # (a fake GPU of 200 MiB: the decode timing's copy of at least 64 MiB is left out)
    ("srv", "", "-b 2 -H 4 --kv-heads 2 -n 1 --kv-seq 1000 -d 64 --paged 64 --dtype fp16 --bench-only", 0,
     r"Time: fp16 B=2 H=4 N=1 d=64 N_kv=1000 H_kv=2 paged 64: ", {"HOSTSIM_MEM_MIB": "200"}),
    # a lesson of packed batches alone: the forward kind of the runner
    ("vlen", "", "--seqlens 77,1,130 -H 2 -d 64 --causal --check-only", 0, r"3 of 3 cases passed"),
    ("vlen", "", "-b 2 -H 2 -n 77 -d 64 --dtype fp16 --check-only", 0, r"1 of 1 cases passed"),
    ("vlen", "", "--seqlens 300,17 -H 2 -d 64 --dtype fp16", 0,
     r"Time: fp16 B=2 H=2 d=64 packed: 317 queries, 317 keys, seqlens 300,17: 1\.000 ms[\s\S]*Causal: "),
    ("vlen", "", "--paged 16", 2, r"lesson 16 does not read a paged KV cache .* LESSON_PAGED_KV"),
    ("vlen", "", "--kv-seq 100", 2, r"does not take decode shapes"),
    # the command line
    ("srv", "", "--paged 100", 2, r"--paged '100' is not valid: expected keys per page, a power of two in 8\.\.1024"),
    ("srv", "", "--paged 4", 2, r"a power of two in 8\.\.1024"),
    ("srv", "", "--seqlens 12,,4", 2, r"--seqlens '12,,4' is not valid: item 2, '', is not a length in 1\.\.1048576"),
    ("srv", "", "--seqlens 0,5", 2, r"item 1, '0', is not a length in 1\.\.1048576"),
    ("srv", "", "--seqlens 5:x", 2, r"item 1, '5:x', is not LEN_Q:LEN_K with both in 1\.\.1048576"),
    ("srv", "", "--seqlens 10:5 --causal", 2, r"--causal with --seqlens item 1, 10:5 .*give LEN_K >= LEN_Q"),
    ("srv", "", "--seqlens 5,6 -b 2", 2, r"--seqlens is the batch .*leave out -b and -n"),
    ("srv", "", "--varlen 100 --paged 16", 2, r"--paged does not combine with --varlen or --seqlens"),
    ("srv", "", "--varlen 100 --seqlens 5", 2, r"give one of them"),
    ("srv", "", "--varlen 2 -b 4096 -n 4096", 2, r"draws more than 4096 sequences"),
    ("srv", "", "--seqlens 5,6 --kv-heads 3 -H 8", 2, r"--kv-heads 3 does not divide --heads 8"),
    # the planted bugs, each rejected with a diagnosis that names it (a fixed seed: the same draw every run)
    ("srv", "cu_seqlens", "--seqlens 77,1,130,16,300 -H 2 -d 64 --dtype fp32 --seed 1 --check-only", 1,
     r"each sees one key more than it has[\s\S]*rerun: \./srv --seqlens 77,1,130,16,300 -H 2 -d 64 --dtype fp32 --seed 1"),
    ("srv", "seq3", "--seqlens 77,1,130,16,300 -H 2 -d 64 --dtype fp16 --seed 2 --check-only", 1,
     r"only sequence 3 is wrong .*check its offsets, cu_seqlens_q\[3\] = 208 and cu_seqlens_k\[3\] = 208[\s\S]*"
     r"their keys start one token late"),
    ("srv", "packed_causal", "--seqlens 16:200,1,100,7:300 -H 2 -d 64 --causal --dtype fp32 --seed 2 --check-only", 1,
     r"causal masked by packed positions"),
    ("srv", "topleft", "--seqlens 16:200,30,7:300 -H 2 -d 64 --causal --dtype fp32 --seed 2 --check-only", 1,
     r"sequences 0 and 2 are wrong, 1 is right[\s\S]*causal aligned top-left"),
    ("srv", "topleft", "-b 2 -H 2 -n 8 --kv-seq 100 -d 64 --paged 16 --causal --dtype fp32 --seed 2 --check-only", 1,
     r"causal aligned top-left"),
    ("srv", "other_table", "-b 4 -H 4 --kv-heads 2 -n 1 --kv-seq 200 -d 64 --paged 16 --dtype fp32 --seed 2 --check-only", 1,
     r"what keys read through another sequence's row of block_table give \(sequence 0 through 1's, 1 through 0's"),
    ("srv", "pool_order", "-b 3 -H 2 -n 1 --kv-seq 96 -d 64 --paged 16 --dtype fp32 --seed 2 --check-only", 1,
     r"what the pool read in order gives"),
    ("srv", "past_page", "-b 3 -H 4 -n 1 --kv-seq 1000 -d 128 --paged 64 --dtype fp16 --seed 2 --check-only", 1,
     r"are those whose length is not a multiple of page_size = 64; every wrong row is NaN"),
    ("srv", "gqa_paged", SHAPE_PAGED + " --dtype fp16 --seed 2 --check-only", 1,
     r"what another K/V head gives \(query head 1 reads 1, .*which is h % H_kv"),
    ("srv", "page2", "-b 3 -H 2 --kv-heads 1 -n 64 --kv-seq 80 -d 64 --paged 16 --causal --dtype fp32 --seed 2 --check-only", 1,
     r"only sequence 1 is wrong[\s\S]*sequence 1's query rows 0\.\.15 are right and its rows from 16 on are wrong: row "
     r"16 is the first to see key 32, the first key, row 0 of its page 2"),
    ("srv", "gqa_paged", "--fuzz 6 --seed 10 --dtype fp16", 1,
     r"diagnosis: only the paged cases \(K and V read through block_table\) fail"),
    ("srv", "page_boundary", "-b 3 -H 4 --kv-heads 2 -n 1 --kv-seq 300 -d 64 --paged 16 --ragged --dtype fp32 --seed 2 "
     "--check-only", 1, r"sees fewer than page_size = 16 keys .* is right, and the rows that see more are wrong: look at "
     r"the page boundaries"),
    # the append (attention_append_kv, which the stand-in defines): checked in the pools, named by key and page
    ("srv", "append_late", "-b 3 -H 4 --kv-heads 2 -n 1 --kv-seq 300 -d 64 --paged 16 --ragged --dtype fp16 --seed 2 "
     "--check-only", 1, r"new key rows do not hold their values \(\d+ still NaN: not written\)[\s\S]*went 1 key late: "
     r"check which key token t becomes"),
]


def build():
    """build/hostsim/serving/srv (paged, packed and decode shapes) and vlen (packed batches alone); an
    error text or None."""
    out = os.path.join(BUILD, "serving")
    os.makedirs(out, exist_ok=True)
    for name, flags in (("srv", []), ("vlen", ["-DSTANDIN_FLAGS=LESSON_VARLEN"])):
        rc, log = sh([CXX, "-O2", "-std=c++17", "-fopenmp", "-w", "-I" + CUDA_INC, "-Ireference/include",
                      "-Ireference/harness", "-Ireference/cpu", "-Ireference/gpu"] + flags +
                     ["tests/hostsim/serving_lesson.cpp"] + OBJ + ["-o", os.path.join(out, name), "-lm"])
        if rc:
            return log
    return None


def main():
    return run_suite("hostsim-serving", build, CHECKS, "the serving layouts (a paged KV cache and packed batches, "
                     "a stand-in lesson with planted bugs over a fake CUDA runtime)")


if __name__ == "__main__":
    sys.exit(main())
