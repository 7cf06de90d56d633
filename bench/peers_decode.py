#!/usr/bin/env python3
"""bench/peers_decode.py: PyTorch's attention on decode shapes, timed like the course harness.

Run by bench/decode.sh (make bench-decode) after the harness rows; needs python3 with a CUDA
build of torch (2.5 or newer for enable_gqa):
    python3 bench/peers_decode.py --csv docs/results/decode-<gpu>.csv --shapes SHAPES ...
SHAPES holds one "dtype,B,H,H_kv,N,N_kv,d" per line. For each shape it times
F.scaled_dot_product_attention(q, k, v, enable_gqa=H_kv < H) with q [B, H, N, d] and k, v
[B, H_kv, N_kv, d] (torch.randn, scale 1/sqrt(d), no mask: a decoding step whose N new
queries see the whole cache) under each backend:
    torch-flash, torch-cudnn, torch-efficient  (sdpa_kernel(FLASH_ATTENTION), ...)
A backend that has no kernel for the shape (GQA, the dtype, ...) gets the status
`unsupported` and the reason PyTorch gives; out of memory gets `oom`.

Timing, the harness's method (reference/harness/runner_device.cu, time_launches): W warm-up launches,
then R launches each timed alone with CUDA events, a buffer of max(2 x L2, 64 MiB) overwritten
before each one outside the events (so that K and V come from HBM, not L2), the median.
Bandwidth: the bytes of K and V, 2 B H_kv N_kv d x element size, over that time (GB/s), the
measure the harness's kv_gbps column uses. Rows are appended to the CSV in bench/decode.sh's
format (pct_of_copy from --copy-gbps).
"""
import argparse
import csv
import statistics
import sys
import warnings

METHODS = ["torch-flash", "torch-cudnn", "torch-efficient"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--csv", required=True, help="CSV to append to (bench/decode.sh's header)")
    p.add_argument("--shapes", required=True, help='file of "dtype,B,H,H_kv,N,N_kv,d" lines')
    p.add_argument("--gpu", default="")
    p.add_argument("--date", default="")
    p.add_argument("--commit", default="")
    p.add_argument("--copy-gbps", type=float, default=0.0, help="the copy bandwidth of this run (GB/s)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--methods", default=",".join(METHODS))
    return p.parse_args()


def main():
    a = parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"peers_decode.py: needs PyTorch 2.5 or newer ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("peers_decode.py: torch sees no CUDA GPU", file=sys.stderr)
        return 4
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    gpu = a.gpu or props.name
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    # The L2 flush before each timed launch reads a 2 x L2 buffer (as the harness does,
    # reference/harness/runner_device.cu): writing it would leave L2 full of dirty lines that the timed
    # kernel then writes back to HBM, some 10 us charged to it on an H100.
    flush = torch.zeros(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=dev)

    def empty_l2():
        flush.max()
    timing = (f"cuda-events median of {a.reps} after {a.warmup} warm-up; 2xL2 read flush between launches; "
              f"torch {torch.__version__}")
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    backends = {"torch-flash": SDPBackend.FLASH_ATTENTION, "torch-cudnn": SDPBackend.CUDNN_ATTENTION,
                "torch-efficient": SDPBackend.EFFICIENT_ATTENTION}
    methods = [m for m in a.methods.split(",") if m in backends]

    def time_fn(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(a.warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for i in range(a.reps):
            empty_l2()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)

    out_f = open(a.csv, "a", newline="")
    # "\n", not the csv module's default "\r\n": bench/decode.sh writes its rows with "\n", and
    # one CSV should not mix the two (awk would read a "\r" into each row's last field)
    w = csv.writer(out_f, lineterminator="\n")
    with open(a.shapes) as f:
        shapes = [ln.strip().split(",") for ln in f if ln.strip()]
    for dt, B, H, H_kv, N, N_kv, d in shapes:
        B, H, H_kv, N, N_kv, d = int(B), int(H), int(H_kv), int(N), int(N_kv), int(d)
        kv_bytes = 2.0 * B * H_kv * N_kv * d * (2 if dt in ("fp16", "bf16") else 4)
        try:
            torch.cuda.empty_cache()
            q = torch.randn(B, H, N, d, dtype=dtypes[dt], device=dev)
            k = torch.randn(B, H_kv, N_kv, d, dtype=dtypes[dt], device=dev)
            v = torch.randn(B, H_kv, N_kv, d, dtype=dtypes[dt], device=dev)
        except torch.cuda.OutOfMemoryError:
            q = k = v = None
            for m in methods:
                w.writerow([gpu, a.date, a.commit, m, dt, B, H, H_kv, N, N_kv, d, "oom", "", "", "", a.copy_gbps or "",
                            "", timing])
            continue
        gqa = H_kv != H
        for m in methods:
            status, ms, gbps, pct, note = "ok", "", "", "", ""
            backend = backends[m]

            def fn():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
            try:
                with warnings.catch_warnings(record=True) as why:
                    warnings.simplefilter("always")  # a backend says here why it declines
                    try:
                        fn()
                        torch.cuda.synchronize()
                    except torch.cuda.OutOfMemoryError:
                        raise
                    except RuntimeError as e:
                        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                        if why:
                            msg += ": " + str(why[0].message).strip().splitlines()[0]
                        raise RuntimeError(msg)
                t = time_fn(fn)
                ms, gbps = f"{t:.4f}", f"{kv_bytes / (t * 1e-3) / 1e9:.1f}"
                if a.copy_gbps > 0:
                    pct = f"{100.0 * kv_bytes / (t * 1e-3) / 1e9 / a.copy_gbps:.1f}"
            except torch.cuda.OutOfMemoryError:
                status, note = "oom", "out of memory"
            except RuntimeError as e:
                msg = str(e)
                low = msg.lower()
                status = "unsupported" if ("no available kernel" in low or "not supported" in low
                                           or "no kernel" in low) else "error"
                note = msg[:160]
            torch.cuda.synchronize()
            w.writerow([gpu, a.date, a.commit, m, dt, B, H, H_kv, N, N_kv, d, status, ms, gbps, pct,
                        a.copy_gbps or "", a.reps if status == "ok" else "", timing])
            out_f.flush()
            if status == "ok":
                print(f"{m:<28} {dt:<4} {B:>4} {H:>3} {H_kv:>4} {N:>3} {N_kv:>7} {d:>4} {float(ms):>10.4f} "
                      f"{float(gbps):>9.1f} {pct + '%' if pct else '':>7}", flush=True)
            else:
                print(f"{m:<28} {dt:<4} {B:>4} {H:>3} {H_kv:>4} {N:>3} {N_kv:>7} {d:>4} {status:>10}   {note}",
                      flush=True)
        q = k = v = None
    out_f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
