#!/usr/bin/env python3
"""DINOv2 ViT-S/14 through `vips-export` and back: issue 46's round trip.

    pip install torch safetensors pillow numpy onnx onnxruntime pyyaml && pip install --no-deps dinov2
    cargo build -p vips-conformance            # target/release or target/debug; or $VIPS_CONFORMANCE
    python3 tools/dinov2_roundtrip.py [--front-end torch|onnx ...] [--validate] [--keep DIR]

Heavy (PyTorch, the official model code, an 87 MB weights file per export): kept out of default CI,
like tools/validate_dinov2.py. About two minutes on 2 cores.

What it checks ("Done when" of issue 46: DINOv2 ViT-S/14 exported through either front-end, with the
committed suite's weights and input, gives stage outputs equal to `dinov2-vits14`'s goldens within
float32 storage, with the same fused operators):

1. The official ViT-S/14 (facebookresearch/dinov2's `vit_small`, built and loaded with the committed
   suite's weights exactly as tools/validate_dinov2.py does), restricted to the part the suite calls
   patch_embed ... final_norm: normalised pixels [1, 3, 224, 224] in, the final LayerNorm's tokens
   [1, 257, 384] out (the Pillow preprocessing and the class/patch split are not model code).
2. Exported with `vips_export.export_torch(module, (pixels,), DIR, tiers=())` and with the ONNX
   front-end (`torch.onnx.export(..., opset_version=17, dynamo=False)`, then
   `vips_export.export_onnx`). The official attention is `q * scale @ k^T -> softmax -> @ v`; the
   PyTorch front-end does not fuse that (aten.matmul is refused, listed and reported here), so the
   PyTorch export is also made of the same model with each `Attention.forward` replaced by
   `F.scaled_dot_product_attention(q, k, v, scale=self.scale)` (the same function; said in the table).
3. The exporter seeds model inputs (vips_export/document.py, `plan`) and has no option to take given
   ones, so the exported document is rewritten in a copy: `pixels` becomes `source: golden` and the
   golden file is regenerated with `vips-conformance generate --tensors` from the committed suite's
   golden `pixels`. A second copy starts at `blocks.0`, fed the committed golden `x_0` the same way,
   which isolates the blocks from the position-embedding difference below.
4. Every exported stage output (`vips-conformance export`) is compared with the committed golden it
   stands for (`x_patch`, `x_0`, `x_1` ... `x_12`, `x_norm`): max abs difference, and the largest
   distance in float32 units in the last place. "identical" = the same float32 values; "<= 1 ulp" =
   equal within float32 storage rounding; more is reported as it is.
5. Each exported block's operators (`op` of its graph nodes, in order) are compared with the committed
   suite's `block_00` graph: the compute operators (layer_norm, linear, sdpa, gelu, mul for LayerScale,
   add) with their attributes, in order; the data-movement operators (reshape, permute, crop) as a
   multiset with their attributes, and whether their order differs. patch_embed, the position stage and
   final_norm are listed beside the committed ones.

The official model's position embedding is interpolated in `forward` from parameters
(DESIGN.md section 10: bicubic, scale_factor 16.1/37); both front-ends fold it into one float32
constant [1, 257, 384] (PyTorch's float32 kernel, or onnx's reference evaluator on Resize), where the
committed suite has an explicit `pos_embed` stage computing it in float64. The folded constant is
compared with the float64 interpolation, and `x_0` differs from the committed golden by that rounding.

Also: every committed parameter is compared with the exported weights file; the exported goldens (fed
the committed pixels) are judged as an engine's captures by `check dinov2-vits14 --tier fp32 --mode
chained`; and the arrays the exporter hands safetensors' `save_file` are watched: it writes an array's
memory as it lies, so a non-C-contiguous array is stored scrambled. When that happens the ONNX export
is repeated with those arrays made contiguous (a separate, labelled row), to show what the fix gives.

--validate also has the exporter validate each suite at fp32 (the model judged by its own suite on
seeded pixels, both modes; slower). --keep DIR keeps the exported suites and their fed copies. Prints
Markdown (docs/validation.md, "DINOv2 through the exporter"). Exit status 0 only when, for every export
made: each stage but the position stage, fed the committed value of its input, is within 1 ulp of its
golden; the blocks have block_00's fused operators and attributes; patch_embed and final_norm have the
committed graphs; the folded position embedding is within 1e-5 of the float64 interpolation; and no
array was handed to save_file non-contiguous. A front-end's refusal is reported, not counted.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import safetensors.numpy
import torch
import torch.nn.functional as F
import yaml
from safetensors.numpy import load_file, save_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "exporter")]

import dinov2.models.vision_transformer as vt  # noqa: E402
import validate_dinov2 as vd  # noqa: E402
import vips_export  # noqa: E402

SUITE = "dinov2-vits14"
MOVEMENT = {"vsdk.reshape", "vsdk.permute", "vsdk.crop", "vsdk.concat", "vsdk.cast"}


def conformance() -> pathlib.Path:
    """$VIPS_CONFORMANCE, else this checkout's release build, else its debug build."""
    if os.environ.get("VIPS_CONFORMANCE"):
        return pathlib.Path(os.environ["VIPS_CONFORMANCE"])
    for profile in ("release", "debug"):
        exe = ROOT / "target" / profile / "vips-conformance"
        if exe.is_file():
            return exe
    sys.exit("vips-conformance not built: cargo build -p vips-conformance (or set VIPS_CONFORMANCE)")


CLI = conformance()
vd.CLI = CLI


def cli(*args: str) -> str:
    r = subprocess.run([str(CLI), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"vips-conformance {' '.join(args)} failed ({r.returncode}):\n{r.stderr}{r.stdout}")
    return r.stdout


def tensors_of(suite: pathlib.Path | str) -> Dict[str, np.ndarray]:
    """Every tensor of a suite (inputs, weights, goldens), by `vips-conformance export`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "all.safetensors"
        cli("export", str(suite), "--out", str(out))
        return load_file(str(out))


# safetensors.numpy.save_file writes each array's memory as it lies (it requires C-contiguous arrays and
# does not check): an array in another layout is stored scrambled. The exporter's writes go through this
# wrapper, which records the names of such arrays and, with FIX_LAYOUT, makes them contiguous first.
NONCONTIGUOUS: List[str] = []
FIX_LAYOUT = False
_save_file = safetensors.numpy.save_file


def _recording_save_file(tensors: Dict[str, np.ndarray], filename: Any, metadata: Any = None) -> None:
    bad = [k for k, v in tensors.items() if not v.flags.c_contiguous]
    NONCONTIGUOUS.extend(bad)
    if FIX_LAYOUT:
        tensors = {k: np.require(v, requirements="C") for k, v in tensors.items()}
    _save_file(tensors, filename, metadata)


safetensors.numpy.save_file = _recording_save_file


# ---------------------------------------------------------------- the official model


class Trunk(vt.DinoVisionTransformer):
    """The official model from normalised pixels to the final norm's tokens (the committed suite's
    patch_embed ... final_norm); its code is the official code, only `forward` picks the part."""

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        x = self.prepare_tokens_with_masks(pixels)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)

    def interpolate_pos_encoding(self, x: torch.Tensor, w: Any, h: Any) -> torch.Tensor:
        # torch.onnx's tracer hands the image size over as tensors, which F.interpolate's
        # scale_factor refuses; they are the static 224.
        return super().interpolate_pos_encoding(x, int(w), int(h))


class SdpaAttention(vt.MemEffAttention):
    """The official Attention.forward with its `q * scale @ k^T -> softmax -> @ v` as one
    F.scaled_dot_product_attention (the same function; what the PyTorch front-end can lower)."""

    def forward(self, x: torch.Tensor, attn_bias: Any = None) -> torch.Tensor:  # type: ignore[override]
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        x = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return self.proj_drop(self.proj(x.transpose(1, 2).reshape(B, N, C)))


def official_trunk(t: Dict[str, np.ndarray], keys: Dict[str, str], sdpa: bool = False) -> torch.nn.Module:
    model = vd.model_for(t, keys, torch.float32)  # vit_small, patch 14, img 518, the suite's weights
    model.__class__ = Trunk
    if sdpa:
        for blk in model.blocks:
            assert type(blk.attn) is vt.MemEffAttention, type(blk.attn)
            blk.attn.__class__ = SdpaAttention
    return model.eval()


# ---------------------------------------------------------------- exports


@dataclass
class Export:
    label: str  # how the row is labelled
    suite: Optional[pathlib.Path] = None
    refused: Optional[str] = None  # the exporter's message when it refused
    seconds: float = 0.0
    validation: Optional[str] = None
    noncontiguous: List[str] = field(default_factory=list)  # arrays the exporter handed save_file scrambled
    fixed: bool = False  # FIX_LAYOUT was on: those arrays were made contiguous here


def _run(label: str, make: Any) -> Export:
    start = len(NONCONTIGUOUS)
    t0 = time.time()
    try:
        r = make()
    except vips_export.UnsupportedOperators as e:
        lines = str(e).splitlines()
        return Export(label, refused=f"{lines[0]} First: `{lines[1].strip()}`", seconds=time.time() - t0)
    except vips_export.ValidationFailed as e:
        return Export(label, refused=f"the exporter's own validation rejected the suite: {e}", seconds=time.time() - t0,
                      noncontiguous=NONCONTIGUOUS[start:], fixed=FIX_LAYOUT)
    return Export(label, r.suite, seconds=time.time() - t0, validation=r.validation and r.validation.table(),
                  noncontiguous=NONCONTIGUOUS[start:], fixed=FIX_LAYOUT)


def export_torch(model: torch.nn.Module, pixels: torch.Tensor, out: pathlib.Path, label: str, validate: bool) -> Export:
    return _run(label, lambda: vips_export.export_torch(model, (pixels,), out, name="dinov2_vits14",
                                                        tiers=("fp32",) if validate else (), force=True))


def export_onnx(model: torch.nn.Module, pixels: torch.Tensor, work: pathlib.Path, out: pathlib.Path, label: str,
                validate: bool) -> Export:
    path = work / "dinov2_vits14.onnx"
    if not path.exists():
        torch.onnx.export(model, (pixels,), str(path), opset_version=17, dynamo=False, input_names=["pixels"],
                          output_names=["x_norm"])
    return _run(label, lambda: vips_export.export_onnx(path, out, tiers=("fp32",) if validate else (), force=True))


def fed_copy(suite: pathlib.Path, out: pathlib.Path, given: Dict[str, np.ndarray], start: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """A copy of an exported suite whose inputs `given` (document name -> array) are the given arrays
    (`source: golden`, generated with `--tensors`) instead of seeded ones; with `start`, the stages
    before that one are dropped and the given arrays are their outputs. Returns the copy's document
    and tensors."""
    doc = yaml.safe_load((suite / "suite.yaml").read_text())
    if start is not None:
        names = [s["stage"] for s in doc["stages"]]
        doc["stages"] = doc["stages"][names.index(start):]
        used = {i for s in doc["stages"] for i in s["inputs"]} | {o for s in doc["stages"] for o in s["outputs"]}
        doc["tensors"] = {k: v for k, v in doc["tensors"].items() if k in used}
    for name in given:
        doc["tensors"][name]["source"] = "golden"
        doc["tensors"][name]["description"] = "given: the committed dinov2-vits14 suite's golden value"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for f in suite.iterdir():
        if f.name.endswith(".safetensors"):
            try:
                os.link(f, out / f.name)  # the pinned weights, unchanged (87 MB: not copied)
            except OSError:
                shutil.copy2(f, out / f.name)
    (out / "suite.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=200, allow_unicode=True))
    feeds = out.parent / f"{out.name}.given.safetensors"
    save_file({k: np.ascontiguousarray(v) for k, v in given.items()}, str(feeds))
    cli("generate", str(out), "--tensors", str(feeds))
    return doc, tensors_of(out)


# ---------------------------------------------------------------- comparisons


def ordered(a: np.ndarray) -> np.ndarray:
    """float32 -> integers in the order of the floats (adjacent floats differ by 1)."""
    i = np.ascontiguousarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(ordered(a) - ordered(b))


@dataclass
class Diff:
    max_abs: float
    max_ulp: int  # per element
    identical: int  # elements
    within_1ulp: int
    n: int
    scale_ulps: float  # max abs in units of the float32 spacing at the tensor's largest magnitude

    @staticmethod
    def of(a: np.ndarray, b: np.ndarray) -> "Diff":
        a = a.reshape(b.shape).astype(np.float32)
        u = ulps(a, b)
        d = float(np.abs(a.astype(np.float64) - b).max())
        return Diff(d, int(u.max()), int((u == 0).sum()), int((u <= 1).sum()), u.size,
                    d / float(np.spacing(np.float32(np.abs(b).max()))))

    def verdict(self) -> str:
        if self.max_ulp == 0:
            return "identical"
        if self.max_ulp <= 1:
            return f"within 1 ulp ({self.n - self.identical} elements 1 ulp apart)"
        return (f"{self.identical / self.n:.1%} identical, {self.within_1ulp / self.n:.1%} within 1 ulp; "
                f"max {self.scale_ulps:.1f} ulp of the largest value")

    def equal(self) -> bool:
        return self.max_ulp <= 1


def stage_map(doc: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(exported stage, its output, the committed golden it stands for), in order."""
    stages = doc["stages"]
    first_block = next((s for s in stages if s["stage"] == "blocks.0"), None)
    rows = []
    for s in stages:
        name, out = s["stage"], s["outputs"][0]
        if name == "patch_embed":
            rows.append((name, out, "x_patch"))
        elif name.startswith("blocks."):
            rows.append((name, out, f"x_{int(name.split('.')[1]) + 1}"))
        elif name == "norm":
            rows.append((name, out, "x_norm"))
        elif first_block is not None and out == first_block["inputs"][0]:
            rows.append((name, out, "x_0"))
        else:
            rows.append((name, out, "?"))
    return rows


def short(op: str) -> str:
    return op.split(".")[-1]


def ops_of(stage: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    return [(n["op"], n.get("attrs") or {}) for n in stage["graph"]]


# Attributes the exported graphs write where the committed suite leaves the catalog's default.
DEFAULTS = {"vsdk.layer_norm": {"axis": -1}, "vsdk.conv2d": {"pads": [0, 0, 0, 0], "dilations": [1, 1], "groups": 1}}


def canon(op: str, attrs: Dict[str, Any]) -> str:
    a = {k: v for k, v in attrs.items() if DEFAULTS.get(op, {}).get(k, object()) != v}
    return f"{short(op)}{a if a else ''}"


def compare_block(mine: Dict[str, Any], ref: Dict[str, Any]) -> Tuple[bool, str]:
    """(same fused operators, a description of what differs)."""
    m, r = ops_of(mine), ops_of(ref)
    mc = [canon(o, a) for o, a in m if o not in MOVEMENT]
    rc = [canon(o, a) for o, a in r if o not in MOVEMENT]
    mm = Counter(canon(o, a) for o, a in m if o in MOVEMENT)
    rm = Counter(canon(o, a) for o, a in r if o in MOVEMENT)
    notes = []
    same = mc == rc
    if same:
        notes.append(f"compute operators identical with their attributes: {' → '.join(short(o) for o, _ in m if o not in MOVEMENT)}")
    else:
        notes.append(f"compute operators differ: {' → '.join(mc)} vs {' → '.join(rc)}")
    if mm != rm:
        extra, missing = mm - rm, rm - mm
        if extra:
            notes.append("extra: " + ", ".join(f"{k} ×{v}" for k, v in extra.items()))
        if missing:
            notes.append("missing: " + ", ".join(f"{k} ×{v}" for k, v in missing.items()))
    elif [short(o) for o, _ in m] != [short(o) for o, _ in r]:
        notes.append("the same data movement (reshape/permute/crop, attributes included; no extra node), in another "
                     "order: " + " ".join(short(o) for o, _ in m if o in MOVEMENT) + " vs "
                     + " ".join(short(o) for o, _ in r if o in MOVEMENT))
    else:
        notes.append("data movement identical, in the same order")
    return same, "; ".join(notes)


def official_pos(t: Dict[str, np.ndarray]) -> np.ndarray:
    """The official interpolation of the committed pos_embed at 224, in float64: [1, 257, 384]."""
    pos = torch.from_numpy(t["pos_embed"].astype(np.float64))
    n = int((pos.shape[1] - 1) ** 0.5)
    grid = pos[:, 1:].reshape(1, n, n, -1).permute(0, 3, 1, 2)
    s = (224 // 14 + 0.1) / n
    out = F.interpolate(grid, scale_factor=(s, s), mode="bicubic").permute(0, 2, 3, 1).reshape(1, -1, pos.shape[2])
    return torch.cat((pos[:, :1], out), dim=1).numpy()


def check_chained(doc: Dict[str, Any], got: Dict[str, np.ndarray], t: Dict[str, np.ndarray]) -> str:
    """The exported suite's goldens, as an engine's captures, judged by the committed suite (fp32,
    chained: each stage against the float64 reference from the previous capture)."""
    caps = {"pixels": t["pixels"]}
    for _, out, golden in stage_map(doc):
        if golden != "?":
            caps[golden] = np.ascontiguousarray(got[out].reshape(t[golden].shape))
    caps["x_norm_clstoken"] = np.ascontiguousarray(caps["x_norm"][:, 0])
    caps["x_norm_patchtokens"] = np.ascontiguousarray(caps["x_norm"][:, 1:])
    report = vd.check(SUITE, caps, "fp32", "chained")
    tr = report["tiers"][0]
    worst = max((vd.number(o["judgement"]["max_e"]), s["stage"]) for s in tr["stages"] for o in s["outputs"])
    e2e = "; ".join(f"{e['tensor']} rel L2 {e['drift']['rel_l2_error']:.1e}" for e in tr["end_to_end"])
    return f"{'PASS' if report['passed'] else 'FAIL'} (largest max\\|e\\| {worst[0]:.3f} at {worst[1]}; {e2e})"


# ---------------------------------------------------------------- main


def report(e: Export, t: Dict[str, np.ndarray], keys: Dict[str, str], committed: Dict[str, Any],
           work: pathlib.Path) -> bool:
    """Prints one export's section; True when it meets the round trip's criteria."""
    by_stage = {s["stage"]: s for s in committed["stages"]}
    print(f"### {e.label}\n")
    if e.suite is None:
        print(f"Refused in {e.seconds:.0f} s: {e.refused}\n")
        if e.noncontiguous:
            print(f"(Non-C-contiguous arrays handed to save_file: {', '.join(e.noncontiguous)}.)\n")
        return not e.noncontiguous
    doc = yaml.safe_load((e.suite / "suite.yaml").read_text())
    print(f"Exported in {e.seconds:.0f} s: {len(doc['stages'])} stages "
          f"({', '.join(s['stage'] for s in doc['stages'][:3])}, ..., {doc['stages'][-1]['stage']}); "
          f"weights.safetensors {(e.suite / 'weights.safetensors').stat().st_size / 1e6:.1f} MB, "
          f"suite.golden {(e.suite / 'suite.golden').stat().st_size / 1e6:.2f} MB.\n")
    if e.noncontiguous:
        print(f"**Exporter bug**: it handed safetensors' save_file non-C-contiguous arrays "
              f"({', '.join(f'`{k}`' for k in e.noncontiguous)}), which save_file writes in their memory order: "
              f"stored scrambled{'; made contiguous by this script for this row (FIX_LAYOUT)' if e.fixed else ''}.\n")
    if e.validation:
        print("The exporter's own validation at fp32 (seeded pixels):\n\n" + e.validation + "\n")
    ok = True
    exp_all = tensors_of(e.suite)
    carried = [(name, key) for name, key in keys.items() if key in exp_all]
    same_w = sum(1 for name, key in carried if np.array_equal(exp_all[key], t[name]))
    # The folded position embedding against the official interpolation in float64.
    pos_stage = next(s for s, _, g in stage_map(doc) if g == "x_0")
    const = next(i for i in next(s for s in doc["stages"] if s["stage"] == pos_stage)["inputs"]
                 if i in exp_all and exp_all[i].shape == (1, 257, 384))
    ref_pos = official_pos(t)
    pos = Diff.of(exp_all[const], ref_pos.astype(np.float32))
    pos_abs = float(np.abs(exp_all[const] - ref_pos).max())
    ok &= pos_abs < 1e-5
    print(f"- Weights: {same_w} of {len(carried)} committed parameters carried bit for bit (all but `pos_embed`, "
          f"folded, and `mask_token`, unused).")
    print(f"- Position embedding: folded into `{const}` {list(exp_all[const].shape)} float32. Against the official "
          f"interpolation in float64: max abs {pos_abs:.2e}; against that value's float32 rounding: {pos.verdict()}.")
    # Values.
    fed_doc, full = fed_copy(e.suite, work / f"{e.suite.name}-fed", {"pixels": t["pixels"]})
    first_in = next(s for s in doc["stages"] if s["stage"] == "blocks.0")["inputs"][0]
    x0_doc, blocks = fed_copy(e.suite, work / f"{e.suite.name}-from-x0", {first_in: t["x_0"]}, start="blocks.0")
    iso = {g: Diff.of(blocks[o], t[g]) for _, o, g in stage_map(x0_doc) if g != "?"}
    # What x_0 would be with the interpolation folded exactly (the float64 value rounded once).
    with_cls = np.concatenate([t["cls_token"], t["x_patch"]], axis=1).astype(np.float64)
    floor = Diff.of((with_cls + ref_pos.astype(np.float32)).astype(np.float32), t["x_0"])
    print(f"- x_0 with any float32 folded constant (the float64 interpolation rounded once, then the add in "
          f"float64): {floor.verdict()}, max abs {floor.max_abs:.1e}: the floor of a folded position embedding.")
    print(f"- The exported goldens (fed the committed pixels) as an engine's captures, judged by `check "
          f"{SUITE} --tier fp32 --mode chained`: {check_chained(doc, full, t)}.\n")
    print("| exported stage | committed golden | fed the committed pixels: max abs | float32 storage | "
          "blocks fed the committed x_0: max abs | float32 storage |")
    print("|---|---|---|---|---|---|")
    for stage, out, golden in stage_map(doc):
        if golden == "?":
            print(f"| {stage} | - | | | | |")
            ok = False
            continue
        d = Diff.of(full[out], t[golden])
        i = iso.get(golden)
        cells = f"{i.max_abs:.2e} | {i.verdict()}" if i else "- | -"
        print(f"| {stage} | {golden} | {d.max_abs:.2e} | {d.verdict()} | {cells} |")
        # The position stage differs by its folded constant; every other stage, fed the committed
        # value of its input, must be equal within float32 storage.
        if golden != "x_0":
            ok &= (i or d).equal()
    print("\n| exported stage | committed stage | same fused operators | what differs |")
    print("|---|---|---|---|")
    groups: Dict[Tuple[bool, str], int] = Counter()
    for s in doc["stages"]:
        if s["stage"].startswith("blocks."):
            same, what = compare_block(s, by_stage["block_00"])
            ok &= same
            groups[(same, what)] += 1
    for (same, what), n in groups.items():
        print(f"| blocks.0 ... blocks.11 ({n} of 12) | block_00 | {'yes' if same else 'NO'} | {what} |")
    for mine, ref in [("patch_embed", "patch_embed"), (pos_stage, "pos_embed"), ("norm", "final_norm")]:
        m = next((s for s in doc["stages"] if s["stage"] == mine), None)
        if m is None:
            continue
        ml = " → ".join(canon(o, a) for o, a in ops_of(m))
        rl = " → ".join(canon(o, a) for o, a in ops_of(by_stage[ref]))
        if ref == "pos_embed":
            print(f"| {mine} | {ref} | the add, yes; the interpolation is a constant | exported: {ml} (`{const}` "
                  f"folded); committed: {' → '.join(short(o) for o, _ in ops_of(by_stage[ref]))} |")
        else:
            ok &= ml == rl
            print(f"| {mine} | {ref} | {'yes' if ml == rl else 'NO'} | {'identical' if ml == rl else f'{ml} vs {rl}'} |")
    print()
    return ok


def main(argv: Optional[Sequence[str]] = None) -> int:
    global FIX_LAYOUT
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--front-end", action="append", choices=("torch", "onnx"), help="default: both")
    ap.add_argument("--validate", action="store_true", help="the exporter's own fp32 validation of each suite")
    ap.add_argument("--keep", type=pathlib.Path, help="keep the exported suites in this folder")
    args = ap.parse_args(argv)
    front_ends = args.front_end or ["torch", "onnx"]
    torch.set_grad_enabled(False)

    t, keys = vd.export(SUITE)
    committed = yaml.safe_load(vd.document(SUITE).read_text())
    pixels = torch.from_numpy(t["pixels"])
    eager = float(np.abs(official_trunk(t, keys)(pixels).numpy().astype(np.float64) - t["x_norm"]).max())

    work = args.keep or pathlib.Path(tempfile.mkdtemp(prefix="dinov2-roundtrip-"))
    work.mkdir(parents=True, exist_ok=True)
    exports: List[Export] = []
    if "torch" in front_ends:
        exports.append(export_torch(official_trunk(t, keys), pixels, work / "torch-official",
                                    "PyTorch front-end, the official Attention", args.validate))
        exports.append(export_torch(official_trunk(t, keys, sdpa=True), pixels, work / "torch-sdpa",
                                    "PyTorch front-end, Attention.forward as F.scaled_dot_product_attention",
                                    args.validate))
    if "onnx" in front_ends:
        label = f"ONNX front-end (torch.onnx.export opset 17, dynamo=False; onnx {__import__('onnx').__version__})"
        e = export_onnx(official_trunk(t, keys), pixels, work, work / "onnx", label, args.validate)
        exports.append(e)
        if e.noncontiguous:
            FIX_LAYOUT = True
            exports.append(export_onnx(official_trunk(t, keys), pixels, work, work / "onnx-contiguous",
                                       label + ", its weights written C-contiguous", args.validate))
            FIX_LAYOUT = False

    where = CLI.relative_to(ROOT) if CLI.is_relative_to(ROOT) else CLI
    print(f"torch {torch.__version__}, onnx {__import__('onnx').__version__}, official dinov2 code (PyPI 0.0.1.dev2, "
          f"no xFormers), {where}. The official trunk run eagerly in float32 on the committed pixels: max abs "
          f"{eager:.2e} from the golden x_norm. \"float32 storage\": per element, the distance in float32 units in "
          f"the last place (ulp); where it is more than 1, the share of identical and of within-1-ulp elements "
          f"and the largest difference in ulps of the tensor's largest magnitude.\n")
    ok = True
    for e in exports:
        ok &= report(e, t, keys, committed, work)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("Round trip:", "as expected (every stage but the folded position embedding equal within float32 storage, "
          "the same fused operators)" if ok else "FAILED (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
