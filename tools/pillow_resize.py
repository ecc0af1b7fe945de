#!/usr/bin/env python3
"""Pillow's resize of the images given on stdin, for sdk/tests/it/pillow_resize.rs.

Reads a JSON list of cases ({"filter": "bicubic" | "lanczos", "mode": a Pillow
mode (L, LA, RGB, RGBA, RGBa), "h", "w", "oh", "ow", "data": the pixels as hex})
and writes, per case, both pass orders (horizontal first, vertical first) and
which of the two the installed Pillow's own `Image.resize` equals.

    pip install pillow
"""
import json, sys
from PIL import Image

ALPHA = {"LA": "La", "RGBA": "RGBa"}
FILTERS = {"bicubic": Image.Resampling.BICUBIC, "lanczos": Image.Resampling.LANCZOS}

def two_passes(im, mode, size, first, f):
    """Pillow's two passes in the given order, each a one-axis resize (one
    pass each in every Pillow version), in the premultiplied mode Pillow
    itself resizes LA and RGBA images in."""
    if im.size == size:
        return im.copy()
    if mode in ALPHA:
        im = im.convert(ALPHA[mode])
    (w, h), (ow, oh) = im.size, size
    mid = (ow, h) if first == "horizontal" else (w, oh)
    out = im.resize(mid, f).resize(size, f)
    return out.convert(mode) if mode in ALPHA else out

out = []
for c in json.load(sys.stdin):
    f = FILTERS[c["filter"]]
    size = (c["ow"], c["oh"])
    im = Image.frombytes(c["mode"], (c["w"], c["h"]), bytes.fromhex(c["data"]))
    hf = two_passes(im, c["mode"], size, "horizontal", f)
    vf = two_passes(im, c["mode"], size, "vertical", f)
    direct = im.resize(size, f)
    order = "horizontal" if direct.tobytes() == hf.tobytes() else "vertical" if direct.tobytes() == vf.tobytes() else None
    out.append({"horizontal_first": hf.tobytes().hex(), "vertical_first": vf.tobytes().hex(), "order": order})
json.dump({"pillow": Image.__version__, "cases": out}, sys.stdout)
