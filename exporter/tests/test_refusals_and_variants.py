"""What the exporter must refuse, and wrong models its suites must fail."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import FIXTURES, sdk, vips_export
from vips_export.document import plan
from vips_export.frontends.onnx import OnnxRunner, load
from vips_export.stages import cut
from vips_export.validate import captures


def test_resnet18_without_its_weights_is_refused_naming_the_node_and_its_stage(tmp_path: Path) -> None:
    out = tmp_path / "resnet18"
    r = vips_export([str(FIXTURES / "resnet18.graph.onnx"), "-o", str(out)])
    assert r.returncode == 2, r.stdout + r.stderr
    # Its pools, ReLUs and batch norms are catalog operators now; without parameter values (the
    # fixture has none) its classifier is a product of two computed tensors.
    for op in ("MaxPool", "GlobalAveragePool", "Relu", "BatchNormalization"):
        assert op not in r.stderr, r.stderr
    assert "Gemm ×1" in r.stderr and "/fc/Gemm | stage fc" in r.stderr, r.stderr
    assert not out.exists() and not any(tmp_path.iterdir()), "something partial was written"


def _variant(src: Path, dst: Path, edit) -> Path:
    m = onnx.load(str(src))
    edit(m.graph)
    onnx.save(m, str(dst))
    return dst


def _eps_1e5(g) -> None:
    for n in g.node:
        if n.op_type == "LayerNormalization":
            for a in n.attribute:
                if a.name == "epsilon":
                    a.f = 1e-5


def _tanh_gelu(g) -> None:
    """Each exact GELU's erf(x/√2) replaced by tanh(√(2/π)(x + 0.044715x³)): the tanh approximation."""
    producers = {o: n for n in g.node for o in n.output}
    for k, e in enumerate([n for n in g.node if n.op_type == "Erf"]):
        x = producers[e.input[0]].input[0]
        c = lambda name, v: g.initializer.append(onnx.numpy_helper.from_array(np.array(v, np.float32), name))
        c(f"tg{k}_a", 0.044715)
        c(f"tg{k}_b", float(np.sqrt(2 / np.pi)))
        new = [
            helper.make_node("Mul", [x, x], [f"tg{k}_x2"]),
            helper.make_node("Mul", [f"tg{k}_x2", x], [f"tg{k}_x3"]),
            helper.make_node("Mul", [f"tg{k}_x3", f"tg{k}_a"], [f"tg{k}_ax3"]),
            helper.make_node("Add", [x, f"tg{k}_ax3"], [f"tg{k}_in"]),
            helper.make_node("Mul", [f"tg{k}_in", f"tg{k}_b"], [f"tg{k}_s"]),
            helper.make_node("Tanh", [f"tg{k}_s"], [e.output[0]]),
        ]
        i = list(g.node).index(e)
        g.node.remove(e)
        for j, n in enumerate(new):
            g.node.insert(i + j, n)


@pytest.mark.parametrize("edit,operator", [(_eps_1e5, "vsdk.layer_norm"), (_tanh_gelu, "vsdk.gelu")])
def test_a_wrong_variant_of_the_model_fails_the_suite(edit, operator: str, tmp_path: Path, conformance: str) -> None:
    model = FIXTURES / "vit.onnx"
    out = tmp_path / "vit"
    r = vips_export([str(model), "-o", str(out), "--tiers", "fp32"])
    assert r.returncode == 0, r.stderr
    wrong = _variant(model, tmp_path / "wrong.onnx", edit)
    g = load(model)
    p = plan(g, cut(g))  # the same plan the exporter made: names are deterministic
    caps = captures(p, OnnxRunner(wrong), "fp32")
    np.savez(tmp_path / "wrong.npz", **caps)
    for mode in ("chained", "isolated"):
        c = sdk(conformance, ["check", str(out), "--tensors", str(tmp_path / "wrong.npz"), "--mode", mode])
        assert c.returncode == 1, c.stdout[-3000:] + c.stderr
        assert "FAIL" in c.stdout and f"`{operator}@1`" in c.stdout, c.stdout[-3000:]
    # The right model's captures of the same run pass (the test can tell the two apart).
    good = captures(p, OnnxRunner(model), "fp32")
    np.savez(tmp_path / "good.npz", **good)
    c = sdk(conformance, ["check", str(out), "--tensors", str(tmp_path / "good.npz"), "--mode", "chained"])
    assert c.returncode == 0, c.stdout[-3000:]


@pytest.mark.parametrize(
    "node, inits, says",
    [
        (helper.make_node("Pad", ["x", "p"], ["out"], name="/crop/Pad"), {"p": np.array([0, 0, -1, 0, 0, 0, 0, 0], np.int64)}, "negative pads"),
        (helper.make_node("Resize", ["x", "", "s"], ["out"], name="/up/Resize", mode="cubic"), {"s": np.array([1, 1, 2, 2], np.float32)}, "mode `cubic`"),
        # ONNX resamples an axis whose length a scale keeps; PyTorch's kernels (the catalog) copy it.
        (helper.make_node("Resize", ["x", "", "s"], ["out"], name="/keep/Resize", mode="linear"), {"s": np.array([1, 1, 1.05, 2], np.float32)}, "keeps an axis"),
        (helper.make_node("Resize", ["x", "", "s"], ["out"], name="/onnx/Resize", mode="nearest"), {"s": np.array([1, 1, 2, 2], np.float32)}, "nearest_mode `round_prefer_floor`"),
        # ONNX Runtime's float32 `(i + ½)/(41/8) − ½` and PyTorch's `(i + ½)·(8/41)` part at output 20.
        (helper.make_node("Resize", ["x", "", "", "z"], ["out"], name="/exact/Resize", mode="nearest", coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil"), {"z": np.array([1, 2, 8, 41], np.int64)}, "not the same function"),
        (helper.make_node("Resize", ["x", "", "", "z"], ["out"], name="/one/Resize", mode="linear", coordinate_transformation_mode="pytorch_half_pixel"), {"z": np.array([1, 2, 1, 4], np.int64)}, "length of 1"),
        (helper.make_node("Pad", ["x", "p", "", "a"], ["out"], name="/short/Pad"), {"p": np.array([1, 1, 1], np.int64), "a": np.array([2, 3], np.int64)}, "no static shape"),
    ],
)
def test_pads_and_resizes_the_catalog_lacks_are_refused_naming_the_node(node, inits, says: str, tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 8, 8])
    out = helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None)
    init = [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()]
    g = helper.make_graph([node], "refused", [x], [out], init)
    path = tmp_path / "refused.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    r = vips_export([str(path), "-o", str(tmp_path / "out")])
    assert r.returncode == 2, r.stdout + r.stderr
    assert node.name in r.stderr and says in r.stderr, r.stderr
