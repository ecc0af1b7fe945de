#!/usr/bin/env python3
"""An independent float64 NumPy implementation of the demo-mlp suite, used to
check `pack` end to end: seeded inputs regenerated from docs/golden-format.md
(tools/seeded_reference.py), stage outputs computed as the document's
algorithms say, each stage fed the float32-rounded outputs of the one before
(the golden values), and saved as an .npz capture.

    python3 tools/demo_reference.py OUT.npz OUT_P.npy < seeded.json

(h and n go to the .npz, p to its own .npy, so both formats are exercised.)

seeded.json lists the seeded tensors: [{"name", "dtype", "shape", "seed",
"distribution"}], as the test writes it from the parsed document.
"""
import json
import math
import pathlib
import struct
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import seeded_reference  # noqa: E402


def tensor(spec):
    raw = bytes.fromhex(seeded_reference.generate(spec)["hex"])
    n = len(raw) // 4
    values = struct.unpack(f"<{n}f", raw)  # the demo's seeded tensors are float32
    return np.array(values, dtype=np.float64).reshape(spec["shape"])


def f32(a):
    return a.astype(np.float32).astype(np.float64)


def main():
    t = {s["name"]: tensor(s) for s in json.load(sys.stdin)}
    erf = np.vectorize(math.erf)
    lin = t["x"] @ t["w1"].T + t["b1"]
    h = 0.5 * lin * (1.0 + erf(lin / math.sqrt(2.0)))
    hh = f32(h)
    mean = hh.mean(axis=-1, keepdims=True)
    var = ((hh - mean) ** 2).mean(axis=-1, keepdims=True)
    n = (hh - mean) / np.sqrt(var + 1e-6) * t["gamma"] + t["beta"]
    logits = f32(n) @ t["w2"].T + t["b2"]
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    np.savez(sys.argv[1], h=h, n=n)
    np.save(sys.argv[2], p)


if __name__ == "__main__":
    main()
