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


def _grouped_attention(tmp_path: Path, form: str) -> Path:
    """softmax(0.25 · q kᵀ) v with 4 query heads over keys and values of 2, repeated as transformers'
    repeat_kv exports: `Unsqueeze` after the heads, `Expand`, `Reshape`. `torchscript`: the shapes
    computed by Shape/Gather/Concat (folded), kᵀ a Transpose; `dynamo`: the keys' Reshape merged into
    a `[N, L, D]` one, kᵀ as Reshape/Transpose/Reshape, √scale on q and kᵀ; `interleaved`: the new axis
    before the heads (head h reads key head h % 2: not grouped heads); `dynamo_interleaved` both."""
    n = helper.make_node
    axis = 1 if form.endswith("interleaved") else 2
    dynamo = form.startswith("dynamo")
    c = {"axes": np.array([axis], np.int64), "two": np.array([2], np.int64), "s": np.array(0.25, np.float32)}
    nodes = []
    dim = {"k": 8, "v": 3}
    for x in ("k", "v"):
        nodes.append(n("Unsqueeze", [x, "axes"], [f"{x}u"], name=f"/attn/Unsqueeze_{x}"))
        if form == "torchscript":
            c[f"lead_{x}"], c[f"tail_{x}"] = np.array([0, 1], np.int64), np.array([2, 3], np.int64)
            nodes += [
                n("Shape", [x], [f"{x}sh"], name=f"/attn/Shape_{x}"),
                n("Gather", [f"{x}sh", f"lead_{x}"], [f"{x}lead"], name=f"/attn/Gather_{x}"),
                n("Gather", [f"{x}sh", f"tail_{x}"], [f"{x}tail"], name=f"/attn/Gather_{x}_1"),
                n("Concat", [f"{x}lead", "two", f"{x}tail"], [f"{x}rep"], name=f"/attn/Concat_{x}", axis=0),
            ]
        else:
            c[f"{x}rep"] = np.array([1, 2, 2, 6, dim[x]], np.int64)
        nodes.append(n("Expand", [f"{x}u", f"{x}rep"], [f"{x}e"], name=f"/attn/Expand_{x}"))
        flat = dynamo and x == "k"
        c[f"{x}shape"] = np.array([4, 6, 8] if flat else [1, 4, 6, dim[x]], np.int64)
        nodes.append(n("Reshape", [f"{x}e", f"{x}shape"], [f"{x}r"], name=f"/attn/Reshape_{x}"))
    if dynamo:
        c["kt_shape"], c["rs"] = np.array([1, 4, 8, 6], np.int64), np.array(0.5, np.float32)
        nodes += [
            n("Transpose", ["kr"], ["kt3"], name="/attn/Transpose", perm=[0, 2, 1]),
            n("Reshape", ["kt3", "kt_shape"], ["kt"], name="/attn/Reshape_kt"),
            n("Mul", ["q", "rs"], ["qs"], name="/attn/Mul"),
            n("Mul", ["kt", "rs"], ["kts"], name="/attn/Mul_1"),
            n("MatMul", ["qs", "kts"], ["logits"], name="/attn/MatMul"),
        ]
    else:
        nodes += [
            n("Transpose", ["kr"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
            n("MatMul", ["q", "kt"], ["qk"], name="/attn/MatMul"),
            n("Mul", ["qk", "s"], ["logits"], name="/attn/Mul"),
        ]
    nodes += [n("Softmax", ["logits"], ["p"], name="/attn/Softmax", axis=-1), n("MatMul", ["p", "vr"], ["y"], name="/attn/MatMul_1")]
    ins = [_f("q", [1, 4, 5, 8]), _f("k", [1, 2, 6, 8]), _f("v", [1, 2, 6, 3])]
    return _model(nodes, ins, [_f("y", [1, 4, 5, 3])], c, tmp_path / f"{form}.onnx")


@pytest.mark.parametrize("form", ["torchscript", "dynamo"])
def test_repeat_kv_in_front_of_attention_becomes_grouped_heads(form: str, tmp_path: Path) -> None:
    g = load(_grouped_attention(tmp_path, form))
    (att,) = g.nodes  # the repeats, their computed shapes and the transposes all fused away
    assert att.op == "vsdk.sdpa" and att.inputs == ["q", "k", "v"], att
    assert att.attrs["scale"] == pytest.approx(0.25)


def test_a_repeat_that_interleaves_heads_lowers_as_copies(tmp_path: Path) -> None:
    """The new axis before the heads: head h reads key head h % 2, which sdpa's grouped heads are not."""
    g = load(_grouped_attention(tmp_path, "interleaved"))
    assert not g.unsupported, g.unsupported
    ops = [n.op for n in g.nodes]
    assert ops.count("vsdk.concat") == 2 and ops.count("vsdk.sdpa") == 1, ops
    att = g.nodes[-1]
    assert [g.specs[i].shape for i in att.inputs] == [(1, 4, 5, 8), (1, 4, 6, 8), (1, 4, 6, 3)]
    concat = next(n for n in g.nodes if n.op == "vsdk.concat")
    assert concat.attrs == {"axis": 1} and len(concat.inputs) == 2
    # The dynamo exporter merges that repeat's reshape into kᵀ's: not sdpa's grouped heads, so not fused;
    # its products of two activations lower as batched matmuls around the softmax.
    g = load(_grouped_attention(tmp_path, "dynamo_interleaved"))
    assert not g.unsupported, g.unsupported
    ops = [n.op for n in g.nodes]
    assert "vsdk.sdpa" not in ops and ops.count("vsdk.matmul") == 2 and "vsdk.softmax" in ops, ops


_F32_MIN = float(np.finfo(np.float32).min)


def _bool_masked_attention(tmp_path: Path, keep: np.ndarray, form: str, fill: float = -math.inf) -> Path:
    """softmax(0.25 · q kᵀ masked by boolean `keep`) v. `where`: torch.where(keep, s, fill);
    `masked_fill`: s.masked_fill(~keep, fill); `torch_sdpa`: what torch.onnx writes for
    F.scaled_dot_product_attention with a boolean mask (Where(keep, 0, −∞) added, and the NaN guard
    Where(IsNaN(p), 0, p) after the softmax); `computed`: the mask `m < 0` of an input `m`."""
    n = helper.make_node
    c = {"s": np.array(0.25, np.float32), "fill": np.array(fill, np.float32), "zero": np.array([0.0], np.float32)}
    c["keep"] = keep if form != "masked_fill" else ~keep
    nodes = [
        n("Transpose", ["k"], ["kt"], name="/attn/Transpose", perm=[0, 1, 3, 2]),
        n("MatMul", ["q", "kt"], ["qk"], name="/attn/MatMul"),
        n("Mul", ["qk", "s"], ["qks"], name="/attn/Mul"),
    ]
    ins = [_f("q", [1, 2, 4, 8]), _f("k", [1, 2, 6, 8]), _f("v", [1, 2, 6, 3])]
    if form == "computed":
        del c["keep"]
        ins.append(_f("m", [4, 6]))
        nodes.append(n("Less", ["m", "zero"], ["keep"], name="/mask/Less"))
    if form in ("where", "computed"):
        nodes.append(n("Where", ["keep", "qks", "fill"], ["logits"], name="/attn/Where"))
    elif form == "masked_fill":
        nodes.append(n("Where", ["keep", "fill", "qks"], ["logits"], name="/attn/Where"))
    else:
        c["neginf"] = np.array([-np.inf], np.float32)
        nodes += [
            n("Where", ["keep", "zero", "neginf"], ["additive"], name="/attn/Where"),
            n("Add", ["qks", "additive"], ["logits"], name="/attn/Add"),
        ]
    nodes.append(n("Softmax", ["logits"], ["p"], name="/attn/Softmax", axis=-1))
    probs = "p"
    if form == "torch_sdpa":
        nodes += [n("IsNaN", ["p"], ["nan"], name="/attn/IsNaN"), n("Where", ["nan", "zero", "p"], ["pg"], name="/attn/Where_1")]
        probs = "pg"
    nodes.append(n("MatMul", [probs, "v"], ["y"], name="/attn/MatMul_1"))
    return _model(nodes, ins, [_f("y", [1, 2, 4, 3])], c, tmp_path / f"{form}.onnx")


@pytest.mark.parametrize("form,fill", [("where", -math.inf), ("where", _F32_MIN), ("masked_fill", -math.inf), ("masked_fill", -1e9), ("torch_sdpa", -math.inf)])
def test_a_boolean_causal_mask_becomes_the_causal_offset(form: str, fill: float, tmp_path: Path) -> None:
    """Every row of a causal mask keeps a key: a fill at or below a float's lowest masks as −∞ does."""
    keep = np.tril(np.ones((4, 6), bool), 2)  # 4 queries after 2 cached keys
    g = load(_bool_masked_attention(tmp_path, keep[None, None], form, fill))
    (att,) = g.nodes
    assert att.op == "vsdk.sdpa" and att.inputs == ["q", "k", "v"], att
    assert att.attrs["causal_offset"] == 2 and att.attrs["scale"] == pytest.approx(0.25)


@pytest.mark.parametrize("form,fill,whole_row", [
    ("where", -math.inf, False), ("masked_fill", _F32_MIN, False), ("where", -1e9, False),
    # A row that keeps no key: uniform with float32's lowest (scores + fill round to fill), NaN with −∞.
    ("where", _F32_MIN, True), ("masked_fill", -math.inf, True), ("torch_sdpa", -math.inf, False),
])
def test_another_boolean_mask_is_the_additive_mask_of_its_fill(form: str, fill: float, whole_row: bool, tmp_path: Path) -> None:
    keep = rng.random((4, 6)) < 0.5
    keep[np.arange(4), rng.integers(0, 6, 4)] = True
    keep[1, :] = not whole_row and keep[1, :]
    keep[0, 0] = False
    g = load(_bool_masked_attention(tmp_path, keep, form, fill))
    (att,) = g.nodes
    assert att.op == "vsdk.sdpa" and "causal_offset" not in att.attrs and len(att.inputs) == 4, att
    mask = g.consts[att.inputs[3]]
    assert mask.dtype == np.float32 and np.array_equal(mask, np.where(keep, 0, np.float32(fill)).astype(np.float32)), mask


@pytest.mark.parametrize("case,node,says", [
    ("soft_fill", "/attn/Where", "not a mask value"),
    ("whole_row_finite", "/attn/Where", "keeps no key"),
    ("computed", "/attn/Where", "computed by the model"),
    ("guarded_whole_row", "/attn/Where_1", "NaN guard"),
])
def test_a_boolean_mask_sdpa_cannot_take_exactly_is_refused_naming_the_node(case: str, node: str, says: str, tmp_path: Path) -> None:
    keep = np.tril(np.ones((4, 6), bool), 1)
    keep[2, 4] = True  # not causal
    if case in ("whole_row_finite", "guarded_whole_row"):
        keep[1, :] = False
    form = {"guarded_whole_row": "torch_sdpa", "computed": "computed"}.get(case, "where")
    fill = {"soft_fill": -100.0, "whole_row_finite": -1e9}.get(case, -math.inf)
    with pytest.raises(UnsupportedOperators) as e:
        refuse_unsupported(load(_bool_masked_attention(tmp_path, keep, form, fill)), [])
    line = next((l for l in str(e.value).splitlines() if f" at {node} " in l or f" at {node}:" in l), None)
    assert line is not None and says in line, str(e.value)


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
