#!/usr/bin/env python3
"""Writes the VIPS documents of the DINOv2 suites (ViT-S/B/L/g, patch 14, with
or without registers, eval or TRELLIS preprocessing, the model's own head or
TRELLIS's conditioning head):

    conformance/suites/dinov2-vits14/suite.yaml        224x224 from a 300x400 image
    conformance/suites/dinov2-vits14-quick/suite.yaml  56x56 from a 75x100 image

The documents are generated because they repeat one block twelve times with
its own weights (YAML anchors are not allowed in VIPS documents: every value
is spelled out where a reviewer reads it). Edit this script, re-run it, then
`vips-conformance generate <suite>` to recompute the golden files.

    python3 tools/make_dinov2_suite.py            (the committed ViT-S/14 suites)
    python3 tools/make_dinov2_suite.py --trellis  (the committed TRELLIS suites:
        dinov2-vitl14-reg-518 and dinov2-vitl14-reg-518-quick)

Any member of the family (one suite, written to --out):

    python3 tools/make_dinov2_suite.py --out DIR [--id NAME] --arch {s,b,l,g} [--registers]
        [--size N] [--depth N] [--preprocess {eval,trellis}] [--head {dinov2,trellis}]
        [--golden-budget BYTES]

--size is the model's input (a multiple of 14; default 224, 518 with
--preprocess trellis); --depth keeps the first N blocks (default: the arch's
12, 12, 24 or 40). --registers is the hub's `*_reg` model: 4 register tokens
and its position-embedding interpolation (size=(g, g), antialiased, no
offset). --head trellis replaces the final norm: TRELLIS takes `x_prenorm`
and applies a LayerNorm without affine, eps 1e-5. --preprocess trellis is
TRELLIS's `preprocess_image` + `encode_image` on an RGBA input with a
transparent background (built in the document, see `trellis_input`).

Real weights and real photos (the golden set is then yours, generated from
them and pinning them by SHA-256):

    python3 tools/make_dinov2_suite.py --out DIR [--weights] [--image photo.jpg]
    vips-conformance generate ./DIR --tensors dinov2_vits14.safetensors [--tensors DIR/image.npy]
    vips-conformance run ./DIR --provider ...      (with a `/`: a path, not a suite name)

--weights reads every weight from the checkpoint under its official key
(tools/convert_dinov2_checkpoint.py turns the hub .pth into safetensors);
--image takes the input from a photo (saved as DIR/image.npy, uint8 RGB;
eval preprocessing only).
"""
import argparse
import re
import json
import math
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "conformance" / "suites"
HEAD_DIM, PATCH, GRID = 64, 14, 37

# The family (facebookresearch/dinov2, dinov2/models/vision_transformer.py and
# dinov2/hub/backbones.py): width, heads (of 64), depth, the official builder,
# and the FFN. ViT-g (vit_giant2) uses ffn_layer="swiglufused": SwiGLU with
# hidden (int(4·1536·2/3) + 7) // 8 · 8 = 4096, w12 [8192, 1536] then
# silu(x1)·x2 then w3 [1536, 4096].
ARCHS = {
    "s": dict(dim=384, heads=6, depth=12, builder="vit_small", name="ViT-S/14", hub="dinov2_vits14", ffn="mlp"),
    "b": dict(dim=768, heads=12, depth=12, builder="vit_base", name="ViT-B/14", hub="dinov2_vitb14", ffn="mlp"),
    "l": dict(dim=1024, heads=16, depth=24, builder="vit_large", name="ViT-L/14", hub="dinov2_vitl14", ffn="mlp"),
    "g": dict(dim=1536, heads=24, depth=40, builder="vit_giant2", name="ViT-g/14", hub="dinov2_vitg14", ffn="swiglu"),
}
REGISTERS = 4


def swiglu_hidden(dim):
    """SwiGLUFFNFused's hidden width for mlp_ratio 4."""
    return (int(4 * dim * 2 / 3) + 7) // 8 * 8


def sig(x):
    """A weight's std rounded to 4 significant digits (0.07 stays 0.07)."""
    return float(f"{x:.4g}")


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
#
# Across widths D (the profile is ViT-S's, D = 384, and stays exactly that
# there): a linear layer's output std is std(w)·sqrt(fan_in)·std(x), so the
# std of every matrix with fan-in D (qkv, proj, fc1) or 4D (fc2) is scaled by
# sqrt(384 / D) and every activation keeps ViT-S's scale; the patch
# embedding's fan-in (3·14·14) does not depend on D. The outlier channels keep
# their indices (all below 384) and grow by sqrt(D / 384): a LayerNorm divides
# by the row's std, whose square is (Σ outlier² + (D - 4)·clean²) / D, so this
# keeps the outliers' share of it, and with it how much they squash the clean
# channels of every later LayerNorm, the same at every width (trained ViT-L/g
# do carry larger outliers than ViT-S). The class token and the registers are
# high-norm tokens (std 1.5 per channel, so their norm grows as sqrt(D), as
# the patch tokens' does). With fewer than 3 blocks (quick suites) the outliers
# are written by the last block, so that the head still sees them.
def weights_table(dim):
    w = {
        "patch_w": ([dim, 3, PATCH, PATCH], "normal", 0.0, 0.02),
        "patch_b": ([dim], "uniform", -0.05, 0.05),
        "cls_token": ([1, 1, dim], "normal", 0.0, "cls"),
        "pos_embed": ([1, GRID * GRID + 1, dim], "normal", 0.0, 0.3),
        "norm_w": ([dim], "uniform", 0.7, 1.3),
        "norm_b": ([dim], "uniform", -0.1, 0.1),
    }
    return w


def block_table(dim, ffn):
    k = math.sqrt(384 / dim)
    b = {
        "norm1_w": ([dim], "uniform", 0.7, 1.3),
        "norm1_b": ([dim], "uniform", -0.1, 0.1),
        "qkv_w": ([3 * dim, dim], "normal", 0.0, sig(0.07 * k)),
        "qkv_b": ([3 * dim], "normal", 0.0, 0.02),
        "proj_w": ([dim, dim], "normal", 0.0, sig(0.05 * k)),
        "proj_b": ([dim], "normal", 0.0, 0.02),
        "ls1": ([dim], "uniform", 0.05, 0.6),
        "norm2_w": ([dim], "uniform", 0.7, 1.3),
        "norm2_b": ([dim], "uniform", -0.1, 0.1),
    }
    if ffn == "mlp":
        b.update({
            "fc1_w": ([4 * dim, dim], "normal", 0.0, sig(0.05 * k)),
            "fc1_b": ([4 * dim], "normal", 0.0, 0.05),
            "fc2_w": ([dim, 4 * dim], "normal", 0.0, sig(0.025 * k)),
            "fc2_b": ([dim], "normal", 0.0, 0.02),
        })
    else:
        hidden = swiglu_hidden(dim)
        # silu(x1)·x2: x2's std matches fc1's; w3 has fan-in `hidden`.
        b.update({
            "w12_w": ([2 * hidden, dim], "normal", 0.0, sig(0.05 * k)),
            "w12_b": ([2 * hidden], "normal", 0.0, 0.05),
            "w3_w": ([dim, hidden], "normal", 0.0, sig(0.025 * math.sqrt(4 * dim / hidden) * k)),
            "w3_b": ([dim], "normal", 0.0, 0.02),
        })
    b["ls2"] = ([dim], "uniform", 0.05, 0.6)
    return b


CHECKPOINT = {
    "patch_w": "patch_embed.proj.weight", "patch_b": "patch_embed.proj.bias",
    "cls_token": "cls_token", "pos_embed": "pos_embed", "norm_w": "norm.weight", "norm_b": "norm.bias",
    "norm1_w": "norm1.weight", "norm1_b": "norm1.bias", "qkv_w": "attn.qkv.weight", "qkv_b": "attn.qkv.bias",
    "proj_w": "attn.proj.weight", "proj_b": "attn.proj.bias", "ls1": "ls1.gamma",
    "norm2_w": "norm2.weight", "norm2_b": "norm2.bias", "fc1_w": "mlp.fc1.weight", "fc1_b": "mlp.fc1.bias",
    "fc2_w": "mlp.fc2.weight", "fc2_b": "mlp.fc2.bias", "ls2": "ls2.gamma",
    "w12_w": "mlp.w12.weight", "w12_b": "mlp.w12.bias", "w3_w": "mlp.w3.weight", "w3_b": "mlp.w3.bias",
    "register_tokens": "register_tokens",
}
# The registers' seed: outside the sequence 1001, 1002, ... of the other
# weights, so that adding registers changes no other tensor.
REGISTER_SEED = 990
# The error model's parameters (docs/error-model.md). END_TO_END: chained mode's
# criterion on the encoder's outputs (relative L2 error, cosine similarity).
LAMBDA = 6.0
BIAS_Z = 8.0
BIAS_RATIO = 0.1
END_TO_END = {"fp32": (1e-4, 0.999999), "fp16": (2e-2, 0.9998), "bf16": (1e-1, 0.995)}

PAPER = "Oquab et al. 2023, DINOv2: Learning Robust Visual Features without Supervision, arXiv:2304.07193"
VIT = "Dosovitskiy et al. 2020, An Image is Worth 16x16 Words, arXiv:2010.11929"
REG_PAPER = "Darcet et al. 2023, Vision Transformers Need Registers, arXiv:2309.16588"
TRELLIS = "Xiang et al. 2024, Structured 3D Latents for Scalable and Versatile 3D Generation (TRELLIS), arXiv:2412.01506"


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


def outlier_bias(dim):
    """The fc2 (w3) bias of the outlier block: small everywhere
    (0.02·sin(0.7·c), 4 decimals) but in the outlier channels, whose values
    grow by sqrt(dim / 384) (block_table's comment)."""
    grow = math.sqrt(dim / 384)
    v = [round(OUTLIERS[c] * grow, 1) if c in OUTLIERS else round(0.02 * math.sin(0.7 * c), 4) for c in range(dim)]
    return [yfloat(x * ACTIVATION_SCALE if c in OUTLIERS else x) for c, x in enumerate(v)]


def seeded(seed, kind, a, b):
    return {"seeded": {"seed": seed, kind: [yfloat(a), yfloat(b)]}}


def node(op, inputs, output, **attrs):
    d = {"op": op, "inputs": inputs, "outputs": [output]}
    if attrs:
        d["attrs"] = {k: (yfloat(v) if isinstance(v, float) else v) for k, v in attrs.items()}
    return f"      - {flow(d)}"


def stage(name, algorithm, impl, paper, inputs, outputs, graph, verify, notes, precision=None):
    lines = [f"  - stage: {name}", f"    algorithm: {q(algorithm)}", f"    impl: {q(impl)}"]
    if paper:
        lines.append(f"    paper: {q(paper)}")
    if precision:
        lines.append(f"    precision: {precision}")
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


def weight(name, key, shape, seed, kind, a, b, dim):
    if REAL_WEIGHTS:
        return tensor(name, "float32", shape, {"weights": q(key)}, key)
    if kind == "outliers":
        return tensor(name, "float32", shape, {"values": outlier_bias(dim)}, key)
    if b == "cls":
        b = 1.5 * ACTIVATION_SCALE
    return tensor(name, "float32", shape, seeded(seed, kind, a, b), key)


def pillow_pass_order(pixels, size_hw, mode="RGB", resample=None):
    """Which pass order the installed Pillow's resize takes for this photo:
    Pillow 13 runs the vertical pass first for some sizes (Pillow#9549)."""
    import numpy as np
    from PIL import Image

    resample = Image.BICUBIC if resample is None else resample
    img = Image.fromarray(pixels, mode) if mode != "RGBa" else Image.frombytes("RGBa", pixels.shape[1::-1], pixels.tobytes())
    (h, w), (oh, ow) = pixels.shape[:2], size_hw
    direct = np.asarray(img.resize((ow, oh), resample))
    vertical = np.asarray(img.resize((w, oh), resample).resize((ow, oh), resample))
    horizontal = np.asarray(img.resize((ow, h), resample).resize((ow, oh), resample))
    if (direct == horizontal).all():
        return 0, Image.__version__
    if (direct == vertical).all():
        return 1, Image.__version__
    raise SystemExit(f"Pillow {Image.__version__} resized {h}x{w} to {oh}x{ow} in neither pass order")


# The TRELLIS input: an RGBA image with a transparent background, as rembg
# writes it (TRELLIS's own input). The seeded test image (docs/golden-format.md)
# with C = 4 does not fit: its alpha (channel 3, c mod 3 = 0) is the horizontal
# gradient, inverted inside the disc, so alpha > 204 covers the full height and
# nothing is transparent. The document builds the input instead, with integer
# operators only (exact at every tier): the seeded RGB test image as colour,
# and as alpha a small mask (a `values` literal, an asymmetric blob) enlarged
# with Pillow's bicubic resize, whose cubic lobes give a soft edge (clipped to
# 0..255) and exact zeros far from the blob. The colour under alpha 0 is not
# black: an implementation that resizes straight (not premultiplied) RGBA
# bleeds it into the object's edge.
ALPHA_MASK = [
    [0, 0, 0, 0, 0, 0, 0, 0],
    [0, 0, 0, 255, 255, 0, 0, 0],
    [0, 0, 255, 255, 255, 255, 0, 0],
    [0, 255, 255, 255, 255, 255, 255, 0],
    [0, 255, 255, 255, 255, 255, 0, 0],
    [0, 0, 255, 255, 255, 255, 0, 0],
    [0, 0, 0, 255, 255, 0, 0, 0],
    [0, 0, 0, 0, 0, 0, 0, 0],
]


def trellis_canvas(size):
    """The RGBA input's height and width for a model input of `size`: large
    enough that the crop (1.2x the alpha bounding box) is larger than `size`
    (Pillow's LANCZOS then downsamples, as for TRELLIS's usual 1024-pixel
    rembg outputs); not square, so that height and width cannot be swapped."""
    h = int(size * 1.55) // 8 * 8
    return h, h - 16 if size > 100 else h - 8


def trellis_alpha(hw):
    """The input's alpha as Pillow computes it: the mask enlarged with
    BICUBIC, horizontal pass first (vsdk.resize_pil_bicubic, vertical_first 0)."""
    import numpy as np
    from PIL import Image

    h, w = hw
    mask = Image.fromarray(np.array(ALPHA_MASK, dtype=np.uint8), "L")
    return np.asarray(mask.resize((w, len(ALPHA_MASK)), Image.BICUBIC).resize((w, h), Image.BICUBIC))


def trellis_crop_box(alpha):
    """TRELLIS's preprocess_image (trellis/pipelines/trellis_image_to_3d.py),
    to the crop: the box of alpha > 0.8·255, centred, its larger side times
    1.2 (truncated), then PIL's crop, which rounds each coordinate with
    Python's round (halves to even). Returns (x0, y0, x1, y1)."""
    import numpy as np

    bbox = np.argwhere(alpha > 0.8 * 255)
    bbox = np.min(bbox[:, 1]), np.min(bbox[:, 0]), np.max(bbox[:, 1]), np.max(bbox[:, 0])
    center = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    size = max(bbox[2] - bbox[0], bbox[3] - bbox[1])
    size = int(size * 1.2)
    box = center[0] - size // 2, center[1] - size // 2, center[0] + size // 2, center[1] + size // 2
    return tuple(int(round(float(v))) for v in box), [int(v) for v in bbox], size


class Variant:
    """One member of the family, with everything a document depends on."""

    def __init__(self, name, title, arch="s", registers=False, size=224, depth=None, preprocess="eval",
                 head="dinov2", image_hw=None, out_dir=None, photo=None, order=(0, "13.0"),
                 lanczos="vsdk.resize_pil_lanczos", golden_budget=None):
        a = ARCHS[arch]
        if size % PATCH or size < PATCH:
            raise SystemExit(f"--size {size}: the input must be a positive multiple of the patch size {PATCH}")
        self.name, self.title, self.arch = name, title, arch
        self.dim, self.heads, self.ffn = a["dim"], a["heads"], a["ffn"]
        self.depth = depth or a["depth"]
        if not 1 <= self.depth <= a["depth"]:
            raise SystemExit(f"--depth {depth}: {a['name']} has {a['depth']} blocks")
        self.arch_name, self.hub, self.builder = a["name"], a["hub"] + ("_reg" if registers else ""), a["builder"]
        self.registers = REGISTERS if registers else 0
        self.size, self.grid = size, size // PATCH
        self.preprocess, self.head = preprocess, head
        self.out_dir, self.photo, self.order = out_dir, photo, order
        self.lanczos, self.golden_budget = lanczos, golden_budget
        if preprocess == "eval":
            self.short = size * 8 // 7  # 224 -> 256 (the eval transform), 56 -> 64
            self.image_hw = image_hw or (int(round(size * 75 / 56)), int(round(size * 100 / 56)))
        else:
            self.image_hw = image_hw or trellis_canvas(size)
        self.outlier_block = min(OUTLIER_BLOCK, self.depth - 1)
        self.default = (arch == "s" and not registers and preprocess == "eval" and head == "dinov2"
                        and self.depth == 12)


def suite(v):
    name, title = v.name, v.title
    DIM, HEADS, DEPTH = v.dim, v.heads, v.depth
    out_dir = v.out_dir or ROOT / name
    vertical_first, pillow = v.order
    h0, w0 = v.image_hw
    grid = v.grid
    crop = v.size
    R = v.registers
    patches = grid * grid
    tokens = patches + 1           # before the registers are inserted
    T = tokens + R                 # the residual stream's tokens
    sf = (grid + 0.1) / GRID
    blk = block_table(DIM, v.ffn)
    out = []
    out.append(f"# Generated by tools/make_dinov2_suite.py: edit the script, not this file.")
    out.append("vips: 1")
    out.append("component:")
    out.append(f"  id: {name}")
    out.append("  version: 0.1.0")
    out.append(f"  title: {q(title)}")
    out.append(f"  paper: {q(PAPER)}")
    out.append("  notes:")
    if v.preprocess == "eval":
        reference = (f"Reference: the official facebookresearch/dinov2 `{v.hub}` (torch.hub) evaluation pipeline; "
                     "preprocessing as its eval transform (torchvision Resize(256, BICUBIC) on the PIL image, CenterCrop(224), "
                     "ToTensor, Normalize(ImageNet mean/std)).")
        if crop != 224:
            reference = reference.replace("Resize(256, BICUBIC)", f"Resize({v.short}, BICUBIC)").replace(
                "CenterCrop(224)", f"CenterCrop({crop})") if not v.default else reference
    else:
        reference = (f"Reference: TRELLIS's image conditioning (microsoft/TRELLIS, trellis/pipelines/trellis_image_to_3d.py): "
                     f"preprocess_image on an RGBA input (crop to the alpha bounding box enlarged 1.2x, Pillow LANCZOS to "
                     f"{crop}x{crop}, alpha premultiplied, uint8), then encode_image (ImageNet normalisation) and the official "
                     f"facebookresearch/dinov2 `{v.hub}` (torch.hub).")
    notes = [
        reference,
        "Weights are seeded synthetic tensors (docs/golden-format.md) named after the official checkpoint: "
        "`blocks.{i}.attn.qkv.weight` is `b{i}_qkv_w`, and so on (each tensor's description gives its checkpoint key). "
        "Training checkpoints saved with block chunks use `blocks.{chunk}.{i}.*` instead.",
        "The weights look trained (tools/make_dinov2_suite.py, WEIGHTS): LayerScale 0.05-0.6; from block "
        f"{v.outlier_block} on the residual stream carries outlier channels {sorted(OUTLIERS)} (block {v.outlier_block}'s "
        f"{'fc2' if v.ffn == 'mlp' else 'w3'} bias writes up to "
        f"{round(max(abs(x) for x in OUTLIERS.values()) * math.sqrt(DIM / 384), 1) * ACTIVATION_SCALE:g} into them), and the class "
        f"token is a high-norm token (std {1.5 * ACTIVATION_SCALE:g}); `vips-conformance inspect` shows each stage's "
        "activation scale. Trained ViTs carry such activations (Darcet et al. 2023, arXiv:2309.16588).",
        "Golden values are computed in float64 by the CPU reference provider (`vips-conformance generate`) "
        "and stored as float32; each stage is fed the float32 golden outputs of the stage before it.",
        "Verdicts follow the SDK's error model (docs/error-model.md): each output, and in a decomposed run each "
        "operator, is judged against the float64 reference recomputed from the provider's own inputs, within a "
        "bound derived from the computation (magnitudes of the operands, accumulation lengths, the tier's "
        "precision). No number here was calibrated on this suite's data.",
    ]
    if DIM != 384:
        notes[2] = notes[2].replace("(tools/make_dinov2_suite.py, WEIGHTS)", "(tools/make_dinov2_suite.py, block_table; "
                                    "ViT-S/14's profile with the matrices' std scaled by sqrt(384 / width) and the outliers "
                                    "by sqrt(width / 384))")
    if R:
        notes[2] = notes[2].replace("is a high-norm token", f"and the {R} registers are high-norm tokens")
        notes.append(f"{v.hub} has {R} register tokens (`register_tokens` [1, {R}, {DIM}]) inserted after the class token "
                     "after the position embedding is added: they carry none. Its position embedding is resized with "
                     "size=(g, g), antialias=True and no offset (interpolate_antialias=True, interpolate_offset=0.0), "
                     "unlike the model without registers.")
    else:
        notes.append(f"The registers variant ({v.hub}_reg) is a different component: 4 register tokens after cls, "
                     f"without position embedding, and its position embedding is resized with size="
                     f"{'(16, 16)' if v.default else f'({grid}, {grid})'}, antialias=True.")
    if v.head == "trellis":
        notes.append(f"Output: TRELLIS's conditioning (encode_image): forward_features(x)['x_prenorm'], all 1 + {R} + {patches} "
                     f"tokens before the model's final norm, then F.layer_norm without weight and bias, eps 1e-5. The "
                     "model's own final norm (norm.weight, norm.bias, eps 1e-6) is not used.")
    if v.ffn == "swiglu":
        notes.append(f"ViT-g's FFN is SwiGLU (ffn_layer='swiglufused'): w12 to 2 x {swiglu_hidden(DIM)}, silu(x1) * x2, w3. "
                     "The catalog has no SiLU: silu(x) = x * sigmoid(x), and sigmoid(x) is the first element of "
                     "softmax([x, 0]) (exactly: e^x / (e^x + 1)), so the graph builds the pair [x, x - x] and takes a softmax over it.")
    for n in notes:
        out.append(f"    - {q(n)}")
    if v.golden_budget is not None:
        out.append("")
        out.append("# Golden tensors larger than this are stored as their SHA-256 only (the values are regenerated")
        out.append("# by `vips-conformance generate` and checked against the hash).")
        out.append("golden:")
        out.append(f"  budget_bytes: {v.golden_budget}")
    out.append("")
    out.append("tensors:")
    if v.preprocess == "eval":
        if v.photo:
            out.append(tensor("image", "uint8", [h0, w0, 3], "golden", f"RGB photo {v.photo}, given to generate as image.npy"))
        else:
            out.append(tensor("image", "uint8", [h0, w0, 3], {"seeded": {"seed": 2304, "test_image": "true"}},
                              "RGB test image: gradients, a checkerboard, a disc, noise"))
    else:
        m = len(ALPHA_MASK)
        out.append(tensor("image_rgb", "uint8", [h0, w0, 3], {"seeded": {"seed": 2304, "test_image": "true"}},
                          "the input's colour: the RGB test image (gradients, a checkerboard, a disc, noise)"))
        out.append(tensor("alpha_mask", "uint8", [m, m, 1], {"values": [str(x) for row in ALPHA_MASK for x in row]},
                          "the input's alpha, before enlarging: an asymmetric blob"))
        out.append(tensor("image", "uint8", [h0, w0, 4], "golden",
                          "RGBA input: the test image under a soft-edged blob of alpha, transparent around it"))
        out.append(tensor("rgba", "uint8", [crop, crop, 4], "golden",
                          f"PIL's image.crop(box).resize(({crop}, {crop}), LANCZOS), RGBA"))
        out.append(tensor("rgb", "uint8", [crop, crop, 3], "golden", "preprocess_image's output: RGB premultiplied by alpha"))
    out.append(tensor("rgb_mean", "float32", [3, 1, 1], {"values": ["0.485", "0.456", "0.406"]}, "ImageNet mean"))
    out.append(tensor("rgb_std", "float32", [3, 1, 1], {"values": ["0.229", "0.224", "0.225"]}, "ImageNet std"))
    out.append(tensor("c255", "float32", [], {"values": ["255.0"]}, "ToTensor's divisor"))
    if v.preprocess == "trellis":
        out.append(tensor("c127", "float32", [], {"values": ["127.0"]}))
    seed = 1000
    for k, (shape, kind, a, b) in weights_table(DIM).items():
        seed += 1
        if k in ("norm_w", "norm_b") and v.head == "trellis":
            continue  # the model's final norm is not used (its seed stays taken)
        out.append(weight(k, CHECKPOINT[k], shape, seed, kind, a, b, DIM))
    if R:
        out.append(weight("register_tokens", "register_tokens", [1, R, DIM], REGISTER_SEED, "normal", 0.0, "cls", DIM))
    for i in range(DEPTH):
        for k, (shape, kind, a, b) in blk.items():
            seed += 1
            if i == v.outlier_block and k in ("fc2_b", "w3_b"):
                kind = "outliers"
            out.append(weight(f"b{i:02d}_{k}", f"blocks.{i}.{CHECKPOINT[k]}", shape, seed, kind, a, b, DIM))
    if v.head == "trellis":
        # A LayerNorm without affine: the catalog's layer_norm takes weight and
        # bias, so they are constants, seeded as degenerate uniforms (low = high:
        # v = low + 0·u is exactly 1 or 0) rather than 2 x DIM literals.
        out.append(tensor("ln_ones", "float32", [DIM], seeded(0, "uniform", 1.0, 1.0),
                          "F.layer_norm without weight: a weight of ones (uniform [1, 1] is exactly 1)"))
        out.append(tensor("ln_zeros", "float32", [DIM], seeded(0, "uniform", 0.0, 0.0),
                          "F.layer_norm without bias: a bias of zeros (uniform [0, 0] is exactly 0)"))
    out.append(tensor("pixels", "float32", [1, 3, crop, crop], "golden", "normalised input"))
    out.append(tensor("x_patch", "float32", [1, grid * grid, DIM], "golden", "patch tokens"))
    out.append(tensor("x_0", "float32", [1, T, DIM], "golden",
                      "tokens with cls and position embedding" + (f", then the {R} registers" if R else "")))
    for i in range(DEPTH):
        out.append(tensor(f"x_{i + 1}", "float32", [1, T, DIM], "golden",
                          f"output of block {i}" + (" (x_prenorm)" if i == DEPTH - 1 and v.head == "trellis" else "")))
    if v.head == "dinov2":
        out.append(tensor("x_norm", "float32", [1, T, DIM], "golden", "after the final LayerNorm"))
        out.append(tensor("x_norm_clstoken", "float32", [1, DIM], "golden"))
        if R:
            out.append(tensor("x_norm_regtokens", "float32", [1, R, DIM], "golden"))
        out.append(tensor("x_norm_patchtokens", "float32", [1, grid * grid, DIM], "golden"))
    else:
        out.append(tensor("cond", "float32", [1, T, DIM], "golden",
                          "TRELLIS's conditioning tokens: F.layer_norm(x_prenorm, eps 1e-5), no affine"))
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
    if v.preprocess == "eval":
        out += eval_preprocess(v)
    else:
        out += trellis_preprocess(v)
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
    out.append(pos_embed_stage(v, tokens, sf))
    for i in range(DEPTH):
        out.append(block_stage(v, i, blk, T))
    if v.head == "dinov2":
        out.append(stage(
            "final_norm",
            "Final LayerNorm over the channels, eps 1e-6",
            f"DinoVisionTransformer.norm (nn.LayerNorm({DIM}, eps=1e-6))",
            PAPER,
            [f"x_{DEPTH}", "norm_w", "norm_b"], ["x_norm"],
            [node("vsdk.layer_norm", [f"x_{DEPTH}", "norm_w", "norm_b"], "x_norm", eps=1e-6)],
            ["finite: x_norm"],
            ["The normalised tokens are the encoder's output; forward_features returns them split, below."],
        ))
        graph = [
            node("vsdk.crop", ["x_norm"], "cls3", offsets=[0, 0, 0], sizes=[1, 1, DIM]),
            node("vsdk.reshape", ["cls3"], "x_norm_clstoken", shape=[1, DIM]),
        ]
        if R:
            graph.append(node("vsdk.crop", ["x_norm"], "x_norm_regtokens", offsets=[0, 1, 0], sizes=[1, R, DIM]))
        graph.append(node("vsdk.crop", ["x_norm"], "x_norm_patchtokens", offsets=[0, 1 + R, 0], sizes=[1, grid * grid, DIM]))
        outs = ["x_norm_clstoken"] + (["x_norm_regtokens"] if R else []) + ["x_norm_patchtokens"]
        out.append(stage(
            "outputs",
            "Split the normalised tokens into the class token" + (", the register tokens" if R else "") + " and the patch tokens",
            "forward_features: x_norm_clstoken = x_norm[:, 0], x_norm_patchtokens = x_norm[:, 1:]" if not R else
            f"forward_features: x_norm_clstoken = x_norm[:, 0], x_norm_regtokens = x_norm[:, 1:{1 + R}], "
            f"x_norm_patchtokens = x_norm[:, {1 + R}:]",
            PAPER,
            ["x_norm"], outs,
            graph,
            [f"finite: {o}" for o in outs],
            ["With registers (dinov2_vits14_reg) the patch tokens start at index 5, not 1."] if not R else
            [f"The patch tokens start at index {1 + R}, after the class token and the {R} registers."],
        ))
    else:
        out.append(stage(
            "trellis_norm",
            f"TRELLIS's conditioning: LayerNorm over the channels of all {T} tokens of x_prenorm (the last block's output), "
            "eps 1e-5, without weight and bias",
            "TrellisImageTo3DPipeline.encode_image: features = model(image, is_training=True)['x_prenorm']; "
            "F.layer_norm(features, features.shape[-1:])",
            TRELLIS,
            [f"x_{DEPTH}", "ln_ones", "ln_zeros"], ["cond"],
            [node("vsdk.layer_norm", [f"x_{DEPTH}", "ln_ones", "ln_zeros"], "cond", eps=1e-5)],
            ["finite: cond"],
            [
                "eps is PyTorch's default 1e-5, not the model's 1e-6; the model's own final norm (norm.weight, norm.bias) "
                "is skipped: x_prenorm is taken before it.",
                f"All tokens are kept, in the model's order: class token, the {R} registers, then the {patches} patch tokens.",
                "No affine: the catalog's layer_norm takes a weight and a bias, here ones and zeros (seeded as uniform [1, 1] "
                "and [0, 0], which are exact constants).",
            ],
        ))
    path = pathlib.Path(out_dir) / "suite.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")
    print(f"wrote {path}")


def eval_preprocess(v):
    h0, w0 = v.image_hw
    short, crop = v.short, v.size
    vertical_first, pillow = v.order
    rh, rw = resize_256(h0, w0, short)
    top, left = int(round((rh - crop) / 2.0)), int(round((rw - crop) / 2.0))
    return [stage(
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
            "torchvision computes the long side as int(256 * long / short): truncation, not rounding." if v.default
            else f"torchvision computes the long side as int({short} * long / short): truncation, not rounding.",
            f"CenterCrop's offsets are int(round((in - out) / 2)), and Python rounds halves to even: here "
            f"round({(rw - crop) / 2.0}) = {left}. An implementation that rounds halves up crops one pixel off.",
        ],
    )]


def trellis_preprocess(v):
    """TRELLIS's preprocess_image and encode_image, as four stages: the test
    input, Pillow's crop + RGBA LANCZOS resize, TRELLIS's premultiplication to
    uint8, the normalisation. Every uint8 result is exact (see the notes for
    how integer division and truncation are written with round-to-nearest
    casts)."""
    import numpy as np

    h0, w0 = v.image_hw
    S = v.size
    m = len(ALPHA_MASK)
    alpha = trellis_alpha((h0, w0))
    (x0, y0, x1, y1), bbox, side = trellis_crop_box(alpha)
    if not (0 <= x0 < x1 <= w0 and 0 <= y0 < y1 <= h0):
        raise SystemExit(f"the crop box {(x0, y0, x1, y1)} leaves the {h0}x{w0} image (PIL pads it with transparent "
                         "pixels; vsdk.crop cannot): choose another canvas")
    ch, cw = y1 - y0, x1 - x0
    if (ch, cw) == (S, S):
        raise SystemExit(f"the crop is {S}x{S}: PIL's resize would be a copy (no RGBa round trip); choose another canvas")
    # The pass order Pillow takes for the LANCZOS resize of this crop (on RGBa).
    from PIL import Image
    rgba = np.zeros((h0, w0, 4), np.uint8)
    rgba[..., 3] = alpha
    rgba[..., :3] = 255
    premult = np.asarray(Image.fromarray(rgba, "RGBA").crop((x0, y0, x1, y1)).convert("RGBa"))
    vertical_first, pillow = pillow_pass_order(np.ascontiguousarray(premult), (S, S), "RGBa", Image.LANCZOS)
    lanczos = {"size": [S, S]}
    if vertical_first:
        lanczos["vertical_first"] = 1
    return [
        stage(
            "input_image",
            f"The test input (not part of TRELLIS): RGBA {h0}x{w0}, colour the seeded test image, alpha the {m}x{m} mask "
            f"enlarged with Pillow's bicubic resize (a soft-edged blob, exact zeros around it)",
            f"numpy.dstack((test_image, Image.fromarray(mask).resize(({w0}, {h0}), Image.BICUBIC)))",
            None,
            ["image_rgb", "alpha_mask"], ["image"],
            [
                node("vsdk.resize_pil_bicubic", ["alpha_mask"], "alpha", size=[h0, w0]),
                node("vsdk.concat", ["image_rgb", "alpha"], "image", axis=2),
            ],
            [],
            [
                "A fixture: an engine under test is given `image`, TRELLIS's RGBA input with a transparent background "
                "(rembg's output). The seeded test image with 4 channels has no transparent background (its alpha is a "
                "gradient), so the document composes one from seeded parts with exact integer operators.",
                "The colour under alpha 0 is the busy test image, not black: resizing straight (not premultiplied) RGBA "
                "bleeds it into the object's edge, which the next stage catches.",
            ],
        ),
        stage(
            "crop_resize",
            f"Crop to the alpha bounding box enlarged 1.2x: box (x0, y0, x1, y1) = ({x0}, {y0}, {x1}, {y1}), {ch}x{cw}; "
            f"then Pillow's RGBA resize to {S}x{S} with LANCZOS (a = 3 sinc window, antialiased, fixed point) through "
            f"premultiplied RGBa: premultiply (round(c * a / 255)), resize the 4 channels, unpremultiply "
            f"(min(255, floor(255 * c / a)), c unchanged where a is 0 or 255)",
            f"preprocess_image: bbox of alpha > 0.8 * 255, size = int(max side * 1.2), output.crop(box)"
            f".resize(({S}, {S}), Image.Resampling.LANCZOS) (Image.resize converts RGBA to RGBa and back)",
            TRELLIS,
            ["image"], ["rgba"],
            [
                node("vsdk.crop", ["image"], "cropped", offsets=[y0, x0, 0], sizes=[ch, cw, 4]),
                node(v.lanczos, ["cropped"], "rgba", alpha=1, **lanczos),
            ],
            [],
            [
                "The crop box is data-dependent: the engine's host code computes it from the input's alpha "
                "(TRELLIS: np.argwhere(alpha > 0.8 * 255), centre, larger side, int(size * 1.2), box = centre -+ size // 2, "
                f"then PIL rounds each coordinate with Python's round). Here the bbox is {bbox} (x0, y0, x1, y1), "
                f"size int({max(bbox[2] - bbox[0], bbox[3] - bbox[1])} * 1.2) = {side}; tools/make_dinov2_suite.py "
                "computed it from this input and wrote it as the crop's static attributes.",
                "PIL crops outside the image with transparent pixels; vsdk.crop cannot, so the input keeps the box inside.",
                "Pillow resizes RGBA through premultiplied RGBa (Image.resize converts, resizes, converts back; the "
                "resize's `alpha: 1`): a resize of the straight RGBA channels differs at every soft edge.",
                f"LANCZOS is Pillow's 3-lobe sinc window, fixed point like its bicubic; Pillow 13 picks the pass order "
                f"by size (python-pillow/Pillow#9549): this resize ({ch}x{cw} -> {S}x{S}) runs the "
                f"{'vertical' if vertical_first else 'horizontal'} pass first, as Pillow {pillow} does.",
            ],
        ),
        stage(
            "premultiply",
            "TRELLIS's premultiplication: floor(c * a / 255) per colour channel, uint8 RGB",
            "preprocess_image: np.array(output).astype(np.float32) / 255; output[:, :, :3] * output[:, :, 3:4]; "
            "Image.fromarray((output * 255).astype(np.uint8))",
            TRELLIS,
            ["rgba", "c127", "c255"], ["rgb"],
            [
                node("vsdk.crop", ["rgba"], "straight_rgb", offsets=[0, 0, 0], sizes=[S, S, 3]),
                node("vsdk.crop", ["rgba"], "straight_alpha", offsets=[0, 0, 3], sizes=[S, S, 1]),
                node("vsdk.cast", ["straight_rgb"], "straight_c", dtype="float32"),
                node("vsdk.cast", ["straight_alpha"], "alpha_f", dtype="float32"),
                node("vsdk.mul", ["straight_c", "alpha_f"], "product"),
                node("vsdk.sub", ["product", "c127"], "product_shifted"),
                node("vsdk.div", ["product_shifted", "c255"], "scaled"),
                node("vsdk.cast", ["scaled"], "rgb", dtype="uint8"),
            ],
            [],
            [
                "astype(np.uint8) truncates: the result is floor(c * a / 255), which TRELLIS's float32 arithmetic gives "
                "exactly for all 65536 (c, a) (checked); rounding instead differs by one level on about half of them. "
                "The catalog's cast rounds to nearest, so floor(m / 255) is written cast((m - 127) / 255).",
                "TRELLIS runs this step in numpy float32 on the host, whatever the model's precision: the stage's "
                "`precision: float32` computes and judges it at float32 at every tier (in fp16 or bf16 no float formula "
                "gives floor(c * a / 255) exactly: c * a needs 16 bits).",
                "encode_image resizes the image again to 518 with LANCZOS and converts it to RGB: both are no-ops "
                "here (PIL returns a copy when the size does not change).",
            ],
            precision="float32",
        ),
        stage(
            "normalize",
            "Scale to [0, 1], normalise per channel (ImageNet mean and std), NCHW",
            "encode_image: np.array(image).astype(np.float32) / 255, permute(2, 0, 1), "
            "transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])",
            TRELLIS,
            ["rgb", "rgb_mean", "rgb_std", "c255"], ["pixels"],
            [
                node("vsdk.cast", ["rgb"], "as_float", dtype="float32"),
                node("vsdk.permute", ["as_float"], "chw", perm=[2, 0, 1]),
                node("vsdk.div", ["chw", "c255"], "unit"),
                node("vsdk.sub", ["unit", "rgb_mean"], "centred"),
                node("vsdk.div", ["centred", "rgb_std"], "normalised"),
                node("vsdk.reshape", ["normalised"], "pixels", shape=[1, 3, S, S]),
            ],
            ["finite: pixels", "range: { tensor: pixels, min: -2.2, max: 2.7 }"],
            ["The background is black after premultiplication, so it normalises to -mean / std, not 0."],
        ),
    ]


def pos_embed_stage(v, tokens, sf):
    DIM, grid, R = v.dim, v.grid, v.registers
    T = tokens + R
    out_x0 = "x_0"
    graph = [
        node("vsdk.crop", ["pos_embed"], "pos_cls", offsets=[0, 0, 0], sizes=[1, 1, DIM]),
        node("vsdk.crop", ["pos_embed"], "pos_grid_flat", offsets=[0, 1, 0], sizes=[1, GRID * GRID, DIM]),
    ]
    if grid == GRID:
        # interpolate_pos_encoding returns pos_embed itself when npatch == N and w == h.
        graph = []
    else:
        graph += [
            node("vsdk.reshape", ["pos_grid_flat"], "pos_grid", shape=[1, GRID, GRID, DIM]),
            node("vsdk.permute", ["pos_grid"], "pos_nchw", perm=[0, 3, 1, 2]),
            (node("vsdk.resize_bicubic", ["pos_nchw"], "pos_resized", size=[grid, grid], antialias=1) if R else
             node("vsdk.resize_bicubic", ["pos_nchw"], "pos_resized", scale_factor=[yfloat(sf), yfloat(sf)], antialias=0)),
            node("vsdk.permute", ["pos_resized"], "pos_nhwc", perm=[0, 2, 3, 1]),
            node("vsdk.reshape", ["pos_nhwc"], "pos_patch", shape=[1, grid * grid, DIM]),
            node("vsdk.concat", ["pos_cls", "pos_patch"], "pos", axis=1),
        ]
    pos = "pos_embed" if grid == GRID else "pos"
    graph.append(node("vsdk.concat", ["cls_token", "x_patch"], "with_cls", axis=1))
    if R:
        graph += [
            node("vsdk.add", ["with_cls", pos], "with_pos"),
            node("vsdk.crop", ["with_pos"], "cls_row", offsets=[0, 0, 0], sizes=[1, 1, DIM]),
            node("vsdk.crop", ["with_pos"], "patch_rows", offsets=[0, 1, 0], sizes=[1, grid * grid, DIM]),
            node("vsdk.concat", ["cls_row", "register_tokens", "patch_rows"], out_x0, axis=1),
        ]
    else:
        graph.append(node("vsdk.add", ["with_cls", pos], out_x0))
    if grid == GRID:
        algorithm = (f"Prepend the class token, add the position embedding as it is (the input is {v.size}x{v.size}, "
                     f"the {GRID}x{GRID} training grid: no resize)")
        impl = ("DinoVisionTransformer.prepare_tokens_with_masks: interpolate_pos_encoding returns self.pos_embed "
                "when npatch == N and w == h")
        notes = [f"At {v.size}x{v.size} the official model adds pos_embed unresized; a resize with scale_factor "
                 f"({GRID} + 0.1) / {GRID} would resample it (and differ).",
                 "The class token gets the first position embedding."]
    elif R:
        algorithm = (f"Prepend the class token, add the position embedding resized from its {GRID}x{GRID} training grid to "
                     f"{grid}x{grid}: bicubic antialiased (Pillow's filter, a = -0.5), size=({grid}, {grid})")
        impl = ("DinoVisionTransformer.interpolate_pos_encoding with interpolate_offset=0 and interpolate_antialias=True: "
                f"nn.functional.interpolate(..., mode='bicubic', antialias=True, size=({grid}, {grid}))")
        notes = [
            "The registers models resize with size=(g, g) and antialias=True (interpolate_offset 0): source coordinates "
            f"use {GRID}/{grid}, and the filter widens by that factor. The scale_factor form of the models without registers "
            "(A = -0.75, offset 0.1) fails this stage.",
            "The class token gets the first position embedding, unresized.",
        ]
    else:
        algorithm = (f"Prepend the class token, add the position embedding resized from its {GRID}x{GRID} training grid to "
                     f"{grid}x{grid}: bicubic (A = -0.75), align_corners=False, antialias off, scale_factor = "
                     f"({grid} + 0.1) / {GRID} per axis")
        impl = ("DinoVisionTransformer.interpolate_pos_encoding: nn.functional.interpolate(patch_pos_embed.reshape(1, 37, 37, dim)"
                ".permute(0, 3, 1, 2), mode='bicubic', antialias=False, scale_factor=(sx, sy)) with "
                "sx = (w0 + interpolate_offset) / M, interpolate_offset = 0.1")
        notes = [
            f"The official model passes scale_factor, not size: the output is floor({GRID} * s) = {grid} pixels, but "
            f"source coordinates use 1/s = {GRID}/{grid + 0.1}, not {GRID}/{grid}. Resizing with size=({grid}, {grid}) "
            "shifts every sample and fails this stage.",
            "timm's vit_small_patch14_dinov2 resizes with size=(16, 16) and antialias=True (a = -0.5): a different "
            "result at 224 (differences up to about 1.0 in this suite's resized position embedding). It is not this component."
            if v.default else
            f"timm's DINOv2 models resize with size=({grid}, {grid}) and antialias=True (a = -0.5): a different "
            "result; they are not this component.",
            "Bicubic with A = -0.75 and clamped borders (PyTorch's upsample_bicubic2d), computed in float32 by "
            "PyTorch; exported graphs (ONNX Resize) sometimes carry A = -0.5 or exclude_outside: check both.",
            "The class token gets the first position embedding, unresized.",
        ]
    if R:
        algorithm += f"; then insert the {R} register tokens after the class token (no position embedding)"
        impl += "; torch.cat((x[:, :1], register_tokens, x[:, 1:]), dim=1)"
        notes.append(f"The registers are inserted after the position embedding is added: they get none. Tokens: "
                     f"class, {R} registers, {grid * grid} patches.")
    return stage(
        "pos_embed", algorithm, impl, PAPER if not R else f"{PAPER}; registers: {REG_PAPER}",
        ["x_patch", "cls_token", "pos_embed"] + (["register_tokens"] if R else []), ["x_0"],
        graph, ["finite: x_0"], notes,
    )


def block_stage(v, i, blk, tokens):
    DIM, HEADS = v.dim, v.heads
    scale = 1.0 / math.sqrt(HEAD_DIM)
    b = f"b{i:02d}_"
    x, y = f"x_{i}", f"x_{i + 1}"
    w = lambda k: b + k
    graph = [
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
    ]
    if v.ffn == "mlp":
        graph += [
            node("vsdk.linear", ["n2", w("fc1_w"), w("fc1_b")], "hidden"),
            node("vsdk.gelu", ["hidden"], "hidden_act"),
            node("vsdk.linear", ["hidden_act", w("fc2_w"), w("fc2_b")], "mlp"),
        ]
        ffn_text = "x += ls2 * fc2(GELU(fc1(norm2(x))))"
        ffn_impl = "Mlp"
    else:
        hd = swiglu_hidden(DIM)
        graph += [
            node("vsdk.linear", ["n2", w("w12_w"), w("w12_b")], "x12"),
            node("vsdk.crop", ["x12"], "x1", offsets=[0, 0, 0], sizes=[1, tokens, hd]),
            node("vsdk.crop", ["x12"], "x2", offsets=[0, 0, hd], sizes=[1, tokens, hd]),
            node("vsdk.reshape", ["x1"], "x1_col", shape=[1, tokens, hd, 1]),
            node("vsdk.sub", ["x1_col", "x1_col"], "zero_col"),
            node("vsdk.concat", ["x1_col", "zero_col"], "x1_pair", axis=3),
            node("vsdk.softmax", ["x1_pair"], "pair_p", axis=-1),
            node("vsdk.crop", ["pair_p"], "sigmoid_col", offsets=[0, 0, 0, 0], sizes=[1, tokens, hd, 1]),
            node("vsdk.reshape", ["sigmoid_col"], "sigmoid", shape=[1, tokens, hd]),
            node("vsdk.mul", ["x1", "sigmoid"], "silu"),
            node("vsdk.mul", ["silu", "x2"], "hidden_act"),
            node("vsdk.linear", ["hidden_act", w("w3_w"), w("w3_b")], "mlp"),
        ]
        ffn_text = "x += ls2 * w3(silu(x1) * x2), (x1, x2) = chunk(w12(norm2(x)), 2)"
        ffn_impl = "SwiGLUFFNFused"
    graph += [
        node("vsdk.mul", ["mlp", w("ls2")], "mlp_scaled"),
        node("vsdk.add", ["x_attn", "mlp_scaled"], y),
    ]
    notes = [
        "LayerNorm eps is 1e-6 (PyTorch's default is 1e-5): the wrong eps fails here.",
        f"Attention scale is 1/sqrt(head_dim) = 1/8, not 1/sqrt({DIM}).",
        "GELU is the exact erf form (nn.GELU()); the tanh approximation differs by up to 5e-4 and fails."
        if v.ffn == "mlp" else
        "silu(x1) * x2 with x1 the first half of w12's output (torch.chunk order); swapping the halves fails here.",
        f"qkv is laid out as [3, heads, head_dim] along the output features: reshape(B, N, 3, {HEADS}, {HEAD_DIM})"
        ".permute(2, 0, 3, 1, 4).",
        "xFormers' memory-efficient attention (used when installed) and PyTorch's SDPA are not bit-identical "
        "to the unfused form; both are within this stage's fp32 tolerance.",
        "LayerScale initialises to 1e-5 in the training config and to 1.0 in the hub model; irrelevant for "
        "inference with a checkpoint, whose gamma values are used as they are.",
    ]
    if v.registers:
        notes.append(f"The block treats the {v.registers} registers as any other token ({tokens} tokens in all).")
    return stage(
        f"block_{i:02d}",
        f"Pre-norm transformer block {i}: x += ls1 * proj(attention(norm1(x))); {ffn_text}. "
        f"LayerNorm eps 1e-6, {HEADS} heads of {HEAD_DIM}, softmax(q k^T / 8) v" + (", exact GELU" if v.ffn == "mlp" else ""),
        f"dinov2.layers.NestedTensorBlock (Block with MemEffAttention, LayerScale, {ffn_impl})",
        f"{VIT}; LayerScale: Touvron et al. 2021, arXiv:2103.17239" +
        ("" if v.ffn == "mlp" else "; SwiGLU: Shazeer 2020, arXiv:2002.05202"),
        [x] + [w(k) for k in blk], [y],
        graph,
        [f"finite: {y}"],
        notes,
    )


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


def family_title(v, extra=""):
    a = ARCHS[v.arch]
    what = f"DINOv2 {a['name']}" + (" with registers" if v.registers else "")
    depth = "" if v.depth == a["depth"] else f", first {v.depth} of {a['depth']} blocks"
    if v.head == "trellis" or v.preprocess == "trellis":
        pre = "TRELLIS preprocessing" if v.preprocess == "trellis" else "eval preprocessing"
        head = "TRELLIS conditioning head" if v.head == "trellis" else "final norm"
        return f"{what}: TRELLIS image conditioning at {v.size}x{v.size} ({pre}, {head}{depth}){extra}"
    return f"{what} image encoder, official eval pipeline at {v.size}x{v.size}{depth}{extra}"


def trellis_suites(lanczos):
    """The committed TRELLIS conditioning suites: ViT-L/14 with registers at
    518 (24 blocks) and its quick variant for CI (the same widths, 112x112: an
    8x8 grid, 2 blocks)."""
    full = Variant("dinov2-vitl14-reg-518", "", arch="l", registers=True, size=518, preprocess="trellis",
                   head="trellis", lanczos=lanczos, golden_budget=8000000)
    full.title = "DINOv2 ViT-L/14 with registers: TRELLIS image conditioning at 518x518 (TRELLIS preprocessing and head)"
    quick = Variant("dinov2-vitl14-reg-518-quick", "", arch="l", registers=True, size=112, depth=2,
                    preprocess="trellis", head="trellis", lanczos=lanczos, golden_budget=2000000)
    quick.title = ("DINOv2 ViT-L/14 with registers: TRELLIS image conditioning, quick: 112x112, first 2 of 24 blocks "
                   "(TRELLIS preprocessing and head)")
    return full, quick


def main():
    global REAL_WEIGHTS
    ap = argparse.ArgumentParser(description="Write DINOv2 suite documents (the committed ViT-S/14 ones by default).")
    ap.add_argument("--out", help="write one suite to this directory instead of the committed ones")
    ap.add_argument("--id", help="the component id (default: from --out's directory name)")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="s", help="ViT-S, B, L or g (with --out)")
    ap.add_argument("--registers", action="store_true", help="the *_reg model: 4 registers, its interpolation (with --out)")
    ap.add_argument("--size", type=int, help="the model's input size, a multiple of 14 (default 224; 518 with "
                    "--preprocess trellis)")
    ap.add_argument("--depth", type=int, help="keep the first N blocks (default: the arch's)")
    ap.add_argument("--preprocess", choices=["eval", "trellis"], default="eval")
    ap.add_argument("--head", choices=["dinov2", "trellis"], default="dinov2",
                    help="dinov2: final norm, split outputs; trellis: x_prenorm, LayerNorm without affine, eps 1e-5")
    ap.add_argument("--golden-budget", type=int, help="write `golden: budget_bytes:` (the golden file's raw-tensor budget)")
    ap.add_argument("--trellis", action="store_true",
                    help="write the committed TRELLIS suites (dinov2-vitl14-reg-518 and its -quick variant)")
    ap.add_argument("--lanczos-op", default="vsdk.resize_pil_lanczos",
                    help="the kernel of Pillow's LANCZOS resize (only to test before the catalog has it)")
    ap.add_argument("--weights", action="store_true", help="read the weights from a checkpoint (with --out)")
    ap.add_argument("--image", help="use this photo as the input (with --out)")
    ap.add_argument("--activation-scale", type=float, default=1.0,
                    help="multiply the outlier channels and the class token (a stress suite; with --out)")
    ap.add_argument("--quick", action="store_true", help="56x56 instead of 224x224 (with --out)")
    args = ap.parse_args()
    global ACTIVATION_SCALE
    ACTIVATION_SCALE = args.activation_scale
    family = (args.arch != "s" or args.registers or args.size or args.depth or args.preprocess != "eval"
              or args.head != "dinov2" or args.golden_budget is not None)
    if args.trellis:
        if args.out or family or args.weights or args.image or args.quick or args.activation_scale != 1.0:
            ap.error("--trellis writes the committed TRELLIS suites and takes no other option but --lanczos-op")
        for v in trellis_suites(args.lanczos_op):
            suite(v)
        return
    if args.out:
        REAL_WEIGHTS = args.weights
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        ident = args.id or re.sub("[^a-z0-9_-]", "-", out.name.lower()) or "dinov2-custom"
        if args.image and args.preprocess == "trellis":
            ap.error("--image takes an RGB photo for the eval preprocessing; the TRELLIS input is built in the document")
        if args.quick and args.size:
            ap.error("--quick is --size 56")
        size = args.size or (56 if args.quick else 518 if args.preprocess == "trellis" else 224)
        order = (0, "13.0")
        image_hw = None
        if args.preprocess == "eval":
            image_hw = (300, 400) if size == 224 else (75, 100) if size == 56 else None
        if args.image:
            import numpy as np
            from PIL import Image

            pixels = np.asarray(Image.open(args.image).convert("RGB"), dtype=np.uint8)
            np.save(out / "image.npy", pixels)
            image_hw = pixels.shape[:2]
            order = pillow_pass_order(pixels, resize_256(image_hw[0], image_hw[1], size * 8 // 7))
        v = Variant(ident, "", arch=args.arch, registers=args.registers, size=size, depth=args.depth,
                    preprocess=args.preprocess, head=args.head, image_hw=image_hw, out_dir=out, photo=args.image,
                    order=order, lanczos=args.lanczos_op, golden_budget=args.golden_budget)
        if v.default and size == 56:
            v.title = "DINOv2 ViT-S/14 image encoder, all stages at 56x56" + variant(args)
        else:
            v.title = family_title(v, variant(args))
        suite(v)
        return
    if args.weights or args.image or args.quick or args.activation_scale != 1.0 or family:
        ap.error("--weights, --image, --quick, --activation-scale and the family's options need --out: "
                 "the committed suites stay as they are")
    suite(Variant("dinov2-vits14", "DINOv2 ViT-S/14 image encoder, official eval pipeline at 224x224",
                  image_hw=(300, 400), size=224))
    suite(Variant("dinov2-vits14-quick", "DINOv2 ViT-S/14 image encoder, all stages at 56x56 (quick tests)",
                  image_hw=(75, 100), size=56))


if __name__ == "__main__":
    main()
