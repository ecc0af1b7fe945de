#!/usr/bin/env python3
"""ONNX Runtime as an engine for the DINOv2 ViT-S/14 suites, judged by `vips-conformance check`.

    pip install numpy onnx onnxruntime pyyaml        # --from document (the default)
    pip install torch onnxscript safetensors pillow && pip install --no-deps dinov2   # --from torch
    cargo build --release -p vips-conformance          # the CLI: target/release/vips-conformance ($VSDK_CLI)
    python3 tools/ort_dinov2.py --suite dinov2-vits14-quick --out /tmp/q.npz --check
    python3 tools/ort_dinov2.py --suite dinov2-vits14 --from torch --ln-eps 1e-5 --out /tmp/e5.npz --check

What it does:
  1. Builds an ONNX model of the suite's encoder with the suite's own weights (obtained with
     `vips-conformance export`, never regenerated here), one of two ways:
       --from document  (default; numpy, onnx, onnxruntime and pyyaml, no torch) translates each stage's
                        `graph` in the suite's document (suite.yaml) operator by operator into standard
                        ONNX ops with onnx.helper: Conv, Reshape, Transpose, Slice, Resize (cubic,
                        A = -0.75, half-pixel), Concat, Add/Sub/Mul/Div, LayerNormalization, MatMul,
                        Softmax, Erf (exact GELU). The weights are initializers under the suite's names.
       --from torch     exports the official `dinov2` package's model (`vit_small`, as torch.hub's
                        dinov2_vits14 builds it, loaded with the suite's weights by tools/validate_dinov2.py)
                        with torch.onnx.export; every stage boundary is a graph output.
     Every LayerNorm gets --ln-eps (default 1e-6, DINOv2's; 1e-5, PyTorch's default, is a known bug that
     the suite must catch).
  2. Runs the model with onnxruntime (CPUExecutionProvider, default session options) and saves every
     stage output under the suite's tensor name, float32, to .npz; once per --mode (default both):
       chained   the engine end to end from the suite's golden `pixels` (the engine starts from the
                 preprocessed pixels; it does not run the suite's `preprocess` stage): to --out.
       isolated  every stage fed its golden activation input (graph inputs `NAME@STAGE`): to
                 OUT.isolated.npz. `check --mode isolated` judges each stage as computed from its golden
                 inputs, so end-to-end outputs judged that way carry the drift from upstream as error.
     --save-inputs also saves each stage's activation inputs as fed, as `NAME@STAGE` (docs/runner.md);
     with them, `check --mode isolated` judges end-to-end captures from the inputs the engine saw.
     --onnx also keeps the model(s).
  3. Prints each stage output's max abs difference from the golden value (and relative L2), and with
     --check has `vips-conformance check SUITE --tensors FILE --mode M` judge each run's captures in the
     mode of the same name at fp32, printing each stage's verdict and the end-to-end drift.

Exit status: 0, or 1 when --check is given and a verdict is not PASS.
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = pathlib.Path(os.environ.get("VSDK_CLI", ROOT / "target" / "release" / "vips-conformance"))
# The tensor the engine starts from: the output of the suite's `preprocess` stage.
START = "pixels"
OPSET = 17  # LayerNormalization is in opset 17; GELU is written with Erf (the Gelu op is opset 20).


def cli():
    if not CLI.exists():
        sys.exit(f"{CLI} is missing: run `cargo build --release -p vips-conformance` first, or set VSDK_CLI")
    return str(CLI)


def document_path(suite):
    """The suite's document: a name is looked up in conformance/suites/; a path (with a `/` or ending in
    .yaml) is a suite directory or a document."""
    p = pathlib.Path(suite)
    if "/" not in suite and not suite.endswith(".yaml"):
        p = ROOT / "conformance" / "suites" / suite
    p = p / "suite.yaml" if p.is_dir() else p
    if not p.is_file():
        sys.exit(f"no suite document at {p} (from {suite!r})")
    return p.resolve()


def read_safetensors(path):
    """A .safetensors file as {name: ndarray}, with numpy alone (8-byte header length, JSON header,
    little-endian data)."""
    dtypes = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "U8": "u1", "I8": "i1", "I32": "<i4", "I64": "<i8"}
    raw = pathlib.Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        if info["dtype"] not in dtypes:
            continue  # bf16 and the like: not in these suites
        begin, end = info["data_offsets"]
        data = raw[8 + n + begin:8 + n + end]
        out[name] = np.frombuffer(data, dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


def suite_tensors(suite_dir):
    """Every tensor of the suite (weights, golden inputs and outputs), as `vips-conformance export`
    writes them."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "suite.safetensors"
        subprocess.run([cli(), "export", str(suite_dir), "--out", str(path)], check=True, capture_output=True)
        return read_safetensors(path)


def model_stages(doc):
    """The stages an engine starting from START runs: those whose inputs are all START, parameters
    (tensors no stage produces) or outputs of earlier such stages."""
    produced = {o for s in doc["stages"] for o in s["outputs"]}
    available = {START} | (set(doc["tensors"]) - produced)
    chosen = []
    for s in doc["stages"]:
        if START in s["outputs"] or not set(s["inputs"]) <= available:
            continue
        chosen.append(s)
        available |= set(s["outputs"])
    return chosen


# --- --from document: the document's graph, operator by operator, in standard ONNX ops ---------------

class GraphBuilder:
    def __init__(self, ranks):
        import onnx.helper
        import onnx.numpy_helper
        self.h, self.nh = onnx.helper, onnx.numpy_helper
        self.nodes, self.inits, self.count = [], {}, 0
        self.rank = dict(ranks)  # tensor name -> rank, the suite's tensors and every output emitted

    def const(self, value, dtype):
        self.count += 1
        name = f"const_{self.count}"
        self.inits[name] = self.nh.from_array(np.asarray(value, dtype=dtype), name)
        return name

    def node(self, op, inputs, outputs, **attrs):
        self.nodes.append(self.h.make_node(op, inputs, outputs, name=f"{op}_{len(self.nodes)}", **attrs))

    def tmp(self, base):
        self.count += 1
        return f"{base}/{self.count}"

    def emit(self, op, ins, outs, attrs, ln_eps):
        """One document operator (docs/operators.md) as ONNX nodes."""
        op = op.removeprefix("vsdk.").split("@")[0]
        out = outs[0]
        rank = {"reshape": len(attrs.get("shape", [])), "permute": len(attrs.get("perm", [])),
                "crop": len(attrs.get("offsets", []))}.get(op, self.rank[ins[0]])
        self.rank.update((o, rank) for o in outs)
        if op in ("add", "sub", "mul", "div"):
            self.node(op.capitalize(), ins, outs)
        elif op == "crop":
            starts = attrs["offsets"]
            steps = attrs.get("steps", [1] * len(starts))
            ends = [o + (s - 1) * k + 1 for o, s, k in zip(starts, attrs["sizes"], steps)]
            axes = list(range(len(starts)))
            self.node("Slice", [ins[0], self.const(starts, np.int64), self.const(ends, np.int64),
                                self.const(axes, np.int64), self.const(steps, np.int64)], outs)
        elif op == "reshape":
            self.node("Reshape", [ins[0], self.const(attrs["shape"], np.int64)], outs)
        elif op == "permute":
            self.node("Transpose", ins, outs, perm=attrs["perm"])
        elif op == "concat":
            self.node("Concat", ins, outs, axis=attrs.get("axis", 0))
        elif op == "conv2d":
            self.node("Conv", ins, outs, strides=attrs.get("strides", [1, 1]), pads=attrs.get("pads", [0, 0, 0, 0]),
                      dilations=attrs.get("dilations", [1, 1]), group=attrs.get("groups", 1))
        elif op == "resize_bicubic":
            # PyTorch's upsample_bicubic2d (A = -0.75, clamped borders); with scale_factor the source
            # coordinate is (i + 0.5) / s - 0.5, ONNX Resize's with `scales` (pytorch_half_pixel).
            if attrs.get("antialias", 0) or "scale_factor" not in attrs:
                raise NotImplementedError("resize_bicubic: only scale_factor without antialias is translated")
            sh, sw = attrs["scale_factor"]
            self.node("Resize", [ins[0], "", self.const([1.0, 1.0, sh, sw], np.float32)], outs, mode="cubic",
                      cubic_coeff_a=-0.75, coordinate_transformation_mode="pytorch_half_pixel")
        elif op == "layer_norm":
            self.node("LayerNormalization", ins, outs, axis=attrs.get("axis", -1), epsilon=ln_eps)
        elif op == "softmax":
            self.node("Softmax", ins, outs, axis=attrs.get("axis", -1))
        elif op == "linear":
            # y = x W^T + b, W as stored ([N, K]); the Transpose of a constant is folded by the engine.
            wt = self.tmp(out + "/w_t")
            self.node("Transpose", [ins[1]], [wt], perm=[1, 0])
            if len(ins) > 2:
                y = self.tmp(out + "/matmul")
                self.node("MatMul", [ins[0], wt], [y])
                self.node("Add", [y, ins[2]], outs)
            else:
                self.node("MatMul", [ins[0], wt], outs)
        elif op == "sdpa":
            q, k, v = ins
            kt, s, scaled, p = (self.tmp(out + n) for n in ("/k_t", "/scores", "/scaled", "/probs"))
            self.node("Transpose", [k], [kt], perm=list(range(rank - 2)) + [rank - 1, rank - 2])
            self.node("MatMul", [q, kt], [s])
            self.node("Mul", [s, self.const(attrs["scale"], np.float32)], [scaled])
            self.node("Softmax", [scaled], [p], axis=-1)
            self.node("MatMul", [p, v], outs)
        elif op == "gelu":
            # Exact GELU: x * 0.5 * (1 + erf(x / sqrt(2))), as PyTorch's nn.GELU().
            a, e, one, half = (self.tmp(out + n) for n in ("/scaled", "/erf", "/1p", "/half"))
            self.node("Mul", [ins[0], self.const(1 / math.sqrt(2), np.float32)], [a])
            self.node("Erf", [a], [e])
            self.node("Add", [e, self.const(1.0, np.float32)], [one])
            self.node("Mul", [ins[0], self.const(0.5, np.float32)], [half])
            self.node("Mul", [half, one], outs)
        else:
            raise NotImplementedError(f"no ONNX translation for vsdk.{op}")


def feeds(doc, stages, isolated):
    """The model's graph inputs as (input name, suite tensor): chained, START alone (the engine's own
    outputs flow on); isolated, every activation input of every stage, as `NAME@STAGE`, fed its golden
    value (the name `check` gives a stage's input as the engine fed it)."""
    if not isolated:
        return [(START, START)]
    produced = {o for s in doc["stages"] for o in s["outputs"]}
    return [(f"{n}@{s['stage']}", n) for s in stages for n in s["inputs"] if n in produced]


def build_from_document(doc, tensors, stages, ln_eps, isolated):
    """The ONNX model of `stages` (document stages, in order): inputs as `feeds` says, every stage output
    a graph output, the parameters initializers under their suite names."""
    import onnx
    from onnx import TensorProto
    inputs = feeds(doc, stages, isolated)
    g = GraphBuilder({name: v.ndim for name, v in tensors.items()} | {i: tensors[n].ndim for i, n in inputs})
    for s in stages:
        # Names inside a stage are local to it: prefix them, except the stage's inputs and outputs; in an
        # isolated model, activation inputs are the graph inputs NAME@STAGE.
        fed = {n: i for i, n in inputs if i.endswith(f"@{s['stage']}")}
        boundary = set(s["inputs"]) | set(s["outputs"])
        local = lambda n: fed.get(n, n if n in boundary else f"{s['stage']}/{n}")
        for op in s["graph"]:
            attrs = dict(op.get("attrs") or {})
            g.emit(op["op"], [local(i) for i in op["inputs"]], [local(o) for o in op["outputs"]], attrs, ln_eps)
    used = {i for n in g.nodes for i in n.input}
    produced = {o for s in doc["stages"] for o in s["outputs"]}
    params = [name for name in doc["tensors"] if name in used and name not in produced]
    for name in params:
        g.inits[name] = g.nh.from_array(np.ascontiguousarray(tensors[name], dtype=np.float32), name)
    outputs = [o for s in stages for o in s["outputs"]]
    vi = lambda name, n: onnx.helper.make_tensor_value_info(name, TensorProto.FLOAT, list(tensors[n].shape))
    graph = onnx.helper.make_graph(g.nodes, "dinov2_from_document", [vi(i, n) for i, n in inputs],
                                   [vi(o, o) for o in outputs], list(g.inits.values()))
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)],
                                   producer_name="tools/ort_dinov2.py")
    model.ir_version = min(model.ir_version, 10)  # readable by older onnxruntime releases
    onnx.checker.check_model(model, full_check=True)
    return model, inputs, outputs


# --- --from torch: the official dinov2 model, exported -----------------------------------------------

def official_model(suite_dir, ln_eps):
    """The official model (tools/validate_dinov2.py's `model_for`, loaded with the suite's weights), every
    LayerNorm's eps set to ln_eps."""
    import torch
    sys.path.insert(0, str(ROOT / "tools"))
    import validate_dinov2 as vd
    t, keys = vd.export(str(suite_dir))
    model = vd.model_for(t, keys, torch.float32)
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.eps = ln_eps
    return model


def build_from_torch(vit, doc, stages, tensors, isolated):
    """`vit` wrapped so that each stage boundary is an output (isolated: each stage fed its own input),
    exported with torch.onnx.export."""
    import io
    import onnx
    import torch

    inputs = feeds(doc, stages, isolated)
    names = [o for s in stages for o in s["outputs"]]
    expected = ["x_patch", "x_0"] + [f"x_{i + 1}" for i in range(len(vit.blocks))] + \
               ["x_norm", "x_norm_clstoken", "x_norm_patchtokens"]
    if names != expected:
        sys.exit(f"--from torch knows the stage outputs {expected}, the suite has {names}")

    class Stages(torch.nn.Module):
        """DinoVisionTransformer.forward_features returning every stage boundary; isolated, each stage
        takes the next input given instead of the stage before's output."""
        def __init__(self):
            super().__init__()
            self.vit = vit

        def forward(self, *given):
            given = iter(given)
            take = (lambda computed: next(given)) if isolated else (lambda computed: computed)
            pixels = next(given)
            w, h = pixels.shape[-2:]
            x_patch = self.vit.patch_embed(pixels)
            x = torch.cat((self.vit.cls_token.expand(1, -1, -1), take(x_patch)), dim=1)
            x = x + self.vit.interpolate_pos_encoding(x, w, h)
            out = [x_patch, x]
            for block in self.vit.blocks:
                x = block(take(x))
                out.append(x)
            x_norm = self.vit.norm(take(x))
            source = take(x_norm)
            return (*out, x_norm, source[:, 0], source[:, 1:])

    buf = io.BytesIO()
    args = tuple(torch.from_numpy(np.array(tensors[n], dtype=np.float32)) for _, n in inputs)
    with torch.no_grad():
        torch.onnx.export(Stages().eval(), args, buf, input_names=[i for i, _ in inputs], output_names=names,
                          opset_version=18, verbose=False)
    return onnx.load_from_string(buf.getvalue()), inputs, names


# --- run, compare, judge ------------------------------------------------------------------------------

def run_ort(model, given, names):
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return {n: np.asarray(v, dtype=np.float32) for n, v in zip(names, sess.run(names, given))}


def check(suite_dir, captures, mode):
    r = subprocess.run([cli(), "check", str(suite_dir), "--tensors", str(captures), "--mode", mode, "--json"],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"vips-conformance check failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def number(v):
    """A float from check's JSON ("inf", "NaN" and null are infinite)."""
    v = float("inf") if v is None else float(v)
    return float("inf") if v != v else v


def print_verdicts(report, mode):
    tier = report["tiers"][0]
    print(f"\n`check --mode {mode}` (tier {tier.get('tier', 'fp32')}): {'PASS' if report['passed'] else 'FAIL'}")
    print("| stage | status | max\\|e\\| | rms_t | coverage warnings | reason |")
    print("|---|---|---|---|---|---|")
    for s in tier["stages"]:
        outs = s.get("outputs") or []
        max_e = max((number(o["judgement"]["max_e"]) for o in outs if o.get("judgement")), default=None)
        rms = [number(o["judgement"]["rms_t"]) for o in outs
               if o.get("judgement") and o["judgement"].get("rms_t") is not None]
        reason = (s.get("reason") or "").replace("\n", " ").replace("|", "\\|")
        print(f"| {s['stage']} | {s['status'].upper()} | {'-' if max_e is None else f'{max_e:.3g}'} | "
              f"{f'{max(rms):.3g}' if rms else '-'} | {len(s.get('coverage') or [])} | {reason[:160]} |")
    for e in tier.get("end_to_end") or []:
        d = e["drift"]
        print(f"end to end {e['tensor']}: rel L2 {d['rel_l2_error']:.2e}, cosine {d['cosine_similarity']:.9f}"
              f" ({'pass' if e.get('passed', True) else 'FAIL'})")
    if any(s.get("coverage") for s in tier["stages"]):
        print(f"(coverage warnings: what a stage's data cannot show; `vips-conformance check ... --mode {mode}` "
              "lists them)")


def capture_path(out, mode):
    """Where a run's captures go: chained (end to end) to --out, isolated beside it as NAME.isolated.npz."""
    out = pathlib.Path(out)
    return out if mode == "chained" else out.with_name(f"{out.stem}.isolated{out.suffix or '.npz'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--suite", default="dinov2-vits14", help="suite name, directory or document "
                    "(dinov2-vits14, dinov2-vits14-quick, dinov2-vits14-stress)")
    ap.add_argument("--from", dest="source", choices=["document", "torch"], default="document",
                    help="build the ONNX model from the suite's document (default) or export the official "
                    "dinov2 PyTorch model")
    ap.add_argument("--ln-eps", type=float, default=1e-6, help="every LayerNorm's eps (default 1e-6, DINOv2's)")
    ap.add_argument("--out", required=True, help="the end-to-end run's stage outputs (.npz); the isolated "
                    "run's go beside it as OUT.isolated.npz")
    ap.add_argument("--mode", action="append", choices=["isolated", "chained"],
                    help="runs to make and judge (repeatable; default both): chained, the engine end to end "
                    "from pixels; isolated, every stage fed its golden input")
    ap.add_argument("--onnx", help="also save the end-to-end ONNX model here (isolated: NAME.isolated.onnx)")
    ap.add_argument("--save-inputs", action="store_true", help="also save each stage's activation inputs "
                    "as fed, as NAME@STAGE: `check --mode isolated` then judges end-to-end captures from the "
                    "inputs the engine saw (docs/runner.md)")
    ap.add_argument("--check", action="store_true", help="judge each run's captures with `vips-conformance "
                    "check --mode` of the same name")
    args = ap.parse_args()

    try:
        import onnx
        import onnxruntime as ort
        import yaml
    except ImportError as e:
        sys.exit(f"{e}: pip install numpy onnx onnxruntime pyyaml")
    doc_path = document_path(args.suite)
    suite_dir = doc_path.parent
    doc = yaml.safe_load(doc_path.read_text())
    stages = model_stages(doc)
    tensors = suite_tensors(suite_dir)
    if args.source == "torch":
        import torch
        vit = official_model(suite_dir, args.ln_eps)
        how = f"official dinov2 model exported by torch {torch.__version__} (torch.onnx.export)"
    else:
        how = "ONNX graph built from the document"
    print(f"suite {doc['component']['id']}: {how}, LayerNorm eps {args.ln_eps:g}; onnx {onnx.__version__}, "
          f"onnxruntime {ort.__version__} (CPUExecutionProvider, default options)")
    print(f"stages run: {', '.join(s['stage'] for s in stages)}")

    passed = True
    for mode in sorted(set(args.mode or ["isolated", "chained"]), reverse=True):
        isolated = mode == "isolated"
        if args.source == "torch":
            model, inputs, names = build_from_torch(vit, doc, stages, tensors, isolated)
        else:
            model, inputs, names = build_from_document(doc, tensors, stages, args.ln_eps, isolated)
        if args.onnx:
            onnx.save(model, str(capture_path(args.onnx, mode).with_suffix(".onnx")))
        given = {i: np.ascontiguousarray(tensors[n], dtype=np.float32) for i, n in inputs}
        captured = run_ort(model, given, names)
        out = capture_path(args.out, mode)
        saved = dict(captured)
        if args.save_inputs:
            # Each stage's activation input as the engine fed it: the golden value (isolated), the
            # engine's own output of the stage before (chained), or the golden `pixels`.
            saved.update((i, given[i] if isolated else captured.get(n, given.get(n)))
                         for i, n in feeds(doc, stages, True))
        np.savez(out, **saved)
        ops = sorted({n.op_type for n in model.graph.node})
        opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        print(f"\n## {mode} run: " + ("the engine end to end from the golden `pixels`" if not isolated else
                                       "every stage fed its golden inputs (graph inputs NAME@STAGE)"))
        print(f"ONNX opset {opset}, {len(model.graph.node)} nodes: {', '.join(ops)}; "
              f"wrote {len(saved)} tensors to {out}\n")
        print("| stage | tensor | max abs diff from golden | max abs golden | relative L2 |")
        print("|---|---|---|---|---|")
        for s in stages:
            for n in s["outputs"]:
                want = tensors[n].astype(np.float64)
                d = captured[n].astype(np.float64) - want
                print(f"| {s['stage']} | {n} | {np.abs(d).max():.3e} | {np.abs(want).max():.3g} | "
                      f"{np.linalg.norm(d) / np.linalg.norm(want):.3e} |")
        if args.check:
            report = check(suite_dir, out, mode)
            print_verdicts(report, mode)
            passed &= bool(report["passed"])
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
