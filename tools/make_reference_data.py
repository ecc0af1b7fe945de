#!/usr/bin/env python3
"""Records known outputs of Pillow's and PyTorch's resizes as test data.

The SDK's resize kernels are specified to match these libraries exactly
(Pillow: bit for bit on uint8; PyTorch: within float32 rounding). This script
writes sdk/tests/data/{pillow_bicubic,torch_bicubic,torch_resize}.json; the tests in
sdk/tests/it/known_values.rs compare both providers against them.

    pip install numpy pillow torch && python3 tools/make_reference_data.py
"""
import json
import pathlib

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

OUT = pathlib.Path(__file__).resolve().parent.parent / "sdk" / "tests" / "data"


def structured_image(h, w, rng):
    """Gradients, a hard edge and noise: every tap of the filter matters."""
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255.0 / max(w - 1, 1))
    g = (y * 255.0 / max(h - 1, 1))
    b = np.where((x // 5 + y // 4) % 2 == 0, 230.0, 20.0)
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, 12, (h, w, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def pillow_cases(rng):
    """Each case in both pass orders, as two one-axis resizes (one pass each,
    so the same in every Pillow version), and Pillow's own two-axis resize
    with the order it took. The last two sizes make Pillow 13 run the
    vertical pass first (python-pillow/Pillow#9549)."""
    cases = []
    sizes = [((29, 37), (12, 16)), ((29, 37), (41, 50)), ((20, 31), (20, 9)), ((64, 48), (37, 11)),
             ((74, 50), (11, 22)), ((30, 28), (5, 25))]
    for (h, w), (oh, ow) in sizes:
        img = Image.fromarray(structured_image(h, w, rng), "RGB")
        horizontal = np.asarray(img.resize((ow, h), Image.BICUBIC).resize((ow, oh), Image.BICUBIC))
        vertical = np.asarray(img.resize((w, oh), Image.BICUBIC).resize((ow, oh), Image.BICUBIC))
        direct = np.asarray(img.resize((ow, oh), Image.BICUBIC))
        order = "horizontal" if (direct == horizontal).all() else "vertical" if (direct == vertical).all() else None
        assert order, f"Pillow {Image.__version__} resized {h}x{w} -> {oh}x{ow} in neither order"
        cases.append({"input_shape": [h, w, 3], "input": np.asarray(img).ravel().tolist(), "size": [oh, ow],
                      "output_shape": list(horizontal.shape), "horizontal_first": horizontal.ravel().tolist(),
                      "vertical_first": vertical.ravel().tolist(), "pillow_order": order})
    return cases


def torch_cases(rng):
    cases = []
    specs = [
        # DINOv2's position-embedding resize at 224: scale_factor = 16.1/37.
        ((1, 3, 37, 37), {"scale_factor": (16.1 / 37, 16.1 / 37)}, False),
        # timm's form of the same resize.
        ((1, 3, 37, 37), {"size": (16, 16)}, True),
        ((1, 2, 5, 7), {"size": (9, 11)}, False),
        ((1, 2, 5, 7), {"size": (9, 11)}, True),
        ((2, 1, 13, 6), {"scale_factor": (0.6, 2.5)}, False),
        ((2, 1, 13, 6), {"size": (4, 15)}, True),
    ]
    for shape, kw, aa in specs:
        x = torch.from_numpy(rng.normal(0, 1, shape).astype(np.float32))
        y = F.interpolate(x, mode="bicubic", align_corners=False, antialias=aa, **kw)
        case = {"input_shape": list(shape), "input": x.numpy().ravel().astype(float).tolist(),
                "antialias": int(aa), "output_shape": list(y.shape),
                "output": y.numpy().ravel().astype(float).tolist()}
        if "size" in kw:
            case["size"] = list(kw["size"])
        else:
            case["scale_factor"] = list(kw["scale_factor"])
        cases.append(case)
    return cases


def torch_resize_cases(rng):
    """Bilinear (both corner conventions) and nearest (`nearest`, `nearest-exact`) on float64 inputs,
    with sizes and scale factors where PyTorch's own index arithmetic matters: a kept axis at 1.05
    (copied), a doubled one, a non-integer downsample, odd upsamples, 2 -> 41."""
    cases = []
    specs = [
        ((1, 2, 9, 12), {"size": (31, 7)}), ((1, 2, 9, 12), {"scale_factor": (1.05, 2.0)}),
        ((2, 1, 7, 5), {"scale_factor": (0.6, 1.7)}), ((1, 1, 2, 3), {"size": (41, 1)}),
        ((1, 1, 13, 10), {"scale_factor": (16.1 / 37, 2.5)}), ((1, 1, 37, 8), {"size": (16, 20)}),
    ]
    for shape, kw in specs:
        for mode, flag in (("bilinear", False), ("bilinear", True), ("nearest", None), ("nearest-exact", None)):
            x = torch.from_numpy(rng.normal(0, 1, shape))
            extra = {} if flag is None else {"align_corners": flag}
            y = F.interpolate(x, mode=mode, **kw, **extra)
            case = {"mode": mode, "input_shape": list(shape), "input": x.numpy().ravel().tolist(),
                    "output_shape": list(y.shape), "output": y.numpy().ravel().tolist()}
            if flag is not None:
                case["align_corners"] = int(flag)
            case.update({k: list(v) for k, v in kw.items()})
            cases.append(case)
    return cases


def main():
    rng = np.random.default_rng(20261121)
    OUT.mkdir(parents=True, exist_ok=True)
    meta = {"pillow": Image.__version__, "torch": torch.__version__}
    (OUT / "pillow_bicubic.json").write_text(json.dumps({"versions": meta, "cases": pillow_cases(rng)}) + "\n")
    (OUT / "torch_bicubic.json").write_text(json.dumps({"versions": meta, "cases": torch_cases(rng)}) + "\n")
    # Its own generator: added later, the files before it stay as they were.
    resize = torch_resize_cases(np.random.default_rng(20261130))
    (OUT / "torch_resize.json").write_text(json.dumps({"versions": meta, "cases": resize}) + "\n")


if __name__ == "__main__":
    main()
