"""The PyTorch front-end on timm models (tools/test-extended: PyTorch's PyPI wheel pulls about 5 GB
of CUDA libraries, too much for CI's install budget; exporter/tests runs the ONNX front-end in CI).

    pip install torch timm && pip install ./exporter && python3 -m pytest exporter/tests_torch
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch

HERE = Path(__file__).resolve().parent
EXPORTER = HERE.parent
sys.path[:0] = [str(EXPORTER), str(HERE)]

import models  # noqa: E402
from vips_export.document import plan  # noqa: E402
from vips_export.frontends.torch import load_module  # noqa: E402
from vips_export.sdk import find_conformance  # noqa: E402
from vips_export.stages import cut  # noqa: E402
from vips_export.validate import captures  # noqa: E402


def export(args: List[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{EXPORTER}:{HERE}"}
    return subprocess.run([sys.executable, "-m", "vips_export.cli", *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def conformance() -> str:
    return find_conformance()


@pytest.fixture(scope="module")
def vit_suite(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vit") / "vit-tiny"
    r = export(["--torch", "models:vit_tiny", "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    return out


def test_vit_tiny_in_one_command_passes_its_own_suite_at_every_tier(vit_suite: Path, conformance: str) -> None:
    v = json.loads((vit_suite / "validation.json").read_text())
    assert v["passed"] and len(v["checks"]) == 6, v
    assert "PyTorch" in v["engine"]
    run = subprocess.run([conformance, "run", str(vit_suite), "--quiet"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]


def test_vit_tiny_is_certified_on_the_cpu_provider(vit_suite: Path, conformance: str, tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    assert subprocess.run([conformance, "keygen", str(key)], capture_output=True).returncode == 0
    report = tmp_path / "report.json"
    run = subprocess.run([conformance, "run", str(vit_suite), "--quiet", "--report", str(report), "--sign-key", str(key)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    pub = tmp_path / "key.pub.pem"
    v = subprocess.run([conformance, "verify", str(report), "--pubkey", str(pub)], capture_output=True, text=True)
    assert v.returncode == 0 and "CERTIFIED" in v.stdout, v.stdout + v.stderr


def test_onnx_runtimes_outputs_of_the_same_model_pass_too(tmp_path: Path, conformance: str) -> None:
    model, x = models.vit_tiny()
    path = tmp_path / "vit_tiny.onnx"
    torch.onnx.export(model, x, str(path), opset_version=17, dynamo=False, input_names=["x"])
    out = tmp_path / "suite"
    r = export([str(path), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "validation.json").read_text())["passed"]


@pytest.mark.parametrize("variant,operator", [("vit_tiny_eps_1e5", "vsdk.layer_norm"), ("vit_tiny_gelu_tanh", "vsdk.gelu")])
def test_a_wrong_variant_fails(variant: str, operator: str, vit_suite: Path, conformance: str, tmp_path: Path) -> None:
    model, x = models.vit_tiny()
    g, _, _ = load_module(model, x, "vit_tiny")
    p = plan(g, cut(g))
    wrong_model, _ = getattr(models, variant)()
    _, wrong_runner, _ = load_module(wrong_model, x, variant)
    # At fp32 only: at bf16 both changes are below the tier's own rounding (eps 1e-5 against 1e-6 moves
    # a LayerNorm by about 5e-6 / var, tanh GELU by at most 5e-4 absolute), and a bf16 engine of
    # either variant is as correct as the model at that precision.
    for tier in ("fp32",):
        caps = captures(p, wrong_runner, tier)
        np.savez(tmp_path / "wrong.npz", **{k: v.astype(np.float32) for k, v in caps.items()})
        c = subprocess.run([conformance, "check", str(vit_suite), "--tensors", str(tmp_path / "wrong.npz"), "--tier", tier], capture_output=True, text=True)
        assert c.returncode == 1 and f"`{operator}@1`" in c.stdout, c.stdout[-3000:]


# Each CNN's operators: no emulation (ReLU from rms_norm, pooling from crops) may stand in for them.
CNNS = {
    "resnet18": {"vsdk.relu": 17, "vsdk.batch_norm": 20, "vsdk.max_pool2d": 1, "vsdk.adaptive_avg_pool2d": 1},
    "efficientnet_b0": {"vsdk.silu": 49, "vsdk.batch_norm": 49, "vsdk.mean": 16, "vsdk.sigmoid": 16},
    "mobilenetv3_small_100": {"vsdk.hardswish": 19, "vsdk.hardsigmoid": 9, "vsdk.mean": 9, "vsdk.relu": 14},
}


@pytest.mark.parametrize("name", sorted(CNNS))
def test_timm_cnns_export_with_their_own_operators_and_pass_at_every_tier(name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    r = export(["--torch", f"models:{name}", "-o", str(out)])
    assert r.returncode == 0, r.stdout + r.stderr
    import yaml

    doc = yaml.safe_load((out / "suite.yaml").read_text())
    ops = [n["op"] for s in doc["stages"] for n in s["graph"]]
    for op, count in CNNS[name].items():
        assert ops.count(op) == count, (op, ops.count(op))
    assert json.loads((out / "validation.json").read_text())["passed"]


def test_a_llama_block_exports_with_grouped_heads_rotary_and_a_causal_cache(tmp_path: Path) -> None:
    out = tmp_path / "llama"
    r = export(["--torch", "models:llama_block", "-o", str(out), "--stage", "layer.self_attn", "--stage", "layer.mlp"])
    assert r.returncode == 0, r.stdout + r.stderr
    import yaml

    doc = yaml.safe_load((out / "suite.yaml").read_text())
    nodes = [n for s in doc["stages"] for n in s["graph"]]
    sdpa = next(n for n in nodes if n["op"] == "vsdk.sdpa")
    # transformers' repeat_kv read back as grouped heads; its constant mask as the cache's offset.
    assert sdpa["attrs"]["causal_offset"] == 12 and len(sdpa["inputs"]) == 3, sdpa
    assert [n["op"] for n in nodes].count("vsdk.rotary_embedding") == 2
    assert json.loads((out / "validation.json").read_text())["passed"]


def test_a_vit_b_with_real_size_weights_keeps_a_small_golden_file(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "vit-b"
    r = export(["--torch", "models:vit_base", "-o", str(out), "--tiers", "fp32"])
    assert r.returncode == 0, r.stderr
    golden = (out / "suite.golden").stat().st_size
    weights = (out / "weights.safetensors").stat().st_size
    assert weights > 340_000_000 and golden < 8_000_000, (golden, weights)
    run = subprocess.run([conformance, "run", str(out), "--quiet", "--stage", "blocks.0"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:]


def test_attention_written_with_matmuls_is_one_sdpa_and_passes(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "attn"
    r = export(["--torch", "models:explicit_attention", "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    import yaml

    doc = yaml.safe_load((out / "suite.yaml").read_text())
    ops = [n["op"] for s in doc["stages"] for n in s["graph"]]
    assert ops.count("vsdk.sdpa") == 2 and "vsdk.softmax" not in ops, ops
    assert json.loads((out / "validation.json").read_text())["passed"]


def test_slices_with_steps_are_stepped_crops_and_pass(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "strided"
    r = export(["--torch", "models:strided_slices", "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    import yaml

    doc = yaml.safe_load((out / "suite.yaml").read_text())
    steps = [n["attrs"].get("steps") for s in doc["stages"] for n in s["graph"] if n["op"] == "vsdk.crop"]
    # The Focus phases (two slices each, rows then columns) and the head's channels and rows.
    assert steps.count([1, 1, 2, 1]) == 4 and steps.count([1, 1, 1, 2]) == 4, steps
    assert [1, 3, 1, 1] in steps and [1, 1, 3, 1] in steps, steps
    assert json.loads((out / "validation.json").read_text())["passed"]
    run = subprocess.run([conformance, "run", str(out), "--tier", "fp32", "--quiet"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def _llama_attention_onnx(path: Path, impl: str, dynamo: bool, padding: int) -> Path:
    """transformers' LlamaAttention through torch.onnx.export (the TorchScript exporter, opset 17, or
    the dynamo one, which needs onnxscript), `apply_rotary_pos_emb` patched out during the export."""
    from unittest import mock

    import transformers.models.llama.modeling_llama as llama

    if dynamo:
        import importlib.util

        assert importlib.util.find_spec("onnxscript"), "torch.onnx.export(dynamo=True) needs onnxscript: pip install onnxscript"
    module, args = models.llama_attention(impl, padding)
    options = {"dynamo": True} if dynamo else {"dynamo": False, "opset_version": 17}
    with torch.no_grad(), mock.patch.object(llama, "apply_rotary_pos_emb", lambda q, k, cos, sin, **kw: (q, k)):
        torch.onnx.export(module, args, str(path), input_names=["x"], output_names=["out"], **options)
    return path


@pytest.mark.parametrize("impl,dynamo,padding", [
    ("eager", False, 0), ("sdpa", False, 0), ("eager", True, 0), ("sdpa", True, 2), ("eager", False, 2),
])
def test_transformers_llama_attention_through_onnx_is_one_sdpa_with_grouped_heads(impl: str, dynamo: bool, padding: int, tmp_path: Path, conformance: str) -> None:
    """The ONNX front-end reads transformers' repeat_kv back as grouped heads and its masks (eager's
    float32-lowest one, sdpa's boolean one as torch.onnx writes it, the NaN guard after it included)
    as sdpa's; ONNX Runtime's captures pass the suite at every tier in both modes. Two left-padded
    tokens mask queries 0 and 1 whole: uniform rows with a float32-lowest mask."""
    onnx_file = _llama_attention_onnx(tmp_path / "attn.onnx", impl, dynamo, padding)
    out = tmp_path / "suite"
    r = export([str(onnx_file), "-o", str(out)])
    assert r.returncode == 0, r.stdout + r.stderr
    import yaml

    doc = yaml.safe_load((out / "suite.yaml").read_text())
    graph = [n for s in doc["stages"] for n in s["graph"]]
    ops = [n["op"] for n in graph]
    assert ops.count("vsdk.sdpa") == 1 and "vsdk.concat" not in ops and "vsdk.softmax" not in ops, ops
    sdpa = next(n for n in graph if n["op"] == "vsdk.sdpa")
    producers = {n["outputs"][0]: n for n in graph}
    for kv in sdpa["inputs"][1:3]:  # the projections' own 2 heads, no repeat
        assert producers[kv]["op"] == "vsdk.permute", producers[kv]
    if impl == "sdpa" and not dynamo and padding == 0:
        assert sdpa["attrs"].get("causal_offset") == 0 and len(sdpa["inputs"]) == 3, sdpa
    else:
        assert len(sdpa["inputs"]) == 4, sdpa
    assert json.loads((out / "validation.json").read_text())["passed"]
    run = subprocess.run([conformance, "run", str(out), "--tier", "fp32", "--quiet"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def test_transformers_sdpa_attention_masking_rows_whole_is_refused_naming_the_guard(tmp_path: Path) -> None:
    """torch.onnx's NaN guard zeroes the rows a boolean mask masks whole (two left-padded tokens);
    sdpa makes them NaN: the guard is named, nothing is written."""
    onnx_file = _llama_attention_onnx(tmp_path / "attn.onnx", "sdpa", False, 2)
    out = tmp_path / "suite"
    r = export([str(onnx_file), "-o", str(out)])
    assert r.returncode == 2 and "NaN guard" in r.stderr and "IsNaN at /attn/IsNaN" in r.stderr, r.stderr
    assert not out.exists()


def test_pads_resizes_group_norms_and_matmuls_lower_from_aten_and_pass(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "decoder"
    r = export(["--torch", "models:decoder", "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    import yaml

    doc = yaml.safe_load((out / "suite.yaml").read_text())
    nodes = [n for s in doc["stages"] for n in s["graph"]]
    attrs = lambda op: [n.get("attrs", {}) for n in nodes if n["op"] == op]
    # F.pad's (left, right, top, bottom) as every axis's start, then every end.
    assert attrs("vsdk.pad")[0] == {"pads": [0, 0, 1, 2, 0, 0, 0, 1], "mode": "reflect"}, attrs("vsdk.pad")
    assert [a["mode"] for a in attrs("vsdk.pad")] == ["reflect", "constant", "replicate", "circular"]
    assert attrs("vsdk.resize_bilinear")[0]["scale_factor"] == [0.6, 0.7]
    assert [a.get("align_corners", 0) for a in attrs("vsdk.resize_bilinear")] == [0, 1]
    assert [a.get("exact", 0) for a in attrs("vsdk.resize_nearest")] == [0, 1]
    assert len(attrs("vsdk.group_norm")) == 1 and len(attrs("vsdk.matmul")) == 2
    assert json.loads((out / "validation.json").read_text())["passed"]
    run = subprocess.run([conformance, "run", str(out), "--tier", "fp32", "--quiet"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
