#!/usr/bin/env python3
"""Writes the capture target's seeds (fuzz/corpus/capture/seed-*): tiny
.npy, .npz and .safetensors files, each behind the byte that picks its format
in fuzz/targets.rs (0 .npy, 1 .npz, 2 .safetensors). Needs numpy and
safetensors; the files are committed, so only rerun this to change them."""
import io
import os
import numpy as np
from safetensors.numpy import save

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "capture")
os.makedirs(out, exist_ok=True)


def write(name, kind, payload):
    with open(os.path.join(out, "seed-" + name), "wb") as f:
        f.write(bytes([kind]) + payload)


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def npz(compressed, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


rng = np.random.default_rng(7)
write("f32.npy", 0, npy(rng.standard_normal((2, 3)).astype("<f4")))
write("f16.npy", 0, npy(np.arange(4, dtype="<f2")))
write("f64-scalar.npy", 0, npy(np.float64(1.5)))
write("u8.npy", 0, npy(np.arange(6, dtype=np.uint8).reshape(1, 2, 3)))
write("i32.npy", 0, npy(np.array([-1, 2, 3], dtype="<i4")))
write("i64-empty.npy", 0, npy(np.zeros((0, 3), dtype="<i8")))
write("stored.npz", 1, npz(False, x=np.ones((2, 2), "<f4"), y=np.arange(3, dtype="<i8")))
write("deflated.npz", 1, npz(True, w=np.zeros((4, 4), "<f4"), b=np.arange(4, dtype=np.uint8)))
write("mixed.safetensors", 2, save({
    "a": np.arange(6, dtype="<f4").reshape(2, 3),
    "b": np.array([1, 2], dtype="<i8"),
    "c": np.array([0.5], dtype="<f2"),
    "d": np.array([[7]], dtype=np.uint8),
}))
write("f64.safetensors", 2, save({"w": np.array([1.0, -2.0], dtype="<f8")}))
