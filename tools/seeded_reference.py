#!/usr/bin/env python3
"""Regenerates seeded golden tensors from docs/golden-format.md alone.

Standard library only. Reads a JSON list of specs on stdin:
  [{"dtype": "float32", "shape": [3, 4], "seed": 7,
    "distribution": {"uniform": [low, high]} | {"normal": [mean, std]}
                    | {"test_image": true}}, ...]
and prints a JSON list with, per spec, the hex of the little-endian bytes and
the SHA-256 of the canonical float32 bytes. sdk/tests/it/golden_format.rs checks
that they equal the SDK's bytes.
"""
import hashlib
import json
import struct
import sys

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def splitmix64(seed, j):
    """Output j (0-based) of SplitMix64 started at `seed`."""
    z = (seed + (j + 1) * GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def value(dist, seed, i):
    kind, (a, b) = next(iter(dist.items()))
    if kind == "uniform":
        u = (splitmix64(seed, i) >> 11) / 2.0**53
        return a + (b - a) * u
    total = sum(splitmix64(seed, 12 * i + j) >> 11 for j in range(12))
    z = float(total - 6 * 2**53) / 2.0**53  # exact integer, one rounding
    return a + b * z


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def encode(dtype, x):
    if dtype == "float64":
        return struct.pack("<d", x)
    if dtype == "float32":
        return struct.pack("<f", x)
    if dtype == "float16":
        return struct.pack("<e", x)
    if dtype == "bfloat16":
        # Round the float32 value to its top 16 bits, ties to even.
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return struct.pack("<H", bits)
    raise ValueError(dtype)


def decode_f32(dtype, raw):
    """The canonical float32 value of an encoded element."""
    if dtype == "float64":
        return f32(struct.unpack("<d", raw)[0])
    if dtype == "float32":
        return struct.unpack("<f", raw)[0]
    if dtype == "float16":
        return struct.unpack("<e", raw)[0]
    return struct.unpack("<f", struct.pack("<I", struct.unpack("<H", raw)[0] << 16))[0]


def test_image_pixel(y, x, c, h, w, noise):
    """Element (y, x, c) of the procedural uint8 test image."""
    if c % 3 == 0:
        base = x * 255 // max(w - 1, 1)
    elif c % 3 == 1:
        base = y * 255 // max(h - 1, 1)
    else:
        base = 230 if (x // 16 + y // 16) % 2 == 0 else 25
    dx, dy = abs(2 * x + 1 - w), abs(2 * y + 1 - h)
    radius = 2 * min(h, w) // 3
    if dx * dx + dy * dy < radius * radius:
        base = 255 - base
    return (3 * base + noise) // 4


def generate(spec):
    if "test_image" in spec["distribution"]:
        h, w, c = spec["shape"]
        raw = bytes(
            test_image_pixel(i // (w * c), (i // c) % w, i % c, h, w, splitmix64(spec["seed"], i) >> 56)
            for i in range(h * w * c)
        )
        canonical = b"".join(struct.pack("<f", v) for v in raw)
        return {"hex": raw.hex(), "sha256": hashlib.sha256(canonical).hexdigest()}
    n = 1
    for d in spec["shape"]:
        n *= d
    elems = [encode(spec["dtype"], value(spec["distribution"], spec["seed"], i)) for i in range(n)]
    canonical = b"".join(struct.pack("<f", decode_f32(spec["dtype"], e)) for e in elems)
    return {"hex": b"".join(elems).hex(), "sha256": hashlib.sha256(canonical).hexdigest()}


if __name__ == "__main__":
    json.dump([generate(s) for s in json.load(sys.stdin)], sys.stdout)
