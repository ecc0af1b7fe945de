#!/usr/bin/env python3
"""How small an error the verdict sees, next to the error correct
implementations make (issue 23; docs/validation.md, "Sensitivity").

    cargo build --release -p vips-conformance -p vsdk-provider-cpu -p vsdk-mutant-provider
    pip install numpy safetensors
    python3 tools/noise_sensitivity.py [--suite dinov2-vits14-quick] [--tier fp32 ...] [--seed N]

For each tier:

1. *The natural error.* Correct implementations run the suite (isolated
   mode): the CPU provider, and the mutant provider's legitimate variants over
   it (a linear summed in reverse, pairwise, onto its bias, with FMA; attention with an online
   softmax; LayerNorm with float32 sums in sequence). The verdict must accept
   the least accurate of them, so the ratio is to the largest. For every stage output the judgement reports `rel_l2_error`,
   `‖a − r‖ / ‖r‖` against the float64 reference; the natural error of a stage
   is the largest over the implementations.
2. *The sensitivity.* The CPU provider's outputs (`run --save-outputs`) get
   relative noise, `a·(1 + ε·z)` with `z` standard normal per element, and
   `vips-conformance check` judges them on their outputs alone (what a fused
   kernel or an engine gets). In isolated mode every stage is fed its golden
   inputs, so one `check` per ε judges every stage at that ε. The sensitivity
   of a stage is the smallest ε of a grid (steps of 2^(1/4)) at which it
   fails; the ratio is sensitivity / natural error.

Prints a Markdown table per tier and the largest ratio; exits 1 if a correct
implementation fails or a ratio exceeds 10 (the issue's target).
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
REL = ROOT / "target" / "release"
CLI = REL / "vips-conformance"
VARIANTS = [
    "sum_reversed", "sum_pairwise", "sum_bias_first", "fma", "online_softmax", "layer_norm_sequential",
]


def run(suite, tier, variant, save=None):
    """Runs the suite on the CPU provider, or a variant of it; returns the report."""
    args = [str(CLI), "run", suite, "--tier", tier, "--json", "-q", "--no-differential"]
    env = dict(os.environ, VSDK_PROVIDER_PATH=str(REL))
    if variant != "cpu":
        args += ["--provider", str(REL / "libvsdk_mutant_provider.so")]
        env.update(VSDK_MUTANT_TARGET=str(REL / "libvsdk_provider_cpu.so"), VSDK_MUTATION=variant)
    if save:
        args += ["--save-outputs", str(save)]
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{variant} at {tier} did not pass (exit {r.returncode}): {r.stderr[-2000:]}\n{r.stdout[-2000:]}")
    return json.loads(r.stdout)


def load(path):
    """A .safetensors file as float32 arrays (numpy has no bfloat16: its bits
    are widened by hand)."""
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        b = data[lo:hi]
        if t["dtype"] == "BF16":
            a = (np.frombuffer(b, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(b, {"F16": np.float16, "F32": np.float32, "F64": np.float64, "U8": np.uint8}[t["dtype"]])
        out[name] = a.reshape(t["shape"]).astype(np.float32) if a.dtype != np.uint8 else a.reshape(t["shape"])
    return out


def check(suite, tier, path):
    r = subprocess.run([str(CLI), "check", suite, "--tensors", str(path), "--tier", tier, "--json", "-q"],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"check failed: {r.stderr}")
    return json.loads(r.stdout)


def stage_outputs(report):
    """{stage: [(tensor, judgement)]} of a one-tier report."""
    return {s["stage"]: [(o["tensor"], o["judgement"]) for o in s["outputs"]] for s in report["tiers"][0]["stages"]}


def main():
    argv = sys.argv[1:]
    opt = lambda name, default: [argv[i + 1] for i, a in enumerate(argv) if a == name] or default
    suite = opt("--suite", ["dinov2-vits14-quick"])[0]
    tiers = opt("--tier", ["fp32", "fp16", "bf16"])
    seed = int(opt("--seed", [str(np.random.SeedSequence().entropy % 2**32)])[0])
    rng = np.random.default_rng(seed)
    print(f"suite `{suite}`, seed {seed}; natural error over: cpu, {', '.join(VARIANTS)}\n")
    worst_ratio = 0.0
    for tier in tiers:
        with tempfile.TemporaryDirectory() as tmp:
            saved = pathlib.Path(tmp) / "cpu.safetensors"
            natural = {}
            for variant in ["cpu"] + VARIANTS:
                report = run(suite, tier, variant, saved if variant == "cpu" else None)
                for stage, outs in stage_outputs(report).items():
                    for tensor, j in outs:
                        key = (stage, tensor)
                        natural[key] = max(natural.get(key, 0.0), j["rel_l2_error"])
            clean = load(saved)
            # Data movement stages (the outputs' crop) are exact: nothing to scale.
            judged = {k: v for k, v in natural.items() if v > 0}
            z = {t: rng.standard_normal(clean[t].shape) for _, t in judged}
            base = min(judged.values())
            first_fail = {}
            eps = base / 4
            while len(first_fail) < len(judged) and eps < 1.0:
                noisy = {k: v for k, v in clean.items()}
                for _, t in judged:
                    a = clean[t].astype(np.float64)
                    noisy[t] = (a * (1.0 + eps * z[t])).astype(np.float32)
                path = pathlib.Path(tmp) / "noisy.safetensors"
                save_file(noisy, str(path))
                for stage, outs in stage_outputs(check(suite, tier, path)).items():
                    for tensor, j in outs:
                        if (stage, tensor) in judged and not j["passed"]:
                            first_fail.setdefault((stage, tensor), (eps, j["reason"]))
                eps *= 2 ** 0.25
        print(f"### {tier}\n")
        print("| stage | output | natural rel L2 | fails from ε | ratio | failing criterion |")
        print("|---|---|---|---|---|---|")
        ratios = []
        for key in sorted(judged, key=lambda k: list(natural).index(k)):
            nat = judged[key]
            eps, why = first_fail.get(key, (float("inf"), "never (ε < 1)"))
            ratio = eps / nat
            ratios.append(ratio)
            crit = "rms" if "rms" in why else "bound" if "bound" in why else "bias" if "bias" in why else why
            print(f"| {key[0]} | {key[1]} | {nat:.2e} | {eps:.2e} | {ratio:.1f} | {crit} |")
        blocks = [r for (s, _), r in zip(sorted(judged, key=lambda k: list(natural).index(k)), ratios)
                  if s.startswith("block_")]
        print(f"\n{tier}: largest ratio {max(ratios):.1f}, blocks {min(blocks):.1f} to {max(blocks):.1f}\n")
        worst_ratio = max(worst_ratio, max(ratios))
    sys.exit(0 if worst_ratio <= 10 else 1)


if __name__ == "__main__":
    main()
