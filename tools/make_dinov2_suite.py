#!/usr/bin/env python3
"""Writes the VIPS documents of the DINOv2 ViT-S/14 suites:

    conformance/suites/dinov2-vits14/suite.yaml        224x224 from a 300x400 image
    conformance/suites/dinov2-vits14-quick/suite.yaml  56x56 from a 75x100 image

The documents are generated because they repeat one block twelve times with
its own weights (YAML anchors are not allowed in VIPS documents: every value
is spelled out where a reviewer reads it). Edit this script, re-run it, then
`vips-conformance generate <suite>` to recompute the golden files.

    python3 tools/make_dinov2_suite.py

Real weights and real photos (the golden set is then yours, generated from
them and pinning them by SHA-256):

    python3 tools/make_dinov2_suite.py --out DIR [--weights] [--image photo.jpg]
    vips-conformance generate ./DIR --tensors dinov2_vits14.safetensors [--tensors DIR/image.npy]
    vips-conformance run ./DIR --provider ...      (with a `/`: a path, not a suite name)

--weights reads every weight from the checkpoint under its official key
(tools/convert_dinov2_checkpoint.py turns the hub .pth into safetensors);
--image takes the input from a photo (saved as DIR/image.npy, uint8 RGB).
"""
import argparse
import re
import json
import math
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "conformance" / "suites"
DIM, HEADS, HEAD_DIM, MLP, DEPTH, PATCH, GRID = 384, 6, 64, 1536, 12, 14, 37

# Seeded synthetic weights with a profile that looks trained: every stage
# changes its input materially (LayerScale 0.05-0.6, not the 1e-5 training
# init, which would make blocks near-identity and certify nothing), and, as in
# trained ViTs (Darcet et al. 2023, arXiv:2309.16588; Sun et al. 2024,
# arXiv:2402.17762), the residual stream grows a few *outlier channels* in an
# early block: block OUTLIER_BLOCK's fc2 bias writes OUTLIERS[c] *
# ACTIVATION_SCALE (times that block's LayerScale) into channel c of every
# token, and the residual connections carry it through the later blocks; the
# class token is a high-norm token (std 1.5 * ACTIVATION_SCALE). The blocks
# before OUTLIER_BLOCK see clean activations, where small effects (a LayerNorm
# eps) are still visible. --activation-scale 10 builds the stress suites: the
# same model with ten times larger outliers.
WEIGHTS = {
    "patch_w": ([DIM, 3, PATCH, PATCH], "normal", 0.0, 0.02),
    "patch_b": ([DIM], "uniform", -0.05, 0.05),
    "cls_token": ([1, 1, DIM], "normal", 0.0, "cls"),
    "pos_embed": ([1, GRID * GRID + 1, DIM], "normal", 0.0, 0.3),
    "norm_w": ([DIM], "uniform", 0.7, 1.3),
    "norm_b": ([DIM], "uniform", -0.1, 0.1),
}
BLOCK = {
    "norm1_w": ([DIM], "uniform", 0.7, 1.3),
    "norm1_b": ([DIM], "uniform", -0.1, 0.1),
    "qkv_w": ([3 * DIM, DIM], "normal", 0.0, 0.07),
    "qkv_b": ([3 * DIM], "normal", 0.0, 0.02),
    "proj_w": ([DIM, DIM], "normal", 0.0, 0.05),
    "proj_b": ([DIM], "normal", 0.0, 0.02),
    "ls1": ([DIM], "uniform", 0.05, 0.6),
    "norm2_w": ([DIM], "uniform", 0.7, 1.3),
    "norm2_b": ([DIM], "uniform", -0.1, 0.1),
    "fc1_w": ([MLP, DIM], "normal", 0.0, 0.05),
    "fc1_b": ([MLP], "normal", 0.0, 0.05),
    "fc2_w": ([DIM, MLP], "normal", 0.0, 0.025),
    "fc2_b": ([DIM], "normal", 0.0, 0.02),
    "ls2": ([DIM], "uniform", 0.05, 0.6),
}
CHECKPOINT = {
    "patch_w": "patch_embed.proj.weight", "patch_b": "patch_embed.proj.bias",
    "cls_token": "cls_token", "pos_embed": "pos_embed", "norm_w": "norm.weight", "norm_b": "norm.bias",
    "norm1_w": "norm1.weight", "norm1_b": "norm1.bias", "qkv_w": "attn.qkv.weight", "qkv_b": "attn.qkv.bias",
    "proj_w": "attn.proj.weight", "proj_b": "attn.proj.bias", "ls1": "ls1.gamma",
    "norm2_w": "norm2.weight", "norm2_b": "norm2.bias", "fc1_w": "mlp.fc1.weight", "fc1_b": "mlp.fc1.bias",
    "fc2_w": "mlp.fc2.weight", "fc2_b": "mlp.fc2.bias", "ls2": "ls2.gamma",
}
# The error model's parameters (docs/error-model.md). END_TO_END: chained mode's
# criterion on the encoder's outputs (relative L2 error, cosine similarity).
LAMBDA = 6.0
BIAS_Z = 8.0
BIAS_RATIO = 0.1
END_TO_END = {"fp32": (1e-4, 0.999999), "fp16": (2e-2, 0.9998), "bf16": (1e-1, 0.995)}

PAPER = "Oquab et al. 2023, DINOv2: Learning Robust Visual Features without Supervision, arXiv:2304.07193"
VIT = "Dosovitskiy et al. 2020, An Image is Worth 16x16 Words, arXiv:2010.11929"


def yfloat(v):
    """A float as YAML 1.2 reads it and YAML 1.1 readers do too: `1e-06` is a
    string to YAML 1.1 (its float pattern wants a dot), so write `1.0e-06`."""
    r = repr(float(v))
    if "e" in r and "." not in r.split("e")[0]:
        m, e = r.split("e")
        r = f"{m}.0e{e}"
    return r


def q(s):
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'


def flow(d):
    parts = []
    for k, v in d.items():
        if isinstance(v, dict):
            v = flow(v)
        elif isinstance(v, list):
            v = "[" + ", ".join(str(x) for x in v) + "]"
        parts.append(f"{k}: {v}")
    return "{ " + ", ".join(parts) + " }"


def tensor(name, dtype, shape, source, description=None):
    d = {"dtype": dtype, "shape": shape, "source": source}
    if description:
        d["description"] = q(description)
    return f"  {name}: {flow(d)}"


REAL_WEIGHTS = False
OUTLIERS = {7: 110.0, 101: -95.0, 202: 70.0, 333: -120.0}
OUTLIER_BLOCK = 2
ACTIVATION_SCALE = 1.0


def outlier_bias():
    """The fc2 bias of block OUTLIER_BLOCK: small everywhere (0.02·sin(0.7·c),
    4 decimals) but in the outlier channels."""
    v = [OUTLIERS.get(c, round(0.02 * math.sin(0.7 * c), 4)) for c in range(DIM)]
    return [yfloat(x * ACTIVATION_SCALE if c in OUTLIERS else x) for c, x in enumerate(v)]


def seeded(seed, kind, a, b):
    return {"seeded": {"seed": seed, kind: [yfloat(a), yfloat(b)]}}


def node(op, inputs, output, **attrs):
    d = {"op": op, "inputs": inputs, "outputs": [output]}
    if attrs:
        d["attrs"] = {k: (yfloat(v) if isinstance(v, float) else v) for k, v in attrs.items()}
    return f"      - {flow(d)}"


def stage(name, algorithm, impl, paper, inputs, outputs, graph, verify, notes):
    lines = [f"  - stage: {name}", f"    algorithm: {q(algorithm)}", f"    impl: {q(impl)}"]
    if paper:
        lines.append(f"    paper: {q(paper)}")
    lines += [f"    inputs: [{', '.join(inputs)}]", f"    outputs: [{', '.join(outputs)}]", "    graph:"]
    lines += graph
    if verify:
        lines.append("    verify:")
        lines += [f"      - {v}" for v in verify]
    lines.append("    notes:")
    lines += [f"      - {q(n)}" for n in notes]
    return "\n".join(lines)


def resize_256(h, w, short):
    """torchvision Resize(short) on a PIL image: the long side is truncated."""
    if h <= w:
        return short, int(short * w / h)
    return int(short * h / w), short


def weight(name, key, shape, seed, kind, a, b):
    if REAL_WEIGHTS:
        return tensor(name, "float32", shape, {"weights": q(key)}, key)
    if kind == "outliers":
        return tensor(name, "float32", shape, {"values": outlier_bias()}, key)
    if b == "cls":
        b = 1.5 * ACTIVATION_SCALE
    return tensor(name, "float32", shape, seeded(seed, kind, a, b), key)


def pillow_pass_order(pixels, size_hw):
    """Which pass order the installed Pillow's resize takes for this photo:
    Pillow 13 runs the vertical pass first for some sizes (Pillow#9549)."""
    import numpy as np
    from PIL import Image

    img = Image.fromarray(pixels, "RGB")
    (h, w), (oh, ow) = pixels.shape[:2], size_hw
    direct = np.asarray(img.resize((ow, oh), Image.BICUBIC))
    vertical = np.asarray(img.resize((w, oh), Image.BICUBIC).resize((ow, oh), Image.BICUBIC))
    horizontal = np.asarray(img.resize((ow, h), Image.BICUBIC).resize((ow, oh), Image.BICUBIC))
    if (direct == horizontal).all():
        return 0, Image.__version__
    if (direct == vertical).all():
        return 1, Image.__version__
    raise SystemExit(f"Pillow {Image.__version__} resized {h}x{w} to {oh}x{ow} in neither pass order")


def suite(name, title, image_hw, short, crop, out_dir=None, photo=None, order=(0, "13.0")):
    out_dir = out_dir or ROOT / name
    vertical_first, pillow = order
    h0, w0 = image_hw
    rh, rw = resize_256(h0, w0, short)
    top, left = int(round((rh - crop) / 2.0)), int(round((rw - crop) / 2.0))
    grid = crop // PATCH
    tokens = grid * grid + 1
    sf = (grid + 0.1) / GRID
    out = []
    out.append(f"# Generated by tools/make_dinov2_suite.py: edit the script, not this file.")
    out.append("vips: 1")
    out.append("component:")
    out.append(f"  id: {name}")
    out.append("  version: 0.1.0")
    out.append(f"  title: {q(title)}")
    out.append(f"  paper: {q(PAPER)}")
    out.append("  notes:")
    for n in [
        "Reference: the official facebookresearch/dinov2 `dinov2_vits14` (torch.hub) evaluation pipeline; "
        "preprocessing as its eval transform (torchvision Resize(256, BICUBIC) on the PIL image, CenterCrop(224), "
        "ToTensor, Normalize(ImageNet mean/std)).",
        "Weights are seeded synthetic tensors (docs/golden-format.md) named after the official checkpoint: "
        "`blocks.{i}.attn.qkv.weight` is `b{i}_qkv_w`, and so on (each tensor's description gives its checkpoint key). "
        "Training checkpoints saved with block chunks use `blocks.{chunk}.{i}.*` instead.",
        "The weights look trained (tools/make_dinov2_suite.py, WEIGHTS): LayerScale 0.05-0.6; from block "
        f"{OUTLIER_BLOCK} on the residual stream carries outlier channels {sorted(OUTLIERS)} (block {OUTLIER_BLOCK}'s "
        f"fc2 bias writes up to {max(abs(v) for v in OUTLIERS.values()) * ACTIVATION_SCALE:g} into them), and the class "
        f"token is a high-norm token (std {1.5 * ACTIVATION_SCALE:g}); `vips-conformance inspect` shows each stage's "
        "activation scale. Trained ViTs carry such activations (Darcet et al. 2023, arXiv:2309.16588).",
        "Golden values are computed in float64 by the CPU reference provider (`vips-conformance generate`) "
        "and stored as float32; each stage is fed the float32 golden outputs of the stage before it.",
        "Verdicts follow the SDK's error model (docs/error-model.md): each output, and in a decomposed run each "
        "operator, is judged against the float64 reference recomputed from the provider's own inputs, within a "
        "bound derived from the computation (magnitudes of the operands, accumulation lengths, the tier's "
        "precision). No number here was calibrated on this suite's data.",
        "The registers variant (dinov2_vits14_reg) is a different component: 4 register tokens after cls, "
        "without position embedding, and its position embedding is resized with size=(16, 16), antialias=True.",
    ]:
        out.append(f"    - {q(n)}")
    out.append("")
    out.append("tensors:")
    if photo:
        out.append(tensor("image", "uint8", [h0, w0, 3], "golden", f"RGB photo {photo}, given to generate as image.npy"))
    else:
        out.append(tensor("image", "uint8", [h0, w0, 3], {"seeded": {"seed": 2304, "test_image": "true"}},
                          "RGB test image: gradients, a checkerboard, a disc, noise"))
    out.append(tensor("rgb_mean", "float32", [3, 1, 1], {"values": ["0.485", "0.456", "0.406"]}, "ImageNet mean"))
    out.append(tensor("rgb_std", "float32", [3, 1, 1], {"values": ["0.229", "0.224", "0.225"]}, "ImageNet std"))
    out.append(tensor("c255", "float32", [], {"values": ["255.0"]}, "ToTensor's divisor"))
    seed = 1000
    for k, (shape, kind, a, b) in WEIGHTS.items():
        seed += 1
        out.append(weight(k, CHECKPOINT[k], shape, seed, kind, a, b))
    for i in range(DEPTH):
        for k, (shape, kind, a, b) in BLOCK.items():
            seed += 1
            if i == OUTLIER_BLOCK and k == "fc2_b":
                kind = "outliers"
            out.append(weight(f"b{i:02d}_{k}", f"blocks.{i}.{CHECKPOINT[k]}", shape, seed, kind, a, b))
    out.append(tensor("pixels", "float32", [1, 3, crop, crop], "golden", "normalised input"))
    out.append(tensor("x_patch", "float32", [1, grid * grid, DIM], "golden", "patch tokens"))
    out.append(tensor("x_0", "float32", [1, tokens, DIM], "golden", "tokens with cls and position embedding"))
    for i in range(DEPTH):
        out.append(tensor(f"x_{i + 1}", "float32", [1, tokens, DIM], "golden", f"output of block {i}"))
    out.append(tensor("x_norm", "float32", [1, tokens, DIM], "golden", "after the final LayerNorm"))
    out.append(tensor("x_norm_clstoken", "float32", [1, DIM], "golden"))
    out.append(tensor("x_norm_patchtokens", "float32", [1, grid * grid, DIM], "golden"))
    out.append("")
    out.append("# The error model's parameters (docs/error-model.md): lambda, the confidence factor of every")
    out.append("# accumulation bound; bias_z and bias_ratio, when a dot product's errors are biased; end_to_end, what")
    out.append("# chained mode requires of the encoder's outputs against the golden values.")
    out.append("tolerances:")
    for tier, (rel_l2, cosine) in END_TO_END.items():
        out.append(f"  {tier}: {{ lambda: {LAMBDA}, bias_z: {BIAS_Z}, bias_ratio: {BIAS_RATIO}, "
                   f"end_to_end: {{ rel_l2: {rel_l2:.1e}, cosine: {cosine} }} }}")
    out.append("")
    out.append("stages:")
    out.append(stage(
        "preprocess",
        f"Resize the shorter side to {short} (bicubic, antialiased, result uint8: {h0}x{w0} -> {rh}x{rw}), "
        f"center-crop {crop}x{crop} at ({top}, {left}), scale to [0, 1], normalise per channel, NCHW",
        f"torchvision.transforms: Resize({short}, InterpolationMode.BICUBIC) on the PIL image (Pillow's resize), "
        f"CenterCrop({crop}), ToTensor(), Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))",
        None,
        ["image", "rgb_mean", "rgb_std", "c255"], ["pixels"],
        [
            (node("vsdk.resize_pil_bicubic", ["image"], "resized", size=[rh, rw], vertical_first=1)
             if vertical_first else node("vsdk.resize_pil_bicubic", ["image"], "resized", size=[rh, rw])),
            node("vsdk.crop", ["resized"], "cropped", offsets=[top, left, 0], sizes=[crop, crop, 3]),
            node("vsdk.cast", ["cropped"], "as_float", dtype="float32"),
            node("vsdk.permute", ["as_float"], "chw", perm=[2, 0, 1]),
            node("vsdk.div", ["chw", "c255"], "unit"),
            node("vsdk.sub", ["unit", "rgb_mean"], "centred"),
            node("vsdk.div", ["centred", "rgb_std"], "normalised"),
            node("vsdk.reshape", ["normalised"], "pixels", shape=[1, 3, crop, crop]),
        ],
        ["finite: pixels", "range: { tensor: pixels, min: -2.2, max: 2.7 }"],
        [
            "Pillow's bicubic resize is antialiased (the filter widens by the scale factor when downsampling) "
            "and uses a = -0.5. A resize without antialias, or with a = -0.75 (OpenCV, PyTorch's non-antialiased "
            "bicubic), fails this stage.",
            "The resized image stays uint8: Pillow rounds and clips to 0..255 after the horizontal pass and again "
            "after the vertical one (fixed point, 22 fractional bits). Resizing in float and rounding once differs "
            "by one step here and there.",
            f"Pillow up to 12 always runs the horizontal pass first; Pillow 13 runs the vertical pass first for some "
            f"sizes (python-pillow/Pillow#9549), a different result by a few levels. This resize "
            f"({h0}x{w0} -> {rh}x{rw}) uses the {'vertical' if vertical_first else 'horizontal'} pass first"
            f"{' (vertical_first: 1)' if vertical_first else ''}: the order Pillow {pillow} takes for these sizes.",
            "torchvision computes the long side as int(256 * long / short): truncation, not rounding.",
            f"CenterCrop's offsets are int(round((in - out) / 2)), and Python rounds halves to even: here "
            f"round({(rw - crop) / 2.0}) = {left}. An implementation that rounds halves up crops one pixel off.",
        ],
    ))
    out.append(stage(
        "patch_embed",
        f"Non-overlapping {PATCH}x{PATCH} patches projected to {DIM} channels: Conv2d(3, {DIM}, kernel {PATCH}, "
        f"stride {PATCH}, bias), flattened to {grid * grid} tokens",
        "dinov2.layers.PatchEmbed: self.proj(x).flatten(2).transpose(1, 2)",
        VIT,
        ["pixels", "patch_w", "patch_b"], ["x_patch"],
        [
            node("vsdk.conv2d", ["pixels", "patch_w", "patch_b"], "patch_grid", strides=[PATCH, PATCH]),
            node("vsdk.reshape", ["patch_grid"], "patch_flat", shape=[1, DIM, grid * grid]),
            node("vsdk.permute", ["patch_flat"], "x_patch", perm=[0, 2, 1]),
        ],
        ["finite: x_patch"],
        ["Tokens are row-major over the patch grid (flatten(2) of NCHW), then channels last."],
    ))
    out.append(stage(
        "pos_embed",
        f"Prepend the class token, add the position embedding resized from its {GRID}x{GRID} training grid to "
        f"{grid}x{grid}: bicubic (A = -0.75), align_corners=False, antialias off, scale_factor = "
        f"({grid} + 0.1) / {GRID} per axis",
        "DinoVisionTransformer.interpolate_pos_encoding: nn.functional.interpolate(patch_pos_embed.reshape(1, 37, 37, dim)"
        ".permute(0, 3, 1, 2), mode='bicubic', antialias=False, scale_factor=(sx, sy)) with "
        "sx = (w0 + interpolate_offset) / M, interpolate_offset = 0.1",
        PAPER,
        ["x_patch", "cls_token", "pos_embed"], ["x_0"],
        [
            node("vsdk.crop", ["pos_embed"], "pos_cls", offsets=[0, 0, 0], sizes=[1, 1, DIM]),
            node("vsdk.crop", ["pos_embed"], "pos_grid_flat", offsets=[0, 1, 0], sizes=[1, GRID * GRID, DIM]),
            node("vsdk.reshape", ["pos_grid_flat"], "pos_grid", shape=[1, GRID, GRID, DIM]),
            node("vsdk.permute", ["pos_grid"], "pos_nchw", perm=[0, 3, 1, 2]),
            node("vsdk.resize_bicubic", ["pos_nchw"], "pos_resized", scale_factor=[yfloat(sf), yfloat(sf)], antialias=0),
            node("vsdk.permute", ["pos_resized"], "pos_nhwc", perm=[0, 2, 3, 1]),
            node("vsdk.reshape", ["pos_nhwc"], "pos_patch", shape=[1, grid * grid, DIM]),
            node("vsdk.concat", ["pos_cls", "pos_patch"], "pos", axis=1),
            node("vsdk.concat", ["cls_token", "x_patch"], "with_cls", axis=1),
            node("vsdk.add", ["with_cls", "pos"], "x_0"),
        ],
        ["finite: x_0"],
        [
            f"The official model passes scale_factor, not size: the output is floor({GRID} * s) = {grid} pixels, but "
            f"source coordinates use 1/s = {GRID}/{grid + 0.1}, not {GRID}/{grid}. Resizing with size=({grid}, {grid}) "
            "shifts every sample and fails this stage.",
            "timm's vit_small_patch14_dinov2 resizes with size=(16, 16) and antialias=True (a = -0.5): a different "
            "result at 224 (differences up to about 1.0 in this suite's resized position embedding). It is not this component.",
            "Bicubic with A = -0.75 and clamped borders (PyTorch's upsample_bicubic2d), computed in float32 by "
            "PyTorch; exported graphs (ONNX Resize) sometimes carry A = -0.5 or exclude_outside: check both.",
            "The class token gets the first position embedding, unresized.",
        ],
    ))
    scale = 1.0 / math.sqrt(HEAD_DIM)
    for i in range(DEPTH):
        b = f"b{i:02d}_"
        x, y = f"x_{i}", f"x_{i + 1}"
        w = lambda k: b + k
        out.append(stage(
            f"block_{i:02d}",
            f"Pre-norm transformer block {i}: x += ls1 * proj(attention(norm1(x))); x += ls2 * fc2(GELU(fc1(norm2(x)))). "
            f"LayerNorm eps 1e-6, {HEADS} heads of {HEAD_DIM}, softmax(q k^T / 8) v, exact GELU",
            "dinov2.layers.NestedTensorBlock (Block with MemEffAttention, LayerScale, Mlp)",
            f"{VIT}; LayerScale: Touvron et al. 2021, arXiv:2103.17239",
            [x] + [w(k) for k in BLOCK], [y],
            [
                node("vsdk.layer_norm", [x, w("norm1_w"), w("norm1_b")], "n1", eps=1e-6),
                node("vsdk.linear", ["n1", w("qkv_w"), w("qkv_b")], "qkv"),
                node("vsdk.reshape", ["qkv"], "qkv5", shape=[1, tokens, 3, HEADS, HEAD_DIM]),
                node("vsdk.permute", ["qkv5"], "qkv_heads", perm=[2, 0, 3, 1, 4]),
                node("vsdk.crop", ["qkv_heads"], "q5", offsets=[0, 0, 0, 0, 0], sizes=[1, 1, HEADS, tokens, HEAD_DIM]),
                node("vsdk.crop", ["qkv_heads"], "k5", offsets=[1, 0, 0, 0, 0], sizes=[1, 1, HEADS, tokens, HEAD_DIM]),
                node("vsdk.crop", ["qkv_heads"], "v5", offsets=[2, 0, 0, 0, 0], sizes=[1, 1, HEADS, tokens, HEAD_DIM]),
                node("vsdk.reshape", ["q5"], "q", shape=[1, HEADS, tokens, HEAD_DIM]),
                node("vsdk.reshape", ["k5"], "k", shape=[1, HEADS, tokens, HEAD_DIM]),
                node("vsdk.reshape", ["v5"], "v", shape=[1, HEADS, tokens, HEAD_DIM]),
                node("vsdk.sdpa", ["q", "k", "v"], "attn", scale=scale),
                node("vsdk.permute", ["attn"], "attn_tokens", perm=[0, 2, 1, 3]),
                node("vsdk.reshape", ["attn_tokens"], "attn_flat", shape=[1, tokens, DIM]),
                node("vsdk.linear", ["attn_flat", w("proj_w"), w("proj_b")], "proj"),
                node("vsdk.mul", ["proj", w("ls1")], "proj_scaled"),
                node("vsdk.add", [x, "proj_scaled"], "x_attn"),
                node("vsdk.layer_norm", ["x_attn", w("norm2_w"), w("norm2_b")], "n2", eps=1e-6),
                node("vsdk.linear", ["n2", w("fc1_w"), w("fc1_b")], "hidden"),
                node("vsdk.gelu", ["hidden"], "hidden_act"),
                node("vsdk.linear", ["hidden_act", w("fc2_w"), w("fc2_b")], "mlp"),
                node("vsdk.mul", ["mlp", w("ls2")], "mlp_scaled"),
                node("vsdk.add", ["x_attn", "mlp_scaled"], y),
            ],
            [f"finite: {y}"],
            [
                "LayerNorm eps is 1e-6 (PyTorch's default is 1e-5): the wrong eps fails here.",
                f"Attention scale is 1/sqrt(head_dim) = 1/8, not 1/sqrt({DIM}).",
                "GELU is the exact erf form (nn.GELU()); the tanh approximation differs by up to 5e-4 and fails.",
                "qkv is laid out as [3, heads, head_dim] along the output features: reshape(B, N, 3, 6, 64)"
                ".permute(2, 0, 3, 1, 4).",
                "xFormers' memory-efficient attention (used when installed) and PyTorch's SDPA are not bit-identical "
                "to the unfused form; both are within this stage's fp32 tolerance.",
                "LayerScale initialises to 1e-5 in the training config and to 1.0 in the hub model; irrelevant for "
                "inference with a checkpoint, whose gamma values are used as they are.",
            ],
        ))
    out.append(stage(
        "final_norm",
        "Final LayerNorm over the channels, eps 1e-6",
        "DinoVisionTransformer.norm (nn.LayerNorm(384, eps=1e-6))",
        PAPER,
        [f"x_{DEPTH}", "norm_w", "norm_b"], ["x_norm"],
        [node("vsdk.layer_norm", [f"x_{DEPTH}", "norm_w", "norm_b"], "x_norm", eps=1e-6)],
        ["finite: x_norm"],
        ["The normalised tokens are the encoder's output; forward_features returns them split, below."],
    ))
    out.append(stage(
        "outputs",
        "Split the normalised tokens into the class token and the patch tokens",
        "forward_features: x_norm_clstoken = x_norm[:, 0], x_norm_patchtokens = x_norm[:, 1:]",
        PAPER,
        ["x_norm"], ["x_norm_clstoken", "x_norm_patchtokens"],
        [
            node("vsdk.crop", ["x_norm"], "cls3", offsets=[0, 0, 0], sizes=[1, 1, DIM]),
            node("vsdk.reshape", ["cls3"], "x_norm_clstoken", shape=[1, DIM]),
            node("vsdk.crop", ["x_norm"], "x_norm_patchtokens", offsets=[0, 1, 0], sizes=[1, grid * grid, DIM]),
        ],
        ["finite: x_norm_clstoken", "finite: x_norm_patchtokens"],
        ["With registers (dinov2_vits14_reg) the patch tokens start at index 5, not 1."],
    ))
    path = pathlib.Path(out_dir) / "suite.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
    print(f"wrote {path}")


def variant(args):
    """What sets a custom suite apart, for its title (shown in every run's header)."""
    parts = []
    if args.weights:
        parts.append("checkpoint weights")
    if args.image:
        parts.append(f"photo {pathlib.Path(args.image).name}")
    if args.activation_scale != 1.0:
        parts.append(f"stress: outlier activations x{args.activation_scale:g}")
    return f" ({', '.join(parts)})" if parts else ""


def main():
    global REAL_WEIGHTS
    ap = argparse.ArgumentParser(description="Write the DINOv2 ViT-S/14 suite documents.")
    ap.add_argument("--out", help="write one 224x224 suite to this directory instead of the committed ones")
    ap.add_argument("--weights", action="store_true", help="read the weights from a checkpoint (with --out)")
    ap.add_argument("--image", help="use this photo as the input (with --out)")
    ap.add_argument("--activation-scale", type=float, default=1.0,
                    help="multiply the outlier channels and the class token (a stress suite; with --out)")
    ap.add_argument("--quick", action="store_true", help="56x56 instead of 224x224 (with --out)")
    args = ap.parse_args()
    global ACTIVATION_SCALE
    ACTIVATION_SCALE = args.activation_scale
    if args.out:
        REAL_WEIGHTS = args.weights
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        size = (300, 400)
        order = (0, "13.0")
        if args.image:
            import numpy as np
            from PIL import Image

            pixels = np.asarray(Image.open(args.image).convert("RGB"), dtype=np.uint8)
            np.save(out / "image.npy", pixels)
            size = pixels.shape[:2]
            order = pillow_pass_order(pixels, resize_256(size[0], size[1], 64 if args.quick else 256))
        ident = re.sub("[^a-z0-9_-]", "-", out.name.lower()) or "dinov2-custom"
        if args.quick:
            size = (75, 100) if not args.image else size
            suite(ident, "DINOv2 ViT-S/14 image encoder, all stages at 56x56" + variant(args), size, 64, 56, out, args.image, order)
        else:
            suite(ident, "DINOv2 ViT-S/14 image encoder, official eval pipeline at 224x224" + variant(args), size, 256, 224, out, args.image, order)
        return
    if args.weights or args.image or args.quick or args.activation_scale != 1.0:
        ap.error("--weights, --image, --quick and --activation-scale need --out: the committed suites stay as they are")
    suite("dinov2-vits14", "DINOv2 ViT-S/14 image encoder, official eval pipeline at 224x224", (300, 400), 256, 224)
    suite("dinov2-vits14-quick", "DINOv2 ViT-S/14 image encoder, all stages at 56x56 (quick tests)", (75, 100), 64, 56)


if __name__ == "__main__":
    main()
