#!/usr/bin/env python3
"""Writes the VIPS documents of TRELLIS's structured-latent flow model
(microsoft/TRELLIS v1, trellis/models/structured_latent_flow.py,
`SLatFlowModel` as TRELLIS-image-large configures it: resolution 64, 8 latent
channels, IO blocks at 128 channels, patch size 2, 2 IO residual blocks,
model width 1024, 24 blocks of 16 heads, APE, q/k RMSNorm, skip connections):

    conformance/suites/trellis-slat-flow-quick/suite.yaml  a 16^3 grid, IO 32, width 128, 2 heads,
        2 blocks, conditioning 69 x 1024: the real model's structure on a few hundred voxels (CI)
    --full: conformance/suites/trellis-slat-flow/suite.yaml, the real shapes on the surface shell of a
        seeded shape at 64^3 (outside CI: docs/benchmarks.md)

Stages follow SLatFlowModel.forward: the timestep embedding; the input layer
(SparseLinear 8 -> IO); input block 0 (SparseResBlock3d IO -> IO); the
downsample (coords // 2, sorted parents, the mean of merged voxels); input
block 1 (SparseResBlock3d IO -> width on the coarse voxels); the position
embedding of the coarse voxels; the transformer blocks over the coarse
voxels as tokens (ModulatedSparseTransformerCrossBlock: full attention,
the flow transformer's operators); the upsample (skip concatenation, then
every fine voxel takes its parent's row); output blocks 0 and 1 (with the
skip of input block 0); the output layer; one Euler step of the guided
sampler. Edit this script, re-run it, then `vips-conformance generate <suite>`.

    python3 tools/make_trellis_slat_suite.py            (the committed quick suite; --full: the full one)

tools/validate_trellis_slat.py judges TRELLIS's own sparse modules
(PyPI `trellis-3d-python`, spconv backend) built with these weights.
"""
import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_dinov2_suite import flow, node, q, seeded, stage, tensor, yfloat  # noqa: E402
from make_trellis_flow_suite import (  # noqa: E402
    HEAD_DIM, IN_CHANNELS, OUTLIERS, TOLERANCES, TRELLIS, block_stage, f32, position_freqs, sampler_constants,
    sampler_stage, time_grid, timestep_freqs, timestep_stage, timestep_weights, weight_line, weights_of_block)

ROOT = pathlib.Path(__file__).resolve().parent.parent / "conformance" / "suites"
SPCONV = "Graham, Engelcke and van der Maaten 2018, 3D Semantic Segmentation with Submanifold Sparse Convolutional Networks, arXiv:1711.10275"
# TRELLIS-image-large's structured-latent sampler (pipeline.json, slat_sampler):
# FlowEulerGuidanceIntervalSampler, 25 steps, cfg_strength 3.0, cfg_interval
# [0.5, 1.0], rescale_t 3.0. The suite's step is number STEP (t = 0.818, inside
# the interval).
SAMPLER = (25, 3.0, (0.5, 1.0), 3.0, 10)


class Variant:
    def __init__(self, name, title, resolution, io, channels, heads, blocks, cond_tokens, cond_channels,
                 golden_budget, out_dir=None):
        assert channels == heads * HEAD_DIM, "TRELLIS's heads are 64 channels wide"
        self.name, self.title = name, title
        self.res, self.io, self.C, self.H, self.blocks = resolution, io, channels, heads, blocks
        self.Lc, self.Cc = cond_tokens, cond_channels
        self.budget = golden_budget
        self.out_dir = out_dir
        self.voxels = shell(resolution)
        self.N = len(self.voxels)
        self.M = len({(b, x // 2, y // 2, z // 2) for b, x, y, z in self.voxels})
        self.T = self.M  # the transformer's tokens (block_stage's name)


def shell(res):
    """The surface voxels of a seeded blob in a res^3 grid, sorted (b, x, y, z):
    three overlapping ellipsoids with low-frequency bumps, one of them cut by
    the grid's x = 0 face (voxels on the boundary, neighbours off the grid).
    A voxel is on the surface when it is inside and a face neighbour is
    outside or off the grid: the one-voxel-thick occupancy TRELLIS's
    sparse-structure stage produces."""
    import numpy as np
    rng = np.random.default_rng(20260 + res)
    g = (np.arange(res) + 0.5) / res
    x, y, z = np.meshgrid(g, g, g, indexing="ij")
    inside = np.zeros((res, res, res), dtype=bool)
    centres = [(0.12, 0.45, 0.5), (0.5, 0.5, 0.45), (0.72, 0.55, 0.6)]
    for i, c in enumerate(centres):
        radii = rng.uniform(0.16, 0.3, size=3)
        phase = rng.uniform(0, 2 * np.pi, size=3)
        d = np.sqrt(((x - c[0]) / radii[0]) ** 2 + ((y - c[1]) / radii[1]) ** 2 + ((z - c[2]) / radii[2]) ** 2)
        bumps = 0.08 * np.sin(5 * x + phase[0]) * np.sin(4 * y + phase[1]) * np.sin(6 * z + phase[2])
        inside |= d < 1.0 + bumps
    padded = np.pad(inside, 1, constant_values=False)
    outside_neighbour = np.zeros_like(inside)
    for axis in range(3):
        for shift in (-1, 1):
            outside_neighbour |= ~np.roll(padded, shift, axis=axis)[1:-1, 1:-1, 1:-1]
    surface = inside & outside_neighbour
    assert surface[0].any(), "the shape touches the grid's x = 0 face"
    return [(0, int(a), int(b), int(c)) for a, b, c in sorted(zip(*np.nonzero(surface)))]


def resblock_weights(prefix, key, cin, cout, C, seed):
    """Name, checkpoint key, shape, distribution of a SparseResBlock3d's
    weights. Surface voxels have about 9 of 27 neighbours, so a convolution's
    weights are scaled by 1/sqrt(9 cin); conv2 is smaller (zero-initialised
    in TRELLIS, trained away from zero)."""
    conv = "(spconv's [Cout, 3, 3, 3, Cin] as [27, Cin, Cout], k = 9 kx + 3 ky + kz: docs/operators.md)"
    rows = [
        ("norm1_w", "norm1.weight", [cin], "uniform", 0.7, 1.3),
        ("norm1_b", "norm1.bias", [cin], "uniform", -0.1, 0.1),
        ("conv1_w", f"conv1.conv.weight {conv}", [27, cin, cout], "normal", 0.0, 1.0 / math.sqrt(9 * cin)),
        ("conv1_b", "conv1.conv.bias", [cout], "normal", 0.0, 0.02),
        ("emb_w", "emb_layers.1.weight", [2 * cout, C], "normal", 0.0, 0.5 / math.sqrt(C)),
        # scale, shift: modulations of about +-0.5, as trained ones are.
        ("emb_b", "emb_layers.1.bias", [2 * cout], "uniform", -0.5, 0.5),
        ("conv2_w", f"conv2.conv.weight {conv}", [27, cout, cout], "normal", 0.0, 0.5 / math.sqrt(9 * cout)),
        ("conv2_b", "conv2.conv.bias", [cout], "normal", 0.0, 0.02),
    ]
    if cin != cout:
        rows += [
            ("skip_w", "skip_connection.weight", [cout, cin], "normal", 0.0, 1.0 / math.sqrt(cin)),
            ("skip_b", "skip_connection.bias", [cout], "normal", 0.0, 0.02),
        ]
    return [(f"{prefix}_{n}", key + k, shape, seed + j, kind, a, b) for j, (n, k, shape, kind, a, b) in enumerate(rows)]


def resblock_stage(v, name, title, prefix, key, x, coords, cin, cout, out, seed, pre=(), pre_inputs=(), notes=()):
    """SparseResBlock3d(cin, C, out_channels=cout) on `x` (after `pre`, the
    nodes that make `x`: the concatenation of a skip)."""
    weights = resblock_weights(prefix, key, cin, cout, v.C, seed)
    w = lambda n: f"{prefix}_{n}"
    ones, zeros = ("ln_ones", "ln_zeros") if cout == v.C else ("io_ones", "io_zeros")
    # Intermediates are named per block: a document gives each name one shape.
    i = lambda n: f"{prefix}_{n}"
    g = list(pre) + [
        # emb_out = Linear(SiLU(t_emb)); scale, shift = chunk(2): scale first.
        node("vsdk.silu", ["t_emb"], i("t_act")),
        node("vsdk.linear", [i("t_act"), w("emb_w"), w("emb_b")], i("emb")),
        node("vsdk.crop", [i("emb")], i("scale"), offsets=[0, 0], sizes=[1, cout]),
        node("vsdk.crop", [i("emb")], i("shift"), offsets=[0, cout], sizes=[1, cout]),
        node("vsdk.layer_norm", [x, w("norm1_w"), w("norm1_b")], i("n1"), eps=1e-6),
        node("vsdk.silu", [i("n1")], i("a1")),
        node("vsdk.sparse_conv3d", [i("a1"), coords, w("conv1_w"), w("conv1_b")], i("c1")),
        node("vsdk.layer_norm", [i("c1"), ones, zeros], i("n2"), eps=1e-6),
        node("vsdk.add", [i("scale"), "one"], i("scale_1")),
        node("vsdk.mul", [i("n2"), i("scale_1")], i("n2_scaled")),
        node("vsdk.add", [i("n2_scaled"), i("shift")], i("n2_mod")),
        node("vsdk.silu", [i("n2_mod")], i("a2")),
        node("vsdk.sparse_conv3d", [i("a2"), coords, w("conv2_w"), w("conv2_b")], i("c2")),
    ]
    if cin != cout:
        g += [node("vsdk.linear", [x, w("skip_w"), w("skip_b")], i("skip")),
              node("vsdk.add", [i("c2"), i("skip")], out)]
    else:
        g.append(node("vsdk.add", [i("c2"), x], out))
    inputs = list(pre_inputs or [x]) + [coords, "t_emb", "one", ones, zeros] + [n for n, *_ in weights]
    return stage(
        name,
        f"{title}: h = conv2(SiLU(LN(conv1(SiLU(LN_affine(x)))) * (1 + scale) + shift)) + "
        f"{'Linear' if cin != cout else 'identity'}(x); submanifold 3x3x3 convolutions, {cin} -> {cout} channels",
        "trellis.models.structured_latent_flow.SparseResBlock3d (TRELLIS v1), spconv SubMConv3d",
        f"{SPCONV}; {TRELLIS}",
        inputs, [out], g, [f"finite: {out}"],
        [
            "emb_out = Linear(SiLU(t_emb)) is split by chunk(2) into scale, then shift (the transformer's "
            "adaLN order is shift first); the norm after conv1 has no affine and is modulated as "
            "LN(h) * (1 + scale) + shift.",
            "norm1 (affine) and norm2 are LayerNorm32 with eps 1e-6: float32 at every precision.",
            "The convolutions are submanifold: output voxels are the input voxels, a neighbour counts only "
            "if it is active; weight k = 9(dx+1) + 3(dy+1) + (dz+1) (docs/operators.md gives spconv's, "
            "PyTorch's and torchsparse's layouts). A port that reads spconv's weight in torchsparse's offset "
            "order, or transposes Cin and Cout, fails here.",
        ] + list(notes),
    )


def suite(v):
    C, H, M, N, io = v.C, v.H, v.M, v.N, v.io
    fd = C // 3 // 2
    pad = C - 6 * fd
    steps, strength, interval, rescale, step = SAMPLER
    t, t_prev = time_grid(steps, rescale, step)
    out_dir = v.out_dir or ROOT / v.name
    out = [
        "# Generated by tools/make_trellis_slat_suite.py: edit the script, not this file.",
        "vips: 1",
        "component:",
        f"  id: {v.name}",
        "  version: 0.1.0",
        f"  title: {q(v.title)}",
        f"  paper: {q(TRELLIS)}",
        "  notes:",
    ]
    notes = [
        "Reference: microsoft/TRELLIS (v1), trellis/models/structured_latent_flow.py, SLatFlowModel as "
        f"TRELLIS-image-large configures it (resolution {v.res}, in/out channels 8, IO block channels [{io}], "
        f"patch size 2, 2 IO residual blocks, model channels {C}, {H} heads of 64, {v.blocks} blocks, "
        "MLP ratio 4, pe_mode ape, qk_rms_norm, share_mod False, use_skip_connection), with the sampler of its "
        "pipeline. Its sparse modules are in PyPI `trellis-3d-python` (SparseConv3d with the spconv backend, "
        "SparseDownsample, SparseUpsample, LayerNorm32, the sparse transformer blocks): "
        "tools/validate_trellis_slat.py builds the model from them with this suite's weights.",
        f"Voxels: the surface shell of a seeded blob in a {v.res}^3 grid ({N} voxels, {M} after the downsample; "
        "some on the grid's x = 0 face), sorted lexicographically by (b, x, y, z), batch 1. TRELLIS's own "
        "coordinates come from the sparse-structure stage: the same kind of one-voxel-thick occupancy.",
        "A sparse tensor is coords [N, 4] int32 beside feats [N, C] (docs/operators.md, 'Sparse voxel tensors'); "
        "rows keep the coordinates' order, the downsample's parents are sorted, so every output is compared "
        "row for row. Coordinates and the downsample's inverse are integers, judged exactly.",
        "Weights are seeded synthetic tensors named after the official checkpoint (each description gives its "
        "key; a convolution's gives the layout mapping). Modulations of about +-0.5; block 0's MLP bias writes "
        f"outlier channels into the residual stream ({sorted(c for c in OUTLIERS if c < C)}).",
        "The conditioning stands for TRELLIS's DINOv2 ViT-L/14-reg tokens after a LayerNorm without affine "
        f"({v.Lc} tokens x {v.Cc}): seeded N(0, 1) here.",
        "Precision: TRELLIS converts the input blocks, the transformer blocks and the output blocks to float16 "
        "(use_fp16); the timestep embedder, the input layer, the position embedding and the output layer "
        "stay float32, so those stages carry `precision: float32`.",
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
        "tensors:",
    ]
    coords = [c for vox in v.voxels for c in vox]
    blocks = [
        ("ib0", "input_blocks.0.", io, io, 30000),
        ("ib1", "input_blocks.1.", io, C, 30100),
        ("ob0", "out_blocks.0.", 2 * C, io, 30200),
        ("ob1", "out_blocks.1.", 2 * io, io, 30300),
    ]
    res_weights = {p: resblock_weights(p, k, cin, cout, C, s) for p, k, cin, cout, s in blocks}
    ten = [
        tensor("coords", "int32", [N, 4], {"values": coords},
               f"the active voxels (b, x, y, z) of the {v.res}^3 grid, sorted"),
        tensor("x_t", "float32", [N, IN_CHANNELS], seeded(8001, "normal", 0.0, 1.0),
               f"the noisy structured latent at t = {t:.6f} (the sampler's step {step} of {steps}): N(0, 1)"),
        tensor("t_model", "float32", [1], {"values": [yfloat(f32(1000 * t))]},
               "the timestep the model receives: 1000 * t, as a float32 tensor"),
        tensor("cond", "float32", [1, v.Lc, v.Cc], seeded(8002, "normal", 0.0, 1.0),
               "the DINOv2 conditioning tokens (F.layer_norm(x_prenorm), no affine)"),
        tensor("t_freqs", "float32", [1, 128], {"values": [yfloat(x) for x in timestep_freqs()]},
               "TimestepEmbedder: exp(-ln(10000) * arange(128) / 128), float32"),
        tensor("pos_freqs", "float32", [1, fd], {"values": [yfloat(x) for x in position_freqs(C)]},
               f"AbsolutePositionEmbedder: 1 / 10000^(arange({fd}) / {fd}), float32"),
    ]
    if pad:
        ten.append(tensor("pos_pad", "float32", [M, pad], seeded(0, "uniform", 0.0, 0.0),
                          f"the embedding's zero padding to {C} channels (uniform [0, 0] is exactly 0)"))
    ten += [
        tensor("zero_rows", "float32", [M, io], seeded(0, "uniform", 0.0, 0.0),
               "the downsample's zero start rows, one per parent (uniform [0, 0] is exactly 0)"),
        tensor("parent_rows", "int32", [M], {"values": list(range(M))}, "0, 1, ..., M - 1: each zero row's parent"),
        tensor("one", "float32", [1], {"values": [yfloat(1.0)]}, "1, for (1 + scale)"),
        tensor("ln_ones", "float32", [C], seeded(0, "uniform", 1.0, 1.0), "a LayerNorm without weight: ones"),
        tensor("ln_zeros", "float32", [C], seeded(0, "uniform", 0.0, 0.0), "a LayerNorm without bias: zeros"),
        tensor("io_ones", "float32", [io], seeded(0, "uniform", 1.0, 1.0), "a LayerNorm without weight: ones"),
        tensor("io_zeros", "float32", [io], seeded(0, "uniform", 0.0, 0.0), "a LayerNorm without bias: zeros"),
    ] + timestep_weights(C, 8010) + [
        tensor("in_w", "float32", [io, IN_CHANNELS], seeded(8014, "normal", 0.0, 0.3), "input_layer.weight"),
        tensor("in_b", "float32", [io], seeded(8015, "normal", 0.0, 0.02), "input_layer.bias"),
    ]
    for p, *_ in blocks[:2]:
        ten += [weight_line(*row) for row in res_weights[p]]
    for i in range(v.blocks):
        ten += [weight_line(*row) for row in weights_of_block(v, i)]
    for p, *_ in blocks[2:]:
        ten += [weight_line(*row) for row in res_weights[p]]
    ten += [
        tensor("out_w", "float32", [IN_CHANNELS, io], seeded(8016, "normal", 0.0, 1.0 / math.sqrt(io)), "out_layer.weight"),
        tensor("out_b", "float32", [IN_CHANNELS], seeded(8017, "normal", 0.0, 0.02), "out_layer.bias"),
        tensor("v_uncond", "float32", [N, IN_CHANNELS], seeded(8003, "normal", 0.0, 1.0),
               "the model's prediction with the zero (negative) conditioning at the same step: stands for a second "
               "forward of the model, which the suite does not repeat"),
    ] + sampler_constants(t, t_prev, strength)
    golden = [
        ("t_emb", "float32", [1, C], "the timestep embedding"),
        ("h_in", "float32", [N, io], "the input layer's features"),
        ("skip_0", "float32", [N, io], "input block 0's output (the skip of output block 1)"),
        ("coarse_coords", "int32", [M, 4], "the downsample's voxels: distinct coords // 2, sorted"),
        ("inverse", "int32", [N], "each fine voxel's row among coarse_coords"),
        ("pooled", "float32", [M, io], "the mean of each coarse voxel's fine features"),
        ("skip_1", "float32", [M, C], "input block 1's output (the skip of output block 0)"),
        ("pos_emb", "float32", [M, C], "the absolute position embedding of the coarse voxels"),
        ("h_0", "float32", [1, M, C], "the transformer's input tokens"),
    ]
    golden += [(f"h_{i + 1}", "float32", [1, M, C], f"output of transformer block {i}") for i in range(v.blocks)]
    golden += [
        ("up", "float32", [N, 2 * C], "the last block's tokens beside skip_1, each fine voxel given its parent's row"),
        ("o_0", "float32", [N, io], "output block 0's output"),
        ("o_1", "float32", [N, io], "output block 1's output"),
        ("v_cond", "float32", [N, IN_CHANNELS], "the model's output: the predicted velocity of every voxel"),
        ("x_prev", "float32", [N, IN_CHANNELS], "the sampler's next latent"),
    ]
    ten += [tensor(n, d, s, "golden", desc) for n, d, s, desc in golden]
    out += ten
    out += ["", "# The error model's parameters (docs/error-model.md).", "tolerances:"]
    for tier, (lam, bz, br, rl2, cos) in TOLERANCES.items():
        out.append(f"  {tier}: {flow({'lambda': yfloat(lam), 'bias_z': yfloat(bz), 'bias_ratio': yfloat(br), 'end_to_end': {'rel_l2': yfloat(rl2), 'cosine': yfloat(cos)}})}")
    out += ["", "stages:"]
    stages = [
        timestep_stage(C, t),
        stage(
            "input_layer",
            f"SparseLinear(8, {io}) on every voxel's latent",
            "SLatFlowModel.forward: self.input_layer(x)",
            TRELLIS,
            ["x_t", "in_w", "in_b"], ["h_in"],
            [node("vsdk.linear", ["x_t", "in_w", "in_b"], "h_in")],
            ["finite: h_in"],
            ["The model casts the result to float16 after this layer (use_fp16); the layer itself is float32."],
            precision="float32",
        ),
    ]
    s = resblock_stage(v, "input_block_0", "Input SparseResBlock3d 0 on the fine voxels", "ib0",
                          "input_blocks.0.", "h_in", "coords", io, io, "skip_0", 30000)
    stages.append(s)
    stages.append(stage(
        "downsample",
        f"SparseDownsample(2): parents coords // 2 (distinct, sorted by (b, x, y, z): {M} of {N}), each voxel's "
        "row among them, and each parent's features: the sum of its n voxels' divided by n + 1 (TRELLIS v1's "
        "scatter_reduce counts the zero it starts from)",
        "trellis.modules.sparse.spatial.SparseDownsample(2) (TRELLIS v1), the start of input block 1",
        TRELLIS,
        ["skip_0", "coords", "zero_rows", "parent_rows"], ["coarse_coords", "inverse", "pooled"],
        [
            node("vsdk.sparse_downsample_coords", ["coords"], "coarse_coords", voxels=M),
            node("vsdk.sparse_downsample_index", ["coords"], "inverse", voxels=M),
            # One zero row per parent joins its segment: Σ / (n + 1).
            node("vsdk.concat", ["skip_0", "zero_rows"], "pool_rows", axis=0),
            node("vsdk.concat", ["inverse", "parent_rows"], "pool_index", axis=0),
            node("vsdk.segment_mean", ["pool_rows", "pool_index"], "pooled", segments=M),
        ],
        ["finite: pooled"],
        [
            "TRELLIS packs (b, x // 2, y // 2, z // 2) into one integer code and takes torch.unique(return_inverse="
            "True): the parents come out sorted lexicographically, which fixes the row of every coarse voxel.",
            "TRELLIS v1 pools with torch.scatter_reduce(torch.zeros(M, C), 0, idx, feats, reduce='mean') and leaves "
            "include_self at its default, True: the zero each parent starts from is averaged in, so a parent's "
            "features are the sum of its n voxels' over n + 1, not their mean. The trained v1 weights expect that; "
            "the graph writes it out as one zero row per parent joining its segment. TRELLIS.2 passes "
            "include_self=False (the true mean): a port that takes the mean, or TRELLIS.2's module, fails here, "
            "as does a sum, or the parents in first-seen order.",
        ],
    ))
    s = resblock_stage(v, "input_block_1", "Input SparseResBlock3d 1 (the downsampling one) on the coarse voxels",
                          "ib1", "input_blocks.1.", "pooled", "coarse_coords", io, C, "skip_1", 30100,
                          notes=["TRELLIS downsamples first (the stage above), then runs the block on the coarse "
                                 "voxels; its skip connection is a SparseLinear because the width changes."])
    stages.append(s)
    stages.append(stage(
        "position_embedding",
        f"Absolute 3-D position embedding of the coarse voxels' (x, y, z): per axis [sin(c f), cos(c f)] with {fd} "
        f"frequencies 10000^(-j / {fd}), the axes concatenated, zero-padded to {C}",
        "trellis.modules.transformer.blocks.AbsolutePositionEmbedder on h.coords[:, 1:]",
        TRELLIS,
        ["coarse_coords", "pos_freqs"] + (["pos_pad"] if pad else []), ["pos_emb"],
        [
            node("vsdk.cast", ["coarse_coords"], "coords_f", dtype="float32"),
            node("vsdk.crop", ["coords_f"], "xyz", offsets=[0, 1], sizes=[M, 3]),
            node("vsdk.reshape", ["xyz"], "pos_coords", shape=[3 * M, 1]),
            node("vsdk.mul", ["pos_coords", "pos_freqs"], "pos_args"),
            node("vsdk.sin", ["pos_args"], "pos_sin"),
            node("vsdk.cos", ["pos_args"], "pos_cos"),
            node("vsdk.concat", ["pos_sin", "pos_cos"], "pos_axis", axis=1),
        ] + ([
            node("vsdk.reshape", ["pos_axis"], "pos_tokens", shape=[M, 6 * fd]),
            node("vsdk.concat", ["pos_tokens", "pos_pad"], "pos_emb", axis=1),
        ] if pad else [
            node("vsdk.reshape", ["pos_axis"], "pos_emb", shape=[M, C]),
        ]),
        ["finite: pos_emb", "range: { tensor: pos_emb, min: -1.0, max: 1.0 }"],
        [
            "The coordinates are the coarse voxels' (after the downsample, 0 to "
            f"{v.res // 2 - 1}), x, y, z in that order; the batch column is not embedded.",
            f"{C} channels hold 3 axes x 2 x {fd} frequencies = {6 * fd}" + (f", then {pad} zeros" if pad else "") + ".",
        ],
        precision="float32",
    ))
    stages.append(stage(
        "add_position",
        "The transformer's tokens: input block 1's output plus the position embedding, as one sequence",
        "SLatFlowModel.forward: h + self.pos_embedder(h.coords[:, 1:]).type(self.dtype)",
        TRELLIS,
        ["skip_1", "pos_emb"], ["h_0"],
        [
            node("vsdk.add", ["skip_1", "pos_emb"], "h_flat"),
            node("vsdk.reshape", ["h_flat"], "h_0", shape=[1, M, C]),
        ],
        ["finite: h_0"],
        ["Full attention over one batch item's voxels is dense attention over its rows: the blocks below are the "
         "flow transformer's, on these tokens."],
    ))
    sparse_impl = ("trellis.modules.sparse.transformer.modulated.ModulatedSparseTransformerCrossBlock (attn_mode "
                   "'full', share_mod=False, qk_rms_norm=True, qk_rms_norm_cross=False)")
    for i in range(v.blocks):
        s = block_stage(v, i)
        s = s.replace(q("trellis.modules.transformer.modulated.ModulatedTransformerCrossBlock (share_mod=False, "
                        "qk_rms_norm=True, qk_rms_norm_cross=False)"), q(sparse_impl))
        stages.append(s)
    last = f"h_{v.blocks}"
    stages.append(stage(
        "upsample",
        f"The last block's tokens beside input block 1's output (concatenated, {2 * C} channels), then "
        "SparseUpsample(2): every fine voxel takes its parent's row through the downsample's inverse",
        "SLatFlowModel.forward: h.replace(torch.cat([h.feats, skip], dim=1)); SparseUpsample(2) at the start of "
        "output block 0",
        TRELLIS,
        [last, "skip_1", "inverse"], ["up"],
        [
            node("vsdk.reshape", [last], "h_rows", shape=[M, C]),
            node("vsdk.concat", ["h_rows", "skip_1"], "h_skip", axis=1),
            node("vsdk.gather_rows", ["h_skip", "inverse"], "up"),
        ],
        ["finite: up"],
        [
            "The tokens come first, the skip second. The upsample reuses the inverse index the downsample cached "
            "(SparseTensor's spatial cache): rows come back in the fine voxels' order. Gathering through another "
            "level's index, or an off-by-one parent, fails here.",
        ],
    ))
    s = resblock_stage(v, "output_block_0", "Output SparseResBlock3d 0 (the upsampling one) on the fine voxels",
                          "ob0", "out_blocks.0.", "up", "coords", 2 * C, io, "o_0", 30200)
    stages.append(s)
    s = resblock_stage(v, "output_block_1", "Output SparseResBlock3d 1 on the fine voxels, after the skip of input "
                          "block 0", "ob1", "out_blocks.1.", "ob1_skip_in", "coords", 2 * io, io, "o_1", 30300,
                          pre=[node("vsdk.concat", ["o_0", "skip_0"], "ob1_skip_in", axis=1)],
                          pre_inputs=["o_0", "skip_0"],
                          notes=["The block's input is torch.cat([h.feats, skip], dim=1): its own features first."])
    stages.append(s)
    stages.append(stage(
        "output_layer",
        f"LayerNorm without affine (eps 1e-5), SparseLinear({io}, 8)",
        "SLatFlowModel.forward: F.layer_norm(h.feats, h.feats.shape[-1:]); self.out_layer(h.type(x.dtype))",
        TRELLIS,
        ["o_1", "io_ones", "io_zeros", "out_w", "out_b"], ["v_cond"],
        [
            node("vsdk.layer_norm", ["o_1", "io_ones", "io_zeros"], "h_norm", eps=1e-5),
            node("vsdk.linear", ["h_norm", "out_w", "out_b"], "v_cond"),
        ],
        ["finite: v_cond"],
        ["The final LayerNorm's eps is PyTorch's default 1e-5, the blocks' is 1e-6."],
        precision="float32",
    ))
    stages.append(sampler_stage(t, t_prev, SAMPLER))
    out += stages
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "suite.yaml").write_text("\n".join(out) + "\n")
    print(f"wrote {out_dir / 'suite.yaml'} ({N} voxels, {M} coarse)")


def committed(full):
    return [v for v in [
        Variant("trellis-slat-flow",
                "TRELLIS structured-latent flow (TRELLIS-image-large): sparse residual blocks at 128 channels around "
                "24 transformer blocks x 1024 on the coarse voxels of a 64^3 shell, the sampler's guided Euler step",
                resolution=64, io=128, channels=1024, heads=16, blocks=24, cond_tokens=1374, cond_channels=1024,
                golden_budget=8_000_000),
        Variant("trellis-slat-flow-quick",
                "TRELLIS structured-latent flow, quick: a 16^3 shell, IO blocks at 32 channels, 2 transformer blocks "
                "x 128 (the real model's structure), the sampler's guided Euler step",
                resolution=16, io=32, channels=128, heads=2, blocks=2, cond_tokens=69, cond_channels=1024,
                golden_budget=2_000_000),
    ] if full or v.name.endswith("-quick")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="also write trellis-slat-flow, the real shapes")
    a = p.parse_args()
    for v in committed(a.full):
        suite(v)


if __name__ == "__main__":
    main()
