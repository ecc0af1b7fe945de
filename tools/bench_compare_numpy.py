#!/usr/bin/env python3
"""NumPy's allclose + hashlib.sha256 on 64 Mi float32 elements: the reference
for the SDK's comparison benchmark (sdk/benches/compare.rs), same sizes and
tolerances."""
import hashlib
import time

import numpy as np

N = 64 << 20
rng = np.random.default_rng()
e = rng.uniform(-4, 4, N).astype(np.float32)
a = e * np.float32(1 + 1e-7)
runs = []
for _ in range(5):
    t0 = time.perf_counter()
    ok = np.allclose(a, e, rtol=1e-5, atol=1e-6)
    t1 = time.perf_counter()
    digest = hashlib.sha256(a.astype("<f4").tobytes()).hexdigest()
    t2 = time.perf_counter()
    runs.append((t1 - t0, t2 - t1, t2 - t0))
runs.sort(key=lambda r: r[2])
allclose, sha, total = runs[len(runs) // 2]
print(f"numpy {np.__version__}: allclose {allclose * 1e3:.0f} ms, sha256 {sha * 1e3:.0f} ms, "
      f"total {total * 1e3:.0f} ms (median of 5; allclose={ok})")
