#!/usr/bin/env python3
"""Fits the rational erf approximation of the CPU provider's float32 GELU
(vendors/cpu/src/kernels/fast_f32.rs) and measures its error bound.

erf(z) ~ z * P(z^2) / Q(z^2) on |z| < 4, Q(0) = 1, both of degree 5 in z^2;
erf is taken as +-1 from |z| = 4 on (erf(4) = 1 - 1.5e-8). The fit is a
linearised least-squares problem (P - erf(z)/z * Q = 0) reweighted towards
the minimax error (Lawson), weighted by z so that it minimises the absolute
error of erf, which is what the error model's GELU bound is stated in.

Usage: tools/fit_erf.py   (prints the coefficients and the measured bound)
"""
import math

import numpy as np

NP, NQ, ZMAX = 5, 5, 4.0


def fit():
    z = np.linspace(0, ZMAX, 400_001)[1:]
    t = z * z
    y = np.array([math.erf(v) for v in z]) / z
    weights = np.ones_like(t)
    q = np.ones_like(t)
    for _ in range(30):
        a = np.hstack([
            np.vander(t, NP + 1, increasing=True),
            -(y[:, None] * np.vander(t, NQ + 1, increasing=True)[:, 1:]),
        ])
        w = z / np.abs(q) * weights
        sol, *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
        p, qc = sol[: NP + 1], np.concatenate([[1.0], sol[NP + 1:]])
        q = np.polyval(qc[::-1], t)
        err = z * (np.polyval(p[::-1], t) / q - y)
        weights = weights * (np.abs(err) / np.abs(err).max()) ** 0.3 + 1e-3
        weights /= weights.max()
    return p, qc


def approx(z, p, q):
    t = z * z
    inner = z * np.polyval(p[::-1], t) / np.polyval(q[::-1], t)
    return np.where(np.abs(z) >= ZMAX, np.sign(z), inner)


def main():
    p, q = fit()
    assert (p > 0).all() and (q > 0).all(), "coefficients of one sign: no cancellation"
    z = np.linspace(-6, 6, 6_000_001)
    ref = np.array([math.erf(v) for v in z])
    bound = np.abs(approx(z, p, q) - ref).max()
    print("ERF_P:", [repr(float(c)) for c in p])
    print("ERF_Q:", [repr(float(c)) for c in q])
    print(f"max |approx - erf| on [-6, 6] (6e6 points): {bound:.3e}")


if __name__ == "__main__":
    main()
