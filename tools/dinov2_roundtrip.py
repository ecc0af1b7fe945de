#!/usr/bin/env python3
"""DINOv2 ViT-S/14 through `vips-export` and back: issue 46's round trip.

    pip install torch safetensors pillow numpy onnx onnxruntime pyyaml && pip install --no-deps dinov2
    cargo build -p vips-conformance            # target/release or target/debug; or $VSDK_CONFORMANCE
    python3 tools/dinov2_roundtrip.py [--front-end torch|onnx ...] [--validate] [--keep DIR]

Heavy (PyTorch, the official model code, an 87 MB weights file per export): kept out of default CI,
like tools/validate_dinov2.py. About a minute on 2 cores, a minute and a half with --validate.

What it checks ("Done when" of issue 46: DINOv2 ViT-S/14 exported through either front-end, with the
committed suite's weights and input, gives stage outputs equal to `dinov2-vits14`'s goldens within
float32 storage, with the same fused operators):

1. The official ViT-S/14 (facebookresearch/dinov2's `vit_small`, built and loaded with the committed
   suite's weights exactly as tools/validate_dinov2.py does, its own `Attention` unchanged), restricted
   to the part the suite calls patch_embed ... final_norm: normalised pixels [1, 3, 224, 224] in, the
   final LayerNorm's tokens [1, 257, 384] out (the Pillow preprocessing and the class/patch split are
   not model code).
2. Exported with `vips_export.export_torch(module, (pixels,), DIR, inputs={"pixels": committed pixels})`
   and with the ONNX front-end (`torch.onnx.export(..., opset_version=17, dynamo=False)`, then
   `vips_export.export_onnx(path, DIR, inputs={"pixels": ...})`): the suites run on the committed
   suite's golden `pixels` (stored beside the weights, `source: { weights: pixels }`). A second export
   of each is the official blocks and final norm alone (the same modules, `forward` from the tokens),
   given the committed golden `x_0`: it isolates the blocks from the position-embedding difference
   below. The official attention (`q * scale @ k^T -> softmax -> @ v`) must be fused into `sdpa` by
   the PyTorch front-end; if it is refused, the refusal is reported (and counted), and that export is
   repeated with each `Attention.forward` as `F.scaled_dot_product_attention(q, k, v, scale=self.scale)`
   (the same function), in a row labelled so.
3. Every exported stage output (`vips-conformance export`) is compared with the committed golden it
   stands for (`x_patch`, `x_0`, `x_1` ... `x_12`, `x_norm`): max abs difference, and the largest
   distance in float32 units in the last place. "identical" = the same float32 values; "<= 1 ulp" =
   equal within float32 storage rounding; more is reported as it is.
4. Each exported block's operators (`op` of its graph nodes, in order) are compared with the committed
   suite's `block_00` graph: the compute operators (layer_norm, linear, sdpa, gelu, mul for LayerScale,
   add) with their attributes, in order; the data-movement operators (reshape, permute, crop) as a
   multiset with their attributes, and whether their order differs. patch_embed, the position stage and
   final_norm are listed beside the committed ones.

The official model's position embedding is interpolated in `forward` from parameters
(DESIGN.md section 10: bicubic, scale_factor 16.1/37); both front-ends fold it into one float32
constant [1, 257, 384] (PyTorch's float32 kernel, or onnx's reference evaluator on Resize), where the
committed suite has an explicit `pos_embed` stage computing it in float64. The folded constant is
compared with the float64 interpolation, and `x_0` differs from the committed golden by that rounding.

Also: the given input is checked to be stored bit for bit; every committed parameter is compared with
the exported weights file; the exported goldens are judged as an engine's captures by `check
dinov2-vits14 --tier fp32 --mode chained`; and the arrays the exporter hands safetensors' `save_file`
are watched (it writes an array's memory as it lies, so a non-C-contiguous array would be stored
scrambled).

--validate also has the exporter validate each full suite at fp32 (the model judged by its own suite
on the committed pixels, both modes; slower). --keep DIR keeps the exported suites. Prints Markdown
(docs/validation.md, "DINOv2 through the exporter"). Exit status 0 only when every export asked for
was made, of the official model (no refusal, no fallback) and, with --validate, passed its own
validation, and for each: the given input is stored bit for bit; the committed parameters are
carried bit for bit; each stage but the position stage, fed the committed value of its input, is
within 1 ulp of its golden; the blocks have block_00's fused operators and attributes; patch_embed
and final_norm have the committed graphs; the folded position embedding is within 1e-5 of the float64
interpolation; the goldens pass the committed suite's chained check; and no array was handed to
save_file non-contiguous.
"""
from __future__ import annotations

import argparse
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
from safetensors.numpy import load_file

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "exporter")]

import dinov2.models.vision_transformer as vt  # noqa: E402
import validate_dinov2 as vd  # noqa: E402
import vips_export  # noqa: E402
import vips_export.sdk  # noqa: E402

SUITE = "dinov2-vits14"
MOVEMENT = {"vsdk.reshape", "vsdk.permute", "vsdk.crop", "vsdk.concat", "vsdk.cast"}


def conformance() -> pathlib.Path:
    """The exporter's own lookup: $VSDK_CONFORMANCE, PATH, or this checkout's build."""
    try:
        return pathlib.Path(vips_export.sdk.find_conformance())
    except vips_export.ExportError as e:
        sys.exit(str(e))


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
# does not check): an array in another layout would be stored scrambled. The exporter's writes go
# through this wrapper, which records the names of such arrays (the exporter's first version handed it
# a Fortran-ordered folded constant; now it lays every array out row-major).
NONCONTIGUOUS: List[str] = []
_save_file = safetensors.numpy.save_file


def _recording_save_file(tensors: Dict[str, np.ndarray], filename: Any, metadata: Any = None) -> None:
    NONCONTIGUOUS.extend(k for k, v in tensors.items() if not v.flags.c_contiguous)
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


class Blocks(vt.DinoVisionTransformer):
    """The official blocks and final norm alone, from the tokens with the position embedding added
    (the committed `x_0`) to the final norm's tokens (the suite's block_00 ... final_norm)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)


class SdpaAttention(vt.MemEffAttention):
    """Only used if the PyTorch front-end refuses the official attention: Attention.forward with its
    `q * scale @ k^T -> softmax -> @ v` as one F.scaled_dot_product_attention (the same function)."""

    def forward(self, x: torch.Tensor, attn_bias: Any = None) -> torch.Tensor:  # type: ignore[override]
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        x = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return self.proj_drop(self.proj(x.transpose(1, 2).reshape(B, N, C)))


def official(t: Dict[str, np.ndarray], keys: Dict[str, str], cls: type, sdpa: bool = False) -> torch.nn.Module:
    model = vd.model_for(t, keys, torch.float32)  # vit_small, patch 14, img 518, the suite's weights
    model.__class__ = cls
    for blk in model.blocks:
        assert type(blk.attn) is vt.MemEffAttention, type(blk.attn)  # the official attention (no xFormers)
        if sdpa:
            blk.attn.__class__ = SdpaAttention
    return model.eval()


# ---------------------------------------------------------------- exports


@dataclass
class Export:
    label: str  # how the row is labelled
    given: str  # the model input the export was given (its name in the lowered graph)
    golden: str  # the committed golden given as that input
    suite: Optional[pathlib.Path] = None
    refused: Optional[str] = None  # the exporter's message when it refused
    seconds: float = 0.0
    validation: Optional[str] = None  # the exporter's own validation table
    validated: Optional[bool] = None  # None: not asked for
    noncontiguous: List[str] = field(default_factory=list)  # arrays the exporter handed save_file scrambled
    official: bool = True  # False: the attention swapped for F.scaled_dot_product_attention


def _run(label: str, given: str, golden: str, out: pathlib.Path, make: Any, official_attention: bool = True) -> Export:
    start = len(NONCONTIGUOUS)
    t0 = time.time()
    e = Export(label, given, golden, official=official_attention)
    try:
        r = make()
    except vips_export.UnsupportedOperators as x:
        lines = str(x).splitlines()
        e.refused = f"{lines[0]} First: `{lines[1].strip()}`" if len(lines) > 1 else lines[0]
    except vips_export.ValidationFailed as x:
        # The suite is kept beside as DIR.rejected: its values are still compared below.
        e.suite, e.validated = out.parent / f"{out.name}.rejected", False
        e.validation = f"the exporter's own validation rejected the suite: {x}"
    except vips_export.ExportError as x:
        e.refused = f"export error: {x}"
    else:
        e.suite = r.suite
        if r.validation is not None:
            e.validated, e.validation = bool(r.validation.passed), r.validation.table()
    e.seconds = time.time() - t0
    e.noncontiguous = NONCONTIGUOUS[start:]
    return e


def _refused_matmul(e: Export) -> bool:
    return e.suite is None and e.refused is not None and "matmul" in e.refused


def torch_exports(t: Dict[str, np.ndarray], keys: Dict[str, str], work: pathlib.Path, validate: bool) -> List[Export]:
    tiers = ("fp32",) if validate else ()

    def trunk(sdpa: bool, out: pathlib.Path, label: str) -> Export:
        return _run(label, "pixels", "pixels", out, lambda: vips_export.export_torch(
            official(t, keys, Trunk, sdpa), (torch.from_numpy(t["pixels"]),), out, name="dinov2_vits14",
            inputs={"pixels": t["pixels"]}, tiers=tiers, force=True), not sdpa)

    def blocks(sdpa: bool, out: pathlib.Path, label: str) -> Export:
        return _run(label, "x", "x_0", out, lambda: vips_export.export_torch(
            official(t, keys, Blocks, sdpa), (torch.from_numpy(t["x_0"]),), out, name="dinov2_vits14_blocks",
            inputs={"x": t["x_0"]}, tiers=(), force=True), not sdpa)

    made = [trunk(False, work / "torch", "PyTorch front-end, the official model")]
    made.append(blocks(False, work / "torch-blocks", "PyTorch front-end, the official blocks and final norm"))
    if _refused_matmul(made[0]) or _refused_matmul(made[1]):
        swap = ", Attention.forward as F.scaled_dot_product_attention (the official attention was refused)"
        made.append(trunk(True, work / "torch-sdpa", "PyTorch front-end, the official model" + swap))
        made.append(blocks(True, work / "torch-sdpa-blocks", "PyTorch front-end, the official blocks and final norm" + swap))
    return made


def onnx_exports(t: Dict[str, np.ndarray], keys: Dict[str, str], work: pathlib.Path, validate: bool) -> List[Export]:
    tiers = ("fp32",) if validate else ()
    made = []
    for cls, golden, onnx_in, out, what in [(Trunk, "pixels", "pixels", "onnx", "the official model"),
                                            (Blocks, "x_0", "x_0", "onnx-blocks", "the official blocks and final norm")]:
        path = work / f"{out}.onnx"
        torch.onnx.export(official(t, keys, cls), (torch.from_numpy(t[golden]),), str(path), opset_version=17,
                          dynamo=False, input_names=[onnx_in], output_names=["x_norm"])
        label = f"ONNX front-end (torch.onnx.export opset 17, dynamo=False), {what}"
        made.append(_run(label, onnx_in, golden, work / out, lambda path=path, out=out, golden=golden, onnx_in=onnx_in:
                         vips_export.export_onnx(path, work / out, inputs={onnx_in: t[golden]},
                                                 tiers=tiers if cls is Trunk else (), force=True)))
    return made


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


def check_chained(doc: Dict[str, Any], got: Dict[str, np.ndarray], t: Dict[str, np.ndarray]) -> Tuple[str, bool]:
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
    text = f"{'PASS' if report['passed'] else 'FAIL'} (largest max\\|e\\| {worst[0]:.3f} at {worst[1]}; {e2e})"
    return text, bool(report["passed"])


# ---------------------------------------------------------------- main


def given_input(doc: Dict[str, Any], name: str) -> Optional[str]:
    """The document's name for the given model input `name` (stored beside the weights)."""
    for k, v in doc["tensors"].items():
        src = v.get("source")
        if isinstance(src, dict) and "weights" in src and (k == name or src["weights"] == name) \
                and "given" in str(v.get("description", "")):
            return k
    return None


def preamble(e: Export, doc: Dict[str, Any], tensors: Dict[str, np.ndarray], t: Dict[str, np.ndarray]) -> Tuple[bool, List[str]]:
    """What every export must meet whatever it covers: made of the official model, validated where
    asked, nothing stored scrambled, the given input stored as given. (ok, lines to print)."""
    ok, lines = e.official, []  # the attention swapped: said in the label, counted here
    if e.noncontiguous:
        ok = False
        lines.append(f"**Exporter bug**: it handed safetensors' save_file non-C-contiguous arrays "
                     f"({', '.join(f'`{k}`' for k in e.noncontiguous)}), which save_file writes in their memory "
                     f"order: stored scrambled.")
    if e.validated is not None:
        ok &= e.validated
        lines.append(("The exporter's own validation at fp32 (the committed pixels):\n\n" + e.validation + "\n")
                     if e.validated else f"**{e.validation}**")
    name = given_input(doc, e.given)
    same = name is not None and name in tensors and np.array_equal(tensors[name].reshape(t[e.golden].shape), t[e.golden])
    ok &= same
    src = doc["tensors"][name]["source"] if name else None
    lines.append(f"- Given input: `{e.given}` = the committed golden `{e.golden}`, stored as `{name}` "
                 f"(`source: {src}`): {'bit for bit' if same else '**NOT the given values**'}.")
    return ok, lines


def report(pair: Tuple[Export, Export], t: Dict[str, np.ndarray], keys: Dict[str, str], committed: Dict[str, Any]) -> bool:
    """Prints one front-end's section (the full export and the blocks-only one); True when it meets
    the round trip's criteria."""
    e, b = pair
    by_stage = {s["stage"]: s for s in committed["stages"]}
    print(f"### {e.label}\n")
    ok = True
    for x in pair:
        if x.suite is None:
            print(f"{x.label}: refused in {x.seconds:.0f} s: {x.refused}\n")
            ok = False
    if e.suite is None:
        return False
    doc = yaml.safe_load((e.suite / "suite.yaml").read_text())
    print(f"Exported in {e.seconds:.0f} s{' (with its fp32 validation)' if e.validated is not None else ''}: "
          f"{len(doc['stages'])} stages ({', '.join(s['stage'] for s in doc['stages'][:3])}, ..., "
          f"{doc['stages'][-1]['stage']}); weights.safetensors {(e.suite / 'weights.safetensors').stat().st_size / 1e6:.1f} MB "
          f"(the given pixels included), suite.golden {(e.suite / 'suite.golden').stat().st_size / 1e6:.2f} MB.")
    full = tensors_of(e.suite)
    good, lines = preamble(e, doc, full, t)
    ok &= good
    bdoc = blocks = None
    if b.suite is not None:
        bdoc = yaml.safe_load((b.suite / "suite.yaml").read_text())
        blocks = tensors_of(b.suite)
        print(f"The blocks and final norm alone, given `x_0`: exported in {b.seconds:.0f} s, {len(bdoc['stages'])} stages.")
        good, blines = preamble(b, bdoc, blocks, t)
        ok &= good
        lines += blines
    print("\n" + "\n".join(lines))
    # Weights: every committed parameter but the folded pos_embed and the unused mask_token, as it is.
    # (`keys`: the committed tensors named by their official parameter.)
    carried = [(name, key) for name, key in keys.items() if key in full]
    same_w = [name for name, key in carried if np.array_equal(full[key].reshape(t[name].shape), t[name])]
    absent = sorted(key for key in keys.values() if key not in full)
    ok &= len(same_w) == len(carried) and absent == ["pos_embed"]
    print(f"- Weights: {len(same_w)} of {len(carried)} committed parameters carried bit for bit under their own names; "
          f"not in the export: {', '.join(f'`{k}`' for k in absent) or 'none'} (folded into the constant below).")
    # The folded position embedding against the official interpolation in float64.
    pos_stage = next(s for s, _, g in stage_map(doc) if g == "x_0")
    pos_doc = next(s for s in doc["stages"] if s["stage"] == pos_stage)
    const = next(i for i in pos_doc["inputs"] if i in full and full[i].shape == (1, 257, 384))
    ref_pos = official_pos(t)
    pos = Diff.of(full[const], ref_pos.astype(np.float32))
    pos_abs = float(np.abs(full[const] - ref_pos).max())
    ok &= pos_abs < 1e-5
    print(f"- Position embedding: folded into `{const}` {list(full[const].shape)} float32 "
          f"({doc['tensors'][const].get('description', 'no description')}). Against the official interpolation in "
          f"float64: max abs {pos_abs:.2e}; against that value's float32 rounding: {pos.verdict()}.")
    # What x_0 would be with the interpolation folded exactly (the float64 value rounded once).
    with_cls = np.concatenate([t["cls_token"], t["x_patch"]], axis=1).astype(np.float64)
    floor = Diff.of((with_cls + ref_pos.astype(np.float32)).astype(np.float32), t["x_0"])
    print(f"- x_0 with any float32 folded constant (the float64 interpolation rounded once, then the add in "
          f"float64): {floor.verdict()}, max abs {floor.max_abs:.1e}: the floor of a folded position embedding.")
    chained, passed = check_chained(doc, full, t)
    ok &= passed
    print(f"- The exported goldens as an engine's captures, judged by `check {SUITE} --tier fp32 --mode chained`: "
          f"{chained}.\n")
    iso = {g: Diff.of(blocks[o], t[g]) for _, o, g in stage_map(bdoc) if g != "?"} if bdoc else {}
    print("| exported stage | committed golden | given the committed pixels: max abs | float32 storage | "
          "blocks alone, given the committed x_0: max abs | float32 storage |")
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
        # value of its input (the blocks: by the blocks-only export), must be equal within float32
        # storage.
        if golden == "x_patch":
            ok &= d.equal()
        elif golden != "x_0":
            ok &= i is not None and i.equal()
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
    if bdoc:
        # The blocks-only export must lower the same blocks the same way.
        mine = [ops_of(s) for s in doc["stages"] if s["stage"].startswith("blocks.") or s["stage"] == "norm"]
        theirs = [ops_of(s) for s in bdoc["stages"]]
        if mine != theirs:
            ok = False
            print("| blocks alone | the full export's | NO | another lowering |")
    for mine, ref in [("patch_embed", "patch_embed"), (pos_stage, "pos_embed"), ("norm", "final_norm")]:
        m = next((s for s in doc["stages"] if s["stage"] == mine), None)
        if m is None:
            ok = False
            print(f"| (none) | {ref} | NO | no stage `{mine}` |")
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
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--front-end", action="append", choices=("torch", "onnx"), help="default: both")
    ap.add_argument("--validate", action="store_true", help="the exporter's own fp32 validation of each full suite")
    ap.add_argument("--keep", type=pathlib.Path, help="keep the exported suites in this folder")
    args = ap.parse_args(argv)
    front_ends = args.front_end or ["torch", "onnx"]
    torch.set_grad_enabled(False)

    t, described = vd.export(SUITE)
    params = official(t, described, Trunk).state_dict()
    keys = {name: key for name, key in described.items() if key in params}  # the committed parameters
    committed = yaml.safe_load(vd.document(SUITE).read_text())
    eager = float(np.abs(official(t, described, Trunk)(torch.from_numpy(t["pixels"])).numpy().astype(np.float64)
                         - t["x_norm"]).max())

    work = args.keep or pathlib.Path(tempfile.mkdtemp(prefix="dinov2-roundtrip-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    exports: List[Export] = []
    if "torch" in front_ends:
        exports += torch_exports(t, described, work, args.validate)
    if "onnx" in front_ends:
        exports += onnx_exports(t, described, work, args.validate)

    import onnx
    import onnxruntime

    where = CLI.relative_to(ROOT) if CLI.is_relative_to(ROOT) else CLI
    print(f"torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, official "
          f"dinov2 code (PyPI 0.0.1.dev2, no xFormers), {where}. The official trunk run eagerly in float32 on the "
          f"committed pixels: max abs {eager:.2e} from the golden x_norm. \"float32 storage\": per element, the "
          f"distance in float32 units in the last place (ulp); where it is more than 1, the share of identical and "
          f"of within-1-ulp elements and the largest difference in ulps of the tensor's largest magnitude.\n")
    ok = True
    for k in range(0, len(exports), 2):
        ok &= report((exports[k], exports[k + 1]), t, keys, committed)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(exports)} exports in {time.time() - t0:.0f} s. Round trip:",
          "as claimed (the official model through every front-end asked for; every stage but the folded position "
          "embedding equal within float32 storage; the same fused operators)" if ok else "FAILED (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
