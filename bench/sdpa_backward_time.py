#!/usr/bin/env python3
"""PyTorch's SDPA backward (FlashAttention-2 and cuDNN backends) timed as the course's harness
times a kernel: warm-up, then each backward alone between CUDA events, a buffer of
max(2 x L2, 64 MiB) read before each (no input left in L2), the median of 20.

    python3 bench/sdpa_backward_time.py DTYPE B,H,N,d,causal [...]
DTYPE: fp16 or bf16. Prints one CSV line per backend and shape: name,B,H,N,d,causal,ms, or the
exception's name in place of ms where the backend has no kernel for the shape or runs out of
memory. Needs PyTorch with CUDA. Used by lessons/11-backward-tensor-cores/worklog/sweep.sh and
lessons/13-hopper-backward/worklog/bench.sh."""
import statistics, sys
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[sys.argv[1]]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
flush = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.float32, device="cuda")
for shape in sys.argv[2:]:
    B, H, N, d, c = (int(x) for x in shape.split(","))
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dt, requires_grad=True) for _ in range(3))
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(c))
            do = torch.randn_like(o)
            bwd = lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
            for _ in range(3):
                bwd()
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(20)]
            for s, e in ev:
                flush.max()  # a read: a write would leave dirty lines for the timed kernel to write back
                s.record(); bwd(); e.record()
            torch.cuda.synchronize()
            ms = statistics.median(s.elapsed_time(e) for s, e in ev)
            print("%s,%d,%d,%d,%d,%d,%.5f" % (name, B, H, N, d, c, ms))
            del q, k, v, o, do
        except Exception as ex:  # no kernel for this backend/shape, out of memory...
            print("%s,%d,%d,%d,%d,%d,%s" % (name, B, H, N, d, c, type(ex).__name__), flush=True)
        torch.cuda.empty_cache()
