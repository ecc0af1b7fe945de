"""The core without the SDK: seeded tensors, fusions, lowering, refusals, lazy imports."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import List

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from vips_export import seeded
from vips_export.errors import ExportError, UnsupportedOperators
from vips_export.export import refuse_unsupported
from vips_export.frontends.onnx import load
from vips_export.lazy import need

REPO = Path(__file__).resolve().parents[2]
rng = np.random.default_rng()


def _reference():
    spec = importlib.util.spec_from_file_location("seeded_reference", REPO / "tools" / "seeded_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("kind", ["normal", "uniform"])
def test_seeded_tensors_are_the_sdks_bit_for_bit(kind: str) -> None:
    ref = _reference()
    for _ in range(3):
        seed = int(rng.integers(0, 2**62))
        shape = [int(rng.integers(1, 5)), int(rng.integers(1, 9))]
        a, b = float(rng.normal()), float(rng.uniform(0.1, 3))
        mine = seeded.normal(seed, shape, a, b) if kind == "normal" else seeded.uniform(seed, shape, a, a + b)
        params = [a, b] if kind == "normal" else [a, a + b]
        theirs = ref.generate({"dtype": "float32", "shape": shape, "seed": seed, "distribution": {kind: params}})
        assert mine.astype("<f4").tobytes().hex() == theirs["hex"]


def _model(nodes, inputs, outputs, inits, path: Path) -> Path:
    g = helper.make_graph(nodes, "t", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _f(name: str, shape: List[int]):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _ops(path: Path) -> List[str]:
    return [n.op for n in load(path).nodes]


@pytest.mark.parametrize("order", ["x_then_half", "half_then_x", "half_x_first"])
def test_exact_gelu_is_fused_in_any_order_of_its_products(order: str, tmp_path: Path) -> None:
    c = {"sqrt2": np.array(math.sqrt(2), np.float32), "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["d"], name="/act/Div"),
        helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="/act/Add"),
    ]
    if order == "x_then_half":
        nodes += [helper.make_node("Mul", ["x", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    elif order == "half_then_x":
        nodes += [helper.make_node("Mul", ["a", "half"], ["m"]), helper.make_node("Mul", ["x", "m"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "a"], ["y"])]
    p = _model(nodes, [_f("x", [2, 8])], [_f("y", [2, 8])], c, tmp_path / "g.onnx")
    assert _ops(p) == ["vsdk.gelu"]


def test_a_near_gelu_is_not_fused(tmp_path: Path) -> None:
    c = {"k": np.array(1.5, np.float32), "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}
    nodes = [
        helper.make_node("Div", ["x", "k"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    p = _model(nodes, [_f("x", [2, 8])], [_f("y", [2, 8])], c, tmp_path / "g.onnx")
    g = load(p)
    assert [u.op for u in g.unsupported] == ["Erf"]


def test_attention_and_linear_are_fused_with_their_scale_and_transposed_weight(tmp_path: Path) -> None:
    w = rng.normal(size=(8, 6)).astype(np.float32)  # MatMul's [K, N]
    b = rng.normal(size=(6,)).astype(np.float32)
    s = np.array(0.5, np.float32)
    c = {"w": w, "b": b, "sq": s, "sk": s}
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="/proj/MatMul"),
        helper.make_node("Add", ["xw", "b"], ["q"], name="/proj/Add"),
        helper.make_node("Mul", ["q", "sq"], ["qs"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("Mul", ["kt", "sk"], ["kts"]),
        helper.make_node("MatMul", ["qs", "kts"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    p = _model(nodes, [_f("x", [2, 5, 8]), _f("k", [2, 7, 6]), _f("v", [2, 7, 3])], [_f("y", [2, 5, 3])], c, tmp_path / "a.onnx")
    g = load(p)
    assert [n.op for n in g.nodes] == ["vsdk.linear", "vsdk.sdpa"]
    lin, att = g.nodes
    assert np.array_equal(g.consts[lin.inputs[1]], w.T), "nn.Linear's [out, in] layout"
    assert lin.inputs[1] == "proj.weight"
    assert att.attrs["scale"] == pytest.approx(0.25)


def _masked_attention(tmp_path: Path, mask: np.ndarray, scale_first: bool = True) -> Path:
    """softmax(0.25 · q kᵀ + mask) v as torch.onnx writes it (or the scale after the mask)."""
    c = {"s": np.array(0.25, np.float32), "mask": mask}
    scaled = [helper.make_node("Mul", ["qk", "s"], ["qks"]), helper.make_node("Add", ["qks", "mask"], ["logits"])]
    if not scale_first:
        scaled = [helper.make_node("Add", ["qk", "mask"], ["qkm"]), helper.make_node("Mul", ["qkm", "s"], ["logits"])]
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        *scaled,
        helper.make_node("Softmax", ["logits"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    ins = [_f("q", [1, 2, 4, 8]), _f("k", [1, 2, 6, 8]), _f("v", [1, 2, 6, 3])]
    return _model(nodes, ins, [_f("y", [1, 2, 4, 3])], c, tmp_path / "m.onnx")


def test_a_constant_causal_mask_becomes_the_causal_offset(tmp_path: Path) -> None:
    past = 2  # 4 queries after 2 cached keys: query i sees keys 0..i+2
    mask = np.where(np.tril(np.ones((4, 6), bool), past), 0.0, -np.inf).astype(np.float32)
    (att,) = load(_masked_attention(tmp_path, mask)).nodes
    assert att.op == "vsdk.sdpa" and len(att.inputs) == 3
    assert att.attrs["causal_offset"] == past and att.attrs["scale"] == pytest.approx(0.25)


@pytest.mark.parametrize("kind", ["random", "finite_causal", "shifted_causal"])
def test_any_other_additive_mask_is_sdpas_fourth_input(kind: str, tmp_path: Path) -> None:
    keep = np.tril(np.ones((4, 6), bool), 2 if kind != "shifted_causal" else 1)
    mask = {
        "random": rng.normal(size=(4, 6)),
        # transformers' finfo.min is not −∞: a row it masks whole is uniform, not NaN.
        "finite_causal": np.where(keep, 0.0, np.finfo(np.float32).min),
        "shifted_causal": np.where(keep, 0.0, -np.inf),
    }[kind].astype(np.float32)
    (att,) = load(_masked_attention(tmp_path, mask)).nodes
    assert att.op == "vsdk.sdpa" and "causal_offset" not in att.attrs
    assert att.inputs[3] == "mask"


def test_a_scale_after_the_mask_is_not_sdpa(tmp_path: Path) -> None:
    mask = rng.normal(size=(4, 6)).astype(np.float32)
    assert "vsdk.sdpa" not in _ops(_masked_attention(tmp_path, mask, scale_first=False))


def test_every_unsupported_operator_is_listed_and_nothing_else_happens(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Floor", ["x"], ["r"], name="/stem/act/Floor"),
        helper.make_node("Erf", ["r"], ["t"], name="/head/Erf"),
        helper.make_node("ReduceMax", ["t"], ["y"], axes=[1], keepdims=0, name="/pool/ReduceMax"),
    ]
    p = _model(nodes, [_f("x", [2, 8])], [_f("y", [2])], {}, tmp_path / "u.onnx")
    with pytest.raises(UnsupportedOperators) as e:
        refuse_unsupported(load(p), [])
    text = str(e.value)
    for where in ("/stem/act/Floor", "/head/Erf", "/pool/ReduceMax"):
        assert where in text
    assert "stage stem" in text and "stage pool" in text


def test_activations_lower_to_their_operators_and_lookalikes_are_refused(tmp_path: Path) -> None:
    c = {"lo": np.array(-1.5, np.float32), "hi": np.array(6, np.float32)}
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="/a/Relu"),
        helper.make_node("Clip", ["a", "", "hi"], ["b"], name="/b/Clip"),
        helper.make_node("Clip", ["b", "lo"], ["d"], name="/d/Clip"),
        helper.make_node("HardSigmoid", ["d"], ["e"], name="/e/HardSigmoid", alpha=1 / 6, beta=0.5),
        helper.make_node("Sigmoid", ["e"], ["y"], name="/y/Sigmoid"),
    ]
    g = load(_model(nodes, [_f("x", [2, 8])], [_f("y", [2, 8])], c, tmp_path / "a.onnx"))
    assert [(n.op, n.attrs) for n in g.nodes] == [
        ("vsdk.relu", {}),
        ("vsdk.clamp", {"max": 6.0}),
        ("vsdk.clamp", {"min": -1.5}),
        ("vsdk.hardsigmoid", {}),
        ("vsdk.sigmoid", {}),
    ]
    # ONNX's default HardSigmoid is Keras's (alpha 0.2); a bound computed by the graph is no number.
    nodes = [
        helper.make_node("HardSigmoid", ["x"], ["h"], name="/keras/HardSigmoid"),
        helper.make_node("Relu", ["x"], ["m"], name="/m/Relu"),
        helper.make_node("Clip", ["h", "", "m"], ["y"], name="/clip/Clip"),
    ]
    p = _model(nodes, [_f("x", [2, 8])], [_f("y", [2, 8])], {}, tmp_path / "k.onnx")
    with pytest.raises(UnsupportedOperators) as e:
        refuse_unsupported(load(p), [])
    text = str(e.value)
    assert "/keras/HardSigmoid" in text and "alpha 0.2" in text, text
    assert "/clip/Clip" in text and "not a constant" in text, text


def test_a_missing_framework_is_named() -> None:
    with pytest.raises(ExportError, match="no_such_framework_xyz"):
        need("no_such_framework_xyz")


def test_a_corrupt_model_file_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(rng.integers(0, 256, 200, dtype=np.uint8).tobytes())
    with pytest.raises(ExportError, match="bad.onnx"):
        load(bad)
