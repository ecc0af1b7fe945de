"""Seeded tensors exactly as the SDK regenerates them (docs/golden-format.md, "Seeded tensors"):
SplitMix64, uniform from the top 53 bits, normal as the sum of 12 uniforms. Vectorised with numpy's
wrapping uint64 arithmetic; sdk/tests/it/golden_format.rs checks the same recipe in pure Python."""
from __future__ import annotations

import hashlib
from typing import Sequence, Tuple

import numpy as np

_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(seed: int, j: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (j + np.uint64(1)) * _GAMMA
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def normal(seed: int, shape: Sequence[int], mean: float, std: float, dtype: str = "float32") -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.uint64)
    total = np.zeros(n, dtype=np.uint64)
    for j in range(12):
        total += _splitmix64(seed, np.uint64(12) * i + np.uint64(j)) >> np.uint64(11)
    # The sum is below 2^57: exact in int64, and (total - 6·2^53) converts to float64 with one rounding.
    z = (total.astype(np.int64) - np.int64(6 * 2**53)).astype(np.float64) / 2.0**53
    return (mean + std * z).astype(dtype).reshape(tuple(shape))


def uniform(seed: int, shape: Sequence[int], low: float, high: float, dtype: str = "float32") -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    u = (_splitmix64(seed, np.arange(n, dtype=np.uint64)) >> np.uint64(11)).astype(np.float64) / 2.0**53
    return (low + (high - low) * u).astype(dtype).reshape(tuple(shape))


def seed_for(name: str, base: int = 0) -> int:
    """A stable seed per tensor name (documents stay diffable when tensors are added)."""
    return (int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little") + base) % (2**31)


def stats(a: np.ndarray) -> Tuple[float, float]:
    a = a.astype(np.float64)
    return float(a.mean()), float(a.std())
