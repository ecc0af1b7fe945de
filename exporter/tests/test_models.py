"""Five architectures of different families exported from ONNX in one command each: the suite is
written, the model passes it at fp32/fp16/bf16 in both modes, and the CPU provider passes `run`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

import numpy as np
import pytest
import yaml

from conftest import FIXTURES, MODELS, sdk, vips_export


def _validated_and_passed_by_the_cpu_provider(out: Path, conformance: str) -> None:
    """ONNX Runtime ran the model: its captures pass the suite at every tier in both modes; and
    the CPU provider passes `run` at fp32."""
    v = json.loads((out / "validation.json").read_text())
    assert v["passed"], v
    run = sdk(conformance, ["run", str(out), "--tier", "fp32", "--quiet"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def _save_onnx(path: Path, name: str, nodes, inits, x: List[int], out: List[int], opset: int = 17) -> Path:
    """A float32 model of `nodes` (opset 17 unless given), input `x` and output `out` of these
    shapes, `inits` its initializers."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    f = lambda n, shape: helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
    g = helper.make_graph(nodes, name, [f("x", x)], [f("out", out)], [numpy_helper.from_array(v, k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


@pytest.mark.parametrize("name", MODELS)
def test_a_model_exports_in_one_command_and_passes_its_own_suite(name: str, tmp_path: Path, conformance: str) -> None:
    out = tmp_path / name
    r = vips_export([str(FIXTURES / f"{name}.onnx"), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    assert len(doc["stages"]) >= 3
    # Weights by reference: the golden file holds none of them.
    weights = (out / "weights.safetensors").stat().st_size
    assert (out / "suite.golden").stat().st_size < weights, "the weights were copied into the golden file"
    v = json.loads((out / "validation.json").read_text())
    assert v["passed"], v
    assert {(c["tier"], c["mode"]) for c in v["checks"]} == {(t, m) for t in ("fp32", "fp16", "bf16") for m in ("chained", "isolated")}
    run = sdk(conformance, ["run", str(out), "--tier", "fp32", "--quiet"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def test_the_vit_document_reads_as_the_model(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "vit"
    r = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(out), "--tiers", "fp32"])
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    names = [s["stage"] for s in doc["stages"]]
    assert names == ["patch_embed", "cls_token_pos_embed", "blocks.0", "blocks.1", "norm", "head"], names
    block = doc["stages"][2]
    ops = [n["op"] for n in block["graph"]]
    # The decompositions torch.onnx wrote are fused back.
    assert ops.count("vsdk.sdpa") == 1 and ops.count("vsdk.gelu") == 1 and ops.count("vsdk.layer_norm") == 2
    assert ops.count("vsdk.linear") == 4
    assert "blocks.0.attn.qkv.weight" in block["inputs"], block["inputs"]
    ln = next(n for n in block["graph"] if n["op"] == "vsdk.layer_norm")
    assert ln["attrs"]["eps"] == pytest.approx(1e-6)
    sdpa = next(n for n in block["graph"] if n["op"] == "vsdk.sdpa")
    assert sdpa["attrs"]["scale"] == pytest.approx(16 ** -0.5, rel=1e-6)
    # Intermediates are local to their stage: both blocks name theirs alike.
    inner0 = {n["outputs"][0] for n in doc["stages"][2]["graph"]} - set(doc["stages"][2]["outputs"])
    inner1 = {n["outputs"][0] for n in doc["stages"][3]["graph"]} - set(doc["stages"][3]["outputs"])
    assert inner0 == inner1 and "attn.sdpa" in inner0
    assert doc["weights"]["file"] == "weights.safetensors" and len(doc["weights"]["sha256"]) == 64


def test_stages_cut_where_the_user_says(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "vit"
    r = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(out), "--tiers", "", "--stage", "blocks.*.attn", "--stage", "blocks.*.mlp"])
    assert r.returncode == 0, r.stderr
    names = [s["stage"] for s in yaml.safe_load((out / "suite.yaml").read_text())["stages"]]
    assert "blocks.0.attn" in names and "blocks.1.mlp" in names, names


def test_notes_are_merged_into_the_document(tmp_path: Path, conformance: str) -> None:
    notes = tmp_path / "notes.yaml"
    notes.write_text(
        'paper: "Dosovitskiy et al. 2020, arXiv:2010.11929"\n'
        "component:\n  - \"Trained at 224; exported at 32x32.\"\n"
        "stages:\n  \"blocks.*\":\n    - \"LayerNorm eps is 1e-6, not PyTorch's 1e-5.\"\n"
    )
    out = tmp_path / "vit"
    r = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(out), "--tiers", "", "--notes", str(notes), "--id", "my-vit"])
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    assert doc["component"]["id"] == "my-vit"
    assert doc["component"]["paper"].startswith("Dosovitskiy")
    assert "Trained at 224; exported at 32x32." in doc["component"]["notes"]
    blocks = [s for s in doc["stages"] if s["stage"].startswith("blocks.")]
    assert blocks and all("LayerNorm eps is 1e-6, not PyTorch's 1e-5." in s["notes"] for s in blocks)
    head = next(s for s in doc["stages"] if s["stage"] == "head")
    assert "LayerNorm eps is 1e-6, not PyTorch's 1e-5." not in head.get("notes", [])


def test_an_existing_folder_is_not_replaced_without_force(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "vit"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    r = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(out), "--tiers", ""])
    assert r.returncode == 2 and "--force" in r.stderr
    assert (out / "mine.txt").read_text() == "keep me"


def test_seeded_weights_replace_the_models_own_and_the_model_still_passes(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "vit"
    r = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(out), "--weights", "seeded", "--tiers", "fp32,bf16"])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    qkv = doc["tensors"]["blocks.0.attn.qkv.weight"]["source"]["seeded"]
    assert qkv["normal"][1] > 0, qkv
    # What stays in the weights file is what is no parameter as it is (the class token's expand).
    kept = {k for k, t in doc["tensors"].items() if isinstance(t["source"], dict) and "weights" in t["source"]}
    assert "blocks.0.attn.qkv.weight" not in kept and len(kept) <= 2, kept
    assert json.loads((out / "validation.json").read_text())["passed"]


def test_a_given_input_is_what_the_suite_runs_on(tmp_path: Path, conformance: str) -> None:
    image = np.random.default_rng().uniform(-2, 2, size=(1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    out = tmp_path / "vit"
    r = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(out), "--input", f"x={tmp_path / 'image.npy'}", "--tiers", "fp32"])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    assert doc["tensors"]["x"]["source"] == {"weights": "x"}
    exported = tmp_path / "all.safetensors"
    assert sdk(conformance, ["export", str(out), "--out", str(exported)]).returncode == 0
    from safetensors.numpy import load_file

    assert np.array_equal(load_file(str(exported))["x"], image)
    wrong = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(tmp_path / "w"), "--input", f"pixels={tmp_path / 'image.npy'}"])
    assert wrong.returncode == 2 and "pixels" in wrong.stderr and not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    "args,says",
    [
        (["--tiers", "fp8"], "unknown tier"),
        (["--notes", "NOTES"], "`stages` must map stage globs"),
        (["--input-shape", "pixels=1,3,32,32"], "names no input of the model"),
        (["--conformance", "NOT_THERE"], "vips-conformance not found"),
    ],
)
def test_bad_options_are_named_and_leave_nothing_behind(args, says: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes.yaml"
    notes.write_text("stages:\n  - blocks.*\n")
    args = [str(notes) if a == "NOTES" else str(tmp_path / "nope") if a == "NOT_THERE" else a for a in args]
    out = tmp_path / "vit"
    r = vips_export([str(FIXTURES / "vit.onnx"), "-o", str(out), *args])
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.yaml"], list(tmp_path.iterdir())


def _activations_cnn(path: Path) -> Path:
    """A small MobileNet-like ONNX graph on fresh random weights: convolution, batch norm, ReLU, a depthwise
    convolution, ReLU6 as Clip, hard swish, a hard-sigmoid gate (PyTorch's alpha 1/6), sigmoid, tanh,
    exp and sqrt, each node under its own module name."""
    from onnx import helper

    rng = np.random.default_rng()
    w = lambda *s: (rng.normal(size=s) * 0.4).astype(np.float32)
    inits = {
        "stem.weight": w(8, 3, 3, 3), "stem.bias": w(8),
        "dw.weight": w(8, 1, 3, 3), "dw.bias": w(8),
        "se.weight": w(8, 8, 1, 1), "se.bias": w(8),
        "zero": np.array(0, np.float32), "six": np.array(6, np.float32),
        "bn.weight": (1 + w(8)).astype(np.float32), "bn.bias": w(8),
        "bn.running_mean": w(8), "bn.running_var": rng.uniform(0.01, 2, 8).astype(np.float32),
    }
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "stem.weight", "stem.bias"], ["c1"], name="/stem/conv/Conv", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"], ["b1"],
          name="/stem/bn/BatchNormalization", epsilon=1e-5),
        n("Relu", ["b1"], ["r1"], name="/stem/act/Relu"),
        n("Conv", ["r1", "dw.weight", "dw.bias"], ["c2"], name="/dw/conv/Conv", pads=[1, 1, 1, 1], group=8),
        n("Clip", ["c2", "zero", "six"], ["r6"], name="/dw/act/Clip"),
        n("HardSwish", ["r6"], ["hs"], name="/dw/hs/HardSwish"),
        n("Conv", ["hs", "se.weight", "se.bias"], ["c3"], name="/se/conv/Conv"),
        n("HardSigmoid", ["c3"], ["g"], name="/se/gate/HardSigmoid", alpha=1 / 6, beta=0.5),
        n("Mul", ["hs", "g"], ["y"], name="/se/Mul"),
        n("Sigmoid", ["y"], ["s"], name="/head/sig/Sigmoid"),
        n("Tanh", ["y"], ["t"], name="/head/tanh/Tanh"),
        n("Exp", ["t"], ["e"], name="/head/exp/Exp"),
        n("Sqrt", ["e"], ["q"], name="/head/sqrt/Sqrt"),
        n("Add", ["s", "q"], ["out"], name="/head/Add"),
    ]
    return _save_onnx(path, "activations", nodes, inits, [1, 3, 16, 16], [1, 8, 16, 16])


def test_the_cnn_activations_export_without_emulation_and_pass(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "activations"
    r = vips_export([str(_activations_cnn(tmp_path / "activations.onnx")), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    ops = [node["op"] for s in doc["stages"] for node in s["graph"]]
    for op in ("vsdk.batch_norm", "vsdk.relu", "vsdk.clamp", "vsdk.hardswish", "vsdk.hardsigmoid", "vsdk.sigmoid", "vsdk.tanh", "vsdk.exp", "vsdk.sqrt"):
        assert ops.count(op) == 1, (op, ops)
    clamp = next(node for s in doc["stages"] for node in s["graph"] if node["op"] == "vsdk.clamp")
    assert clamp["attrs"] == {"min": 0.0, "max": 6.0}, clamp
    _validated_and_passed_by_the_cpu_provider(out, conformance)


def _pooling_cnn(path: Path) -> Path:
    """A small ResNet/EfficientNet-like ONNX graph on fresh random weights with every pooling and
    reduction the catalog has: a stem whose max pool (ceil_mode) and padded average pool
    (count_include_pad, ceil_mode) hang over a 17-pixel edge, squeeze-and-excitation's ReduceMean,
    a ReduceSum, a pool without padding counted, and ResNet's GlobalAveragePool head."""
    from onnx import helper

    rng = np.random.default_rng()
    w = lambda *s: (rng.normal(size=s) * 0.4).astype(np.float32)
    inits = {
        "stem.weight": w(8, 3, 3, 3), "stem.bias": w(8),
        "bn.weight": (1 + w(8)).astype(np.float32), "bn.bias": w(8),
        "bn.running_mean": w(8), "bn.running_var": rng.uniform(0.05, 2, 8).astype(np.float32),
        "se.weight": w(8, 8, 1, 1), "se.bias": w(8),
        "axes": np.array([1], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "stem.weight", "stem.bias"], ["c1"], name="/stem/conv/Conv", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"], ["b1"],
          name="/stem/bn/BatchNormalization"),
        n("Relu", ["b1"], ["r1"], name="/stem/act/Relu"),
        n("MaxPool", ["r1"], ["m"], name="/stem/pool/MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        n("AveragePool", ["m"], ["a"], name="/body/pool/AveragePool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
          ceil_mode=1, count_include_pad=1),
        n("ReduceMean", ["a"], ["s"], name="/se/mean/ReduceMean", axes=[2, 3], keepdims=1),
        n("Conv", ["s", "se.weight", "se.bias"], ["g"], name="/se/conv/Conv"),
        n("HardSigmoid", ["g"], ["gs"], name="/se/gate/HardSigmoid", alpha=1 / 6, beta=0.5),
        n("Mul", ["a", "gs"], ["y"], name="/se/Mul"),
        n("AveragePool", ["y"], ["p"], name="/tail/pool/AveragePool", kernel_shape=[2, 2], strides=[1, 1]),
        n("ReduceSum", ["p", "axes"], ["ch"], name="/tail/sum/ReduceSum", keepdims=1),
        n("Add", ["p", "ch"], ["q"], name="/tail/Add"),
        n("GlobalAveragePool", ["q"], ["out"], name="/head/pool/GlobalAveragePool"),
    ]
    return _save_onnx(path, "pooling", nodes, inits, [1, 3, 17, 17], [1, 8, 1, 1])


def test_the_pools_and_reductions_export_without_emulation_and_pass(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "pooling"
    r = vips_export([str(_pooling_cnn(tmp_path / "pooling.onnx")), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    nodes = [node for s in doc["stages"] for node in s["graph"]]
    ops = [node["op"] for node in nodes]
    for op, count in (("vsdk.max_pool2d", 1), ("vsdk.avg_pool2d", 2), ("vsdk.mean", 2), ("vsdk.sum", 1)):
        assert ops.count(op) == count, (op, ops)
    avg = [node["attrs"] for node in nodes if node["op"] == "vsdk.avg_pool2d"]
    # ONNX's count_include_pad defaults to 0, the catalog's to 1: written out either way.
    assert [a["count_include_pad"] for a in avg] == [1, 0], avg
    assert next(node["attrs"] for node in nodes if node["op"] == "vsdk.max_pool2d")["ceil_mode"] == 1
    _validated_and_passed_by_the_cpu_provider(out, conformance)


def _strided_slices(path: Path) -> Path:
    """An ONNX graph on fresh random weights whose Slices step: every 3rd row and 2nd column of a
    convolution's output (ends not reached: ⌈15/3⌉ = 5 rows, ⌈15/2⌉ = 8 columns), then every 2nd
    channel to an INT64_MAX end, as exporters write "to the end"."""
    from onnx import helper

    rng = np.random.default_rng()
    inits = {
        "conv.weight": (rng.normal(size=(8, 3, 3, 3)) * 0.4).astype(np.float32),
        "s1.starts": np.array([1, 0], np.int64), "s1.ends": np.array([16, 15], np.int64),
        "s1.axes": np.array([2, 3], np.int64), "s1.steps": np.array([3, 2], np.int64),
        "s2.starts": np.array([0], np.int64), "s2.ends": np.array([2**63 - 1], np.int64),
        "s2.axes": np.array([1], np.int64), "s2.steps": np.array([2], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
        n("Slice", ["c", "s1.starts", "s1.ends", "s1.axes", "s1.steps"], ["d"], name="/down/Slice"),
        n("Relu", ["d"], ["r"], name="/act/Relu"),
        n("Slice", ["r", "s2.starts", "s2.ends", "s2.axes", "s2.steps"], ["out"], name="/channels/Slice"),
    ]
    return _save_onnx(path, "strided", nodes, inits, [1, 3, 16, 16], [1, 4, 5, 8])


def test_slices_with_steps_export_as_stepped_crops_and_pass(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "strided"
    r = vips_export([str(_strided_slices(tmp_path / "strided.onnx")), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    crops = [node["attrs"] for s in doc["stages"] for node in s["graph"] if node["op"] == "vsdk.crop"]
    assert crops == [
        {"offsets": [0, 0, 1, 0], "sizes": [1, 8, 5, 8], "steps": [1, 1, 3, 2]},
        {"offsets": [0, 0, 0, 0], "sizes": [1, 4, 5, 8], "steps": [1, 2, 1, 1]},
    ], crops
    _validated_and_passed_by_the_cpu_provider(out, conformance)


def _masked_attention(path: Path, kind: str) -> Path:
    """Attention over 6 positions in 2 heads on fresh random projections, its additive mask a
    constant: causal (0 on and below the diagonal, −∞ above), or random and broadcast over heads."""
    from onnx import helper

    rng = np.random.default_rng()
    w = lambda *s: (rng.normal(size=s) * 0.4).astype(np.float32)
    causal = np.where(np.tril(np.ones((6, 6), bool)), 0.0, -np.inf).astype(np.float32)
    inits = {
        "q.weight": w(8, 8), "k.weight": w(8, 8), "v.weight": w(8, 4),
        "scale": np.array(8 ** -0.5, np.float32),
        "mask": causal if kind == "causal" else w(1, 1, 6, 6),
    }
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "q.weight"], ["q"], name="/attn/q/MatMul"),
        n("MatMul", ["x", "k.weight"], ["k"], name="/attn/k/MatMul"),
        n("MatMul", ["x", "v.weight"], ["v"], name="/attn/v/MatMul"),
        n("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        n("MatMul", ["q", "kt"], ["qk"], name="/attn/MatMul"),
        n("Mul", ["qk", "scale"], ["qks"], name="/attn/Mul"),
        n("Add", ["qks", "mask"], ["logits"], name="/attn/Add"),
        n("Softmax", ["logits"], ["p"], name="/attn/Softmax", axis=-1),
        n("MatMul", ["p", "v"], ["out"], name="/attn/MatMul_1"),
    ]
    return _save_onnx(path, "masked_attention", nodes, inits, [1, 2, 6, 8], [1, 2, 6, 4])


@pytest.mark.parametrize("kind", ["causal", "additive"])
def test_masked_attention_exports_as_sdpa_and_passes(kind: str, tmp_path: Path, conformance: str) -> None:
    out = tmp_path / kind
    r = vips_export([str(_masked_attention(tmp_path / f"{kind}.onnx", kind)), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    (att,) = [node for s in doc["stages"] for node in s["graph"] if node["op"] == "vsdk.sdpa"]
    if kind == "causal":
        assert att["attrs"].get("causal_offset") == 0 and len(att["inputs"]) == 3, att
    else:
        assert "causal_offset" not in att["attrs"] and len(att["inputs"]) == 4, att
    _validated_and_passed_by_the_cpu_provider(out, conformance)


def _llama_attention(path: Path, repeat: str, mask: str) -> Path:
    """Attention as Hugging Face transformers' Llama writes it and torch.onnx exports it, on fresh
    random projections: x [1, 6, 32] to 4 query heads of 8 and 2 key/value heads (4 with `repeat`
    `none`), the keys and values repeated by `repeat_kv` (`grouped`: Unsqueeze after the heads, Expand
    and Reshape to shapes computed by Shape/Gather/Concat; `interleaved`: the new axis before the heads,
    so head h reads key/value head h % 2), scores scaled by 8^-0.5 then masked, o_proj.

    Masks: `finfo_causal` transformers' additive causal mask of float32's lowest; `where_causal`
    torch.where(causal, s, finfo.min); `where_padding` the same over a causal mask with 2 left-padded
    keys, so queries 0 and 1 keep no key (uniform rows); `torch_sdpa` what torch.onnx writes for
    F.scaled_dot_product_attention with a random boolean mask: Where(mask, 0, −∞) added, and the NaN
    guard Where(IsNaN(p), 0, p) after the softmax."""
    from onnx import helper

    rng = np.random.default_rng()
    w = lambda *s: (rng.normal(size=s) * 0.3).astype(np.float32)
    kv_heads = 4 if repeat == "none" else 2
    lowest = np.finfo(np.float32).min
    causal = np.tril(np.ones((6, 6), bool))
    keep = {
        "finfo_causal": causal,
        "where_causal": causal,
        "where_padding": causal & (np.arange(6) >= 2)[None, :],
        "torch_sdpa": rng.random((6, 6)) < 0.5,
    }[mask]
    if mask == "torch_sdpa":
        keep[np.arange(6), rng.integers(0, 6, 6)] = True  # every row keeps a key (the guard changes none)
    inits = {
        "q.weight": w(32, 32), "k.weight": w(32, 8 * kv_heads), "v.weight": w(32, 8 * kv_heads), "o.weight": w(32, 32),
        "q_shape": np.array([1, 6, 4, 8], np.int64), "kv_shape": np.array([1, 6, kv_heads, 8], np.int64),
        "out_shape": np.array([1, 6, 32], np.int64), "scale": np.array(8 ** -0.5, np.float32),
        "axes": np.array([1 if repeat == "interleaved" else 2], np.int64), "n_rep": np.array([2], np.int64),
        "lead": np.array([0, 1], np.int64), "tail": np.array([2, 3], np.int64), "b": np.array([0], np.int64),
        "h": np.array([1], np.int64), "zero": np.array([0.0], np.float32), "neginf": np.array([-np.inf], np.float32),
        "lowest": np.array(lowest, np.float32), "mask": keep[None, None],
        "additive": np.where(keep, 0, lowest).astype(np.float32)[None, None],
    }
    n = helper.make_node
    nodes = [n("MatMul", ["x", "q.weight"], ["q0"], name="/attn/q_proj/MatMul"),
             n("Reshape", ["q0", "q_shape"], ["q1"], name="/attn/Reshape"),
             n("Transpose", ["q1"], ["q"], name="/attn/Transpose", perm=[0, 2, 1, 3])]
    for x in ("k", "v"):
        nodes += [n("MatMul", ["x", f"{x}.weight"], [f"{x}0"], name=f"/attn/{x}_proj/MatMul"),
                  n("Reshape", [f"{x}0", "kv_shape"], [f"{x}1"], name=f"/attn/Reshape_{x}"),
                  n("Transpose", [f"{x}1"], [x], name=f"/attn/Transpose_{x}", perm=[0, 2, 1, 3])]
        if repeat == "none":
            nodes.append(n("Identity", [x], [f"{x}r"], name=f"/attn/Identity_{x}"))
            continue
        if repeat == "grouped":
            rep = [f"{x}lead", "n_rep", f"{x}tail"]
            merged = [f"{x}b", f"{x}hn", f"{x}tail"]
        else:  # [B, n, H, L, D] reshaped to [B, n·H, L, D]
            rep = [f"{x}b", "n_rep", f"{x}h", f"{x}tail"]
            merged = [f"{x}b", f"{x}hn", f"{x}tail"]
        nodes += [
            n("Shape", [x], [f"{x}sh"], name=f"/attn/Shape_{x}"),
            n("Gather", [f"{x}sh", "lead"], [f"{x}lead"], name=f"/attn/Gather_{x}"),
            n("Gather", [f"{x}sh", "tail"], [f"{x}tail"], name=f"/attn/Gather_{x}_1"),
            n("Gather", [f"{x}sh", "b"], [f"{x}b"], name=f"/attn/Gather_{x}_2"),
            n("Gather", [f"{x}sh", "h"], [f"{x}h"], name=f"/attn/Gather_{x}_3"),
            n("Mul", [f"{x}h", "n_rep"], [f"{x}hn"], name=f"/attn/Mul_{x}"),
            n("Concat", rep, [f"{x}rep"], name=f"/attn/Concat_{x}", axis=0),
            n("Concat", merged, [f"{x}merged"], name=f"/attn/Concat_{x}_1", axis=0),
            n("Unsqueeze", [x, "axes"], [f"{x}u"], name=f"/attn/Unsqueeze_{x}"),
            n("Expand", [f"{x}u", f"{x}rep"], [f"{x}e"], name=f"/attn/Expand_{x}"),
            n("Reshape", [f"{x}e", f"{x}merged"], [f"{x}r"], name=f"/attn/Reshape_{x}_1"),
        ]
    nodes += [n("Transpose", ["kr"], ["kt"], name="/attn/Transpose_1", perm=[0, 1, 3, 2]),
              n("MatMul", ["q", "kt"], ["qk"], name="/attn/MatMul"),
              n("Mul", ["qk", "scale"], ["s"], name="/attn/Mul")]
    probs = "p"
    if mask == "finfo_causal":
        nodes.append(n("Add", ["s", "additive"], ["logits"], name="/attn/Add"))
    elif mask in ("where_causal", "where_padding"):
        nodes.append(n("Where", ["mask", "s", "lowest"], ["logits"], name="/attn/Where"))
    else:
        nodes += [n("Where", ["mask", "zero", "neginf"], ["bias"], name="/attn/Where"),
                  n("Add", ["s", "bias"], ["logits"], name="/attn/Add")]
    nodes.append(n("Softmax", ["logits"], ["p"], name="/attn/Softmax", axis=-1))
    if mask == "torch_sdpa":
        nodes += [n("IsNaN", ["p"], ["nan"], name="/attn/IsNaN"), n("Where", ["nan", "zero", "p"], ["pg"], name="/attn/Where_1")]
        probs = "pg"
    nodes += [n("MatMul", [probs, "vr"], ["a"], name="/attn/MatMul_1"),
              n("Transpose", ["a"], ["at"], name="/attn/Transpose_2", perm=[0, 2, 1, 3]),
              n("Reshape", ["at", "out_shape"], ["a2"], name="/attn/Reshape_1"),
              n("MatMul", ["a2", "o.weight"], ["out"], name="/attn/o_proj/MatMul")]
    return _save_onnx(path, "llama_attention", nodes, inits, [1, 6, 32], [1, 6, 32])


@pytest.mark.parametrize("repeat,mask", [
    ("grouped", "finfo_causal"), ("interleaved", "finfo_causal"),
    ("grouped", "where_causal"), ("none", "where_padding"), ("grouped", "torch_sdpa"),
])
def test_grouped_heads_and_boolean_masks_export_as_sdpa_and_pass(repeat: str, mask: str, tmp_path: Path, conformance: str) -> None:
    """ONNX Runtime's captures judge the lowering: grouped heads read as sdpa's (query head h over
    key/value head h // 2), an interleaving repeat as copies, boolean masks as the causal offset or an
    additive mask of their fill (rows masked whole uniform, as the Where makes them)."""
    out = tmp_path / f"{repeat}_{mask}"
    r = vips_export([str(_llama_attention(tmp_path / f"{repeat}_{mask}.onnx", repeat, mask)), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    graph = [node for s in doc["stages"] for node in s["graph"]]
    (att,) = [node for node in graph if node["op"] == "vsdk.sdpa"]
    concats = [node for node in graph if node["op"] == "vsdk.concat"]
    if repeat == "grouped":
        assert not concats, concats
        k_producer = next(node for node in graph if node["outputs"][0] == att["inputs"][1])
        assert k_producer["op"] == "vsdk.permute", k_producer  # the projection's 2 heads, not a repeat
    elif repeat == "interleaved":
        assert len(concats) == 2 and all(c["attrs"]["axis"] == 1 for c in concats), concats
    if mask == "where_causal":
        assert att["attrs"].get("causal_offset") == 0 and len(att["inputs"]) == 3, att
    elif mask != "finfo_causal":
        assert "causal_offset" not in att["attrs"] and len(att["inputs"]) == 4, att
    _validated_and_passed_by_the_cpu_provider(out, conformance)


def _decoder(path: Path) -> Path:
    """A decoder's operators in ONNX on fresh random weights: reflect, constant (-0.25), edge and wrap
    pads with uneven sides; instance norm; a nearest 2x upsample (asymmetric, floor: PyTorch's
    `nearest`) and nearest-exact (half-pixel, round_prefer_ceil); bilinear resizes with half-pixel
    centres and with aligned corners; group norm with per-channel scale (opset 21); and a MatMul of
    two activations (`c @ cᵀ` over the rows of each channel)."""
    from onnx import helper

    rng = np.random.default_rng()
    i64 = lambda v: np.array(v, np.int64)
    f32 = lambda v: np.array(v, np.float32)
    inits = {
        "conv.weight": (rng.normal(size=(8, 4, 3, 3)) * 0.3).astype(np.float32),
        "in.scale": (1 + 0.2 * rng.normal(size=8)).astype(np.float32), "in.bias": (0.2 * rng.normal(size=8)).astype(np.float32),
        "gn.scale": (1 + 0.2 * rng.normal(size=8)).astype(np.float32), "gn.bias": (0.2 * rng.normal(size=8)).astype(np.float32),
        "p1": i64([0, 0, 1, 2, 0, 0, 2, 1]), "p2": i64([0, 0, 0, 2, 0, 0, 1, 0]), "v2": f32(-0.25),
        "p3": i64([0, 0, 1, 0, 0, 0, 0, 1]), "p4": i64([0, 0, 2, 1, 0, 0, 1, 3]),
        "up": f32([1, 1, 2, 2]), "s_half": i64([1, 8, 15, 17]), "s_corner": i64([1, 8, 9, 7]), "s_exact": i64([1, 8, 5, 4]),
        "perm": i64([0, 1, 3, 2]),
    }
    n = helper.make_node
    nodes = [
        n("Pad", ["x", "p1"], ["a"], name="/pad1/Pad", mode="reflect"),  # [1, 4, 11, 11]
        n("Conv", ["a", "conv.weight"], ["c"], name="/conv/Conv"),  # [1, 8, 9, 9]
        n("InstanceNormalization", ["c", "in.scale", "in.bias"], ["i"], name="/norm1/InstanceNormalization", epsilon=1e-5),
        n("Pad", ["i", "p2", "v2"], ["b"], name="/pad2/Pad"),  # [1, 8, 10, 11]
        n("Resize", ["b", "", "up"], ["u"], name="/up/Resize", mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),  # [1, 8, 20, 22]
        n("Pad", ["u", "p3"], ["e"], name="/pad3/Pad", mode="edge"),  # [1, 8, 21, 23]
        n("Resize", ["e", "", "", "s_half"], ["h"], name="/half/Resize", mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),  # [1, 8, 15, 17]
        n("Pad", ["h", "p4"], ["w"], name="/pad4/Pad", mode="wrap"),  # [1, 8, 18, 21]
        n("GroupNormalization", ["w", "gn.scale", "gn.bias"], ["g"], name="/norm2/GroupNormalization", num_groups=4, epsilon=1e-5),
        n("Resize", ["g", "", "", "s_corner"], ["k"], name="/corner/Resize", mode="linear", coordinate_transformation_mode="align_corners"),
        n("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        n("MatMul", ["k", "kt"], ["m"], name="/attn/MatMul"),  # [1, 8, 9, 9]
        n("Resize", ["m", "", "", "s_exact"], ["out"], name="/exact/Resize", mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil"),
    ]
    return _save_onnx(path, "decoder", nodes, inits, [1, 4, 8, 8], [1, 8, 5, 4], opset=21)


def test_pads_resizes_group_norms_and_matmuls_export_and_pass(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "decoder"
    r = vips_export([str(_decoder(tmp_path / "decoder.onnx")), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    nodes = [node for s in doc["stages"] for node in s["graph"]]
    attrs = lambda op: [node.get("attrs", {}) for node in nodes if node["op"] == op]
    assert [a["mode"] for a in attrs("vsdk.pad")] == ["reflect", "constant", "replicate", "circular"]
    # ONNX's order (starts, then ends) is the catalog's.
    assert attrs("vsdk.pad")[0]["pads"] == [0, 0, 1, 2, 0, 0, 2, 1]
    assert attrs("vsdk.pad")[1]["value"] == -0.25
    assert [a.get("align_corners", 0) for a in attrs("vsdk.resize_bilinear")] == [0, 1]
    assert [a.get("exact", 0) for a in attrs("vsdk.resize_nearest")] == [0, 1]
    assert attrs("vsdk.resize_nearest")[0]["scale_factor"] == [2.0, 2.0]
    assert [a["groups"] for a in attrs("vsdk.group_norm")] == [8, 4]
    assert len(attrs("vsdk.matmul")) == 1
    _validated_and_passed_by_the_cpu_provider(out, conformance)


def _rmsnorm_rotate_half(path: Path) -> Path:
    """Llama's RMSNorm and rotate_half as ONNX writes them, unfused: `x · Reciprocal(Sqrt(ReduceMean(
    Pow(x, 2)) + eps)) · w`, then `x·cos + cat(−x₂, x₁)·sin` with `Neg`, and `Pow(·, −0.5)`."""
    from onnx import helper

    rng = np.random.default_rng()
    f32 = lambda v: np.array(v, np.float32)
    pos = np.arange(6)[:, None] * (10000.0 ** (-np.arange(4) / 4))[None, :]
    ang = np.concatenate([pos, pos], axis=1)
    inits = {
        "two": f32(2.0), "eps": f32(1e-6), "half": f32(-0.5),
        "w": (1 + 0.1 * rng.normal(size=8)).astype(np.float32),
        "cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32),
        "s0": np.array([0], np.int64), "s4": np.array([4], np.int64), "s8": np.array([8], np.int64), "ax": np.array([-1], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("Pow", ["x", "two"], ["sq"], name="/norm/Pow"),
        n("ReduceMean", ["sq"], ["ms"], name="/norm/ReduceMean", axes=[-1], keepdims=1),
        n("Add", ["ms", "eps"], ["mse"], name="/norm/Add"),
        n("Sqrt", ["mse"], ["rt"], name="/norm/Sqrt"),
        n("Reciprocal", ["rt"], ["inv"], name="/norm/Reciprocal"),
        n("Mul", ["x", "inv"], ["xn"], name="/norm/Mul"),
        n("Mul", ["xn", "w"], ["y"], name="/norm/Mul_1"),
        n("Slice", ["y", "s0", "s4", "ax"], ["y1"], name="/rope/Slice"),
        n("Slice", ["y", "s4", "s8", "ax"], ["y2"], name="/rope/Slice_1"),
        n("Neg", ["y2"], ["ny2"], name="/rope/Neg"),
        n("Concat", ["ny2", "y1"], ["rot"], name="/rope/Concat", axis=-1),
        n("Mul", ["y", "cos"], ["yc"], name="/rope/Mul"),
        n("Mul", ["rot", "sin"], ["rs"], name="/rope/Mul_1"),
        n("Add", ["yc", "rs"], ["r"], name="/rope/Add"),
        n("Mul", ["r", "r"], ["r2"], name="/tail/Mul"),
        n("Add", ["r2", "eps"], ["r2e"], name="/tail/Add"),
        n("Pow", ["r2e", "half"], ["out"], name="/tail/Pow"),
    ]
    return _save_onnx(path, "rmsnorm_rope", nodes, inits, [2, 6, 8], [2, 6, 8])


def test_rmsnorm_and_rotate_half_unfused_export_and_pass(tmp_path: Path, conformance: str) -> None:
    out = tmp_path / "rmsnorm"
    r = vips_export([str(_rmsnorm_rotate_half(tmp_path / "rmsnorm.onnx")), "-o", str(out)])
    assert r.returncode == 0, r.stderr + r.stdout
    doc = yaml.safe_load((out / "suite.yaml").read_text())
    ops = [node["op"] for s in doc["stages"] for node in s["graph"]]
    for op in ("vsdk.sqrt", "vsdk.div", "vsdk.rsqrt", "vsdk.mean"):
        assert op in ops, ops
    _validated_and_passed_by_the_cpu_provider(out, conformance)
