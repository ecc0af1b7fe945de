"""ONNX -> the core graph.

Three passes: constants and shapes folded first (onnx's shape inference; every node whose inputs are
all constant evaluated by onnx's own reference evaluator, never by a hand-written one), then the usual
decompositions fused back (exact GELU from Erf, attention from MatMul/Softmax/MatMul with its masks,
additive or boolean, and transformers' repeat_kv as grouped heads, linear from MatMul + Add or Gemm,
SiLU from Sigmoid and Mul), then each remaining node lowered to catalog operators. What has no
lowering is collected, every use, and reported at once, with why where a fusion was close.

Module paths come from node names as torch.onnx writes them (`/blocks.0/attn/qkv/MatMul`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...errors import ExportError, Unsupported
from ...graph import Graph, Node, Spec, c_order, dtype_name, slice_count
from ...lazy import need

# ONNX TensorProto element types -> document dtypes.
_ELEM = {1: "float32", 2: "uint8", 6: "int32", 7: "int64", 10: "float16", 11: "float64", 16: "bfloat16"}


@dataclass
class ONode:
    """A mutable ONNX node (op_type may be a fused `vsdk.*` kernel)."""

    op: str
    name: str
    inputs: List[str]
    outputs: List[str]
    attrs: Dict[str, Any] = field(default_factory=dict)
    origin: List[str] = field(default_factory=list)


def module_of(node_name: str) -> str:
    """`/blocks.0/attn/qkv/MatMul` -> `blocks.0.attn.qkv`; `/Concat` -> ``. torch.onnx names the
    children of a Sequential in full (`/blocks/blocks.0/...`): the repeated prefix is dropped."""
    parts: List[str] = []
    for p in [p for p in node_name.split("/") if p][:-1]:
        if parts and p.startswith(parts[-1] + "."):
            parts[-1] = p
        else:
            parts.append(p)
    return ".".join(parts)


def _attrs(onnx, node) -> Dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class _Folder:
    """Constants and static shapes of a model; evaluates constant nodes with onnx.reference."""

    def __init__(self, onnx, model):
        self.onnx = onnx
        self.model = model
        self.opsets = list(model.opset_import)
        self.const: Dict[str, np.ndarray] = {}
        self.computed: Dict[str, str] = {}  # a folded value -> the node that computed it
        self.roots: Dict[str, set] = {}  # a value -> the named initializers it derives from

    def evaluate(self, node) -> List[np.ndarray]:
        onnx = self.onnx
        from onnx.reference import ReferenceEvaluator

        inputs = [i for i in node.input if i]
        graph = onnx.helper.make_graph(
            [node],
            "fold",
            [onnx.helper.make_tensor_value_info(i, onnx.TensorProto.UNDEFINED, None) for i in inputs],
            [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output],
        )
        m = onnx.helper.make_model(graph, opset_imports=self.opsets)
        return ReferenceEvaluator(m).run(None, {i: self.const[i] for i in inputs})


def _static_shapes(onnx, model, input_shapes: Dict[str, Sequence[int]]) -> Any:
    """The model with fixed input shapes and inferred value shapes."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    unknown = set(input_shapes) - {i.name for i in g.input if i.name not in inits}
    if unknown:
        raise ExportError(f"--input-shape names no input of the model: {sorted(unknown)}")
    for inp in g.input:
        if inp.name in inits:
            continue
        dims = inp.type.tensor_type.shape.dim
        if inp.name in input_shapes:
            want = list(input_shapes[inp.name])
            if any(d < 1 for d in want):
                raise ExportError(f"--input-shape {inp.name}: every size must be at least 1, got {want}")
            if len(want) != len(dims):
                raise ExportError(f"--input-shape {inp.name}: rank {len(want)}, the model's input has rank {len(dims)}")
        else:
            want = []
            for d in dims:
                if d.HasField("dim_value") and d.dim_value > 0:
                    want.append(d.dim_value)
                elif d.dim_param.lower() in ("batch", "batch_size", "n", "b") or not d.dim_param:
                    want.append(1)
                else:
                    raise ExportError(
                        f"input `{inp.name}` has a symbolic dimension `{d.dim_param}`: "
                        f"give its size with --input-shape {inp.name}=D0,D1,..."
                    )
        for d, v in zip(dims, want):
            d.ClearField("dim_param")
            d.dim_value = int(v)
    infer = lambda m: onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
    inferred = infer(model)
    # onnx's inference leaves some function-defined normalisations untyped (GroupNormalization-21):
    # their output has their input's type, and inference resumes from there.
    for _ in range(len(g.node)):
        gi = inferred.graph
        typed = {v.name: v for v in [*gi.value_info, *gi.input, *gi.output] if v.type.tensor_type.HasField("shape")}
        missing = [n for n in gi.node if n.op_type in _SAME_SHAPE and n.output and n.output[0] not in typed and n.input and n.input[0] in typed]
        if not missing:
            break
        for n in missing:
            vi = gi.value_info.add()
            vi.CopyFrom(typed[n.input[0]])
            vi.name = n.output[0]
        inferred = infer(inferred)
    return inferred


def _value_specs(model) -> Dict[str, Spec]:
    specs = {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if not t.HasField("shape") or t.elem_type not in _ELEM:
            continue
        dims = []
        for d in t.shape.dim:
            if not d.HasField("dim_value"):
                dims = None
                break
            dims.append(int(d.dim_value))
        if dims is not None:
            specs[vi.name] = Spec(tuple(dims), _ELEM[t.elem_type])
    return specs


def load(path: Union[str, Path], input_shapes: Optional[Dict[str, Sequence[int]]] = None) -> Graph:
    onnx = need("onnx")
    numpy_helper = onnx.numpy_helper
    path = Path(path)
    try:
        model = onnx.load(str(path))
    except Exception as e:  # onnx raises several kinds for a bad file
        raise ExportError(f"{path}: not a readable ONNX model ({e})") from e
    model = _static_shapes(onnx, model, input_shapes or {})
    g = model.graph
    folder = _Folder(onnx, model)
    const = folder.const
    for init in g.initializer:
        const[init.name] = c_order(numpy_helper.to_array(init))
    inits = set(const)
    specs = _value_specs(model)
    inputs = {}
    for i in g.input:
        if i.name in inits:
            continue
        if i.name not in specs:
            elem = i.type.tensor_type.elem_type
            raise ExportError(f"{path}: input `{i.name}` has element type {onnx.TensorProto.DataType.Name(elem)}, which the catalog has no tensors of")
        inputs[i.name] = specs[i.name]
    clean_names = {n: n for n in inits if not n.startswith(("onnx::", "/"))}
    folder.roots.update({n: {n} for n in clean_names})
    outputs = [o.name for o in g.output]

    # 1. Fold constants and shapes, then infer shapes again with what was folded, until nothing changes
    # (a Shape -> Concat -> Expand chain is known only once its Shape is folded).
    nodes = list(g.node)
    for _ in range(8):
        live = _fold(onnx, folder, nodes, specs, clean_names)
        if len(live) == len(nodes):
            break
        nodes = live
        specs.update(_value_specs(_reinfer(onnx, model, live, const, inputs, outputs)))
    live_nodes = [ONode(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}", n.name, list(n.input), list(n.output), _attrs(onnx, n)) for n in nodes]
    for name, v in const.items():
        if v.dtype != object and str(v.dtype) != "bool":
            specs.setdefault(name, Spec(tuple(int(d) for d in v.shape), dtype_name(v)))

    fg = _Fusion(live_nodes, const, specs)
    fg.fuse()
    graph = Graph(
        name=path.stem,
        framework="onnx",
        inputs=inputs,
        outputs=outputs,
        consts={},
        specs={},
        nodes=[],
    )
    _Lowering(graph, fg, const, specs, clean_names, inits, folder.computed).run()
    return graph


def _fold(onnx, folder: "_Folder", nodes, specs: Dict[str, Spec], clean: Dict[str, str]) -> list:
    """The nodes left after evaluating every one whose inputs are constant or whose result is a shape."""
    const = folder.const
    live = []
    for node in nodes:
        ins = [i for i in node.input if i]
        if node.domain not in ("", "ai.onnx"):
            live.append(node)
        elif node.op_type == "Shape" and ins[0] in specs:
            a = _attrs(onnx, node)
            shape = np.array(specs[ins[0]].shape, dtype=np.int64)
            const[node.output[0]] = shape[a.get("start", 0) : a.get("end", len(shape))]
        elif node.op_type == "Size" and ins[0] in specs:
            const[node.output[0]] = np.array(specs[ins[0]].numel(), dtype=np.int64)
        elif node.op_type == "Constant" or (ins and all(i in const for i in ins)):
            try:
                outs = folder.evaluate(node)
            except Exception as e:
                raise ExportError(f"node `{node.name}` ({node.op_type}): its constant inputs could not be folded ({e})") from e
            for o, v in zip(node.output, outs):
                const[o] = c_order(np.asarray(v))
                if node.op_type not in _VIEWS:  # a view of a parameter is that parameter
                    folder.computed[o] = f"{node.op_type} {node.name}, from {', '.join(sorted(folder.roots.get(o, ()))) or 'constants'}"
            # Named after the parameter it comes from: a view of one keeps its name (the class token),
            # anything else computed from one is `<param>.computed` (a position embedding's interpolation).
            roots = set().union(*(folder.roots.get(i, set()) for i in ins))
            for o in node.output:
                folder.roots[o] = roots
            if len(roots) == 1 and len(node.output) == 1 and const[node.output[0]].dtype.kind == "f":
                (root,) = roots
                view = node.op_type in _VIEWS and len(ins) and ins[0] in clean and const[node.output[0]].size == const[ins[0]].size
                clean[node.output[0]] = clean[ins[0]] if view else f"{root}.computed"
        else:
            live.append(node)
    return live


def _reinfer(onnx, model, live, const: Dict[str, np.ndarray], inputs: Dict[str, Spec], outputs: List[str]):
    """Shape inference over the live nodes, with the folded constants as initializers."""
    used = {i for n in live for i in n.input if i in const}
    inits = [onnx.numpy_helper.from_array(np.asarray(const[name]), name) for name in sorted(used)]
    elem = {v: k for k, v in _ELEM.items()}
    g_in = [onnx.helper.make_tensor_value_info(n, elem[s.dtype], list(s.shape)) for n, s in inputs.items()]
    g_out = [onnx.helper.make_empty_tensor_value_info(o) for o in outputs]
    graph = onnx.helper.make_graph(live, "reinfer", g_in, g_out, inits)
    m = onnx.helper.make_model(graph, opset_imports=list(model.opset_import))
    return onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)


class _Fusion:
    """Pattern fusions over the live ONNX nodes."""

    def __init__(self, nodes: List[ONode], const: Dict[str, np.ndarray], specs: Dict[str, Spec]):
        self.nodes = nodes
        self.const = const
        self.specs = specs
        self.refusals: Dict[str, str] = {}  # a node left unfused -> why, where it then has no lowering

    def _index(self) -> Tuple[Dict[str, ONode], Dict[str, List[ONode]]]:
        prod: Dict[str, ONode] = {}
        cons: Dict[str, List[ONode]] = {}
        for n in self.nodes:
            for o in n.outputs:
                prod[o] = n
            for i in n.inputs:
                cons.setdefault(i, []).append(n)
        return prod, cons

    def scalar(self, name: str) -> Optional[float]:
        v = self.const.get(name)
        if v is None or v.size != 1 or v.dtype.kind != "f":
            return None
        return float(v.reshape(()))

    def fuse(self) -> None:
        for rule in (self._gelu_erf, self._silu, self._attention, self._linear):
            while rule():
                pass

    def _replace(self, removed: List[ONode], new: ONode) -> None:
        # The fused node sits where its last removed node was (its inputs are defined by then).
        last = max(self.nodes.index(n) for n in removed)
        new.origin = [f"{n.op} {n.name}" for n in sorted(removed, key=self.nodes.index)]
        self.nodes[last] = new
        self.nodes[:] = [n for i, n in enumerate(self.nodes) if i == last or n not in removed]

    def _only(self, cons: Dict[str, List[ONode]], value: str) -> Optional[ONode]:
        c = cons.get(value, [])
        return c[0] if len(c) == 1 else None

    def _other(self, n: ONode, value: str) -> Optional[str]:
        if len(n.inputs) != 2:
            return None
        if n.inputs[0] == value:
            return n.inputs[1]
        if n.inputs[1] == value:
            return n.inputs[0]
        return None

    def _near(self, name: Optional[str], want: float) -> bool:
        v = self.scalar(name) if name is not None else None
        return v is not None and abs(v - want) <= 1e-6 * abs(want)

    def _gelu_erf(self) -> bool:
        """x · (1 + erf(x / √2)) · 0.5, in any order of the products -> vsdk.gelu."""
        prod, cons = self._index()
        for e in [n for n in self.nodes if n.op == "Erf"]:
            d = prod.get(e.inputs[0])
            if d is None:
                continue
            if d.op == "Div" and self._near(d.inputs[1], math.sqrt(2.0)):
                x = d.inputs[0]
            elif d.op == "Mul" and self._near(self._other(d, d.inputs[0]), 1 / math.sqrt(2.0)):
                x = d.inputs[0]
            elif d.op == "Mul" and self._near(d.inputs[0], 1 / math.sqrt(2.0)):
                x = d.inputs[1]
            else:
                continue
            a = self._only(cons, e.outputs[0])
            if a is None or a.op != "Add" or not self._near(self._other(a, e.outputs[0]), 1.0):
                continue
            m1 = self._only(cons, a.outputs[0])
            if m1 is None or m1.op != "Mul":
                continue
            other = self._other(m1, a.outputs[0])
            removed = [d, e, a, m1]
            if other == x:
                m2 = self._only(cons, m1.outputs[0])
                if m2 is None or m2.op != "Mul" or not self._near(self._other(m2, m1.outputs[0]), 0.5):
                    continue
                removed.append(m2)
                y = m2.outputs[0]
            elif self._near(other, 0.5):
                m2 = self._only(cons, m1.outputs[0])
                if m2 is None or m2.op != "Mul" or self._other(m2, m1.outputs[0]) != x:
                    continue
                removed.append(m2)
                y = m2.outputs[0]
            else:
                h = prod.get(other) if other else None
                if h is None or h.op != "Mul" or self._other(h, x) is None or not self._near(self._other(h, x), 0.5):
                    continue
                if len(cons.get(h.outputs[0], [])) != 1:
                    continue
                removed.append(h)
                y = m1.outputs[0]
            if any(len(cons.get(n.outputs[0], [])) != 1 for n in removed if n.outputs[0] != y):
                continue
            self._replace(removed, ONode("vsdk.gelu", e.name, [x], [y]))
            return True
        return False

    def _silu(self) -> bool:
        prod, cons = self._index()
        for s in [n for n in self.nodes if n.op == "Sigmoid"]:
            m = self._only(cons, s.outputs[0])
            if m is None or m.op != "Mul" or self._other(m, s.outputs[0]) != s.inputs[0]:
                continue
            self._replace([s, m], ONode("vsdk.silu", s.name, [s.inputs[0]], [m.outputs[0]]))
            return True
        return False

    def _strip_scale(self, prod, cons, value: str, removed: List[ONode]) -> Tuple[str, float]:
        """Follows scalar Mul/Div producers back from `value`: (the unscaled value, the scale)."""
        scale = 1.0
        while True:
            n = prod.get(value)
            if n is None or n.op not in ("Mul", "Div") or len(cons.get(value, [])) != 1:
                return value, scale
            a, b = n.inputs
            if self.scalar(b) is not None:
                scale *= self.scalar(b) if n.op == "Mul" else 1.0 / self.scalar(b)
                value = a
            elif n.op == "Mul" and self.scalar(a) is not None:
                scale *= self.scalar(a)
                value = b
            else:
                return value, scale
            removed.append(n)

    def _masked(self, prod, cons, logits: str, scale: float, removed: List[ONode]) -> Optional[Tuple[str, float, Optional["_Mask"]]]:
        """`logits` as (the scores before the mask, their scale, the mask or None) where the mask comes
        after the scale, as sdpa adds it: an `Add` of an additive mask, or a `Where` that keeps the
        scores where a boolean mask says and puts a fill value elsewhere (`torch.where(mask, s, fill)`,
        `s.masked_fill(mask, fill)`). None where the scale comes after the mask (it would scale the mask
        too: another function)."""
        n = prod.get(logits)
        if n is None or n.op not in ("Add", "Where") or len(cons.get(logits, [])) != 1:
            return logits, scale, None
        if scale != 1.0:
            return None
        if n.op == "Add":
            pairs = [(n.inputs[0], n.inputs[1], True), (n.inputs[1], n.inputs[0], True)]
        else:  # Where(condition, a, b): the scores kept where the condition is True, or where False
            pairs = [(n.inputs[1], n.inputs[2], True), (n.inputs[2], n.inputs[1], False)]
        for scores, other, keep_when in pairs:
            taken: List[ONode] = []
            inner, inner_scale = self._strip_scale(prod, cons, scores, taken)
            mm = prod.get(inner)
            if mm is None or mm.op != "MatMul" or len(cons.get(inner, [])) != 1:
                continue
            if self.specs.get(logits) != self.specs.get(scores):
                continue  # a mask that broadcasts the scores to a larger shape: not sdpa's
            removed += [n, *taken]
            if n.op == "Add":
                return inner, inner_scale, _Mask(n, additive=other)
            return inner, inner_scale, _Mask(n, condition=n.inputs[0], fill=other, keep_when=keep_when)
        return logits, scale, None

    def _probabilities(self, cons, s: ONode, removed: List[ONode]) -> Tuple[Optional[ONode], Optional[ONode]]:
        """The MatMul that multiplies softmax `s`'s probabilities by the values, past casts that change
        nothing (transformers' `softmax(dtype=float32).to(float32)`) and the NaN guard torch.onnx writes
        after the softmax of a boolean mask (`Where(IsNaN(p), 0, p)`): (the MatMul, the guard's Where)."""
        value, guard = s.outputs[0], None
        while True:
            users = cons.get(value, [])
            if len(users) == 1 and users[0].op == "Cast":
                c = users[0]
                a, b = self.specs.get(c.inputs[0]), self.specs.get(c.outputs[0])
                if a is None or b is None or a.dtype != b.dtype or _CAST.get(int(c.attrs.get("to", 0))) != a.dtype:
                    return None, None
                removed.append(c)
                value = c.outputs[0]
                continue
            if len(users) == 2 and guard is None:
                isnan = next((u for u in users if u.op == "IsNaN"), None)
                where = next((u for u in users if u.op == "Where"), None)
                if isnan is None or where is None or where.inputs[0] != isnan.outputs[0] or where.inputs[2] != value:
                    return None, None
                zero = self.const.get(where.inputs[1])
                if zero is None or zero.size != 1 or float(zero.reshape(())) != 0.0 or len(cons.get(isnan.outputs[0], [])) != 1:
                    return None, None
                if self.specs.get(where.outputs[0]) != self.specs.get(value):
                    return None, None
                removed += [isnan, where]
                value, guard = where.outputs[0], where
                continue
            break
        users = cons.get(value, [])
        if len(users) != 1 or users[0].op != "MatMul" or users[0].inputs[0] != value:
            return None, None
        return users[0], guard

    def _keys(self, prod, cons, kt: str, removed: List[ONode]) -> Optional[Tuple[str, Tuple[int, ...], float]]:
        """The keys `k` behind `kt = kᵀ` (the last two axes swapped), the shape `k` has there and a
        scale found between them: a `Transpose` of them, or torch.onnx's dynamo form, `Reshape` to
        `[N, L, D]`, `Transpose` to `[N, D, L]`, `Reshape` back to `[..., D, L]` (the value before it
        may then be of another shape, the `[B, H, g, L, D]` of a repeat_kv: its leading axes merge
        into the heads)."""
        t = prod.get(kt)
        if t is None or len(cons.get(kt, [])) != 1:
            return None
        if t.op == "Transpose":
            r = len(self.specs[t.inputs[0]].shape) if t.inputs[0] in self.specs else 0
            perm = list(t.attrs.get("perm", range(r - 1, -1, -1)))
            if r < 2 or perm != list(range(r - 2)) + [r - 1, r - 2]:
                return None
            removed.append(t)
            k, scale = self._strip_scale(prod, cons, t.inputs[0], removed)
            return (k, self.specs[k].shape, scale) if k in self.specs else None
        if t.op != "Reshape":
            return None
        tr = prod.get(t.inputs[0])
        if tr is None or tr.op != "Transpose" or len(cons.get(t.inputs[0], [])) != 1 or list(tr.attrs.get("perm", [])) != [0, 2, 1]:
            return None
        r1 = prod.get(tr.inputs[0])
        if r1 is None or r1.op != "Reshape" or len(cons.get(tr.inputs[0], [])) != 1:
            return None
        shapes = [self.specs.get(v) for v in (r1.inputs[0], r1.outputs[0], t.outputs[0])]
        if any(sh is None for sh in shapes):
            return None
        src, flat, out = (sh.shape for sh in shapes)
        if len(flat) != 3 or len(src) < 2 or len(out) < 2 or flat[1:] != src[-2:] or out[-2:] != flat[:0:-1]:
            return None
        if int(np.prod(src[:-2], dtype=np.int64)) != flat[0] or int(np.prod(out[:-2], dtype=np.int64)) != flat[0]:
            return None
        removed += [t, tr, r1]
        return r1.inputs[0], tuple(out[:-2]) + tuple(src[-2:]), 1.0

    def _unrepeat(self, prod, cons, value: str, want: Tuple[int, ...]) -> Optional[Tuple[str, int, List[ONode]]]:
        """transformers' `repeat_kv` in front of an attention: `x [..., H, L, D]` unsqueezed after its
        heads, expanded to `[..., H, g, L, D]` and reshaped to `[..., H·g, L, D]` (the `want` shape),
        so that head `h` of the result is head `h // g` of `x`, what sdpa's grouped heads read:
        (x, g, the nodes passed over). None for anything else (a new axis elsewhere interleaves the
        heads: the repeat then lowers as itself)."""
        taken: List[ONode] = []
        n = prod.get(value)
        if len(cons.get(value, [])) != 1 or n is None:
            return None
        if self.specs.get(value) is not None and self.specs[value].shape == tuple(want):
            if n.op != "Reshape":
                return None
            taken.append(n)
            value = n.inputs[0]
            n = prod.get(value)
            if n is None or len(cons.get(value, [])) != 1:
                return None
        if n.op != "Expand":
            return None
        taken.append(n)
        u = prod.get(n.inputs[0])
        if u is None or u.op not in ("Unsqueeze", "Reshape") or len(cons.get(n.inputs[0], [])) != 1:
            return None
        taken.append(u)
        x = u.inputs[0]
        shapes = [self.specs.get(v) for v in (x, u.outputs[0], n.outputs[0])]
        if any(sh is None for sh in shapes):
            return None
        src, one, rep = (tuple(sh.shape) for sh in shapes)
        r = len(src)
        if r < 3 or len(want) != r:
            return None
        a = r - 3  # the heads axis
        g = rep[a + 1] if len(rep) == r + 1 else 0
        if g < 1 or one != src[: a + 1] + (1,) + src[a + 1 :] or rep != src[: a + 1] + (g,) + src[a + 1 :]:
            return None
        if tuple(want) != src[:a] + (src[a] * g,) + src[a + 1 :]:
            return None
        return x, g, taken

    def _attention(self) -> bool:
        """softmax(scale · q kᵀ [+ mask]) v -> vsdk.sdpa (the unfused form torch.onnx writes): a
        constant causal mask (0 on and below the diagonal, −∞ above; or boolean) as `causal_offset`,
        any other as sdpa's fourth input; transformers' `repeat_kv` of the keys and values as grouped
        heads."""
        prod, cons = self._index()
        for s in [n for n in self.nodes if n.op == "Softmax"]:
            rank = len(self.specs[s.inputs[0]].shape) if s.inputs[0] in self.specs else None
            axis = s.attrs.get("axis", -1)
            if rank is None or axis not in (-1, rank - 1):
                continue
            removed: List[ONode] = [s]
            pv, guard = self._probabilities(cons, s, removed)
            if pv is None:
                continue
            removed.append(pv)
            logits, scale = self._strip_scale(prod, cons, s.inputs[0], removed)
            masked = self._masked(prod, cons, logits, scale, removed)
            if masked is None:
                continue
            logits, scale, mask = masked
            qk = prod.get(logits)
            if qk is None or qk.op != "MatMul" or len(cons.get(logits, [])) != 1:
                continue
            removed.append(qk)
            q, sq = self._strip_scale(prod, cons, qk.inputs[0], removed)
            kt, sk = self._strip_scale(prod, cons, qk.inputs[1], removed)
            keys = self._keys(prod, cons, kt, removed)
            if keys is None:
                continue
            k, k_shape, sk2 = keys
            v = pv.inputs[1]
            if q not in self.specs or v not in self.specs:
                continue
            qs, ks, vs = self.specs[q].shape, tuple(k_shape), self.specs[v].shape
            if not (len(qs) == len(ks) == len(vs) >= 2 and qs[:-2] == ks[:-2] == vs[:-2] and ks[-2] == vs[-2]):
                continue
            # Grouped heads: both repeats undone, by the same factor; otherwise the repeats lower as
            # themselves (copies), and the keys must be what the attention reads.
            ku, vu = self._unrepeat(prod, cons, k, ks), self._unrepeat(prod, cons, v, vs)
            if ku is not None and vu is not None and ku[1] == vu[1]:
                k, v = ku[0], vu[0]
                removed += ku[2] + vu[2]
            elif self.specs.get(k) is None or self.specs[k].shape != ks:
                self.refusals.setdefault(qk.name, f"the keys {k} reach this product reshaped to {list(ks)} by a pattern other than repeat_kv's: not fused as sdpa")
                continue
            # The model multiplies in float32: its scale is the float32 product, written shortest.
            total = float(str(np.float32(np.float32(scale) * np.float32(sq) * np.float32(sk) * np.float32(sk2))))
            attrs: Dict[str, Any] = {"scale": total}
            ins = [q, k, v]
            try:
                offset, additive = self._mask_input(mask, qs[-2], ks[-2], guard)
            except _NotFused as e:
                self.refusals.setdefault(e.node, e.reason)
                isnan = prod.get(guard.inputs[0]) if guard is not None and e.node == guard.name else None
                if isnan is not None:
                    self.refusals.setdefault(isnan.name, f"part of the NaN guard {guard.name}: {e.reason}")
                continue
            if offset is not None:
                attrs["causal_offset"] = offset
            elif additive is not None:
                ins.append(additive)
            self._replace(removed, ONode("vsdk.sdpa", s.name, ins, [pv.outputs[0]], attrs))
            return True
        return False

    def _mask_input(self, mask: Optional["_Mask"], length: int, keys: int, guard: Optional[ONode]) -> Tuple[Optional[int], Optional[str]]:
        """(causal_offset, the additive mask input) for sdpa; _NotFused naming the node where the mask
        cannot be sdpa's exactly.

        An additive mask is sdpa's own. A boolean one (`Where(keep, scores, fill)`) must be a constant:
        causal, it is `causal_offset` (its rows each keep a key, so a finite fill far below the scores
        masks as −∞ does); otherwise the mask input `0` where kept and `fill` elsewhere. That adds
        `fill` to the scores instead of replacing them by it: the same softmax where a row keeps a key
        and `fill` is a mask value (−∞, or a float's lowest or below, whose exp(fill − max) is 0), and
        in a row that keeps none only for −∞ (NaN both) or a fill that swamps the scores (float32's
        lowest: scores + fill round to fill, and the row is uniform as the Where's is). The NaN guard
        torch.onnx writes after a boolean mask's softmax (`Where(IsNaN(p), 0, p)`) zeroes rows masked
        whole; sdpa's are NaN: fused only where no row is."""
        offset: Optional[int] = None
        additive: Optional[str] = None
        nan_rows = False  # a row whose logits are all −∞ (NaN after the softmax)
        if mask is not None and mask.additive is not None:
            m = self.const.get(mask.additive)
            offset = _causal_offset(m, length, keys) if m is not None else None
            if offset is None:
                additive = mask.additive
                nan_rows = m is None or bool(np.any(np.all(np.isneginf(np.atleast_1d(m)), axis=-1)))
                if guard is not None and m is None:
                    raise _NotFused(f"the NaN guard after the softmax zeroes the rows a computed mask ({mask.additive}) masks whole, sdpa makes them NaN: only a constant mask, which shows it masks none, fuses", guard.name)
        elif mask is not None:
            where = mask.node
            cond = self.const.get(mask.condition)
            fill = self.const.get(mask.fill)
            if cond is None or cond.dtype != np.bool_:
                raise _NotFused(f"a boolean attention mask computed by the model ({mask.condition}), not a constant: the catalog has no select operator to turn it into sdpa's additive mask", where.name)
            if fill is None or fill.dtype.kind != "f" or fill.size == 0 or not np.all(fill == fill.reshape(-1)[0]):
                raise _NotFused(f"the masked logits' fill {mask.fill} is not one constant number", where.name)
            f = float(fill.reshape(-1)[0])
            if not f <= _MASK_FILL:
                raise _NotFused(f"fill {f:g} is not a mask value (−∞, or a float's lowest, {_MASK_FILL:g}, or below): exp(fill − max) need not vanish, and an additive mask of it is another function", where.name)
            keep = cond if mask.keep_when else ~cond
            whole = not bool(np.all(np.atleast_1d(keep).any(axis=-1)))  # a row that keeps no key
            offset = _causal_keep(keep, length, keys)
            if offset is None:
                if whole and not (math.isinf(f) or f <= _SWAMPS):
                    raise _NotFused(f"a row of the mask keeps no key: the Where makes it uniform (every logit {f:g}), an additive mask of {f:g} keeps the scores' differences (only −∞ or a fill of {_SWAMPS:.3g} or below is exact)", where.name)
                name = f"{where.outputs[0]}.additive"
                additive_mask = c_order(np.where(keep, np.float32(0), np.float32(f)).astype(np.float32))
                self.const[name] = additive_mask
                self.specs[name] = Spec(tuple(int(d) for d in additive_mask.shape), "float32")
                additive = name
                nan_rows = whole and math.isinf(f)
        if guard is not None and nan_rows:
            raise _NotFused("the NaN guard after the softmax (torch.onnx's, for a boolean mask) makes a row the mask masks whole 0, sdpa makes it NaN: not fused", guard.name)
        return offset, additive

    def _linear(self) -> bool:
        """MatMul by a constant matrix (+ a constant bias), or Gemm -> vsdk.linear."""
        prod, cons = self._index()
        for m in self.nodes:
            if m.op == "Gemm":
                a = m.attrs
                w = self.const.get(m.inputs[1])
                if w is None or a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
                    continue
                ins = [m.inputs[0], m.inputs[1]] + ([m.inputs[2]] if len(m.inputs) > 2 and m.inputs[2] else [])
                new = ONode("vsdk.linear", m.name, ins, list(m.outputs), {"transposed": not a.get("transB", 0)})
                self._replace([m], new)
                return True
            if m.op != "MatMul":
                continue
            w = self.const.get(m.inputs[1])
            if w is None or w.ndim != 2 or m.inputs[0] in self.const:
                continue
            removed = [m]
            ins = [m.inputs[0], m.inputs[1]]
            out = m.outputs[0]
            add = self._only(cons, out)
            if add is not None and add.op == "Add":
                b = self.const.get(self._other(add, out) or "")
                if b is not None and b.shape == (w.shape[1],):
                    removed.append(add)
                    ins.append(self._other(add, out))
                    out = add.outputs[0]
            self._replace(removed, ONode("vsdk.linear", m.name, ins, [out], {"transposed": True}))
            return True
        return False


_CAST = {1: "float32", 2: "uint8", 6: "int32", 7: "int64", 10: "float16", 11: "float64", 16: "bfloat16"}
_VIEWS = ("Expand", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Identity", "Flatten")
_ELEMENTWISE = {"Add": "vsdk.add", "Sub": "vsdk.sub", "Mul": "vsdk.mul", "Div": "vsdk.div"}
_UNARY = {
    "Sin": "vsdk.sin",
    "Cos": "vsdk.cos",
    "Relu": "vsdk.relu",
    "Sigmoid": "vsdk.sigmoid",
    "Tanh": "vsdk.tanh",
    "Exp": "vsdk.exp",
    "Sqrt": "vsdk.sqrt",
    "HardSwish": "vsdk.hardswish",
}
_SHAPE_ONLY = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")
_ALIASES = ("Identity", "Dropout")
# Normalisations whose output has their input's shape and type.
_SAME_SHAPE = ("GroupNormalization", "InstanceNormalization", "LayerNormalization", "RMSNormalization")


def _why(n: ONode, const: Dict[str, np.ndarray]) -> str:
    if n.op in ("MatMul", "Gemm") and len(n.inputs) > 1 and n.inputs[1] not in const:
        return "a Gemm of two computed tensors (its second operand is not a constant): only MatMul's product of two tensors is a catalog operator (vsdk.matmul)"
    if n.op in ("Conv",):
        return "only 2-D convolution without auto_pad has a catalog operator"
    if n.op in ("Where", "IsNaN"):
        return "no catalog operator selects elements: a boolean attention mask lowers only inside an attention that fuses to sdpa, as a constant"
    return "no lowering to a catalog operator"


class _Lowering:
    """Each live node -> catalog nodes; what has no lowering collected."""

    def __init__(self, graph: Graph, fused: _Fusion, const, specs, clean_names, initializers, folded):
        self.g = graph
        self.initializers = initializers
        self.folded = folded
        self.nodes = fused.nodes
        self.refusals = fused.refusals
        self.const = const
        self.specs = specs
        self.clean = clean_names
        self.alias: Dict[str, str] = {}
        self.const_keys: Dict[str, str] = {}  # a graph const -> the ONNX value it holds
        self.counter = 0
        self.fresh_names: set = set()

    def v(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def use_const(self, name: str, n: ONode, role: str, array: Optional[np.ndarray] = None, transposed: bool = False, of_param: bool = False) -> str:
        """A constant input of node `n`, recorded in the graph's consts under a readable name: the
        model's own (an initializer's name, shared by its users), else `<module>.<role>`."""
        a = self.const[name] if array is None else array
        clean = self.clean.get(name) if array is None else None
        if clean and self.const_keys.setdefault(clean, name) == name:
            key = clean
        else:
            mod = module_of(n.name)
            base = f"{mod}.{role}" if mod else role
            key, k = base, 1
            while key in self.g.consts and not (array is None and self.const_keys.get(key) == name):
                k += 1
                key = f"{base}_{k}"
            self.const_keys[key] = name
        if name in self.initializers and (array is None or of_param):
            self.g.params.setdefault(key, (name, transposed))
        elif array is None and name not in self.initializers and name in self.folded:
            # Folded at export by onnx's reference evaluator; ONNX Runtime computes it again.
            self.g.computed.setdefault(key, self.folded[name])
            self.g.framework_names[key] = name
        if key not in self.g.consts:
            if a.dtype == np.float64:
                a = a.astype(np.float32)
            self.g.consts[key] = a
            self.g.specs[key] = Spec(tuple(int(d) for d in a.shape), dtype_name(a))
            if clean and key == clean:
                self.g.const_names[key] = key
        return key

    def inp(self, name: str, n: ONode, role: str) -> str:
        name = self.v(name)
        if name in self.const:
            return self.use_const(name, n, role)
        return name

    def ins(self, n: ONode, roles: Sequence[str] = ()) -> List[str]:
        """Every non-empty input of `n`, constants named by role (`weight`, `bias`, else `const`)."""
        return [self.inp(i, n, roles[k] if k < len(roles) else "const") for k, i in enumerate(n.inputs) if i]

    def emit(self, n: ONode, op: str, inputs: List[str], output: str, attrs=None, spec: Optional[Spec] = None) -> None:
        self.g.nodes.append(
            Node(op, inputs, output, dict(attrs or {}), module_of(n.name), "; ".join(n.origin) or f"{n.op} {n.name}")
        )
        self.g.specs[output] = spec or self.specs[output]
        if output not in self.fresh_names:
            self.g.framework_names[output] = output

    def fresh(self, base: str) -> str:
        self.counter += 1
        name = f"{base}#{self.counter}"
        self.fresh_names.add(name)  # made by the lowering: no ONNX value to capture
        return name

    def run(self) -> None:
        g = self.g
        for name, s in g.inputs.items():
            g.specs[name] = s
            g.framework_names[name] = name
        for n in self.nodes:
            try:
                if not self.lower(n):
                    reason = self.refusals.get(n.name) or _why(n, self.const)
                    g.unsupported.append(Unsupported(n.op, n.name, module_of(n.name), reason=reason))
            except ExportError as e:
                reason = self.refusals.get(n.name) or str(e)
                g.unsupported.append(Unsupported(n.op, n.name, module_of(n.name), reason=reason))
        g.outputs = [self.v(o) for o in g.outputs]

    def lower(self, n: ONode) -> bool:
        op, a = n.op, n.attrs
        out = n.outputs[0] if n.outputs else ""
        if op in _ALIASES:
            self.alias[out] = n.inputs[0]
            return True
        if out and out not in self.specs and op not in ("Split",):
            raise ExportError(f"no static shape for `{out}` after shape inference")
        if op.startswith("vsdk."):
            return self.fused(n)
        if op in _ELEMENTWISE:
            self.emit(n, _ELEMENTWISE[op], self.ins(n), out)
            return True
        if op in _UNARY:
            self.emit(n, _UNARY[op], self.ins(n), out)
            return True
        if op == "HardSigmoid":
            # ONNX's default (alpha 0.2) is Keras's hard sigmoid; PyTorch exports alpha = 1/6.
            alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
            if abs(alpha - 1 / 6) > 1e-6 or abs(beta - 0.5) > 1e-6:
                raise ExportError(f"HardSigmoid with alpha {alpha:g}, beta {beta:g} is not the catalog's hardsigmoid (PyTorch's: alpha 1/6, beta 0.5)")
            self.emit(n, "vsdk.hardsigmoid", self.ins(n), out)
            return True
        if op == "Clip":
            return self.clip(n)
        if op in ("Pow", "Reciprocal", "Neg"):
            return self.power(n)
        if op == "BatchNormalization":
            if int(a.get("training_mode", 0)) != 0 or len([o for o in n.outputs if o]) > 1:
                raise ExportError("BatchNormalization in training mode (the batch's own statistics) has no catalog operator")
            x, scale, bias, mean, var = self.ins(n, ("x", "weight", "bias", "running_mean", "running_var"))
            eps = float(str(np.float32(a.get("epsilon", 1e-5))))
            self.emit(n, "vsdk.batch_norm", [x, mean, var, scale, bias], out, {"eps": eps})
            return True
        if op in ("MaxPool", "AveragePool"):
            return self.pool(n)
        if op in ("GlobalAveragePool", "GlobalMaxPool"):
            rank = len(self.specs[n.inputs[0]].shape)
            if op == "GlobalAveragePool":
                self.emit(n, "vsdk.mean", self.ins(n), out, {"axes": list(range(2, rank)), "keepdims": 1})
                return True
            if rank != 4:
                raise ExportError(f"GlobalMaxPool over {rank - 2} spatial axes: the catalog pools 2-D planes")
            self.emit(n, "vsdk.max_pool2d", self.ins(n), out, {"kernel": list(self.specs[n.inputs[0]].shape[2:])})
            return True
        if op in ("ReduceMean", "ReduceSum"):
            return self.reduce(n)
        if op == "Gelu":
            kind = "vsdk.gelu_tanh" if a.get("approximate", b"none") in (b"tanh", "tanh") else "vsdk.gelu"
            self.emit(n, kind, self.ins(n), out)
            return True
        if op == "Conv":
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or len(self.specs[out].shape) != 4:
                return False
            attrs = {
                "strides": list(a.get("strides", [1, 1])),
                "pads": list(a.get("pads", [0, 0, 0, 0])),
                "dilations": list(a.get("dilations", [1, 1])),
                "groups": int(a.get("group", 1)),
            }
            self.emit(n, "vsdk.conv2d", self.ins(n, ("x", "weight", "bias")), out, attrs)
            return True
        if op == "LayerNormalization":
            d = self.specs[n.inputs[0]].shape[a.get("axis", -1):]
            ins = self.ins(n, ("x", "weight", "bias"))
            if len(ins) == 2:
                ins.append(self.use_const(n.inputs[1], n, "bias", np.zeros(d, np.float32)))
            eps = float(np.float32(a.get("epsilon", 1e-5)))
            self.emit(n, "vsdk.layer_norm", ins, out, {"axis": int(a.get("axis", -1)), "eps": float(str(np.float32(eps)))})
            return True
        if op == "Softmax":
            self.emit(n, "vsdk.softmax", self.ins(n), out, {"axis": int(a.get("axis", -1))})
            return True
        if op == "Concat":
            self.emit(n, "vsdk.concat", self.ins(n), out, {"axis": int(a["axis"])})
            return True
        if op in _SHAPE_ONLY:
            self.emit(n, "vsdk.reshape", self.ins(n)[:1], out, {"shape": list(self.specs[out].shape)})
            return True
        if op == "Expand":
            return self.expand(n)
        if op == "Transpose":
            r = len(self.specs[n.inputs[0]].shape)
            self.emit(n, "vsdk.permute", self.ins(n), out, {"perm": list(a.get("perm", range(r - 1, -1, -1)))})
            return True
        if op == "Cast":
            self.emit(n, "vsdk.cast", self.ins(n), out, {"dtype": _CAST[int(a["to"])]})
            return True
        if op == "Slice":
            return self.slice(n)
        if op == "Pad":
            return self.pad(n)
        if op == "Resize":
            return self.resize(n)
        if op in ("GroupNormalization", "InstanceNormalization"):
            return self.group_norm(n)
        if op == "MatMul":
            ranks = [len(self.specs[i].shape) for i in n.inputs]
            if min(ranks) < 2:
                raise ExportError(f"MatMul of a {min(ranks)}-d operand (NumPy's vector rule): the catalog's matmul takes matrices")
            self.emit(n, "vsdk.matmul", self.ins(n), out)
            return True
        if op == "Gather":
            return self.gather(n)
        if op == "Split":
            return self.split(n)
        return False

    def clip(self, n: ONode) -> bool:
        """Clip with constant bounds (inputs since opset 11, attributes before) -> `vsdk.clamp`."""
        out = n.outputs[0]
        bounds: List[Optional[float]] = []
        for k, name in ((1, "min"), (2, "max")):
            given = n.inputs[k] if len(n.inputs) > k else ""
            if given:
                value = self.const.get(self.v(given))
                if value is None or value.size != 1:
                    raise ExportError(f"Clip's {name} `{given}` is computed, not a constant: only number bounds have a catalog operator")
                bounds.append(float(value.reshape(())))
            else:
                bounds.append(float(n.attrs[name]) if name in n.attrs else None)
        lo, hi = bounds
        if lo is None and hi is None:
            self.alias[out] = n.inputs[0]
            return True
        if lo is not None and hi is not None and lo > hi:
            raise ExportError(f"Clip with min {lo:g} above max {hi:g}: not the catalog's clamp")
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        self.emit(n, "vsdk.clamp", [self.inp(n.inputs[0], n, "const")], out, attrs)
        return True

    def power(self, n: ONode) -> bool:
        """`Pow` by a constant 2, 1, 0.5 or −0.5 (RMSNorm's `x.pow(2)` and `rsqrt` as exporters write
        them), `Reciprocal` and `Neg` (rotate_half's) -> catalog operators, exactly: `x·x`, `x`,
        `sqrt`, `rsqrt`, `1 / x`, `x·(−1)`."""
        x, out = self.inp(n.inputs[0], n, "const"), n.outputs[0]
        dtype = np.float32 if self.specs[out].dtype == "float32" else np.dtype(self.specs[out].dtype)
        number = lambda role, v: self.use_const(f"{n.name}.{role}", n, role, np.array(v, dtype))
        if n.op == "Reciprocal":
            self.emit(n, "vsdk.div", [number("one", 1.0), x], out)
            return True
        if n.op == "Neg":
            self.emit(n, "vsdk.mul", [x, number("minus_one", -1.0)], out)
            return True
        e = self.const.get(self.v(n.inputs[1]))
        if e is None or e.size != 1:
            raise ExportError(f"Pow's exponent `{n.inputs[1]}` is computed, not a constant")
        e = float(e.reshape(()))
        if e == 1.0:
            self.alias[out] = n.inputs[0]
        elif e == 2.0:
            self.emit(n, "vsdk.mul", [x, x], out)
        elif e in (0.5, -0.5):
            self.emit(n, "vsdk.sqrt" if e > 0 else "vsdk.rsqrt", [x], out)
        else:
            raise ExportError(f"Pow with exponent {e:g}: only 2, 1, 0.5 and -0.5 have catalog operators")
        return True

    def pool(self, n: ONode) -> bool:
        """MaxPool and AveragePool with explicit pads -> the catalog's 2-D pools. ONNX's
        count_include_pad defaults to 0 (PyTorch's to 1): written out either way."""
        a, x = n.attrs, n.inputs[0]
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise ExportError(f"{n.op} with auto_pad {a['auto_pad']!r}: only explicit pads have a catalog operator")
        if len(self.specs[x].shape) != 4:
            raise ExportError(f"{n.op} over {len(self.specs[x].shape) - 2} spatial axes: the catalog pools 2-D planes")
        if len([o for o in n.outputs if o]) > 1:
            raise ExportError("MaxPool's Indices output has no catalog operator")
        attrs = {
            "kernel": list(a["kernel_shape"]),
            "strides": list(a.get("strides", [1, 1])),
            "pads": list(a.get("pads", [0, 0, 0, 0])),
            "ceil_mode": int(a.get("ceil_mode", 0)),
        }
        dilations = list(a.get("dilations", [1, 1]))
        if n.op == "MaxPool":
            attrs["dilations"] = dilations
        elif dilations != [1, 1]:
            raise ExportError(f"AveragePool with dilations {dilations}: the catalog's average pool is not dilated")
        else:
            attrs["count_include_pad"] = int(a.get("count_include_pad", 0))
        op = "vsdk.max_pool2d" if n.op == "MaxPool" else "vsdk.avg_pool2d"
        self.emit(n, op, [self.inp(x, n, "const")], n.outputs[0], attrs)
        return True

    def reduce(self, n: ONode) -> bool:
        """ReduceMean/ReduceSum: axes as an attribute (before opsets 18/13) or a constant input;
        none means every axis unless noop_with_empty_axes."""
        a, out = n.attrs, n.outputs[0]
        axes = list(a["axes"]) if "axes" in a else None
        if axes is None and len(n.inputs) > 1 and n.inputs[1]:
            axes = self._ints(self.v(n.inputs[1]))
            if axes is None:
                raise ExportError(f"{n.op}'s axes `{n.inputs[1]}` are computed, not a constant")
        rank = len(self.specs[n.inputs[0]].shape)
        if not axes:
            if int(a.get("noop_with_empty_axes", 0)):
                self.alias[out] = n.inputs[0]
                return True
            axes = list(range(rank))
        op = "vsdk.mean" if n.op == "ReduceMean" else "vsdk.sum"
        self.emit(n, op, [self.inp(n.inputs[0], n, "const")], out, {"axes": [int(x) for x in axes], "keepdims": int(a.get("keepdims", 1))})
        return True

    def fused(self, n: ONode) -> bool:
        out = n.outputs[0]
        if n.op == "vsdk.linear":
            x, w = self.v(n.inputs[0]), self.const[n.inputs[1]]
            weight = w.T if n.attrs.get("transposed") else w
            # torch.onnx stores nn.Linear's weight transposed for MatMul: transposed back, it is the
            # module's own parameter, named after it.
            flip = bool(n.attrs.get("transposed"))
            ins = [x, self.use_const(n.inputs[1], n, "weight", c_order(weight), transposed=flip, of_param=True)]
            if len(n.inputs) > 2:
                ins.append(self.inp(n.inputs[2], n, "bias"))
            self.emit(n, "vsdk.linear", ins, out)
            return True
        roles = ("q", "k", "v", "mask") if n.op == "vsdk.sdpa" else ()
        self.emit(n, n.op, self.ins(n, roles), out, n.attrs)
        return True

    def expand(self, n: ONode) -> bool:
        """Expand of size-1 axes -> copies concatenated along each (exact data movement; a few copies
        at most, as a repeat of key/value heads that is not transformers' grouped one makes)."""
        x, out = n.inputs[0], n.outputs[0]
        if x not in self.specs:
            raise ExportError(f"no static shape for `{x}`")
        src, dst = self.specs[x].shape, self.specs[out]
        name = self.inp(x, n, "const")
        shape = [1] * (len(dst.shape) - len(src)) + list(src)
        if len(shape) != len(src):
            name_lead = self.fresh(out)
            self.emit(n, "vsdk.reshape", [name], name_lead, {"shape": list(shape)}, Spec(tuple(shape), dst.dtype))
            name = name_lead
        axes = [a for a in range(len(shape)) if shape[a] != dst.shape[a]]
        if not axes:
            self.alias[out] = name
            return True
        for k, a in enumerate(axes):
            times = dst.shape[a]
            if shape[a] != 1 or times > 64:
                raise ExportError(f"Expand of axis {a} from {shape[a]} to {times}: only size-1 axes, 64 copies at most, become copies")
            shape[a] = times
            last = k == len(axes) - 1
            target = out if last else self.fresh(out)
            self.emit(n, "vsdk.concat", [name] * times, target, {"axis": a}, None if last else Spec(tuple(shape), dst.dtype))
            name = target
        return True

    def _ints(self, name: str) -> Optional[List[int]]:
        v = self.const.get(name)
        return None if v is None else [int(i) for i in v.reshape(-1)]

    def slice(self, n: ONode) -> bool:
        shape = self.specs[n.inputs[0]].shape
        starts, ends = self._ints(n.inputs[1]), self._ints(n.inputs[2])
        axes = self._ints(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] else list(range(len(starts or [])))
        steps = self._ints(n.inputs[4]) if len(n.inputs) > 4 and n.inputs[4] else [1] * len(starts or [])
        if starts is None or ends is None or axes is None or steps is None:
            raise ExportError("slice bounds are not constant")
        if any(s < 1 for s in steps):
            raise ExportError(f"slice with steps {steps} (a negative step reverses an axis: no catalog operator does)")
        offsets, sizes, strides = [0] * len(shape), list(shape), [1] * len(shape)
        for s, e, ax, k in zip(starts, ends, axes, steps):
            ax %= len(shape)
            dim = shape[ax]
            s = max(0, min(dim, s + dim if s < 0 else s))
            e = max(0, min(dim, e + dim if e < 0 else e))
            offsets[ax], sizes[ax], strides[ax] = s, slice_count(s, e, k), k
        attrs = {"offsets": offsets, "sizes": sizes}
        if any(k != 1 for k in strides):
            attrs["steps"] = strides
        self.emit(n, "vsdk.crop", self.ins(n)[:1], n.outputs[0], attrs)
        return True

    def pad(self, n: ONode) -> bool:
        """Pad with constant pads (an input since opset 11, an attribute before; `axes` since 18)
        -> `vsdk.pad`: ONNX's order (every start, then every end) is the catalog's; `edge` is
        `replicate`, `wrap` is `circular`. A negative pad crops: no catalog pad does."""
        a, x, out = n.attrs, n.inputs[0], n.outputs[0]
        rank = len(self.specs[x].shape)
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        modes = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}
        if mode not in modes:
            raise ExportError(f"Pad mode `{mode}` has no catalog operator")
        given = lambda k: len(n.inputs) > k and n.inputs[k]
        pads = list(a["pads"]) if "pads" in a else (self._ints(self.v(n.inputs[1])) if given(1) else None)
        if pads is None:
            raise ExportError(f"Pad's pads `{n.inputs[1]}` are computed, not a constant")
        axes = self._ints(self.v(n.inputs[3])) if given(3) else list(range(rank))
        if axes is None:
            raise ExportError(f"Pad's axes `{n.inputs[3]}` are computed, not a constant")
        if len(pads) != 2 * len(axes) or any(not -rank <= ax < rank for ax in axes):
            raise ExportError(f"Pad with {len(pads)} pads for axes {axes} of a rank-{rank} input (2 per axis, starts then ends)")
        full = [0] * (2 * rank)
        for k, ax in enumerate(axes):
            full[ax % rank], full[rank + ax % rank] = int(pads[k]), int(pads[len(axes) + k])
        if any(p < 0 for p in full):
            raise ExportError(f"Pad with negative pads {full} (a crop): the catalog's pad only adds")
        attrs: Dict[str, Any] = {"pads": full, "mode": modes[mode]}
        if mode == "constant":
            value = self.const.get(self.v(n.inputs[2])) if given(2) else np.array(a.get("value", 0.0))
            if value is None or value.size != 1:
                raise ExportError(f"Pad's constant_value `{n.inputs[2]}` is computed, not a constant")
            if float(value.reshape(())) != 0.0:
                attrs["value"] = float(value.reshape(()))
        self.emit(n, "vsdk.pad", [self.inp(x, n, "const")], out, attrs)
        return True

    def resize(self, n: ONode) -> bool:
        """Resize of the last two axes of `[N, C, H, W]` -> `vsdk.resize_bilinear` (mode linear:
        `align_corners`, or PyTorch's half-pixel centres) or `vsdk.resize_nearest` (`asymmetric` +
        `floor`: PyTorch's `nearest`; half-pixel + `round_prefer_ceil`: `nearest-exact`). Scales
        become `scale_factor` (ONNX too maps with `1 / scale`), sizes `size`."""
        a, x, out = n.attrs, n.inputs[0], n.outputs[0]
        text = lambda k, d: (lambda v: v.decode() if isinstance(v, bytes) else str(v))(a.get(k, d))
        mode, coords, rounding = text("mode", "nearest"), text("coordinate_transformation_mode", "half_pixel"), text("nearest_mode", "round_prefer_floor")
        shape, dst = self.specs[x].shape, self.specs[out].shape
        if len(shape) != 4 or tuple(dst[:2]) != tuple(shape[:2]):
            raise ExportError(f"Resize of {list(shape)} to {list(dst)}: the catalog resizes the last two axes of [N, C, H, W]")
        if int(a.get("antialias", 0)) or "axes" in a or text("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise ExportError("Resize with antialias, axes or a keep_aspect_ratio_policy has no catalog operator")
        given = lambda k: len(n.inputs) > k and n.inputs[k]
        scales = self.const.get(self.v(n.inputs[2])) if given(2) else None
        attrs: Dict[str, Any]
        if scales is not None and scales.size == 4:
            s = [float(v) for v in scales.reshape(-1)]
            if s[:2] != [1.0, 1.0]:
                raise ExportError(f"Resize with scales {s}: the batch and channel axes must keep their size")
            kept = [dst[2 + i] == shape[2 + i] and s[2 + i] != 1.0 for i in range(2)]
            if any(kept):
                raise ExportError(f"Resize by {s[2:]} keeps an axis's length but resamples it (ONNX); the catalog copies such an axis (PyTorch's CPU kernels): export with sizes")
            attrs = {"scale_factor": s[2:]}
        elif given(3) or (scales is not None and scales.size == 0):
            attrs = {"size": [int(d) for d in dst[2:]]}
        else:
            raise ExportError("Resize's scales and sizes are computed, not constants")
        if coords == "pytorch_half_pixel" and 1 in (int(dst[2]), int(dst[3])):
            raise ExportError("Resize with pytorch_half_pixel to a length of 1 samples coordinate 0 (ONNX); PyTorch's kernels, and the catalog, sample the centre")
        if mode == "nearest":
            self._same_nearest(n, shape, dst, scales, coords, rounding)
        if mode == "linear" and coords in ("align_corners", "pytorch_half_pixel", "half_pixel"):
            if coords == "align_corners":
                attrs = {"size": [int(d) for d in dst[2:]], "align_corners": 1}
            self.emit(n, "vsdk.resize_bilinear", [self.inp(x, n, "const")], out, attrs)
            return True
        if mode == "nearest" and (coords, rounding) == ("asymmetric", "floor"):
            self.emit(n, "vsdk.resize_nearest", [self.inp(x, n, "const")], out, attrs)
            return True
        if mode == "nearest" and coords in ("half_pixel", "pytorch_half_pixel") and rounding == "round_prefer_ceil":
            self.emit(n, "vsdk.resize_nearest", [self.inp(x, n, "const")], out, dict(attrs, exact=1))
            return True
        raise ExportError(f"Resize mode `{mode}` with coordinate_transformation_mode `{coords}` and nearest_mode `{rounding}` has no catalog operator")

    def _same_nearest(self, n: ONode, shape, dst, scales, coords: str, rounding: str) -> None:
        """ONNX Runtime's nearest indices (float32: `i / scale` or half-pixel centres, `scale = out /
        in`) against the catalog's (PyTorch's float32 arithmetic, docs/operators.md): they part on some
        sizes; where they do on this call, it is refused rather than lowered to another function."""
        exact = coords != "asymmetric"
        for axis in (2, 3):
            size, out = int(shape[axis]), int(dst[axis])
            given = None if scales is None or scales.size != 4 else float(scales.reshape(-1)[axis])
            ort_scale = np.float32(given) if given is not None else np.float32(out) / np.float32(size)
            ours = np.float32(1.0 / given) if given is not None else np.float32(size) / np.float32(out)
            for i in range(out):
                if exact:
                    x = (np.float32(i) + np.float32(0.5)) / ort_scale - np.float32(0.5)
                    theirs = int(np.ceil(x)) if x == np.floor(x) + np.float32(0.5) else int(np.floor(x + np.float32(0.5)))
                    src = np.float32((i + 0.5) * np.float64(ours))
                else:
                    theirs = int(np.floor(np.float32(i) / ort_scale))
                    src = np.float32(np.float32(i) * ours)
                mine = i if not exact and out == size else i // 2 if not exact and out == 2 * size else int(np.floor(src))
                if min(max(theirs, 0), size - 1) != min(mine, size - 1):
                    raise ExportError(
                        f"Resize nearest ({coords}, {rounding}) of axis {axis} from {size} to {out}: ONNX's float32 index "
                        f"arithmetic reads pixel {min(max(theirs, 0), size - 1)} for output {i}, PyTorch's (the catalog's) "
                        f"pixel {min(mine, size - 1)}: not the same function"
                    )

    def group_norm(self, n: ONode) -> bool:
        """GroupNormalization (scale and bias per channel since opset 21, per group before: spread
        over the group's channels) and InstanceNormalization (a group per channel) -> `vsdk.group_norm`."""
        a, x, out = n.attrs, n.inputs[0], n.outputs[0]
        channels = int(self.specs[x].shape[1])
        groups = channels if n.op == "InstanceNormalization" else int(a["num_groups"])
        eps = float(str(np.float32(a.get("epsilon", 1e-5))))
        ins = [self.inp(x, n, "const")]
        for k, role in ((1, "weight"), (2, "bias")):
            name = self.v(n.inputs[k])
            size = int(np.prod(self.specs[name].shape)) if name in self.specs else int(self.const[name].size)
            if size == channels:
                ins.append(self.inp(name, n, role))
            elif size == groups and name in self.const:
                per_channel = np.repeat(self.const[name].reshape(-1), channels // groups).astype(np.float32)
                ins.append(self.use_const(name, n, role, per_channel))
            else:
                raise ExportError(f"{n.op}'s {role} `{name}` has {size} values for {channels} channels in {groups} groups")
        self.emit(n, "vsdk.group_norm", ins, out, {"groups": groups, "eps": eps})
        return True

    def gather(self, n: ONode) -> bool:
        idx = self._ints(n.inputs[1])
        if idx is None or len(idx) != 1:
            raise ExportError("a gather of non-constant or several indices has no catalog operator")
        shape = self.specs[n.inputs[0]].shape
        ax = n.attrs.get("axis", 0) % len(shape)
        i = idx[0] % shape[ax]
        offsets = [0] * len(shape)
        offsets[ax] = i
        sizes = list(shape)
        sizes[ax] = 1
        out = n.outputs[0]
        cropped = self.fresh(out)
        self.emit(n, "vsdk.crop", self.ins(n)[:1], cropped, {"offsets": offsets, "sizes": sizes}, Spec(tuple(sizes), self.specs[out].dtype))
        self.emit(n, "vsdk.reshape", [cropped], out, {"shape": list(self.specs[out].shape)})
        return True

    def split(self, n: ONode) -> bool:
        shape = self.specs[n.inputs[0]].shape
        ax = n.attrs.get("axis", 0) % len(shape)
        x = self.ins(n)[0]
        offset = 0
        for o in n.outputs:
            if o not in self.specs:
                raise ExportError(f"no static shape for `{o}`")
            size = self.specs[o].shape[ax]
            offsets = [0] * len(shape)
            offsets[ax] = offset
            self.emit(n, "vsdk.crop", [x], o, {"offsets": offsets, "sizes": list(self.specs[o].shape)})
            offset += size
        return True


class _NotFused(Exception):
    """A pattern that looks fused but is not exactly the catalog operator: why, and the node to name."""

    def __init__(self, reason: str, node: str):
        super().__init__(reason)
        self.reason, self.node = reason, node


@dataclass
class _Mask:
    """An attention mask found after the scale: an additive one, or a boolean `condition` (True keeps
    the score where `keep_when`, else masks it) with the value `fill` put where it masks."""

    node: ONode
    additive: Optional[str] = None
    condition: Optional[str] = None
    fill: Optional[str] = None
    keep_when: bool = True


# A fill at or below float16's lowest masks (exp(fill − max) is 0 for any score above fill + 745);
# at or below 2^100 it swamps the scores too (scores + fill round to fill in float32 and float64 while
# |scores| < 2^47), so a row masked whole is uniform in both forms.
_MASK_FILL = -65504.0
_SWAMPS = -(2.0**100)


def _causal_keep(keep: np.ndarray, length: int, keys: int) -> Optional[int]:
    """`P = keys − length` when boolean `keep` is the causal pattern of `length` queries after `P`
    cached keys (key j kept for query i iff j ≤ i + P), the same for every leading index; None for
    any other, one that broadcasts over queries or keys included."""
    if keep.ndim < 2 or tuple(keep.shape[-2:]) != (length, keys) or keys < length:
        return None
    past = keys - length
    return past if bool(np.all(keep == np.tril(np.ones((length, keys), dtype=bool), past))) else None


def _causal_offset(mask: np.ndarray, length: int, keys: int) -> Optional[int]:
    """`P = keys − length` when `mask` is the causal mask of `length` queries after `P` cached keys,
    the same for every leading index: 0 where key j ≤ i + P, −∞ elsewhere (a large finite negative
    is not: a row it masks whole is uniform, not NaN); None for any other mask, one that broadcasts
    over queries or keys included."""
    if mask.ndim < 2 or tuple(mask.shape[-2:]) != (length, keys) or keys < length:
        return None
    if mask.dtype.kind != "f" or not bool(np.all((mask == 0) | np.isneginf(mask))):
        return None
    return _causal_keep(mask == 0, length, keys)
