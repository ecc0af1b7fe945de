#!/usr/bin/env python3
"""Writes the VIPS documents of TRELLIS's sparse-structure flow transformer
(microsoft/TRELLIS, trellis/models/sparse_structure_flow.py,
`SparseStructureFlowModel` as configured for TRELLIS-image-large):

    conformance/suites/trellis-ss-flow-quick/suite.yaml  8^3 tokens x 128, 2 heads, 2 blocks,
        conditioning 69 x 1024 (the quick DINOv2 conditioning's shape): the real model's structure
    --full: conformance/suites/trellis-ss-flow/suite.yaml, the real shapes: noise [1, 8, 16, 16, 16],
        4096 tokens x 1024, 24 blocks of 16 heads x 64, conditioning 1374 x 1024 (outside CI: a
        block's float64 reference takes minutes on 2 cores; docs/benchmarks.md)

Stages: the timestep embedding, the position embedding, the input layer, each
ModulatedTransformerCrossBlock (adaLN modulation, self-attention with q/k
RMSNorm, cross-attention to the DINOv2 tokens, the GELU-tanh MLP), the output
layer, and one Euler step of the guided sampler (teacher-forced). Edit this
script, re-run it, then `vips-conformance generate <suite>`.

    python3 tools/make_trellis_flow_suite.py            (the committed quick suite; --full: the full one)
    python3 tools/make_trellis_flow_suite.py --out DIR --resolution 8 --channels 128 --heads 2 --blocks 2

tools/validate_trellis_flow.py judges the official model (PyPI
`trellis-3d-python`) built with these weights.
"""
import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_dinov2_suite import flow, node, q, seeded, stage, tensor, yfloat  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent / "conformance" / "suites"
TRELLIS = "Xiang et al. 2024, Structured 3D Latents for Scalable and Versatile 3D Generation (TRELLIS), arXiv:2412.01506"
DIT = "Peebles and Xie 2023, Scalable Diffusion Models with Transformers (DiT, adaLN modulation), arXiv:2212.09748"
FLOW = "Lipman et al. 2023, Flow Matching for Generative Modeling, arXiv:2210.02747; Liu et al. 2023, Rectified Flow, arXiv:2209.03003"
CFG = "Ho and Salimans 2022, Classifier-Free Diffusion Guidance, arXiv:2207.12598"
HEAD_DIM = 64
IN_CHANNELS = 8
FREQ_DIM = 256  # TimestepEmbedder's frequency_embedding_size
MAX_PERIOD = 10000
SIGMA_MIN = 1e-5
# TRELLIS-image-large's sparse-structure sampler (pipeline.json):
# FlowEulerGuidanceIntervalSampler, 25 steps, cfg_strength 7.5,
# cfg_interval [0.5, 0.95], rescale_t 3.0. The suite's step is number STEP.
STEPS, CFG_STRENGTH, CFG_INTERVAL, RESCALE_T, STEP = 25, 7.5, (0.5, 0.95), 3.0, 6
# The error model's parameters (docs/error-model.md), as the DINOv2 suites.
TOLERANCES = {
    "fp32": (6.0, 8.0, 0.1, 1e-4, 0.999999),
    "fp16": (6.0, 8.0, 0.1, 2e-2, 0.9998),
    "bf16": (6.0, 8.0, 0.1, 1e-1, 0.995),
}
# Residual-stream outlier channels written by block 0's MLP bias (times its
# gate): trained transformers carry a few such channels.
OUTLIERS = {5: 40.0, 77: -35.0, 300: 28.0, 901: -45.0}


class Variant:
    def __init__(self, name, title, resolution, channels, heads, blocks, cond_tokens, cond_channels,
                 golden_budget, out_dir=None):
        assert channels == heads * HEAD_DIM, "TRELLIS's heads are 64 channels wide"
        self.name, self.title = name, title
        self.res, self.C, self.H, self.blocks = resolution, channels, heads, blocks
        self.T = resolution ** 3
        self.Lc, self.Cc = cond_tokens, cond_channels
        self.budget = golden_budget
        self.out_dir = out_dir


def time_grid(steps=STEPS, rescale=RESCALE_T, step=STEP):
    """The sampler's (t, t_prev) at `step`, as TRELLIS computes them (numpy
    float64): linspace(1, 0, steps + 1), then t <- r t / (1 + (r - 1) t)."""
    seq = [1 - i / steps for i in range(steps + 1)]
    seq = [rescale * t / (1 + (rescale - 1) * t) for t in seq]
    return seq[step], seq[step + 1]


def f32(x):
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


def timestep_freqs():
    """exp(-ln(10000) i / 128), i < 128, as torch computes it in float32."""
    import numpy as np
    import torch
    half = FREQ_DIM // 2
    f = torch.exp(-np.log(MAX_PERIOD) * torch.arange(start=0, end=half, dtype=torch.float32) / half)
    return [float(x) for x in f.tolist()]


def position_freqs(channels):
    """AbsolutePositionEmbedder: 1 / 10000^(j / fd), fd = C // 3 // 2, float32."""
    import torch
    fd = channels // 3 // 2
    f = torch.arange(fd, dtype=torch.float32) / fd
    f = 1.0 / (10000 ** f)
    return [float(x) for x in f.tolist()]


def weights_of_block(v, i):
    """Name, checkpoint key, shape, distribution of each weight of block i."""
    C, H, Cc = v.C, v.H, v.Cc
    s = 1.0 / math.sqrt(C)
    k = f"blocks.{i}."
    base = 20000 + 100 * i
    rows = [
        ("ada_w", k + "adaLN_modulation.1.weight", [6 * C, C], "normal", 0.0, 0.5 * s),
        # shift, scale, gate of both halves: modulations of about +-0.5.
        ("ada_b", k + "adaLN_modulation.1.bias", [6 * C], "uniform", -0.6, 0.6),
        ("qkv_w", k + "self_attn.to_qkv.weight", [3 * C, C], "normal", 0.0, s),
        ("qkv_b", k + "self_attn.to_qkv.bias", [3 * C], "normal", 0.0, 0.02),
        ("q_gamma", k + "self_attn.q_rms_norm.gamma", [H, HEAD_DIM], "uniform", 0.5, 1.5),
        ("k_gamma", k + "self_attn.k_rms_norm.gamma", [H, HEAD_DIM], "uniform", 0.5, 1.5),
        ("attn_out_w", k + "self_attn.to_out.weight", [C, C], "normal", 0.0, s),
        ("attn_out_b", k + "self_attn.to_out.bias", [C], "normal", 0.0, 0.02),
        ("norm2_w", k + "norm2.weight", [C], "uniform", 0.7, 1.3),
        ("norm2_b", k + "norm2.bias", [C], "uniform", -0.1, 0.1),
        ("cq_w", k + "cross_attn.to_q.weight", [C, C], "normal", 0.0, s),
        ("cq_b", k + "cross_attn.to_q.bias", [C], "normal", 0.0, 0.02),
        ("ckv_w", k + "cross_attn.to_kv.weight", [2 * C, Cc], "normal", 0.0, 1.0 / math.sqrt(Cc)),
        ("ckv_b", k + "cross_attn.to_kv.bias", [2 * C], "normal", 0.0, 0.02),
        ("cout_w", k + "cross_attn.to_out.weight", [C, C], "normal", 0.0, s),
        ("cout_b", k + "cross_attn.to_out.bias", [C], "normal", 0.0, 0.02),
        ("fc1_w", k + "mlp.mlp.0.weight", [4 * C, C], "normal", 0.0, s),
        ("fc1_b", k + "mlp.mlp.0.bias", [4 * C], "normal", 0.0, 0.05),
        ("fc2_w", k + "mlp.mlp.2.weight", [C, 4 * C], "normal", 0.0, 0.5 * s),
        ("fc2_b", k + "mlp.mlp.2.bias", [C], "outliers" if i == 0 else "normal", 0.0, 0.02),
    ]
    return [(f"b{i:02d}_{n}", key, shape, base + j, kind, a, b) for j, (n, key, shape, kind, a, b) in enumerate(rows)]


def outlier_bias(C):
    vals = [OUTLIERS.get(c, round(0.02 * math.sin(0.9 * c), 4)) for c in range(C)]
    return [yfloat(x) for x in vals]


def weight_line(name, key, shape, seed, kind, a, b):
    if kind == "outliers":
        return tensor(name, "float32", shape, {"values": outlier_bias(shape[0])}, key)
    return tensor(name, "float32", shape, seeded(seed, kind, a, b), key)


def block_stage(v, i):
    C, H, T, Lc = v.C, v.H, v.T, v.Lc
    x, y = f"h_{i}", f"h_{i + 1}"
    w = lambda n: f"b{i:02d}_{n}"
    scale = 1.0 / math.sqrt(HEAD_DIM)
    chunk = lambda k, name: [
        node("vsdk.crop", ["mod"], name + "_flat", offsets=[0, k * C], sizes=[1, C]),
        node("vsdk.reshape", [name + "_flat"], name, shape=[1, 1, C]),
    ]
    g = [
        # adaLN: mod = Linear(SiLU(t_emb)), chunk(6) in this order.
        node("vsdk.silu", ["t_emb"], "t_act"),
        node("vsdk.linear", ["t_act", w("ada_w"), w("ada_b")], "mod"),
    ]
    for k, name in enumerate(["shift_msa", "scale_msa", "gate_msa", "shift_mlp", "scale_mlp", "gate_mlp"]):
        g += chunk(k, name)
    g += [
        # x += gate1 * SelfAttn(LN(x) * (1 + scale1) + shift1)
        node("vsdk.layer_norm", [x, "ln_ones", "ln_zeros"], "n1", eps=1e-6),
        node("vsdk.add", ["scale_msa", "one"], "scale_msa_1"),
        node("vsdk.mul", ["n1", "scale_msa_1"], "n1_scaled"),
        node("vsdk.add", ["n1_scaled", "shift_msa"], "n1_mod"),
        node("vsdk.linear", ["n1_mod", w("qkv_w"), w("qkv_b")], "qkv"),
        node("vsdk.reshape", ["qkv"], "qkv5", shape=[1, T, 3, H, HEAD_DIM]),
        node("vsdk.crop", ["qkv5"], "q5", offsets=[0, 0, 0, 0, 0], sizes=[1, T, 1, H, HEAD_DIM]),
        node("vsdk.crop", ["qkv5"], "k5", offsets=[0, 0, 1, 0, 0], sizes=[1, T, 1, H, HEAD_DIM]),
        node("vsdk.crop", ["qkv5"], "v5", offsets=[0, 0, 2, 0, 0], sizes=[1, T, 1, H, HEAD_DIM]),
        node("vsdk.reshape", ["q5"], "q_tokens", shape=[1, T, H, HEAD_DIM]),
        node("vsdk.reshape", ["k5"], "k_tokens", shape=[1, T, H, HEAD_DIM]),
        node("vsdk.reshape", ["v5"], "v_tokens", shape=[1, T, H, HEAD_DIM]),
        node("vsdk.rms_norm", ["q_tokens", w("q_gamma")], "q_normed", eps=1e-12),
        node("vsdk.rms_norm", ["k_tokens", w("k_gamma")], "k_normed", eps=1e-12),
        node("vsdk.permute", ["q_normed"], "q", perm=[0, 2, 1, 3]),
        node("vsdk.permute", ["k_normed"], "k", perm=[0, 2, 1, 3]),
        node("vsdk.permute", ["v_tokens"], "v", perm=[0, 2, 1, 3]),
        node("vsdk.sdpa", ["q", "k", "v"], "attn", scale=scale),
        node("vsdk.permute", ["attn"], "attn_tokens", perm=[0, 2, 1, 3]),
        node("vsdk.reshape", ["attn_tokens"], "attn_flat", shape=[1, T, C]),
        node("vsdk.linear", ["attn_flat", w("attn_out_w"), w("attn_out_b")], "attn_out"),
        node("vsdk.mul", ["attn_out", "gate_msa"], "attn_gated"),
        node("vsdk.add", [x, "attn_gated"], "x_attn"),
        # x += CrossAttn(LN_affine(x), cond): no modulation, no gate.
        node("vsdk.layer_norm", ["x_attn", w("norm2_w"), w("norm2_b")], "n2", eps=1e-6),
        node("vsdk.linear", ["n2", w("cq_w"), w("cq_b")], "cq_flat"),
        node("vsdk.reshape", ["cq_flat"], "cq_tokens", shape=[1, T, H, HEAD_DIM]),
        node("vsdk.permute", ["cq_tokens"], "cq", perm=[0, 2, 1, 3]),
        node("vsdk.linear", ["cond", w("ckv_w"), w("ckv_b")], "ckv"),
        node("vsdk.reshape", ["ckv"], "ckv5", shape=[1, Lc, 2, H, HEAD_DIM]),
        node("vsdk.crop", ["ckv5"], "ck5", offsets=[0, 0, 0, 0, 0], sizes=[1, Lc, 1, H, HEAD_DIM]),
        node("vsdk.crop", ["ckv5"], "cv5", offsets=[0, 0, 1, 0, 0], sizes=[1, Lc, 1, H, HEAD_DIM]),
        node("vsdk.reshape", ["ck5"], "ck_tokens", shape=[1, Lc, H, HEAD_DIM]),
        node("vsdk.reshape", ["cv5"], "cv_tokens", shape=[1, Lc, H, HEAD_DIM]),
        node("vsdk.permute", ["ck_tokens"], "ck", perm=[0, 2, 1, 3]),
        node("vsdk.permute", ["cv_tokens"], "cv", perm=[0, 2, 1, 3]),
        node("vsdk.sdpa", ["cq", "ck", "cv"], "cross", scale=scale),
        node("vsdk.permute", ["cross"], "cross_tokens", perm=[0, 2, 1, 3]),
        node("vsdk.reshape", ["cross_tokens"], "cross_flat", shape=[1, T, C]),
        node("vsdk.linear", ["cross_flat", w("cout_w"), w("cout_b")], "cross_out"),
        node("vsdk.add", ["x_attn", "cross_out"], "x_cross"),
        # x += gate2 * MLP(LN(x) * (1 + scale2) + shift2)
        node("vsdk.layer_norm", ["x_cross", "ln_ones", "ln_zeros"], "n3", eps=1e-6),
        node("vsdk.add", ["scale_mlp", "one"], "scale_mlp_1"),
        node("vsdk.mul", ["n3", "scale_mlp_1"], "n3_scaled"),
        node("vsdk.add", ["n3_scaled", "shift_mlp"], "n3_mod"),
        node("vsdk.linear", ["n3_mod", w("fc1_w"), w("fc1_b")], "hidden"),
        node("vsdk.gelu_tanh", ["hidden"], "hidden_act"),
        node("vsdk.linear", ["hidden_act", w("fc2_w"), w("fc2_b")], "mlp"),
        node("vsdk.mul", ["mlp", "gate_mlp"], "mlp_gated"),
        node("vsdk.add", ["x_cross", "mlp_gated"], y),
    ]
    weights = [name for name, *_ in weights_of_block(v, i)]
    notes = [
        "adaLN: mod = Linear(SiLU(t_emb)) split by chunk(6) into shift, scale, gate for the attention, then shift, "
        "scale, gate for the MLP, in that order; the input is modulated as LN(x) * (1 + scale) + shift (writing "
        "`scale` for `1 + scale` fails here), and only the self-attention and the MLP are gated.",
        "norm1 and norm3 are LayerNorms without affine (eps 1e-6), norm2 (before the cross-attention) has weight and "
        "bias; TRELLIS's LayerNorm32 computes them in float32 at every precision.",
        f"q and k get a per-head RMSNorm before the attention: x / max(|x|, 1e-12) * sqrt({HEAD_DIM}) * gamma over "
        "each head's 64 channels (F.normalize; a variant adding eps under the root is close but not the same). "
        "TRELLIS.2 applies RoPE after it; the cross-attention has no RMSNorm in this configuration.",
        f"qkv is laid out as [3, heads, 64] along the output features: reshape(B, L, 3, {H}, 64).unbind(2); the "
        f"cross-attention's keys and values come from to_kv(cond) laid out as [2, heads, 64], over the {Lc} "
        "conditioning tokens.",
        "The MLP's GELU is the tanh approximation (nn.GELU(approximate='tanh')); the erf form differs by up to "
        "about 5e-4 and fails here at fp32.",
        "Attention is scaled_dot_product_attention with the default scale 1/sqrt(64) (ATTN_BACKEND=sdpa).",
    ]
    return stage(
        f"block_{i:02d}",
        f"ModulatedTransformerCrossBlock {i}: x += gate1 * SelfAttn(LN(x) * (1 + scale1) + shift1) with q/k RMSNorm; "
        f"x += CrossAttn(LN_affine(x), cond); x += gate2 * MLP(LN(x) * (1 + scale2) + shift2), GELU tanh. {H} heads of "
        f"64, {v.T} tokens, {Lc} conditioning tokens",
        "trellis.modules.transformer.modulated.ModulatedTransformerCrossBlock (share_mod=False, qk_rms_norm=True, "
        "qk_rms_norm_cross=False)",
        f"{DIT}; {TRELLIS}",
        [x, "t_emb", "cond", "ln_ones", "ln_zeros", "one"] + weights, [y],
        g,
        [f"finite: {y}"],
        notes,
    )


def timestep_weights(C, seed):
    """TimestepEmbedder's MLP, seeded from `seed` on."""
    return [
        tensor("t_w1", "float32", [C, FREQ_DIM], seeded(seed, "normal", 0.0, 0.05), "t_embedder.mlp.0.weight"),
        tensor("t_b1", "float32", [C], seeded(seed + 1, "normal", 0.0, 0.02), "t_embedder.mlp.0.bias"),
        tensor("t_w2", "float32", [C, C], seeded(seed + 2, "normal", 0.0, 1.0 / math.sqrt(C)), "t_embedder.mlp.2.weight"),
        tensor("t_b2", "float32", [C], seeded(seed + 3, "normal", 0.0, 0.02), "t_embedder.mlp.2.bias"),
    ]


def sampler_constants(t, t_prev, strength):
    """The guided Euler step's scalars."""
    return [
        tensor("cfg_pos", "float32", [1], {"values": [yfloat(1 + strength)]}, "1 + cfg_strength"),
        tensor("cfg_neg", "float32", [1], {"values": [yfloat(strength)]}, "cfg_strength"),
        tensor("dt", "float32", [1], {"values": [yfloat(f32(t - t_prev))]},
               f"t - t_prev = {t:.9f} - {t_prev:.9f}, computed in float64 and used as a float32 scalar"),
    ]


def timestep_stage(C, t):
    """TimestepEmbedder: 1000 t -> sinusoidal (cos, sin) -> Linear, SiLU, Linear (float32)."""
    return stage(
        "timestep_embedding",
        "Sinusoidal timestep embedding of 1000 t: 128 frequencies exp(-ln(10000) i / 128), cos then sin; then "
        f"Linear(256, {C}), SiLU, Linear({C}, {C})",
        "trellis.models.sparse_structure_flow.TimestepEmbedder (timestep_embedding, then mlp)",
        f"{DIT}; {TRELLIS}",
        ["t_model", "t_freqs", "t_w1", "t_b1", "t_w2", "t_b2"], ["t_emb"],
        [
            node("vsdk.reshape", ["t_model"], "t_col", shape=[1, 1]),
            node("vsdk.mul", ["t_col", "t_freqs"], "args"),
            node("vsdk.cos", ["args"], "args_cos"),
            node("vsdk.sin", ["args"], "args_sin"),
            node("vsdk.concat", ["args_cos", "args_sin"], "t_freq", axis=1),
            node("vsdk.linear", ["t_freq", "t_w1", "t_b1"], "t_hidden"),
            node("vsdk.silu", ["t_hidden"], "t_hidden_act"),
            node("vsdk.linear", ["t_hidden_act", "t_w2", "t_b2"], "t_emb"),
        ],
        ["finite: t_emb"],
        [
            "cos first, then sin (GLIDE's order); the position embedding below is sin first. Swapping either fails.",
            f"The arguments reach 1000 t = {1000 * t:.1f} radians: a sine without an accurate argument reduction "
            "(CUDA's __sinf) is off by far more than float32's rounding there.",
            "TRELLIS keeps the timestep embedder in float32 when the blocks run in float16.",
        ],
        precision="float32",
    )


def sampler_stage(t, t_prev, sampler):
    """One teacher-forced Euler step of FlowEulerGuidanceIntervalSampler (TRELLIS v1's guidance)."""
    steps, strength, interval, rescale, step = sampler
    return stage(
        "sampler_step",
        f"One Euler step of the guided rectified-flow sampler at t = {t:.6f} -> {t_prev:.6f} (step {step} of "
        f"{steps}, rescale_t {rescale:g}, inside the guidance interval {list(interval)}): v = (1 + s) v_cond - "
        f"s v_uncond with s = {strength:g}; x_prev = x_t - (t - t_prev) v",
        "trellis.pipelines.samplers.FlowEulerGuidanceIntervalSampler.sample_once (TRELLIS v1's "
        "ClassifierFreeGuidanceSamplerMixin, negative condition zeros_like(cond))",
        f"{FLOW}; {CFG}",
        ["x_t", "v_cond", "v_uncond", "cfg_pos", "cfg_neg", "dt"], ["x_prev"],
        [
            node("vsdk.mul", ["v_cond", "cfg_pos"], "v_pos"),
            node("vsdk.mul", ["v_uncond", "cfg_neg"], "v_neg"),
            node("vsdk.sub", ["v_pos", "v_neg"], "v_guided"),
            node("vsdk.mul", ["v_guided", "dt"], "step"),
            node("vsdk.sub", ["x_t", "step"], "x_prev"),
        ],
        ["finite: x_prev"],
        [
            "Judged one step at a time from stored (x_t, t, t_prev), teacher-forced: a whole trajectory "
            "compounds errors and is not a verdict on any one step.",
            f"The time grid: t_seq = linspace(1, 0, {steps + 1}); t <- r t / (1 + (r - 1) t), r = {rescale:g}, "
            "computed in float64 on the host; guidance applies only where cfg_interval[0] <= t <= "
            "cfg_interval[1] (outside it this step is x_t - (t - t_prev) v_cond).",
            "TRELLIS v1's guidance is (1 + s) v_cond - s v_uncond; TRELLIS.2's (and trellis-3d-python's) is "
            "s v_cond + (1 - s) v_uncond, with guidance rescale by the ratio of the x0 predictions' std: another "
            "formula, not interchangeable.",
            f"x_t = (1 - t) x0 + (sigma_min + (1 - sigma_min) t) eps with sigma_min = {SIGMA_MIN:g} (the "
            "sampler's x0 prediction is not an output of this step).",
        ],
        precision="float32",
    )


def suite(v):
    C, H, T, R = v.C, v.H, v.T, v.res
    fd = C // 3 // 2
    pad = C - 6 * fd
    t, t_prev = time_grid()
    out_dir = v.out_dir or ROOT / v.name
    out = [
        "# Generated by tools/make_trellis_flow_suite.py: edit the script, not this file.",
        "vips: 1",
        "component:",
        f"  id: {v.name}",
        "  version: 0.1.0",
        f"  title: {q(v.title)}",
        f"  paper: {q(TRELLIS)}",
        "  notes:",
    ]
    notes = [
        "Reference: microsoft/TRELLIS, trellis/models/sparse_structure_flow.py, SparseStructureFlowModel as "
        f"TRELLIS-image-large configures it (resolution {R}, in/out channels 8, model channels {C}, "
        f"{H} heads of 64, {v.blocks} blocks, MLP ratio 4, pe_mode ape, qk_rms_norm, share_mod False, patch size 1), "
        "with the sampler of its pipeline (FlowEulerGuidanceIntervalSampler). PyPI `trellis-3d-python` packages "
        "these modules: tools/validate_trellis_flow.py builds the official model with this suite's weights.",
        "Weights are seeded synthetic tensors named after the official checkpoint (each description gives its key). "
        "The modulation's bias makes shifts, scales and gates of about +-0.6 (trained adaLN modulations are of that "
        f"size); block 0's MLP bias writes outlier channels {sorted(OUTLIERS)} (up to "
        f"{max(abs(x) for x in OUTLIERS.values()):g}, times its gate) into the residual stream.",
        "The conditioning stands for TRELLIS's DINOv2 ViT-L/14-reg tokens after a LayerNorm without affine "
        f"(dinov2-vitl14-reg-518: {v.Lc} tokens x {v.Cc}): seeded N(0, 1) here, the values such tokens have per "
        "token; a model document composes the two (issue 29).",
        "Precision: TRELLIS converts only the blocks to float16 (use_fp16): the timestep embedder, the input "
        "layer with the position embedding and the output layer stay float32, so those stages carry "
        "`precision: float32`; the blocks run at the tier.",
        "Golden values are computed in float64 by the CPU reference provider (`vips-conformance generate`) and "
        "stored as float32 (past the golden budget, as their SHA-256, regenerated: docs/golden-format.md).",
        "Verdicts follow the SDK's error model (docs/error-model.md); no number here was calibrated on this suite's data.",
    ]
    out += [f"    - {q(n)}" for n in notes]
    out += [
        "",
        "# Golden tensors larger than this are stored as their SHA-256 only (regenerated by `generate`).",
        "golden:",
        f"  budget_bytes: {v.budget}",
        "",
        "# The latent's tokens lie on a grid: 16³ is not the 64x64 its count suggests (docs/report.md, Layouts).",
        "layout:",
        f"  tokens: {flow({'prefix': 0, 'grid': [R, R, R]})}",
        "",
        "tensors:",
    ]
    coords = [float(c) for z in range(R) for y in range(R) for x in range(R) for c in (z, y, x)]
    ten = [
        tensor("x_t", "float32", [1, IN_CHANNELS, R, R, R], seeded(7001, "normal", 0.0, 1.0),
               f"the noisy latent at t = {t:.6f} (the sampler's step {STEP} of {STEPS}): N(0, 1)"),
        tensor("t_model", "float32", [1], {"values": [yfloat(f32(1000 * t))]},
               "the timestep the model receives: 1000 * t, as a float32 tensor"),
        tensor("cond", "float32", [1, v.Lc, v.Cc], seeded(7002, "normal", 0.0, 1.0),
               "the DINOv2 conditioning tokens (F.layer_norm(x_prenorm), no affine)"),
        tensor("t_freqs", "float32", [1, FREQ_DIM // 2], {"values": [yfloat(x) for x in timestep_freqs()]},
               "TimestepEmbedder: exp(-ln(10000) * arange(128) / 128), float32"),
        tensor("pos_coords", "float32", [3 * T, 1], {"values": [yfloat(c) for c in coords]},
               f"the latent's voxel coordinates (z, y, x) for each of the {T} tokens (meshgrid 'ij', flattened)"),
        tensor("pos_freqs", "float32", [1, fd], {"values": [yfloat(x) for x in position_freqs(C)]},
               f"AbsolutePositionEmbedder: 1 / 10000^(arange({fd}) / {fd}), float32"),
    ]
    if pad:
        ten.append(tensor("pos_pad", "float32", [T, pad], seeded(0, "uniform", 0.0, 0.0),
                          f"the embedding's zero padding to {C} channels (uniform [0, 0] is exactly 0)"))
    ten += [
        tensor("one", "float32", [1], {"values": [yfloat(1.0)]}, "1, for (1 + scale)"),
        tensor("ln_ones", "float32", [C], seeded(0, "uniform", 1.0, 1.0), "a LayerNorm without weight: ones"),
        tensor("ln_zeros", "float32", [C], seeded(0, "uniform", 0.0, 0.0), "a LayerNorm without bias: zeros"),
    ] + timestep_weights(C, 7010) + [
        tensor("in_w", "float32", [C, IN_CHANNELS], seeded(7014, "normal", 0.0, 0.3), "input_layer.weight"),
        tensor("in_b", "float32", [C], seeded(7015, "normal", 0.0, 0.02), "input_layer.bias"),
    ]
    for i in range(v.blocks):
        ten += [weight_line(*row) for row in weights_of_block(v, i)]
    ten += [
        tensor("out_w", "float32", [IN_CHANNELS, C], seeded(7016, "normal", 0.0, 1.0 / math.sqrt(C)), "out_layer.weight"),
        tensor("out_b", "float32", [IN_CHANNELS], seeded(7017, "normal", 0.0, 0.02), "out_layer.bias"),
        tensor("v_uncond", "float32", [1, IN_CHANNELS, R, R, R], seeded(7003, "normal", 0.0, 1.0),
               "the model's prediction with the zero (negative) conditioning at the same step: stands for a second "
               "forward of the model, which the suite does not repeat"),
    ] + sampler_constants(t, t_prev, CFG_STRENGTH)
    golden = [
        ("t_emb", [1, C], "the timestep embedding"),
        ("pos_emb", [1, T, C], "the absolute 3-D position embedding (the model's pos_emb buffer)"),
        ("h_0", [1, T, C], "the input layer's tokens with the position embedding"),
    ]
    golden += [(f"h_{i + 1}", [1, T, C], f"output of block {i}") for i in range(v.blocks)]
    golden += [
        ("v_cond", [1, IN_CHANNELS, R, R, R], "the model's output: the predicted velocity"),
        ("x_prev", [1, IN_CHANNELS, R, R, R], "the sampler's next latent"),
    ]
    ten += [tensor(n, "float32", s, "golden", d) for n, s, d in golden]
    out += ten
    out += [
        "",
        "# The error model's parameters (docs/error-model.md).",
        "tolerances:",
    ]
    for tier, (lam, bz, br, rl2, cos) in TOLERANCES.items():
        out.append(f"  {tier}: {flow({'lambda': yfloat(lam), 'bias_z': yfloat(bz), 'bias_ratio': yfloat(br), 'end_to_end': {'rel_l2': yfloat(rl2), 'cosine': yfloat(cos)}})}")
    out += ["", "stages:"]
    stages = [
        timestep_stage(C, t),
        stage(
            "position_embedding",
            f"Absolute 3-D position embedding: per token (z, y, x), per axis [sin(c f), cos(c f)] with {fd} "
            f"frequencies 10000^(-j / {fd}), the axes concatenated, zero-padded to {C}",
            "trellis.modules.transformer.blocks.AbsolutePositionEmbedder on meshgrid(arange(res)^3, indexing='ij')",
            TRELLIS,
            ["pos_coords", "pos_freqs"] + (["pos_pad"] if pad else []), ["pos_emb"],
            [
                node("vsdk.mul", ["pos_coords", "pos_freqs"], "pos_args"),
                node("vsdk.sin", ["pos_args"], "pos_sin"),
                node("vsdk.cos", ["pos_args"], "pos_cos"),
                node("vsdk.concat", ["pos_sin", "pos_cos"], "pos_axis", axis=1),
                node("vsdk.reshape", ["pos_axis"], "pos_tokens", shape=[T, 6 * fd]),
            ] + ([
                node("vsdk.concat", ["pos_tokens", "pos_pad"], "pos_padded", axis=1),
                node("vsdk.reshape", ["pos_padded"], "pos_emb", shape=[1, T, C]),
            ] if pad else [
                node("vsdk.reshape", ["pos_tokens"], "pos_emb", shape=[1, T, C]),
            ]),
            ["finite: pos_emb", "range: { tensor: pos_emb, min: -1.0, max: 1.0 }"],
            [
                "sin first, then cos, per axis (z, y, x in meshgrid 'ij' order); the timestep embedding is cos first.",
                f"{C} channels hold 3 axes x 2 x {fd} frequencies = {6 * fd}" + (f", then {pad} zeros" if pad else "") + ".",
                "The model computes this once, at construction (the pos_emb buffer): an engine may precompute it; "
                "its values must still be these.",
            ],
            precision="float32",
        ),
        stage(
            "input_layer",
            f"The latent [1, 8, {R}, {R}, {R}] as {T} tokens of 8 channels (view, permute), Linear(8, {C}), plus the "
            "position embedding",
            "SparseStructureFlowModel.forward: x.view(B, C, -1).permute(0, 2, 1); input_layer; h + pos_emb[None]",
            TRELLIS,
            ["x_t", "in_w", "in_b", "pos_emb"], ["h_0"],
            [
                node("vsdk.reshape", ["x_t"], "x_flat", shape=[1, IN_CHANNELS, T]),
                node("vsdk.permute", ["x_flat"], "x_tokens", perm=[0, 2, 1]),
                node("vsdk.linear", ["x_tokens", "in_w", "in_b"], "h_in"),
                node("vsdk.add", ["h_in", "pos_emb"], "h_0"),
            ],
            ["finite: h_0"],
            ["Tokens are the voxels in (z, y, x) row-major order, channels last."],
            precision="float32",
        ),
    ]
    stages += [block_stage(v, i) for i in range(v.blocks)]
    last = f"h_{v.blocks}"
    stages += [
        stage(
            "output_layer",
            f"LayerNorm without affine (eps 1e-5), Linear({C}, 8), back to [1, 8, {R}, {R}, {R}]",
            "SparseStructureFlowModel.forward: F.layer_norm(h, h.shape[-1:]); out_layer; permute(0, 2, 1).view(...)",
            TRELLIS,
            [last, "ln_ones", "ln_zeros", "out_w", "out_b"], ["v_cond"],
            [
                node("vsdk.layer_norm", [last, "ln_ones", "ln_zeros"], "h_norm", eps=1e-5),
                node("vsdk.linear", ["h_norm", "out_w", "out_b"], "out_tokens"),
                node("vsdk.permute", ["out_tokens"], "v_channels", perm=[0, 2, 1]),
                node("vsdk.reshape", ["v_channels"], "v_cond", shape=[1, IN_CHANNELS, R, R, R]),
            ],
            ["finite: v_cond"],
            ["The final LayerNorm's eps is PyTorch's default 1e-5, the blocks' is 1e-6.",
             "The model casts back to float32 before it (manual_cast(h, x.dtype))."],
            precision="float32",
        ),
        sampler_stage(t, t_prev, (STEPS, CFG_STRENGTH, CFG_INTERVAL, RESCALE_T, STEP)),
    ]
    out += stages
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "suite.yaml").write_text("\n".join(out) + "\n")
    print(f"wrote {out_dir / 'suite.yaml'}")


def committed(full):
    return [v for v in [
        Variant("trellis-ss-flow",
                "TRELLIS sparse-structure flow transformer (TRELLIS-image-large): 16^3 latent tokens x 1024, 24 blocks, "
                "the sampler's guided Euler step",
                resolution=16, channels=1024, heads=16, blocks=24, cond_tokens=1374, cond_channels=1024,
                golden_budget=8_000_000),
        Variant("trellis-ss-flow-quick",
                "TRELLIS sparse-structure flow transformer, quick: 8^3 latent tokens x 128, 2 heads, 2 blocks "
                "(the real model's structure), the sampler's guided Euler step",
                resolution=8, channels=128, heads=2, blocks=2, cond_tokens=69, cond_channels=1024,
                golden_budget=2_000_000),
    ] if full or v.name.endswith("-quick")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=pathlib.Path)
    p.add_argument("--full", action="store_true", help="also write trellis-ss-flow, the real shapes")
    p.add_argument("--id")
    p.add_argument("--resolution", type=int, default=8)
    p.add_argument("--channels", type=int, default=128)
    p.add_argument("--heads", type=int)
    p.add_argument("--blocks", type=int, default=2)
    p.add_argument("--cond-tokens", type=int, default=69)
    p.add_argument("--cond-channels", type=int, default=1024)
    p.add_argument("--golden-budget", type=int, default=8_000_000)
    a = p.parse_args()
    if a.out is None:
        for v in committed(a.full):
            suite(v)
        return
    heads = a.heads or a.channels // HEAD_DIM
    name = a.id or a.out.name
    suite(Variant(name, f"TRELLIS sparse-structure flow transformer: {a.resolution}^3 x {a.channels}, {a.blocks} blocks",
                  a.resolution, a.channels, heads, a.blocks, a.cond_tokens, a.cond_channels, a.golden_budget, a.out))


if __name__ == "__main__":
    main()
