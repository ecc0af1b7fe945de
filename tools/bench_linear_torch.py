#!/usr/bin/env python3
"""PyTorch CPU's F.linear on DINOv2's MLP shape, [257x384]·[384x1536]+bias, f32,
with 2 threads: the reference rate for the CPU provider's linear benchmark."""
import time

import torch
import torch.nn.functional as F

M, K, N = 257, 384, 1536
torch.set_num_threads(2)
x, w, b = torch.randn(M, K), torch.randn(N, K), torch.randn(N)
out = torch.empty(M, N)
flop = 2 * M * N * K
with torch.inference_mode():
    for _ in range(200):
        torch.addmm(b, x, w.t(), out=out)
    samples = []
    for _ in range(100):
        t0 = time.perf_counter()
        for _ in range(20):
            F.linear(x, w, b)
        samples.append((time.perf_counter() - t0) / 20)
samples.sort()
median = samples[len(samples) // 2]
print(f"torch {torch.__version__} F.linear 2 threads: median {median * 1e3:.3f} ms, "
      f"{flop / median / 1e9:.1f} GFLOP/s (best {flop / samples[0] / 1e9:.1f})")
