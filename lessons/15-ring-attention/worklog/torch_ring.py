"""PyTorch's ring attention on the shapes of lesson 15's bench.sh, for comparison.

Run under torchrun, one process per GPU (bench.sh does):
    python3 -m torch.distributed.run --standalone --nproc-per-node 2 torch_ring.py --seqlen 65536 --csv out.csv
It uses torch.distributed.tensor.experimental.context_parallel: inside the context, Q, K and V
are sharded along the sequence (the load-balanced layout for causal attention, as lesson 15's)
and scaled_dot_product_attention runs as ring attention over the GPUs. Timed: the SDPA call
inside the context (median of --reps, after warm-up), so the sharding itself is not counted,
like lesson 15's ring time. One row per (SDPA backend, K/V rotation method, causal) that runs;
one with the error where it does not. FLOPs: 4 B H N^2 d, halved when causal.
"""
import argparse
import csv
import os
import statistics

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", dest="b", type=int, default=1)
    ap.add_argument("--heads", dest="h", type=int, default=16)
    ap.add_argument("--seqlen", dest="n", type=int, default=65536)
    ap.add_argument("--head-dim", dest="d", type=int, default=128)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--csv", default="torch.csv")
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    rows = []
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.experimental import context_parallel
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:  # an older or newer torch without the experimental API
        rows.append(dict(backend="", rotate="", N=args.n, causal="", ms="", tflops="", error="context_parallel: %s" % e))
    else:
        try:
            from torch.distributed.tensor.experimental._attention import set_rotate_method
            rotations = ["alltoall", "allgather"]
        except ImportError:
            set_rotate_method, rotations = None, ["default"]
        mesh = init_device_mesh("cuda", (world,))
        for backend_name in ["CUDNN_ATTENTION", "FLASH_ATTENTION"]:
            for rotate in rotations:
                for causal in [0, 1]:
                    row = dict(backend=backend_name, rotate=rotate, N=args.n, causal=causal, ms="", tflops="", error="")
                    try:
                        if set_rotate_method:
                            set_rotate_method(rotate)
                        row["ms"] = "%.3f" % time_ring(args, mesh, context_parallel, sdpa_kernel,
                                                       getattr(SDPBackend, backend_name), causal)
                        flops = 4.0 * args.b * args.h * args.n * args.n * args.d * (0.5 if causal else 1.0)
                        row["tflops"] = "%.1f" % (flops / (float(row["ms"]) * 1e-3) / 1e12)
                    except Exception as e:  # a backend the ring does not dispatch to, out of memory, ...
                        row["error"] = ("%s: %s" % (type(e).__name__, e)).replace("\n", " ")[:200]
                    rows.append(row)
                    if rank == 0:
                        print(row, flush=True)
    if rank == 0:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["backend", "rotate", "N", "causal", "ms", "tflops", "error"])
            w.writeheader()
            w.writerows(rows)
    dist.destroy_process_group()


def load_balance(on):
    """context_parallel shards causal inputs in the load-balanced layout (as lesson 15's) and
    refuses a non-causal SDPA call in it, so non-causal runs turn it off (a private option of
    torch.distributed.tensor.experimental; a torch without it keeps its default)."""
    try:
        from torch.distributed.tensor.experimental._attention import _cp_options
        _cp_options.enable_load_balance = on
    except (ImportError, AttributeError):
        pass


def time_ring(args, mesh, context_parallel, sdpa_kernel, backend, causal):
    load_balance(bool(causal))
    g = torch.Generator(device="cuda").manual_seed(1)  # the same full tensors on every rank
    shape = (args.b, args.h, args.n, args.d)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    times = []
    with sdpa_kernel(backend), context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
        for i in range(args.reps + 2):
            dist.barrier()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            end.record()
            torch.cuda.synchronize()
            if i >= 2:
                times.append(start.elapsed_time(end))
    # the slowest rank's median: the ring is done when every rank is
    t = torch.tensor([statistics.median(times)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


if __name__ == "__main__":
    main()
