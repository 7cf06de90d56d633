#!/usr/bin/env python3
"""lessons/16-paged-kv-cache/worklog/peer_flex.py: PyTorch's paged attention (FlexAttention with
torch.nn.attention.experimental._paged_attention.PagedAttention) on decoding steps, timed like the
course's harness. Run by bench.sh (make bench-16); needs python3 with a CUDA build of torch that has
both (2.11 has).

    python3 peer_flex.py --shapes "B,H,H_kv,N_kv,d;..." --pages 16,64,256 --csv FILE [--reps R] [--warmup W]

Per shape and page size: a pool of B N_kv / P pages (torch's layout: one cache [1, H_kv, pages P, d] for
K and one for V), PagedAttention's page table filled by reserve() for every sequence's N_kv keys from a
free list shuffled first (so a sequence's pages lie anywhere in the pool, as in the course's harness),
a logical block mask of blocks of P keys (create_block_mask, no mask: every key visible) converted
to the physical pages (convert_logical_block_mask), and torch.compile(flex_attention)(q, k_cache,
v_cache, block_mask=..., enable_gqa=True) with q [B, H, 1, d] in fp16, scale 1/sqrt(d).

Timing, the harness's method (reference/harness/runner_device.cu, time_launches; bench/peers_decode.py):
warm-up calls (the first compiles), then R calls each timed alone with CUDA events, a read of a buffer of
max(2 x L2, 64 MiB) before each, the median. Bandwidth: the bytes of K and V, 2 B H_kv N_kv d x 2, over
that time. One CSV row per (shape, page size): method,page,B,H,H_kv,N_kv,d,status,ms,kv_gbps,note, status
ok, oom, unsupported or error (the first line of PyTorch's message in note).
"""
import argparse
import csv
import random
import statistics
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", required=True, help='"B,H,H_kv,N_kv,d;..."')
    p.add_argument("--pages", default="16,64,256")
    p.add_argument("--csv", required=True)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    return p.parse_args()


def main():
    a = parse_args()
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        from torch.nn.attention.experimental._paged_attention import PagedAttention
    except ImportError as e:
        print(f"peer_flex.py: needs PyTorch with FlexAttention and its PagedAttention ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("peer_flex.py: torch sees no CUDA GPU", file=sys.stderr)
        return 4
    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, knob):  # one compilation per shape and page size
            setattr(torch._dynamo.config, knob, 256)
    dev = torch.device("cuda")
    l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 50 << 20)
    flush = torch.zeros(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=dev)
    compiled = torch.compile(flex_attention, dynamic=False)

    def time_fn(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(a.warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.reps):
            flush.max()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    def no_mask(b, h, q_idx, kv_idx):
        return q_idx >= 0

    out = open(a.csv, "a", newline="")
    w = csv.writer(out, lineterminator="\n")
    for spec in filter(None, a.shapes.split(";")):
        B, H, H_kv, N_kv, d = (int(x) for x in spec.split(","))
        kv_bytes = 2.0 * B * H_kv * N_kv * d * 2
        for P in (int(x) for x in a.pages.split(",")):
            status, ms, gbps, note = "ok", "", "", ""
            try:
                torch.cuda.empty_cache()
                n_pages = B * ((N_kv + P - 1) // P)
                pa = PagedAttention(n_pages, P, B, device="cuda")
                random.Random(P * 7919 + B).shuffle(pa.empty_pages)
                for b in range(B):
                    pa.reserve(torch.tensor(b, device=dev), torch.tensor(N_kv, device=dev))
                k_cache = torch.randn(1, H_kv, n_pages * P, d, dtype=torch.float16, device=dev)
                v_cache = torch.randn(1, H_kv, n_pages * P, d, dtype=torch.float16, device=dev)
                q = torch.randn(B, H, 1, d, dtype=torch.float16, device=dev)
                logical = create_block_mask(no_mask, B, 1, 1, N_kv, device=dev, BLOCK_SIZE=P)
                physical = pa.convert_logical_block_mask(logical)

                def fn():
                    return compiled(q, k_cache, v_cache, block_mask=physical, enable_gqa=H_kv != H)
                fn()
                torch.cuda.synchronize()
                t = time_fn(fn)
                ms, gbps = f"{t:.4f}", f"{kv_bytes / (t * 1e-3) / 1e9:.1f}"
            except torch.cuda.OutOfMemoryError:
                status, note = "oom", "out of memory"
            except Exception as e:  # noqa: BLE001 (a compile error of any kind: recorded, the next one runs)
                msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
                status = "unsupported" if any(s in msg.lower() for s in ("not supported", "unsupported", "must be")) else "error"
                note = f"{type(e).__name__}: {msg}"[:200]
            torch.cuda.synchronize()
            w.writerow(["torch-flex-paged", P, B, H, H_kv, N_kv, d, status, ms, gbps, note])
            out.flush()
            print(f"torch-flex-paged P={P:<4} B={B} H={H} H_kv={H_kv} N_kv={N_kv} d={d}: "
                  f"{status} {ms + ' ms ' + gbps + ' GB/s' if status == 'ok' else note}", flush=True)
            q = k_cache = v_cache = pa = None
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
