#!/usr/bin/env python3
"""Independent validation of the DINOv2 ViT-S/14 suites against the official
facebookresearch/dinov2 PyTorch code.

    pip install torch safetensors pillow numpy && pip install --no-deps dinov2
    cargo build --release
    python3 tools/validate_dinov2.py [SUITE ...] [--tier fp32|fp16|bf16|autocast-bf16 ...]
                                     [--mode isolated|chained ...] [--no-inputs] [--save DIR]
    python3 tools/validate_dinov2.py [SUITE ...] --golden

Default: the suites dinov2-vits14 and dinov2-vits14-stress, tiers fp32 and
bf16, modes isolated and chained. For each suite, tier and mode it runs the
official model on the CPU in that dtype, stage by stage, captures every
stage's output, and has `vips-conformance check` judge the captures with the
SDK's error model (docs/error-model.md), exactly as it judges a provider.
Prints a Markdown table for docs/validation.md; exits 1 if any run fails.

Tiers: fp32, fp16 and bf16 convert the model to that dtype (`model.to(dtype)`)
and are judged at that tier. autocast-bf16 is what a PyTorch user does: the
model stays float32 and every stage runs under
`torch.autocast("cpu", dtype=torch.bfloat16)` (GEMMs, convolutions and
attention in bfloat16; LayerNorm, LayerScale, the residual adds, the position
embedding and the preprocessing in float32, with float32 parameters); it is
judged with `check --tier bf16`. Captures are stored as float32 (bf16 and
fp16 values are exact in it) and are not rounded here: where autocast
produced float32, `check` rounds the capture to bf16 and says so in the
stage's notes. In isolated mode each stage is fed its golden activation
input at the tier (autocast-bf16: rounded to bfloat16, held in float32);
in chained mode, the model's own previous output, unrounded.

Both modes also capture each stage's inputs as the first operator consuming
them received them, as `INPUT@STAGE` (`x_12@final_norm`, `norm_w@final_norm`,
...); `check` takes them as the stage's inputs instead of the golden value
(isolated) or the previous stage's capture (chained) rounded to the tier:
  - activations (the test image, `pixels`, `x_patch`, `x_0` ... `x_12`,
    `x_norm`): as fed, i.e. chained the previous stage's unrounded output.
    Under autocast an activation whose first consumer is an op autocast
    runs in bfloat16 is captured rounded to bfloat16, as that op received
    it: `pixels`, into the patch embedding's convolution. The others enter
    float32 ops (LayerNorm, the concatenation with the class token, the
    crops of the outputs stage) and are captured as fed.
  - parameters and constants, autocast-bf16 only: autocast casts the
    weights and biases of Linear and Conv2d layers to bfloat16, which is
    the tier's golden value (no capture needed), but keeps the others in
    float32: `cls_token`, `pos_embed`, the LayerNorm weights and biases,
    the LayerScale gammas (`bNN_ls1`, `bNN_ls2`), and the preprocessing's
    `rgb_mean`, `rgb_std` and `c255`. These are captured in float32, in
    both modes (isolated, the model is fed its own float32 parameters).
    With fp32, fp16 and bf16 the model is converted to the tier's dtype:
    its parameters are the tier's golden values and are not captured.
--no-inputs omits the input captures (each stage judged as fed the golden
values, or in chained mode the previous stage's rounded capture, at the
tier). --save DIR keeps each run's captures and `check` JSON as
DIR/SUITE.TIER.MODE[.no-inputs].{safetensors,json}.

Columns besides the verdict: the largest normalised error `max_e` of a
stage output (and its stage), the median over stages, the largest `rms_t`
(the error in units of a correct implementation's; outputs where it is null,
not tested, are skipped), the number of stages with `notes` or `coverage`
in `check`'s JSON, and in chained mode the end-to-end drift.

--golden instead compares the official model run in float64 with the golden
values (each stage fed its golden input): the golden values are right to
float32 storage rounding.

The suite's tensors (weights, test image, golden outputs) come from
`vips-conformance export`; the official model (`vit_small`, patch 14,
img_size 518, LayerScale, no block chunks: what torch.hub's dinov2_vits14
builds) is loaded with the weights under their checkpoint names (each
tensor's description in the document). Preprocessing is Pillow's own resize,
torchvision's center-crop rule and the normalisation in the tier's dtype.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from safetensors.numpy import load_file, save_file

import torch.nn.functional as F
import yaml

import dinov2.models.vision_transformer as vt

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = pathlib.Path(os.environ.get("VIPS_CONFORMANCE", ROOT / "target" / "release" / "vips-conformance"))
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}
# Tier name -> (model dtype, autocast dtype or None, the tier `check` judges at).
TIERS = {"fp32": (torch.float32, None, "fp32"), "fp16": (torch.float16, None, "fp16"),
         "bf16": (torch.bfloat16, None, "bf16"), "autocast-bf16": (torch.float32, torch.bfloat16, "bf16")}


def document(suite):
    """The suite's document: a name under conformance/suites, or a path (with a `/`)."""
    if "/" in suite:
        return pathlib.Path(suite) / "suite.yaml"
    return ROOT / "conformance" / "suites" / suite / "suite.yaml"


# The official builders by width (dinov2/models/vision_transformer.py).
BUILDERS = {384: "vit_small", 768: "vit_base", 1024: "vit_large", 1536: "vit_giant2"}


def variant_of(suite):
    """What the document says the model is, read from its graphs and tensors:
    width, depth, registers, the position-embedding interpolation, the FFN,
    the preprocessing (eval or TRELLIS, with the crop box and the resize
    kernel) and the head. The official model is then built to match, and
    every fact the document states is checked against the official code."""
    doc = yaml.safe_load(document(suite).read_text())
    tensors, stages = doc["tensors"], {st["stage"]: st for st in doc["stages"]}
    ops = lambda st: [(n["op"], n.get("attrs", {})) for n in stages[st]["graph"]]
    dim = tensors["patch_w"]["shape"][0]
    depth = sum(1 for name in stages if name.startswith("block_"))
    heads = next(a["shape"][3] for op, a in ops("block_00") if op == "vsdk.reshape" and len(a["shape"]) == 5)
    registers = tensors["register_tokens"]["shape"][1] if "register_tokens" in tensors else 0
    resize = [a for op, a in ops("pos_embed") if op == "vsdk.resize_bicubic"]
    v = {"dim": dim, "depth": depth, "heads": heads, "registers": registers,
         "ffn": "swiglufused" if "b00_w12_w" in tensors else "mlp",
         "antialias": bool(resize and resize[0].get("antialias", 0)),
         "offset": 0.1 if resize and "scale_factor" in resize[0] else (0.0 if resize else None),
         "head": "trellis" if "trellis_norm" in stages else "dinov2",
         "preprocess": "trellis" if "crop_resize" in stages else "eval"}
    if v["preprocess"] == "trellis":
        crop = next(a for op, a in ops("crop_resize") if op == "vsdk.crop")
        v["crop_box"] = (crop["offsets"][1], crop["offsets"][0], crop["offsets"][1] + crop["sizes"][1],
                         crop["offsets"][0] + crop["sizes"][0])
        v["resize_op"] = next(op for op, _ in ops("crop_resize") if op.startswith("vsdk.resize_pil"))
    return v


def export(suite):
    doc = document(suite)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "suite.safetensors"
        subprocess.run([str(CLI), "export", suite, "--out", str(path)], check=True, capture_output=True)
        t = load_file(str(path))
    info = json.loads(subprocess.run([str(CLI), "inspect", str(doc), "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    keys = {row["name"]: row["description"] for row in info["tensors"] if row.get("description")}
    return t, keys


def official(builder, depth, **kwargs):
    """The official builder (vit_small, ...) with its own width, heads, MLP
    ratio and FFN, but only `depth` blocks (the builders pass depth
    themselves, so it is overridden on the class they call)."""
    base = vt.DinoVisionTransformer

    class Shallow(base):
        def __init__(self, **kw):
            kw["depth"] = depth
            super().__init__(**kw)

    vt.DinoVisionTransformer = Shallow
    try:
        return getattr(vt, builder)(**kwargs)
    finally:
        vt.DinoVisionTransformer = base


def model_for(t, keys, dtype, v=None):
    v = v or {"dim": 384, "depth": 12, "registers": 0, "antialias": False, "offset": 0.1, "ffn": "mlp", "head": "dinov2"}
    extra = {}
    if v["registers"] or v["antialias"] or v["offset"] not in (0.1, None):
        if "num_register_tokens" not in vt.DinoVisionTransformer.__init__.__code__.co_varnames:
            sys.exit("the installed dinov2 package (PyPI 0.0.1.dev2) predates registers and interpolate_antialias / "
                     "interpolate_offset: put facebookresearch/dinov2's current code first on PYTHONPATH")
        extra = dict(num_register_tokens=v["registers"], interpolate_antialias=v["antialias"],
                     interpolate_offset=v["offset"] if v["offset"] is not None else 0.0)
    if v["ffn"] != "mlp":
        extra["ffn_layer"] = v["ffn"]
    model = official(BUILDERS[v["dim"]], v["depth"], patch_size=14, img_size=518, init_values=1.0, block_chunks=0,
                     **extra)
    state = model.state_dict()
    loaded = 0
    for name, key in keys.items():
        if key in state:
            state[key] = torch.from_numpy(t[name].astype(np.float32))
            loaded += 1
    model.load_state_dict(state)
    unused = {"mask_token"} | ({"norm.weight", "norm.bias"} if v["head"] == "trellis" else set())
    assert loaded == len([k for k in state if k not in unused]), f"loaded {loaded} of {len(state)} tensors"
    return model.to(dtype).eval()


# Activations whose first consumer is an op that autocast runs in its lower
# precision (the patch embedding's convolution): that op receives them rounded.
AUTOCAST_CAST_INPUTS = {"pixels"}


def stage_of(key):
    """The suite stage that has the checkpoint parameter `key` as an input."""
    if key.startswith("blocks."):
        return f"block_{int(key.split('.')[1]):02d}"
    return {"patch_embed": "patch_embed", "cls_token": "pos_embed", "pos_embed": "pos_embed",
            "register_tokens": "pos_embed", "norm": "final_norm"}[key.split(".")[0]]


def autocast_float32_parameters(model, keys):
    """The model's parameters that autocast leaves in float32, as
    `NAME@STAGE`: all but those of Linear and Conv2d layers (which it casts)."""
    cast = {f"{m}.{p}" for m, module in model.named_modules()
            if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d))
            for p, _ in module.named_parameters(recurse=False)}
    params = dict(model.named_parameters())
    return {f"{name}@{stage_of(key)}": params[key] for name, key in keys.items()
            if key in params and key not in cast}


def stages(model, t, keys, dtype, chained, autocast=None, inputs=True, v=None):
    """Each stage's output, fed the golden activation input (isolated) or the
    model's own previous output (chained), computed in `dtype` (the model's),
    under `torch.autocast` to `autocast` where given. With `inputs`: also each
    stage's inputs as its first operator received them, named `INPUT@STAGE`
    (see the module's docstring)."""
    v = v or {"preprocess": "eval", "head": "dinov2", "registers": 0}
    if autocast is None:
        return _stages(model, t, keys, dtype, chained, None, inputs, v)
    with torch.autocast("cpu", dtype=autocast):
        return _stages(model, t, keys, dtype, chained, autocast, inputs, v)


def trellis_preprocess(image, box, resample, size):
    """TRELLIS's preprocess_image (trellis/pipelines/trellis_image_to_3d.py,
    the has_alpha path), line for line, returning the resized RGBA image and
    the result; the crop box it computes must be the document's."""
    output = Image.fromarray(image, "RGBA")
    output_np = np.array(output)
    alpha = output_np[:, :, 3]
    bbox = np.argwhere(alpha > 0.8 * 255)
    bbox = np.min(bbox[:, 1]), np.min(bbox[:, 0]), np.max(bbox[:, 1]), np.max(bbox[:, 0])
    center = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    size_ = max(bbox[2] - bbox[0], bbox[3] - bbox[1])
    size_ = int(size_ * 1.2)
    bbox = center[0] - size_ // 2, center[1] - size_ // 2, center[0] + size_ // 2, center[1] + size_ // 2
    rounded = tuple(int(round(float(c))) for c in bbox)
    assert rounded == tuple(box), f"TRELLIS crops {rounded}, the document {tuple(box)}"
    output = output.crop(bbox)
    output = output.resize((size, size), resample)
    rgba = np.array(output)
    output = np.array(output).astype(np.float32) / 255
    output = output[:, :, :3] * output[:, :, 3:4]
    output = Image.fromarray((output * 255).astype(np.uint8))
    return rgba, np.array(output)


def _stages(model, t, keys, dtype, chained, autocast, inputs, v):
    out = {}
    fed = {}
    # Golden inputs at the tier: autocast-bf16 is judged at bf16, so its golden
    # inputs are rounded to bfloat16 (and held in the model's float32).
    tier_dtype = autocast or dtype

    def given(name, stage):
        if chained and name in out:
            v = out[name]
        else:
            v = torch.from_numpy(t[name].astype(np.float32)).to(tier_dtype).to(dtype)
        if inputs:
            received = v.to(autocast) if autocast and name in AUTOCAST_CAST_INPUTS else v
            fed[f"{name}@{stage}"] = received
        return v

    crop = t["pixels"].shape[-1]
    mean = torch.tensor([0.485, 0.456, 0.406]).to(dtype).reshape(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).to(dtype).reshape(3, 1, 1)
    c255 = torch.tensor(255.0).to(dtype)
    if v["preprocess"] == "eval":
        image = t["image"]
        if inputs:
            fed["image@preprocess"] = torch.from_numpy(image)
        h, w = image.shape[:2]
        short = crop * 8 // 7  # 224 -> 256, 56 -> 64
        rh, rw = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
        resized = np.asarray(Image.fromarray(image, "RGB").resize((rw, rh), Image.BICUBIC))
        top, left = int(round((rh - crop) / 2.0)), int(round((rw - crop) / 2.0))
        cropped = torch.from_numpy(resized[top:top + crop, left:left + crop].astype(np.float32)).to(dtype)
        out["pixels"] = ((cropped.permute(2, 0, 1) / c255 - mean) / std)[None]
    else:
        # The test input, composed as the document says (Pillow's bicubic
        # enlargement of the mask, horizontal pass first), then TRELLIS.
        mask = t["alpha_mask"][:, :, 0]
        h, w = t["image_rgb"].shape[:2]
        m = Image.fromarray(mask, "L")
        alpha = np.asarray(m.resize((w, mask.shape[0]), Image.BICUBIC).resize((w, h), Image.BICUBIC))
        out["image"] = np.dstack((t["image_rgb"], alpha))
        # Stand-in: a document written with `--lanczos-op vsdk.resize_pil_bicubic` (before the catalog had
        # LANCZOS) is checked against Pillow's BICUBIC.
        resample = Image.LANCZOS if v["resize_op"] == "vsdk.resize_pil_lanczos" else Image.BICUBIC
        source = out["image"] if chained else t["image"]
        out["rgba"], _ = trellis_preprocess(source, v["crop_box"], resample, crop)
        rgba = out["rgba"] if chained else t["rgba"]
        f = rgba.astype(np.float32) / 255
        out["rgb"] = np.array(Image.fromarray((f[:, :, :3] * f[:, :, 3:4] * 255).astype(np.uint8)))
        rgb = out["rgb"] if chained else t["rgb"]
        # encode_image: np.array(i.convert('RGB')).astype(np.float32) / 255, permute, Normalize.
        unit = torch.from_numpy(rgb.astype(np.float32)).to(dtype).permute(2, 0, 1) / c255
        out["pixels"] = ((unit - mean) / std)[None]
    if autocast and inputs:
        # Autocast leaves these in float32 (the tier's golden values are
        # rounded to bf16); the Linear and Conv2d parameters it casts are not.
        fed.update({"rgb_mean@preprocess": mean, "rgb_std@preprocess": std, "c255@preprocess": c255})
        fed.update(autocast_float32_parameters(model, keys))
    out["x_patch"] = model.patch_embed(given("pixels", "patch_embed"))
    # prepare_tokens_with_masks without its patch embedding: the stage starts
    # from x_patch (golden, or the model's own).
    x = torch.cat((model.cls_token.expand(1, -1, -1), given("x_patch", "pos_embed")), dim=1)
    x = x + model.interpolate_pos_encoding(x, crop, crop)
    R = v["registers"]
    if R:
        x = torch.cat((x[:, :1], model.register_tokens.expand(x.shape[0], -1, -1), x[:, 1:]), dim=1)
    out["x_0"] = x
    for i, block in enumerate(model.blocks):
        out[f"x_{i + 1}"] = block(given(f"x_{i}", f"block_{i:02d}"))
    depth = len(model.blocks)
    if v["head"] == "trellis":
        # encode_image: features = x_prenorm; F.layer_norm(features, features.shape[-1:]) (eps 1e-5, no affine)
        x_prenorm = given(f"x_{depth}", "trellis_norm")
        out["cond"] = F.layer_norm(x_prenorm, x_prenorm.shape[-1:])
    else:
        x_norm = model.norm(given(f"x_{depth}", "final_norm"))
        out["x_norm"] = x_norm
        source = given("x_norm", "outputs")
        out["x_norm_clstoken"] = source[:, 0]
        if R:
            out["x_norm_regtokens"] = source[:, 1:R + 1]
        out["x_norm_patchtokens"] = source[:, R + 1:]
    # Captures in float32 (bf16 and fp16 values are exact in it); float64 stays;
    # the uint8 image stays.
    keep = torch.float64 if dtype == torch.float64 else torch.float32
    captured = {k: (x if isinstance(x, np.ndarray) else (x.to(keep) if x.is_floating_point() else x).detach().numpy())
                for k, x in {**out, **fed}.items()}
    # In the document's shapes (`INPUT@STAGE` has its input's shape).
    return {k: v.reshape(t[k.split("@")[0]].shape) for k, v in captured.items()}


def check(suite, captured, tier, mode, save=None):
    """`vips-conformance check`'s JSON report; with `save` (a path without
    suffix), also keep the captures and the report there."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "captured.safetensors"
        save_file({k: np.require(v, requirements="C") for k, v in captured.items()}, str(path))  # keeps 0-d shapes
        r = subprocess.run([str(CLI), "check", suite, "--tensors", str(path), "--tier", tier, "--mode", mode,
                            "--json"], capture_output=True, text=True)
        if save is not None:
            save.parent.mkdir(parents=True, exist_ok=True)
            path.replace(save.parent / f"{save.name}.safetensors")
            (save.parent / f"{save.name}.json").write_text(r.stdout)
    if r.returncode not in (0, 1):
        sys.exit(f"vips-conformance check failed: {r.stderr}")
    return json.loads(r.stdout)


def number(v):
    """A float from `check`'s JSON: non-finite values are the strings "inf",
    "-inf" and "NaN" (an infinite |e|: a NaN or Inf where the reference is
    finite, or any difference where the bound is 0); older reports wrote null.
    NaN and null read as infinity."""
    v = float("inf") if v is None else float(v)
    return float("inf") if v != v else v


def golden(suite):
    t, keys = export(suite)
    v = variant_of(suite)
    model = model_for(t, keys, torch.float64, v)
    got = stages(model, t, keys, torch.float64, chained=False, inputs=False, v=v)
    print(f"Suite `{suite}`, torch {torch.__version__}, float64, each stage fed its golden input.\n")
    print("| tensor | max abs error | relative L2 error |")
    print("|---|---|---|")
    for name, got_v in got.items():
        want = t[name].astype(np.float64)
        d = got_v.astype(np.float64) - want
        print(f"| {name} | {np.abs(d).max():.2e} | {np.linalg.norm(d) / np.linalg.norm(want):.2e} |")


def main():
    argv = sys.argv[1:]
    valued = {"--tier", "--mode", "--save"}
    opt = lambda name: [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
    tiers = opt("--tier") or ["fp32", "bf16"]
    modes = opt("--mode") or ["isolated", "chained"]
    save = pathlib.Path(opt("--save")[-1]) if opt("--save") else None
    skip = {i + 1 for i, a in enumerate(argv) if a in valued}
    suites = [a for i, a in enumerate(argv) if not a.startswith("--") and i not in skip]
    suites = suites or ["dinov2-vits14", "dinov2-vits14-stress"]
    inputs = "--no-inputs" not in argv
    for tier in tiers:
        if tier not in TIERS:
            sys.exit(f"unknown tier {tier!r}: one of {', '.join(TIERS)}")
    for mode in modes:
        if mode not in ("isolated", "chained"):
            sys.exit(f"unknown mode {mode!r}: isolated or chained")
    torch.set_grad_enabled(False)
    if "--golden" in argv:
        for s in suites:
            golden(s)
        return
    print(f"torch {torch.__version__} on the CPU ({torch.get_num_threads()} threads), official dinov2 code "
          "(PyPI 0.0.1.dev2, no xFormers), judged by `vips-conformance check`"
          f"{'' if inputs else '; no input captures (each stage fed its golden or previous capture at the tier)'}.\n")
    print("| suite | tier | mode | verdict | largest stage max\\|e\\| (stage) | median stage max\\|e\\| | "
          "largest rms_t (stage) | stages with notes | end to end: rel L2, cosine |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = False
    for suite in suites:
        t, keys = export(suite)
        v = variant_of(suite)
        for tier in tiers:
            dtype, autocast, judged_at = TIERS[tier]
            model = model_for(t, keys, dtype, v)
            for mode in modes:
                captured = stages(model, t, keys, dtype, chained=mode == "chained", autocast=autocast,
                                  inputs=inputs, v=v)
                report = check(suite, captured, judged_at, mode,
                               save and save / f"{suite}.{tier}.{mode}{'' if inputs else '.no-inputs'}")
                tr = report["tiers"][0]
                margins = [(max((number(o["judgement"]["max_e"]) for o in s["outputs"]), default=0.0), s["stage"])
                           for s in tr["stages"]]
                worst = max(margins)
                median = sorted(m for m, _ in margins)[len(margins) // 2]
                # rms_t is null where the output is not tested (data movement, integers).
                rms = [(number(o["judgement"]["rms_t"]), s["stage"]) for s in tr["stages"] for o in s["outputs"]
                       if o["judgement"].get("rms_t") is not None]
                rms_t = f"{max(rms)[0]:.3g} ({max(rms)[1]})" if rms else "-"
                noted = sum(1 for s in tr["stages"] if s.get("notes") or s.get("coverage"))
                bad = [s["stage"] for s in tr["stages"] if s["status"] != "pass"]
                e2e = "; ".join(f"{e['tensor']}: {e['drift']['rel_l2_error']:.2e}, "
                                f"{e['drift']['cosine_similarity']:.6f}" for e in tr["end_to_end"]) or "-"
                verdict = "PASS" if report["passed"] else f"FAIL ({', '.join(bad) or 'end to end'})"
                failed |= not report["passed"]
                print(f"| {suite} | {tier} | {mode} | {verdict} | {worst[0]:.3f} ({worst[1]}) | {median:.3f} | "
                      f"{rms_t} | {noted} | {e2e} |", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
