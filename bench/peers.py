#!/usr/bin/env python3
"""bench/peers.py: PyTorch attention on the same GPU, shapes and timing as the course harness.

Run by bench/bench.sh after the harness rows (it needs python3 with a CUDA build of torch):
    python3 bench/peers.py --csv docs/results/bench-<gpu>.csv --shapes SHAPES_FILE ...
SHAPES_FILE holds one "sweep,B,H,N,d,causal" per line. For each shape and dtype (fp16, bf16)
it times, on Q, K, V of layout [B, H, N, d] (torch.randn, scale 1/sqrt(d)):
    torch-flash        F.scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION)
    torch-cudnn        ... under sdpa_kernel(CUDNN_ATTENTION)
    torch-efficient    ... under sdpa_kernel(EFFICIENT_ATTENTION)
    torch-math-matmul  plain (Q*scale) @ K^T, causal mask, softmax, @ V: S and P in HBM
and appends rows to the CSV in bench.sh's format (speedup over the harness's `standard` row of
the same pass, dtype and shape, when there is one).

With --pass backward the same methods are timed backward only: the forward runs once, outside the
timing (Q, K, V require gradients; dO = torch.randn), and each timed launch is
torch.autograd.grad(out, (q, k, v), dO, retain_graph=True), the backward kernels the backend chose
at the forward. FLOPs = 2.5 x 4 B H N^2 d (halved when causal), the harness's backward convention;
memory is the allocator's peak over the forward and one backward (the saved tensors, dO and the
gradients included; torch-math-matmul keeps S and P for its backward, the flash backends only O
and the logsumexp).

Timing, the same method as the harness (reference/harness/runner_device.cu, time_launches): W untimed
warm-up launches, then R launches, each timed alone with CUDA events on the current stream,
with a buffer of max(2 x L2, 64 MiB) overwritten before each launch outside the events so that
no launch finds its inputs in L2; the median of the R times is reported. R is chosen so that
the timed launches take about --rep-ms in all (3..30). FLOPs = 4 B H N^2 d, halved when causal.
Memory: the caching allocator's peak over one launch (torch.cuda.max_memory_allocated), counted
from before Q, K, V were allocated, so it includes the inputs, the output and any workspace
(the harness measures the cudaMemGetInfo drop instead; both count the same buffers). A causal
mask for torch-math-matmul is built once per shape, outside the count, like a cached mask.
Every row ends with its pass (forward | backward). Status per row: ok, oom (torch.cuda.OutOfMemoryError), unsupported (no kernel for this backend,
dtype or shape), skipped (one launch predicted above --cap-ms), error.
"""
import argparse
import csv
import math
import statistics
import sys
import warnings

METHODS = ["torch-flash", "torch-cudnn", "torch-efficient", "torch-math-matmul"]
HEADER = ("gpu,date,commit,method,dtype,B,H,N,d,causal,status,ms,tflops,mem_bytes,"
          "speedup_vs_standard,reps,sweep,gpu_mem_bytes,timing,pass").split(",")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--csv", required=True, help="bench CSV to append to (read for standard's times)")
    p.add_argument("--shapes", required=True, help='file of "sweep,B,H,N,d,causal" lines')
    p.add_argument("--gpu", default="", help="GPU name for the rows (default: torch's)")
    p.add_argument("--gpu-mem", type=int, default=0, help="GPU memory in bytes for the rows")
    p.add_argument("--date", default="")
    p.add_argument("--commit", default="")
    p.add_argument("--dtypes", default="fp16,bf16")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--cap-ms", type=float, default=2000.0,
                   help="skip a series once one launch is predicted to take longer")
    p.add_argument("--rep-ms", type=float, default=1500.0, help="time budget of the timed launches")
    p.add_argument("--quick", action="store_true", help="fp16 only")
    p.add_argument("--pass", dest="pass_", choices=["forward", "backward"], default="forward",
                   help="time the forward pass, or the backward pass alone")
    return p.parse_args()


def standard_times(path, pass_):
    """(dtype, B, H, N, d, causal) -> ms of the harness's standard attention rows of this pass."""
    out = {}
    try:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r.get("method") == "standard" and r.get("status") == "ok" and r.get("ms") and \
                        (r.get("pass") or "forward") == pass_:
                    key = (r["dtype"], int(r["B"]), int(r["H"]), int(r["N"]), int(r["d"]), int(r["causal"]))
                    out[key] = float(r["ms"])
    except FileNotFoundError:
        pass
    return out


def main():
    a = parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"peers.py: needs PyTorch 2.3 or newer ({e})", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("peers.py: torch sees no CUDA GPU", file=sys.stderr)
        return 4
    # fp32 accumulation in the 16-bit GEMMs, like the harness's standard attention.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    gpu = a.gpu or props.name
    gpu_mem = a.gpu_mem or props.total_memory
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    # The L2 flush before each timed launch reads a 2 x L2 buffer (as the harness does,
    # reference/harness/runner_device.cu): writing it would leave L2 full of dirty lines that the timed
    # kernel then writes back to HBM, some 10 us charged to it on an H100.
    flush = torch.zeros(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device=dev)

    def empty_l2():
        flush.max()
    timing = (f"cuda-events median of reps after warm-up; 2xL2 read flush between launches; "
              f"torch {torch.__version__}; memory = allocator peak")
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    want_dtypes = ["fp16"] if a.quick else [t for t in a.dtypes.split(",") if t]
    methods = [m for m in a.methods.split(",") if m]
    backends = {"torch-flash": SDPBackend.FLASH_ATTENTION, "torch-cudnn": SDPBackend.CUDNN_ATTENTION,
                "torch-efficient": SDPBackend.EFFICIENT_ATTENTION}
    std = standard_times(a.csv, a.pass_)
    backward = a.pass_ == "backward"
    shapes = []
    with open(a.shapes) as f:
        for line in f:
            if line.strip():
                sw, B, H, N, d, c = line.strip().split(",")
                shapes.append((sw, int(B), int(H), int(N), int(d), int(c)))

    def make_fn(method, q, k, v, causal, scale, mask):
        if method in backends:
            backend = backends[method]

            def fn():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=scale)
            return fn

        def fn():  # the unfused baseline: S and P are [B, H, N, N] tensors in HBM
            s = torch.matmul(q * scale, k.transpose(-2, -1))
            if causal:
                s.masked_fill_(mask, float("-inf"))
            p = torch.softmax(s, dim=-1)
            del s
            return torch.matmul(p, v)
        return fn

    def time_fn(fn, pred_ms):
        """Median ms of R launches, each after an L2 flush; R from the budget and pred_ms."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        warm = 1 if pred_ms > 100 else 3
        for _ in range(warm):
            out = fn()
        torch.cuda.synchronize()
        if pred_ms <= 0:  # first of its series: time one launch to size R
            empty_l2()
            start.record()
            out = fn()
            end.record()
            torch.cuda.synchronize()
            pred_ms = start.elapsed_time(end)
        reps = max(3, min(30, int(a.rep_ms / max(pred_ms, 1e-3))))
        times = []
        for i in range(reps):
            empty_l2()
            start.record()
            out = fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        del out
        return statistics.median(times), reps

    out_f = open(a.csv, "a", newline="")
    # "\n", not the csv module's default "\r\n": the harness writes "\n", and awk's last field
    # (the pass column) would otherwise end in "\r" and match no filter in bench/plot.sh
    w = csv.writer(out_f, lineterminator="\n")
    last = {}  # series -> (ms, B*N^2) of its previous run
    dead = set()
    print(f"{'method':<28} {'dtype':<4} {'B':>5} {'H':>3} {'N':>6} {'d':>4} {'cau':>3} {'ms':>10} "
          f"{'TFLOP/s':>8} {'mem MiB':>10} {'speedup':>8}")
    for (sweep, B, H, N, d, causal) in shapes:
        for tname in want_dtypes:
            dt = dtypes[tname]
            q = k = v = mask = None
            try:
                torch.cuda.empty_cache()
                if causal and "torch-math-matmul" in methods:
                    mask = torch.ones(N, N, dtype=torch.bool, device=dev).triu_(1)
                base = torch.cuda.memory_allocated()
                q, k, v = (torch.randn(B, H, N, d, dtype=dt, device=dev, requires_grad=backward) for _ in range(3))
                dout = torch.randn(B, H, N, d, dtype=dt, device=dev) if backward else None
            except torch.cuda.OutOfMemoryError:
                q = k = v = mask = None
                torch.cuda.empty_cache()
                print(f"   inputs of B={B} H={H} N={N} d={d} {tname} do not fit; shape skipped")
                continue
            scale = 1.0 / math.sqrt(d)
            flops = (2.5 if backward else 1.0) * 4.0 * B * H * N * N * d * (0.5 if causal else 1.0)
            for m in methods:
                series = (m, tname, d, causal, sweep)
                if series in dead:
                    continue
                status, ms, tf, mem, reps, note, sp = "ok", "", "", "", "", "", ""
                pred = 0.0
                if series in last:
                    pred = last[series][0] * (B * N * N) / last[series][1]
                if pred > a.cap_ms:
                    status, note = "skipped", f"one launch predicted at {pred:.0f} ms > {a.cap_ms:.0f} ms"
                    dead.add(series)
                else:
                    fn = make_fn(m, q, k, v, causal, scale, mask)
                    why = []
                    fwd_out = None
                    try:
                        torch.cuda.empty_cache()
                        torch.cuda.reset_peak_memory_stats()
                        with warnings.catch_warnings(record=True) as why:
                            warnings.simplefilter("always")  # a backend says here why it declines
                            out = fn()
                            if backward:  # the forward once, outside the timing; time the backward alone
                                fwd_out = out

                                def fn():
                                    return torch.autograd.grad(fwd_out, (q, k, v), dout, retain_graph=True)
                                out = fn()
                        torch.cuda.synchronize()
                        mem = torch.cuda.max_memory_allocated() - base
                        del out
                        t, reps = time_fn(fn, pred)
                        ms, tf = f"{t:.4f}", f"{flops / (t * 1e-3) / 1e12:.2f}"
                        last[series] = (t, B * N * N)
                        sk = (tname, B, H, N, d, causal)
                        if sk in std:
                            sp = f"{std[sk] / t:.2f}"
                    except torch.cuda.OutOfMemoryError:
                        status, mem, note = "oom", "", "out of memory"
                    except RuntimeError as e:
                        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                        if why:
                            msg += ": " + str(why[0].message).strip().splitlines()[0]
                        if "no available kernel" in msg.lower() or "not supported" in msg.lower() \
                                or "no kernel" in msg.lower():
                            status, note = "unsupported", msg[:140]
                            dead.add(series)
                        else:
                            status, note = "error", msg[:140]
                            dead.add(series)
                        mem = ""
                    finally:
                        fn = fwd_out = None
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()
                w.writerow([gpu, a.date, a.commit, m, tname, B, H, N, d, causal, status, ms, tf, mem, sp,
                            reps, sweep, gpu_mem, timing, a.pass_])
                out_f.flush()
                mib = f"{mem / 1048576:.0f}" if mem != "" else ""
                if status == "ok":
                    print(f"{m:<28} {tname:<4} {B:>5} {H:>3} {N:>6} {d:>4} {causal:>3} {float(ms):>10.3f} "
                          f"{float(tf):>8.1f} {mib:>10} {sp + 'x' if sp else '':>8}", flush=True)
                else:
                    print(f"{m:<28} {tname:<4} {B:>5} {H:>3} {N:>6} {d:>4} {causal:>3} {status:>10} "
                          f"{'':>8} {mib:>10}   {note}", flush=True)
            q = k = v = mask = dout = None
    out_f.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
