#!/usr/bin/env python3
"""Independent validation of the DINOv2 ViT-S/14 golden vectors against the
official facebookresearch/dinov2 PyTorch code, stage by stage.

    pip install torch safetensors pillow numpy && pip install --no-deps dinov2
    cargo build --release
    python3 tools/validate_dinov2.py [dinov2-vits14|dinov2-vits14-quick] [--calibrate]

With --calibrate it instead runs the official model in float32 (how PyTorch
users run it) and merges its per-stage errors into the suite's
calibration.json as one more correct implementation at fp32 (run
tools/calibrate_tolerances.py first: it rewrites that file).

The suite's tensors (seeded weights, test image, golden outputs) are exported
with `vips-conformance export`; the official model (`vit_small`, patch 14,
img_size 518, LayerScale, no block chunks: what torch.hub's dinov2_vits14
builds) is loaded with the weights under their checkpoint names (each
tensor's description in the document), converted to float64, and every stage
is fed the golden input of that stage (isolated mode), as the runner does.
Preprocessing is recomputed with Pillow's own resize. Prints a Markdown table
for docs/validation.md.
"""
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch
from PIL import Image
from safetensors.numpy import load_file

import dinov2.models.vision_transformer as vt

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = ROOT / "target" / "release" / "vips-conformance"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    calibrate = "--calibrate" in sys.argv
    suite = args[0] if args else "dinov2-vits14"
    dtype = torch.float32 if calibrate else torch.float64
    doc = ROOT / "conformance" / "suites" / suite / "suite.yaml"
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "suite.safetensors"
        subprocess.run([str(CLI), "export", suite, "--out", str(path)], check=True, capture_output=True)
        t = load_file(str(path))
    info = json.loads(subprocess.run([str(CLI), "inspect", str(doc), "--json"], check=True, capture_output=True, text=True).stdout)
    keys = {row["name"]: row["description"] for row in info["tensors"] if row.get("description")}

    torch.set_grad_enabled(False)
    model = vt.vit_small(patch_size=14, img_size=518, init_values=1.0, block_chunks=0)
    state = model.state_dict()
    loaded = 0
    for name, key in keys.items():
        if key in state:
            state[key] = torch.from_numpy(t[name].astype(np.float32))
            loaded += 1
    model.load_state_dict(state)
    model = model.to(dtype).eval()
    assert loaded == len([k for k in state if k != "mask_token"]), f"loaded {loaded} of {len(state)} checkpoint tensors"

    def f64(name):
        return torch.from_numpy(t[name].astype(np.float64)).to(dtype)

    rows = []

    def row(stage, got, want):
        got = got.detach().numpy().astype(np.float64)
        want = t[want].astype(np.float64)
        assert got.shape == want.shape, (stage, got.shape, want.shape)
        err = np.abs(got - want)
        rows.append((stage, float(err.max()), float(np.linalg.norm(got - want) / np.linalg.norm(want))))

    # Preprocessing with Pillow itself, then float64 arithmetic.
    image = t["image"]
    h, w = image.shape[:2]
    crop = t["pixels"].shape[-1]
    short = {224: 256, 56: 64}[crop]
    rh, rw = (short, int(short * w / h)) if h <= w else (int(short * h / w), short)
    resized = np.asarray(Image.fromarray(image, "RGB").resize((rw, rh), Image.BICUBIC))
    top, left = int(round((rh - crop) / 2.0)), int(round((rw - crop) / 2.0))
    cropped = resized[top:top + crop, left:left + crop].astype(np.float64) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    pixels = ((cropped - mean) / std).transpose(2, 0, 1)[None]
    row("preprocess", torch.from_numpy(pixels), "pixels")

    x = f64("pixels")
    row("patch_embed", model.patch_embed(x), "x_patch")
    row("pos_embed", model.prepare_tokens_with_masks(x), "x_0")
    for i, block in enumerate(model.blocks):
        row(f"block_{i:02d}", block(f64(f"x_{i}")), f"x_{i + 1}")
    x_norm = model.norm(f64("x_12"))
    row("final_norm", x_norm, "x_norm")
    row("outputs (cls)", model.norm(f64("x_12"))[:, 0], "x_norm_clstoken")
    row("outputs (patches)", x_norm[:, 1:], "x_norm_patchtokens")

    if calibrate:
        path = ROOT / "conformance" / "suites" / suite / "calibration.json"
        cal = json.loads(path.read_text())
        fp32 = cal["max_abs_error"]["fp32"]
        for stage, mx, _ in rows:
            stage = "outputs" if stage.startswith("outputs") else stage
            fp32[stage] = max(fp32.get(stage, 0.0), mx)
        cal["implementations"].append(f"official dinov2 PyTorch fp32 (torch {torch.__version__})")
        path.write_text(json.dumps(cal, indent=1, sort_keys=True) + "\n")
        print(f"merged into {path}")
        return
    print(f"Suite `{suite}`, torch {torch.__version__}, dinov2 (PyPI 0.0.1.dev2), float64, each stage fed its golden input.\n")
    print("| stage | max abs error | relative L2 error |")
    print("|---|---|---|")
    for stage, mx, rel in rows:
        print(f"| {stage} | {mx:.2e} | {rel:.2e} |")


if __name__ == "__main__":
    main()
