#!/usr/bin/env python3
"""Independent validation of the DINOv2 ViT-S/14 suites against the official
facebookresearch/dinov2 PyTorch code.

    pip install torch safetensors pillow numpy && pip install --no-deps dinov2
    cargo build --release
    python3 tools/validate_dinov2.py [SUITE ...] [--tier fp32|bf16 ...] [--golden]

Default: the suites dinov2-vits14 and dinov2-vits14-stress, tiers fp32 and
bf16. For each suite, tier and mode (isolated, chained) it runs the official
model on the CPU in that dtype, stage by stage, captures every stage's output,
and has `vips-conformance check` judge the captures with the SDK's error model
(docs/error-model.md), exactly as it judges a provider. Prints a Markdown
table for docs/validation.md; exits 1 if any run fails.

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
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from safetensors.numpy import load_file, save_file

import dinov2.models.vision_transformer as vt

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = ROOT / "target" / "release" / "vips-conformance"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}


def export(suite):
    doc = ROOT / "conformance" / "suites" / suite / "suite.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "suite.safetensors"
        subprocess.run([str(CLI), "export", suite, "--out", str(path)], check=True, capture_output=True)
        t = load_file(str(path))
    info = json.loads(subprocess.run([str(CLI), "inspect", str(doc), "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    keys = {row["name"]: row["description"] for row in info["tensors"] if row.get("description")}
    return t, keys


def model_for(t, keys, dtype):
    model = vt.vit_small(patch_size=14, img_size=518, init_values=1.0, block_chunks=0)
    state = model.state_dict()
    loaded = 0
    for name, key in keys.items():
        if key in state:
            state[key] = torch.from_numpy(t[name].astype(np.float32))
            loaded += 1
    model.load_state_dict(state)
    assert loaded == len([k for k in state if k != "mask_token"]), f"loaded {loaded} of {len(state)} tensors"
    return model.to(dtype).eval()


def stages(model, t, dtype, chained):
    """Each stage's output, fed the golden input (isolated) or the model's own
    previous output (chained), computed in `dtype`."""
    out = {}

    def given(name, own):
        if chained and own in out:
            return out[own]
        return torch.from_numpy(t[name].astype(np.float32)).to(dtype)

    image = t["image"]
    h, w = image.shape[:2]
    crop = t["pixels"].shape[-1]
    short = {224: 256, 56: 64}[crop]
    rh, rw = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
    resized = np.asarray(Image.fromarray(image, "RGB").resize((rw, rh), Image.BICUBIC))
    top, left = int(round((rh - crop) / 2.0)), int(round((rw - crop) / 2.0))
    cropped = torch.from_numpy(resized[top:top + crop, left:left + crop].astype(np.float32)).to(dtype)
    mean = torch.tensor([0.485, 0.456, 0.406]).to(dtype).reshape(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).to(dtype).reshape(3, 1, 1)
    out["pixels"] = ((cropped.permute(2, 0, 1) / torch.tensor(255.0).to(dtype) - mean) / std)[None]
    out["x_patch"] = model.patch_embed(given("pixels", "pixels"))
    # prepare_tokens_with_masks without its patch embedding: the stage starts
    # from x_patch (golden, or the model's own).
    x = torch.cat((model.cls_token.expand(1, -1, -1), given("x_patch", "x_patch")), dim=1)
    out["x_0"] = x + model.interpolate_pos_encoding(x, crop, crop)
    for i, block in enumerate(model.blocks):
        out[f"x_{i + 1}"] = block(given(f"x_{i}", f"x_{i}"))
    x_norm = model.norm(given("x_12", "x_12"))
    out["x_norm"] = x_norm
    source = given("x_norm", "x_norm")
    out["x_norm_clstoken"] = source[:, 0]
    out["x_norm_patchtokens"] = source[:, 1:]
    # Captures in float32 (bf16 and fp16 values are exact in it); float64 stays.
    keep = torch.float64 if dtype == torch.float64 else torch.float32
    return {k: v.detach().to(keep).numpy() for k, v in out.items()}


def check(suite, captured, tier, mode):
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "captured.safetensors"
        save_file({k: np.ascontiguousarray(v) for k, v in captured.items()}, str(path))
        r = subprocess.run([str(CLI), "check", suite, "--tensors", str(path), "--tier", tier, "--mode", mode,
                            "--json"], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"vips-conformance check failed: {r.stderr}")
    return json.loads(r.stdout)


def golden(suite):
    t, keys = export(suite)
    model = model_for(t, keys, torch.float64)
    got = stages(model, t, torch.float64, chained=False)
    print(f"Suite `{suite}`, torch {torch.__version__}, float64, each stage fed its golden input.\n")
    print("| tensor | max abs error | relative L2 error |")
    print("|---|---|---|")
    for name, v in got.items():
        want = t[name].astype(np.float64)
        d = v.astype(np.float64) - want
        print(f"| {name} | {np.abs(d).max():.2e} | {np.linalg.norm(d) / np.linalg.norm(want):.2e} |")


def main():
    argv = sys.argv[1:]
    tiers = [argv[i + 1] for i, a in enumerate(argv) if a == "--tier"] or ["fp32", "bf16"]
    skip = {i + 1 for i, a in enumerate(argv) if a == "--tier"}
    suites = [a for i, a in enumerate(argv) if not a.startswith("--") and i not in skip]
    suites = suites or ["dinov2-vits14", "dinov2-vits14-stress"]
    torch.set_grad_enabled(False)
    if "--golden" in argv:
        for s in suites:
            golden(s)
        return
    print(f"torch {torch.__version__} on the CPU ({torch.get_num_threads()} threads), official dinov2 code "
          "(PyPI 0.0.1.dev2, no xFormers), judged by `vips-conformance check`.\n")
    print("| suite | tier | mode | verdict | largest stage max\\|e\\| (stage) | median stage max\\|e\\| | "
          "end to end: rel L2, cosine |")
    print("|---|---|---|---|---|---|---|")
    failed = False
    for suite in suites:
        t, keys = export(suite)
        for tier in tiers:
            model = model_for(t, keys, DTYPES[tier])
            for mode in ["isolated", "chained"]:
                captured = stages(model, t, DTYPES[tier], chained=mode == "chained")
                report = check(suite, captured, tier, mode)
                tr = report["tiers"][0]
                # JSON has no infinity: a NaN or Inf where the reference is finite reads null.
                margins = [(max((o["judgement"]["max_e"] if o["judgement"]["max_e"] is not None else float("inf")
                                 for o in s["outputs"]), default=0.0), s["stage"]) for s in tr["stages"]]
                worst = max(margins)
                median = sorted(m for m, _ in margins)[len(margins) // 2]
                bad = [s["stage"] for s in tr["stages"] if s["status"] != "pass"]
                e2e = "; ".join(f"{e['tensor']}: {e['drift']['rel_l2_error']:.2e}, "
                                f"{e['drift']['cosine_similarity']:.6f}" for e in tr["end_to_end"]) or "-"
                verdict = "PASS" if report["passed"] else f"FAIL ({', '.join(bad) or 'end to end'})"
                failed |= not report["passed"]
                print(f"| {suite} | {tier} | {mode} | {verdict} | {worst[0]:.3f} ({worst[1]}) | {median:.3f} | {e2e} |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
