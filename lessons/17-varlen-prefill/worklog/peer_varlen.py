#!/usr/bin/env python3
"""lessons/17-varlen-prefill/worklog/peer_varlen.py: PyTorch's attention over the packed batch lesson 17's
benchmark times (bench.sh calls it), each timed as the harness times a lesson: CUDA events around one call,
3 warm-up calls, the median of --reps calls with L2 flushed (a 256 MiB buffer zeroed) before each.

    python3 peer_varlen.py --seqlens 4021,17,... --heads 16 --d 128 [--causal] [--reps 20] [--csv FILE]

Peers: FlexAttention (torch.compile(flex_attention), a block mask that keeps each query inside its own
sequence: the packed batch as one sequence of total tokens, the mask's document ids), and SDPA over nested
jagged tensors (torch.nested.nested_tensor_from_jagged, [B, H, j, d]). fp16. A peer that fails prints why and
gets a row "failed". FLOPs as the harness counts them: 4 H d (n^2, minus n^2 / 2 causal) per sequence.
CSV rows (appended): method,ms,tflops,note."""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F


def timed(fn, reps):
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def flex(q, k, v, lens, causal):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    total = q.shape[0]
    doc = torch.repeat_interleave(torch.arange(len(lens), device="cuda"), torch.tensor(lens, device="cuda"))

    def keep(b, h, qi, ki):
        same = doc[qi] == doc[ki]
        return same & (qi >= ki) if causal else same

    mask = create_block_mask(keep, None, None, total, total, device="cuda")
    fa = torch.compile(flex_attention)
    qq, kk, vv = (x.transpose(0, 1).unsqueeze(0).contiguous() for x in (q, k, v))  # [1, H, total, d]
    return lambda: fa(qq, kk, vv, block_mask=mask)


def nested(q, k, v, lens, causal):
    off = torch.tensor([0] + list(torch.tensor(lens).cumsum(0).tolist()), dtype=torch.int64, device="cuda")
    nq, nk, nv = (torch.nested.nested_tensor_from_jagged(x, off).transpose(1, 2) for x in (q, k, v))
    return lambda: F.scaled_dot_product_attention(nq, nk, nv, is_causal=causal)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seqlens", required=True)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--csv")
    a = ap.parse_args()
    lens = [int(x) for x in a.seqlens.split(",")]
    total, H, d = sum(lens), a.heads, a.d
    torch.manual_seed(0)
    q, k, v = (torch.randn(total, H, d, dtype=torch.float16, device="cuda") for _ in range(3))
    flops = sum(4.0 * H * d * (n * n - (n * n / 2 if a.causal else 0)) for n in lens)
    rows = []
    for name, make in (("flex", flex), ("sdpa-nested", nested)):
        try:
            ms = timed(make(q, k, v, lens, a.causal), a.reps)
            rows.append("%s,%.4f,%.1f," % (name, ms, flops / (ms * 1e-3) / 1e12))
        except Exception as e:  # a peer this PyTorch cannot run: say why, keep the others
            rows.append("%s,,,failed: %s" % (name, str(e).splitlines()[0][:150].replace(",", ";")))
        print(rows[-1])
        sys.stdout.flush()
    if a.csv:
        with open(a.csv, "a") as f:
            f.write("".join(r + "\n" for r in rows))


if __name__ == "__main__":
    main()
