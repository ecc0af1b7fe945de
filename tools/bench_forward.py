#!/usr/bin/env python3
"""The CPU provider against PyTorch and ONNX Runtime, back to back in one run,
and the conformance suite's own cost; writes the tables into docs/benchmarks.md.

    pip install torch onnx onnxruntime onnxscript safetensors pillow numpy
    pip install --no-deps dinov2
    python3 tools/bench_forward.py [--rounds N] [--suite-runs N] [--no-write]

1. PyTorch float32 `forward_features` of the official DINOv2 ViT-S/14 loaded
   with the suite's weights (tools/validate_dinov2.py builds it), and the same
   model exported to ONNX and run by ONNX Runtime (CPU provider, full graph
   optimisation); both on the suite's golden `pixels`, both on the same number
   of threads as rayon (2 here).
2. The CPU provider's forward through the provider ABI (sdk/benches/forward.rs):
   every stage's graph node by node, chained, float32, weights uploaded once.
   "model" excludes the preprocessing stage, which the other two do not run.
3. The same operators one call at a time on the model's shapes, in PyTorch
   and in the provider.
4. PyTorch and ONNX Runtime once more, to show how much the machine drifted.
5. `vips-conformance run dinov2-vits14` (release, fp32, defaults): wall time
   and peak RSS (/usr/bin/time), and where its CPU time goes (perf, when it
   can record here).
Every figure is a median; the counts are printed beside them.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = ROOT / "target" / "release" / "vips-conformance"
sys.path.insert(0, str(ROOT / "tools"))
import validate_dinov2 as v  # noqa: E402

THREADS = int(os.environ.get("RAYON_NUM_THREADS", os.cpu_count() or 1))
SUITE = "dinov2-vits14"


def timed(f, rounds, warmup=3):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


class Features(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model.forward_features(x)
        return out["x_norm_clstoken"], out["x_norm_patchtokens"]


def frameworks(model, pixels, onnx_path, rounds):
    import onnxruntime as ort

    x = torch.from_numpy(pixels)
    with torch.inference_mode():
        torch_ms = timed(lambda: model.forward_features(x), rounds)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    ort_ms = timed(lambda: sess.run(None, {"pixels": pixels}), rounds)
    return torch_ms, ort_ms, sess


def ort_profile(onnx_path, pixels, rounds):
    """ONNX Runtime's own per-operator times (its profiler), per forward:
    {op type: ms}, the median over `rounds` profiled runs."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = str(pathlib.Path(tmp) / "ort")
        sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        for _ in range(3 + rounds):
            sess.run(None, {"pixels": pixels})
        events = json.loads(pathlib.Path(sess.end_profiling()).read_text())
    per_run = {}
    run = -1
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            run += 1
        elif e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and run >= 3:
            op = e["args"].get("op_name", "?")
            per_run.setdefault(op, {}).setdefault(run, 0.0)
            per_run[op][run] += e["dur"] / 1e3
    return {op: statistics.median(runs.values()) for op, runs in per_run.items()}


def torch_ops(rounds):
    g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))

    def r(*s):
        return torch.rand(*s, generator=g) * 4 - 2

    x384, x1536 = r(1, 257, 384), r(1, 257, 1536)
    weights = {(n, k): (r(n, k), r(n)) for n, k in [(1152, 384), (384, 384), (1536, 384), (384, 1536)]}
    h = r(257, 1536)
    ln_w, ln_b = r(384), r(384)
    logits = r(6, 257, 257)
    q, k, vv = r(1, 6, 257, 64), r(1, 6, 257, 64), r(1, 6, 257, 64)
    qkv = r(1, 257, 3, 6, 64)
    qkv_heads = qkv.permute(2, 0, 3, 1, 4).contiguous()
    flat = r(1, 257, 1152)
    a, c = r(1, 257, 384), r(1, 257, 384)
    one = r(1)
    ops = {
        "linear qkv 257x384 * 1152x384": lambda: F.linear(x384, *weights[1152, 384]),
        "linear proj 257x384 * 384x384": lambda: F.linear(x384, *weights[384, 384]),
        "linear fc1 257x384 * 1536x384": lambda: F.linear(x384, *weights[1536, 384]),
        "linear fc2 257x1536 * 384x1536": lambda: F.linear(x1536, *weights[384, 1536]),
        "gelu 257x1536": lambda: F.gelu(h),
        "layer_norm 257x384": lambda: F.layer_norm(x384, (384,), ln_w, ln_b, 1e-6),
        "softmax 6x257x257": lambda: torch.softmax(logits, -1),
        "sdpa 6x257x64": lambda: F.scaled_dot_product_attention(q, k, vv, scale=0.125),
        # Materialised, as the provider ABI's outputs are (PyTorch's own
        # forward takes views, which cost nothing).
        "permute qkv [2,0,3,1,4]": lambda: qkv.permute(2, 0, 3, 1, 4).contiguous(),
        "crop q of qkv": lambda: qkv_heads[0:1].clone(),
        "reshape 257x1152": lambda: flat.reshape(1, 257, 3, 6, 64).clone(),
        "add 257x384": lambda: a + c,
        "add of one element (the cost of a call)": lambda: one + one,
    }
    from PIL import Image

    image = Image.fromarray(np.random.default_rng().integers(0, 256, (300, 400, 3), dtype=np.uint8), "RGB")
    pillow = {"resize_pil_bicubic 300x400x3 to 256x341": lambda: image.resize((341, 256), Image.BICUBIC)}
    with torch.inference_mode():
        times = {name: timed(f, rounds * 5) for name, f in ops.items()}
    # Pillow's own resize (single-threaded C), the operator's definition.
    times.update({name: timed(f, rounds * 5) for name, f in pillow.items()})
    return times


def provider(rounds):
    out = subprocess.run(
        ["cargo", "bench", "-q", "-p", "vips-sdk", "--bench", "forward", "--",
         str(ROOT / "conformance" / "suites" / SUITE), str(rounds)],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def suite_runs(runs):
    """Wall time and peak RSS of the suite run, medians."""
    walls, rss = [], []
    for _ in range(runs):
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", str(CLI), "run", SUITE, "--seed", "1"],
                           cwd=ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"vips-conformance run failed:\n{p.stdout}\n{p.stderr}")
        wall, kib = p.stderr.strip().splitlines()[-1].split()
        walls.append(float(wall))
        rss.append(int(kib) / 1024)
    return statistics.median(walls), statistics.median(rss)


def kernel_share():
    """Where the suite run's CPU time goes, by `perf record` samples of both
    processes (the runner and its worker): the CPU provider's library (every
    kernel: the provider under test, and the float64 reference the error model
    runs), the runner's own code, the C library (copies), the OS kernel.
    None when perf cannot record here."""
    with tempfile.TemporaryDirectory() as tmp:
        data = pathlib.Path(tmp) / "perf.data"
        rec = subprocess.run(["perf", "record", "-F", "999", "-o", str(data), str(CLI), "run", SUITE,
                              "--seed", "1"], cwd=ROOT, capture_output=True, text=True)
        if rec.returncode != 0:
            return None
        rep = subprocess.run(["perf", "report", "-i", str(data), "--sort", "dso", "--stdio"],
                             capture_output=True, text=True).stdout
    share = {}
    for line in rep.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)", line)
        if m:
            share[m.group(2)] = share.get(m.group(2), 0.0) + float(m.group(1))
    return share


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--suite-runs", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(THREADS)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "vips-conformance", "-p", "vsdk-provider-cpu"],
                   cwd=ROOT, check=True)

    t, keys = v.export(SUITE)
    model = v.model_for(t, keys, torch.float32)
    pixels = t["pixels"].astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = pathlib.Path(tmp) / "dinov2_vits14.onnx"
        torch.onnx.export(Features(model).eval(), (torch.from_numpy(pixels),), str(onnx_path),
                          input_names=["pixels"], opset_version=18, dynamo=True)
        torch_before, ort_before, sess = frameworks(model, pixels, onnx_path, args.rounds)
        with torch.inference_mode():
            want = model.forward_features(torch.from_numpy(pixels))["x_norm_patchtokens"].numpy()
        got = sess.run(None, {"pixels": pixels})[1]
        ort_err = float(np.abs(got - want).max())
        ort_ops = ort_profile(onnx_path, pixels, args.rounds)
        prov = provider(args.rounds)
        ops = torch_ops(args.rounds)
        torch_after, ort_after, _ = frameworks(model, pixels, onnx_path, args.rounds)
    wall, rss = suite_runs(args.suite_runs)
    share = kernel_share()
    report = render(args, torch_before, torch_after, ort_before, ort_after, ort_err, prov, ops, wall, rss, share,
                    ort_ops)
    print(report)
    if not args.no_write:
        write(report)


def render(args, tb, ta, ob, oa, ort_err, prov, ops, wall, rss, share, ort_ops):
    ort_best = ob
    model = prov["model_ms"]
    lines = [
        "<!-- bench_forward: written by tools/bench_forward.py -->",
        f"Measured {time.strftime('%Y-%m-%d')} with `python3 tools/bench_forward.py` on {THREADS} threads "
        f"(torch {torch.__version__}, onnxruntime {__import__('onnxruntime').__version__}). "
        f"Forward times are medians of {args.rounds} runs after 3 warm-ups; single operators of "
        f"{max(args.rounds, 200)} (provider) and {args.rounds * 5} (PyTorch) calls; the suite of "
        f"{args.suite_runs} runs.",
        "",
        "| DINOv2 ViT-S/14 forward, 224 × 224, float32 | median | vs ONNX Runtime |",
        "|---|---|---|",
        f"| ONNX Runtime (exported official model; max abs difference from PyTorch {ort_err:.1e}) | "
        f"{ob:.1f} ms (after: {oa:.1f} ms) | 1.00× |",
        f"| PyTorch `forward_features` | {tb:.1f} ms (after: {ta:.1f} ms) | {tb / ort_best:.2f}× |",
        f"| **CPU provider**, model stages (patch embedding → final norm) | **{model:.1f} ms** | "
        f"**{model / ort_best:.2f}×** |",
        f"| CPU provider, with the preprocessing stage (`{prov['first_stage']}`) | "
        f"{prov['forward_ms']:.1f} ms | |",
        "",
        "| operator, DINOv2 shape | CPU provider | PyTorch (Pillow for `resize_pil_bicubic`) | ratio |",
        "|---|---|---|---|",
    ]
    for name, ms in prov["single_op_ms"].items():
        pt = ops.get(name)
        ratio = f"{ms / pt:.2f}×" if pt else ""
        lines.append(f"| {name} | {ms * 1e3:.0f} µs | {pt * 1e3:.0f} µs | {ratio} |")
    lines += [
        "",
        "Where one provider forward goes (operator: total per forward, median): " + ", ".join(
            f"{k.removeprefix('vsdk.')} {v:.1f} ms" for k, v in
            sorted(prov["ops_per_forward_ms"].items(), key=lambda kv: -kv[1])) + ".",
        "",
        "ONNX Runtime's own profile of its forward (operator type: total per forward, median; "
        "model_run events are not counted, so this sums to less than its wall time): " + ", ".join(
            f"{k} {v:.1f} ms" for k, v in sorted(ort_ops.items(), key=lambda kv: -kv[1]) if v >= 0.05) + ".",
        "",
        "| `vips-conformance run dinov2-vits14 --seed 1` (release, fp32, defaults) | median |",
        "|---|---|",
        f"| wall time | {wall:.2f} s |",
        f"| peak RSS | {rss:.0f} MiB |",
        f"| regenerating the seeded tensors (22 M values; generator alone) | {prov['regenerate_ms']:.0f} ms |",
        f"| materialising every stage input (regeneration, SHA-256 check, copies) | {prov['materialise_ms']:.0f} ms |",
    ]
    if share:
        kernels = share.get("libvsdk_provider_cpu.so", 0.0)
        rest = 100.0 - kernels
        lines += [
            "",
            "CPU time of one suite run by where it is spent (`perf record`, both processes): "
            + ", ".join(f"{k} {v:.1f} %" for k, v in sorted(share.items(), key=lambda kv: -kv[1]) if v >= 0.5)
            + f". Kernels (the CPU provider's library: the provider under test and the float64 reference "
            f"of the error model) {kernels:.1f} %; everything else {rest:.1f} %, "
            f"{rest / max(kernels, 1e-9) * 100:.0f} % of the kernel time.",
        ]
    lines += [
        "<!-- bench_forward: end -->",
    ]
    return "\n".join(lines)


def write(report):
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text()
    pattern = re.compile(r"<!-- bench_forward: written.*?<!-- bench_forward: end -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: report, text)
    else:
        text += "\n## The CPU provider against PyTorch and ONNX Runtime\n\n" + report + "\n"
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
