"""PyTorch -> the core graph, through `torch.export` (ATen operators, functional, no decompositions:
`run_decompositions({})` keeps `aten.linear`, `aten.layer_norm`, `aten.gelu`, `aten.conv2d`,
`aten.scaled_dot_product_attention` whole). Module paths and classes come from each node's
`nn_module_stack`, source lines from its stack trace. Nodes whose tensor inputs are all constants
(parameters and what is computed from them alone) are evaluated once, by PyTorch itself.
"""
from __future__ import annotations

import importlib
import operator
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...errors import ExportError, Unsupported
from ...graph import Graph, Node, Spec, c_order, slice_count
from ...lazy import need
from .runner import TorchRunner

_DTYPES = {"torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float64": "float64", "torch.int64": "int64", "torch.int32": "int32", "torch.uint8": "uint8"}
_FRIENDLY = {
    "_native_batch_norm_legit_no_training": "batch_norm",
    "_native_batch_norm_legit": "batch_norm",
    "native_batch_norm": "batch_norm",
    "batch_norm": "batch_norm",
}
_ALIASES = {"clone", "contiguous", "alias", "detach", "dropout", "lift_fresh_copy", "_assert_tensor_metadata"}
_ELEMENTWISE = {"add": "vsdk.add", "sub": "vsdk.sub", "mul": "vsdk.mul", "div": "vsdk.div"}
_UNARY = {
    "silu": "vsdk.silu",
    "sin": "vsdk.sin",
    "cos": "vsdk.cos",
    "relu": "vsdk.relu",
    "sigmoid": "vsdk.sigmoid",
    "tanh": "vsdk.tanh",
    "exp": "vsdk.exp",
    "sqrt": "vsdk.sqrt",
    "rsqrt": "vsdk.rsqrt",
    "hardswish": "vsdk.hardswish",
    "hardsigmoid": "vsdk.hardsigmoid",
}
# ATen's inference batch norms: the positions of (running_mean, running_var, training, eps) among
# their arguments (input, weight, bias first), and whether they return a tuple.
_BATCH_NORMS = {
    "_native_batch_norm_legit_no_training": (3, 4, None, 6, True),
    "native_batch_norm": (3, 4, 5, 7, True),
    "batch_norm": (3, 4, 5, 7, False),
}
_CREATION = ("arange", "full", "zeros", "ones", "scalar_tensor", "linspace", "eye")
_POOLS = ("max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d")
_REDUCTIONS = ("mean", "sum")
# ATen's clamps: the positions of (min, max) among the arguments, and their defaults.
_CLAMPS = {"clamp": (1, 2, None, None), "hardtanh": (1, 2, -1.0, 1.0), "clamp_min": (1, None, None, None), "clamp_max": (None, 1, None, None)}
_RESHAPES = {"view", "reshape", "_unsafe_view", "flatten", "unsqueeze", "squeeze", "unflatten"}
# ATen's pads: the mode of each (aten.pad names its own).
_PADS = {
    "pad": None,
    "constant_pad_nd": "constant",
    "reflection_pad1d": "reflect",
    "reflection_pad2d": "reflect",
    "reflection_pad3d": "reflect",
    "replication_pad1d": "replicate",
    "replication_pad2d": "replicate",
    "replication_pad3d": "replicate",
    "_pad_circular": "circular",
}
# ATen's 2-D upsamples: the catalog operator, and whether align_corners is its third argument.
_UPSAMPLES = {
    "upsample_bilinear2d": ("vsdk.resize_bilinear", True),
    "upsample_nearest2d": ("vsdk.resize_nearest", False),
    "_upsample_nearest_exact2d": ("vsdk.resize_nearest", False),
}


def load_factory(spec: str, input_shapes: Dict[str, List[int]]) -> Tuple[Graph, TorchRunner, str]:
    """`package.module:factory` -> a model (or (model, example_inputs)) -> the graph."""
    torch = need("torch")
    mod_name, _, fn_name = spec.partition(":")
    if not mod_name or not fn_name:
        raise ExportError(f"--torch {spec}: expected MODULE:FACTORY, e.g. my_models.vit:make")
    # The user's module is found where they run the command, as `python -m` would find it.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError) as e:
        raise ExportError(f"--torch {spec}: cannot import ({e})") from e
    try:
        made = factory()
    except Exception as e:  # the user's code: report it as theirs
        raise ExportError(f"--torch {spec}: the factory raised {type(e).__name__}: {e}") from e
    if isinstance(made, tuple):
        model, given = made[0], made[1]
        inputs = (given,) if isinstance(given, torch.Tensor) else tuple(given)
    else:
        model = made
        if not input_shapes:
            raise ExportError(f"--torch {spec}: the factory returned only a module; give its inputs with --input-shape NAME=D0,D1,...")
        gen = torch.Generator().manual_seed(0)
        inputs = tuple(torch.randn(*s, generator=gen) for s in input_shapes.values())
    return load_module(model, inputs, fn_name)


def load_module(model: Any, inputs: Tuple[Any, ...], name: Optional[str] = None) -> Tuple[Graph, TorchRunner, str]:
    torch = need("torch")
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"{name or 'the model'}: expected a torch.nn.Module, got {type(model).__name__}")
    model = model.eval()
    label = name or type(model).__name__
    try:
        with torch.no_grad():
            ep = torch.export.export(model, inputs).run_decompositions({})
    except Exception as e:  # torch.export raises many kinds, each with its own explanation
        raise ExportError(f"{label}: torch.export failed: {e}") from e
    graph = _Lowering(torch, ep, label).run()
    return graph, TorchRunner(ep, graph), f"{label} (PyTorch {torch.__version__})"


def _short(target: Any) -> str:
    s = str(target)
    if s.startswith("aten."):
        return s.split(".")[1]
    return getattr(target, "__name__", s)


def _source(node) -> Optional[str]:
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ")]
    # The model's own code, not torch.nn's forward that it called.
    own = [ln for ln in lines if "/torch/" not in ln]
    if not lines:
        return None
    last = (own or lines)[-1]  # File "x.py", line 12, in forward
    try:
        file = last.split('"')[1]
        line = last.split("line ")[1].split(",")[0]
        return f"{file}:{line}"
    except IndexError:
        return None


class _Lowering:
    def __init__(self, torch, ep, label: str):
        self.torch = torch
        self.ep = ep
        self.label = label
        sig = ep.graph_signature
        self.param_of = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
        self.user_inputs = list(sig.user_inputs)
        self.g = Graph(label, "torch", {}, [], {}, {}, [])
        self.const_t: Dict[str, Any] = {}  # node name -> constant torch tensor
        self.alias: Dict[str, str] = {}
        self.lists: Dict[str, List[str]] = {}  # multi-output node -> its part names
        self.placeholders: set = set()  # consts that are parameters or buffers as they are
        self.computed: Dict[str, str] = {}  # consts evaluated at export -> from what
        self.roots: Dict[str, set] = {}  # a const -> the parameters it derives from

    def v(self, name: str) -> str:
        while name in self.alias:
            name = self.alias[name]
        return name

    def spec(self, node) -> Spec:
        val = node.meta.get("val")
        if val is None or not hasattr(val, "shape"):
            raise ExportError(f"{node.name}: no tensor metadata")
        return Spec(tuple(int(d) for d in val.shape), _DTYPES[str(val.dtype)])

    def const(self, name: str, t: Any, clean: Optional[str] = None) -> str:
        if name not in self.g.consts:
            a = t.detach().to(self.torch.float32 if t.is_floating_point() else t.dtype).cpu().numpy()
            self.g.consts[name] = c_order(a)
            self.g.specs[name] = Spec(tuple(a.shape), str(a.dtype))
            if clean:
                self.g.const_names[name] = clean
            if name in self.placeholders and t.is_floating_point():
                self.g.params[name] = (self.param_of[name], False)
            elif name in self.computed:
                self.g.computed[name] = self.computed[name]
                self.g.framework_names[name] = name
        return name

    def scalar(self, x: Any, like: str) -> str:
        name = f"{like}.scalar{len(self.g.consts)}"
        self.g.consts[name] = np.array(float(x), dtype=np.float32)
        self.g.specs[name] = Spec((), "float32")
        return name

    def arg(self, a: Any, node) -> str:
        """A tensor argument: a value name, with constants recorded."""
        if hasattr(a, "name"):
            n = self.v(a.name)
            if n in self.const_t:
                return self.const(n, self.const_t[n], self.param_of.get(n))
            return n
        if isinstance(a, (int, float)):
            return self.scalar(a, node.name)
        raise ExportError(f"{node.name}: unexpected argument {a!r}")

    def batch_norm(self, node, t: str, args: Sequence[Any]) -> bool:
        """Inference batch norm (running statistics) -> `vsdk.batch_norm`; in training mode the
        batch's own statistics are used, which no catalog operator computes."""
        at_mean, at_var, at_training, at_eps, tuple_out = _BATCH_NORMS[t]
        if at_training is not None and bool(args[at_training]):
            raise ExportError(f"{node.name}: aten.{t} in training mode (the batch's own statistics): export the model in eval()")
        x = args[0]
        ch = int(x.meta["val"].shape[1])
        ones = lambda what, fill: self.const(f"{node.name}.{what}", self.torch.full((ch,), fill))
        w = self.arg(args[1], node) if args[1] is not None else ones("ones", 1.0)
        b = self.arg(args[2], node) if args[2] is not None else ones("zeros", 0.0)
        ins = [self.arg(x, node), self.arg(args[at_mean], node), self.arg(args[at_var], node), w, b]
        eps = float(node.kwargs.get("eps", args[at_eps] if len(args) > at_eps else 1e-5))
        if not tuple_out:
            self.emit(node, "vsdk.batch_norm", ins, {"eps": eps})
            return True
        out = f"{node.name}.0"
        spec = Spec(tuple(int(d) for d in x.meta["val"].shape), _DTYPES[str(x.meta["val"].dtype)])
        self.emit(node, "vsdk.batch_norm", ins, {"eps": eps}, output=out, spec=spec)
        self.lists[node.name] = [out]  # the saved statistics (outputs 1, 2) are training's
        return True

    def sdpa(self, node) -> bool:
        """`F.scaled_dot_product_attention` -> `vsdk.sdpa`: an additive float mask as its fourth input,
        `is_causal` as causal_offset 0 (PyTorch aligns it top-left), grouped key/value heads as they
        are (with `enable_gqa`, or found behind transformers' `repeat_kv`)."""
        args, kw = list(node.args), dict(node.kwargs)
        names = ["attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
        given = dict(zip(names, args[3:]))
        given.update({k: v for k, v in kw.items() if k in names})
        if given.get("dropout_p", 0.0):
            raise ExportError(f"{node.name}: sdpa with dropout_p {given['dropout_p']} (training) has no catalog operator")
        q = args[0].meta["val"]
        k, v = (self.repeat_kv.get(node.name, {}).get(i, args[i]) for i in (1, 2))
        ins = [self.arg(args[0], node), self.arg(k, node), self.arg(v, node)]
        attrs: Dict[str, Any] = {"scale": float(given.get("scale") or (1.0 / float(q.shape[-1]) ** 0.5))}
        mask = given.get("attn_mask")
        folded = self.const_t.get(self.v(mask.name)) if mask is not None else None
        lq, lk = int(q.shape[-2]), int(k.meta["val"].shape[-2])
        offset = _causal_offset(self.torch, folded, lq, lk) if folded is not None else None
        if offset is not None:
            # A constant causal mask (transformers builds one per step): the kernel's own causal
            # path, with the cache's length as its offset.
            attrs["causal_offset"] = offset
        elif mask is not None:
            if str(mask.meta["val"].dtype) == "torch.bool":
                raise ExportError(f"{node.name}: sdpa with a boolean mask (True = keep) has no catalog operator: pass an additive float mask")
            ins.append(self.arg(mask, node))
        if given.get("is_causal"):
            attrs["causal_offset"] = 0
        self.emit(node, "vsdk.sdpa", ins, attrs)
        return True

    def rotary(self, node) -> bool:
        """`x·cos + rotate_half(x)·sin` (transformers' apply_rotary_pos_emb) with constant tables
        whose two halves repeat (`cat((freqs, freqs))`) -> `vsdk.rotary_embedding`. Otherwise the
        nodes passed over are lowered one by one, and False lets the addition lower as itself."""
        x, cos, sin, parts = self.rotaries[node.name]
        tables = [self.const_t.get(self.v(t.name)) for t in (cos, sin)]
        rows, width = tuple(x.meta["val"].shape)[-2:]
        ok = all(t is not None and t.shape[-2:] == (rows, width) and all(d == 1 for d in t.shape[:-2]) for t in tables)
        half = width // 2
        if ok:
            flat = [t.reshape(rows, width) for t in tables]
            ok = all(bool((t[:, :half] == t[:, half:]).all()) for t in flat)
        if not ok:
            for n in parts:
                if not self.fold(n) and not self.lower(n):
                    raise ExportError(f"{n.name}: part of a rotary embedding that does not fuse, and has no lowering")
            return False
        c, s_ = (self.const(f"{node.name}.{what}", t[:, :half].contiguous()) for what, t in zip(("cos", "sin"), flat))
        for t, name in ((cos, c), (sin, s_)):
            if self.v(t.name) in self.computed:
                self.g.computed[name] = self.computed[self.v(t.name)]
        self.emit(node, "vsdk.rotary_embedding", [self.arg(x, node), c, s_])
        return True

    def expand(self, node) -> bool:
        """`expand` of size-1 axes -> copies concatenated along each (exact data movement; a few
        copies at most, as transformers' repeat_kv makes)."""
        x = node.args[0]
        src, dst = tuple(x.meta["val"].shape), self.spec(node)
        name = self.arg(x, node)
        lead = len(dst.shape) - len(src)
        shape = list(src)
        if lead:
            shape = [1] * lead + shape
            name = self.emit(node, "vsdk.reshape", [name], {"shape": shape}, output=f"{node.name}.lead", spec=Spec(tuple(shape), dst.dtype))
        axes = [a for a in range(len(shape)) if shape[a] != dst.shape[a]]
        if not axes:
            self.alias[node.name] = name
            return True
        for n, a in enumerate(axes):
            times = dst.shape[a]
            if shape[a] != 1 or times > 64:
                raise ExportError(f"{node.name}: expand of axis {a} from {shape[a]} to {times} (only size-1 axes, 64 copies at most, become copies)")
            shape[a] = times
            last = n == len(axes) - 1
            out = node.name if last else f"{node.name}.axis{a}"
            name = self.emit(node, "vsdk.concat", [name] * times, {"axis": a}, output=out, spec=None if last else Spec(tuple(shape), dst.dtype))
        return True

    def pool(self, node, t: str, args: Sequence[Any]) -> bool:
        """`max_pool2d` (and `_with_indices`, its values), `avg_pool2d`, `adaptive_avg_pool2d` ->
        the catalog's pools; PyTorch's stride defaults to the kernel, its padding is symmetric."""
        x = self.arg(args[0], node)
        if len(args[0].meta["val"].shape) != 4:
            raise ExportError(f"{node.name}: aten.{t} of a {len(args[0].meta['val'].shape)}-d input (the catalog pools [N, C, H, W])")
        pair = lambda v: [int(v)] * 2 if isinstance(v, int) else [int(i) for i in v] * (2 if len(v) == 1 else 1)
        if t.startswith("_adaptive") or t.startswith("adaptive"):
            self.emit(node, "vsdk.adaptive_avg_pool2d", [x], {"output_size": list(self.spec(node).shape[2:])})
            return True
        names = ["kernel_size", "stride", "padding"] + (["dilation", "ceil_mode"] if t.startswith("max") else ["ceil_mode", "count_include_pad", "divisor_override"])
        given = dict(zip(names, args[1:]))
        given.update({k: v for k, v in node.kwargs.items() if k in names})
        kernel = pair(given["kernel_size"])
        stride = pair(given.get("stride") or kernel)
        pad = pair(given.get("padding", 0))
        attrs: Dict[str, Any] = {"kernel": kernel, "strides": stride, "pads": pad + pad, "ceil_mode": int(bool(given.get("ceil_mode", False)))}
        if t.startswith("max"):
            attrs["dilations"] = pair(given.get("dilation", 1))
            op = "vsdk.max_pool2d"
        else:
            if given.get("divisor_override") is not None:
                raise ExportError(f"{node.name}: avg_pool2d with divisor_override {given['divisor_override']} has no catalog operator")
            attrs["count_include_pad"] = int(bool(given.get("count_include_pad", True)))
            op = "vsdk.avg_pool2d"
        if t != "max_pool2d_with_indices":
            self.emit(node, op, [x], attrs)
            return True
        val = node.meta["val"][0]
        out = f"{node.name}.0"
        self.emit(node, op, [x], attrs, output=out, spec=Spec(tuple(int(d) for d in val.shape), _DTYPES[str(val.dtype)]))
        self.lists[node.name] = [out]  # output 1, the indices, has no catalog operator
        return True

    def reduce(self, node, t: str, args: Sequence[Any]) -> bool:
        """`mean`/`sum` over dims (all when none are given) -> `vsdk.mean`/`vsdk.sum`; a dtype
        argument (accumulate or return in another type) has no catalog operator."""
        rank = len(args[0].meta["val"].shape)
        dims = args[1] if len(args) > 1 else node.kwargs.get("dim")
        keep = bool(args[2] if len(args) > 2 else node.kwargs.get("keepdim", False))
        if node.kwargs.get("dtype") is not None:
            raise ExportError(f"{node.name}: aten.{t} with dtype {node.kwargs['dtype']} has no catalog operator")
        axes = list(range(rank)) if dims is None or (isinstance(dims, (list, tuple)) and not dims) else [int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
        self.emit(node, "vsdk.mean" if t == "mean" else "vsdk.sum", [self.arg(args[0], node)], {"axes": axes, "keepdims": int(keep)})
        return True

    def pad(self, node, t: str, args: Sequence[Any]) -> bool:
        """`F.pad` (aten.pad, constant_pad_nd, reflection_/replication_pad, _pad_circular) ->
        `vsdk.pad`. PyTorch lists (start, end) pairs from the last axis backwards; the catalog
        lists every axis's start, then every end (ONNX's order)."""
        rank = len(args[0].meta["val"].shape)
        pairs = [int(v) for v in args[1]]
        mode = _PADS[t] or (args[2] if len(args) > 2 else node.kwargs.get("mode", "constant"))
        value = args[2] if t == "constant_pad_nd" and len(args) > 2 else (args[3] if t == "pad" and len(args) > 3 else node.kwargs.get("value"))
        if mode not in ("constant", "reflect", "replicate", "circular"):
            raise ExportError(f"{node.name}: aten.{t} mode `{mode}` has no catalog operator")
        pads = [0] * (2 * rank)
        for i in range(len(pairs) // 2):
            axis = rank - 1 - i
            pads[axis], pads[rank + axis] = pairs[2 * i], pairs[2 * i + 1]
        if any(p < 0 for p in pads):
            raise ExportError(f"{node.name}: aten.{t} with negative pads {pairs} (a crop): the catalog's pad only adds")
        attrs: Dict[str, Any] = {"pads": pads, "mode": mode}
        if mode == "constant" and value is not None and float(value) != 0.0:
            attrs["value"] = float(value)
        self.emit(node, "vsdk.pad", [self.arg(args[0], node)], attrs)
        return True

    def upsample(self, node, t: str, args: Sequence[Any]) -> bool:
        """`F.interpolate` in bilinear (no antialias), nearest or nearest-exact over `[N, C, H, W]`
        -> the catalog's resizes: `scale_factor` where PyTorch was given one (its kernels map with
        `1 / s`, not `in / out`), else `size`."""
        op, aligned = _UPSAMPLES[t]
        if len(args[0].meta["val"].shape) != 4:
            raise ExportError(f"{node.name}: aten.{t} of a {len(args[0].meta['val'].shape)}-d input (the catalog resizes [N, C, H, W])")
        rest = list(args[1:])
        align = bool(rest.pop(1)) if aligned and len(rest) > 1 else bool(node.kwargs.get("align_corners", False))
        scales = rest[1] if len(rest) > 1 else node.kwargs.get("scale_factors")
        if isinstance(scales, (int, float)) or (scales is None and len(rest) > 2):
            # The .default overload: (output_size, [align_corners,] scales_h, scales_w).
            hw = [rest[1], rest[2]] if len(rest) > 2 else [None, None]
            scales = None if None in hw else hw
        attrs: Dict[str, Any] = {"size": list(self.spec(node).shape[2:])} if scales is None else {"scale_factor": [float(v) for v in scales]}
        if op == "vsdk.resize_bilinear":
            attrs["align_corners"] = int(align)
            if align:
                attrs = {"size": list(self.spec(node).shape[2:]), "align_corners": 1}
        elif t == "_upsample_nearest_exact2d":
            attrs["exact"] = 1
        self.emit(node, op, [self.arg(args[0], node)], attrs)
        return True

    def group_norm(self, node, t: str, args: Sequence[Any]) -> bool:
        """`group_norm(x, groups, weight, bias, eps)` and `native_group_norm(x, weight, bias, N, C,
        HxW, groups, eps)` (its mean and rstd outputs have no catalog operator) -> `vsdk.group_norm`;
        a missing affine is ones and zeros."""
        x = args[0]
        channels = int(x.meta["val"].shape[1])
        if t == "group_norm":
            groups = int(args[1])
            w, b = (args[2] if len(args) > 2 else None), (args[3] if len(args) > 3 else None)
            eps = float(args[4]) if len(args) > 4 else float(node.kwargs.get("eps", 1e-5))
        else:
            w, b, groups, eps = args[1], args[2], int(args[6]), float(args[7])
        wn = self.arg(w, node) if w is not None else self.const(f"{node.name}.ones", self.torch.ones(channels))
        bn = self.arg(b, node) if b is not None else self.const(f"{node.name}.zeros", self.torch.zeros(channels))
        attrs = {"groups": groups, "eps": eps}
        if t == "group_norm":
            self.emit(node, "vsdk.group_norm", [self.arg(x, node), wn, bn], attrs)
            return True
        val = node.meta["val"][0]
        out = f"{node.name}.0"
        self.emit(node, "vsdk.group_norm", [self.arg(x, node), wn, bn], attrs, output=out, spec=Spec(tuple(int(d) for d in val.shape), _DTYPES[str(val.dtype)]))
        self.lists[node.name] = [out]  # the group statistics are training's
        return True

    def clamp(self, node, t: str, args: Sequence[Any]) -> bool:
        """`clamp`, `clamp_min`, `clamp_max`, `hardtanh` (ReLU6) with number bounds -> `vsdk.clamp`;
        tensor bounds have no catalog operator."""
        at_min, at_max, lo, hi = _CLAMPS[t]
        names = {"clamp": ("min", "max"), "hardtanh": ("min_val", "max_val"), "clamp_min": ("min", None), "clamp_max": (None, "max")}[t]

        def bound(at: Optional[int], name: Optional[str], default: Optional[float]) -> Optional[float]:
            if at is None:
                return None
            v = node.kwargs.get(name, args[at] if len(args) > at else default)
            if v is not None and not isinstance(v, (int, float)):
                raise ExportError(f"{node.name}: aten.{t} with a tensor bound has no catalog operator (number bounds only)")
            return None if v is None else float(v)

        lo, hi = bound(at_min, names[0], lo), bound(at_max, names[1], hi)
        if lo is None and hi is None:
            self.alias[node.name] = self.v(args[0].name)
            return True
        if lo is not None and hi is not None and lo > hi:
            raise ExportError(f"{node.name}: aten.{t} with min {lo} above max {hi} (PyTorch then returns max everywhere): not the catalog's clamp")
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        self.emit(node, "vsdk.clamp", [self.arg(args[0], node)], attrs)
        return True

    def emit(self, node, op: str, inputs: List[str], attrs=None, output: Optional[str] = None, spec: Optional[Spec] = None) -> str:
        out = output or node.name
        stack = node.meta.get("nn_module_stack") or {}
        module = ""
        for path, cls in stack.values():
            module = _path(path)
            self.g.module_classes.setdefault(module, cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}")
        self.g.nodes.append(Node(op, inputs, out, dict(attrs or {}), module, f"{node.target}", _source(node)))
        self.g.specs[out] = spec or self.spec(node)
        if out == node.name:  # the node's own value (a part of one is captured through its getitem)
            self.g.framework_names[out] = node.name
        return out

    def run(self) -> Graph:
        torch = self.torch
        state = {**self.ep.state_dict, **getattr(self.ep, "constants", {})}
        self.attention = _Attention(self.ep.graph, state, self.param_of)
        self.repeat_kv, skipped = _repeat_kv(self.ep.graph)
        self.attention.absorbed.update(skipped)
        self.rotaries = _rotate_half(self.ep.graph)
        for parts in self.rotaries.values():
            self.attention.absorbed.update(n.name for n in parts[3])
        for node in self.ep.graph.nodes:
            if node.op == "placeholder":
                if node.name in self.param_of:
                    self.const_t[node.name] = state[self.param_of[node.name]]
                    self.placeholders.add(node.name)
                    self.roots[node.name] = {self.param_of[node.name]}
                else:
                    self.g.inputs[node.name] = self.spec(node)
                    self.g.specs[node.name] = self.g.inputs[node.name]
                    self.g.framework_names[node.name] = node.name
                continue
            if node.op == "output":
                outs = node.args[0]
                self.g.outputs = [self.v(o.name) for o in (outs if isinstance(outs, (list, tuple)) else [outs]) if hasattr(o, "name")]
                self.g.output_names = {o: "output" if len(self.g.outputs) == 1 else f"output{k}" for k, o in enumerate(self.g.outputs)}
                continue
            if node.op != "call_function":
                continue
            try:
                if node.name in self.attention.absorbed:
                    continue  # part of an attention written out, lowered as one sdpa below
                if node.name in self.attention.fused:
                    q, k, v, scale = self.attention.fused[node.name]
                    self.emit(node, "vsdk.sdpa", [self.arg(q, node), self.arg(k, node), self.arg(v, node)], {"scale": scale})
                    continue
                if node.name in self.rotaries and self.rotary(node):
                    continue
                if self.fold(node):
                    continue
                if not self.lower(node):
                    short = _short(node.target)
                    friendly = _FRIENDLY.get(short)
                    op = f"aten.{short}" + (f" ({friendly})" if friendly and friendly != short else "")
                    stack = node.meta.get("nn_module_stack") or {}
                    where = _path(list(stack.values())[-1][0]) if stack else ""
                    self.g.unsupported.append(Unsupported(op, where or node.name, where, source=_source(node)))
            except ExportError as e:
                stack = node.meta.get("nn_module_stack") or {}
                where = _path(list(stack.values())[-1][0]) if stack else ""
                self.g.unsupported.append(Unsupported(f"aten.{_short(node.target)}", where or node.name, where, source=_source(node), reason=str(e)))
        del torch
        return self.g

    def fold(self, node) -> bool:
        """Evaluates a node whose tensor inputs are all constant."""
        flat = [a for a in _flatten(node.args) + _flatten(list(node.kwargs.values())) if hasattr(a, "name")]
        # A node of constants alone, or a deterministic one of none (a causal mask, rotary positions).
        if not all(self.v(a.name) in self.const_t for a in flat):
            return False
        if not flat and _short(node.target) not in _CREATION:
            return False
        if node.target is operator.getitem:
            return False

        def value(a):
            if hasattr(a, "name"):
                return self.const_t[self.v(a.name)]
            if isinstance(a, (list, tuple)):
                return type(a)(value(x) for x in a)
            return a

        with self.torch.no_grad():
            out = node.target(*value(list(node.args)), **{k: value(v) for k, v in node.kwargs.items()})
        if not isinstance(out, self.torch.Tensor):
            return False
        self.const_t[node.name] = out
        # Named after the parameter it comes from: a view of one keeps its name (the class token);
        # anything else computed from one is `<param>.computed` (an interpolated position embedding).
        sources = {self.v(a.name) for a in flat}
        roots = sorted(set().union(*(self.roots.get(s, set()) for s in sources)))
        self.roots[node.name] = set(roots)
        src = next(iter(sources), None)
        if len(sources) == 1 and _view(node) and self.const_t[src].numel() == out.numel() and src not in self.computed:
            if src in self.param_of:
                self.param_of[node.name] = self.param_of[src]
            return True
        if len(roots) == 1:
            self.param_of[node.name] = f"{roots[0]}.computed"
        self.computed[node.name] = f"aten.{_short(node.target)}, from {', '.join(roots) or 'constants'}"
        return True

    def lower(self, node) -> bool:
        t = _short(node.target)
        args = node.args
        if node.target is operator.getitem:
            parts = self.lists.get(args[0].name)
            if parts is None:
                # Part of a multi-output operator already listed as unsupported.
                return any(u.where == args[0].name or u.source == _source(args[0]) for u in self.g.unsupported)
            if int(args[1]) >= len(parts):
                source = _short(args[0].target)
                what = "max pooling's indices" if "pool" in source else ("a group norm's statistics are training's" if "group_norm" in source else "a batch norm's saved statistics are training's")
                raise ExportError(f"{node.name}: output {args[1]} of {args[0].name} ({what}) has no catalog operator")
            self.alias[node.name] = parts[args[1]]
            self.g.framework_names[parts[args[1]]] = node.name
            return True
        if t in _ALIASES or (t in ("to", "_to_copy") and self.spec(node) == self.g.specs.get(self.v(args[0].name))):
            self.alias[node.name] = self.v(args[0].name)
            return True
        if t == "expand":
            return self.expand(node)
        if t in _ELEMENTWISE:
            if len(args) > 2 or node.kwargs.get("alpha", 1) != 1 or node.kwargs.get("rounding_mode"):
                return False
            self.emit(node, _ELEMENTWISE[t], [self.arg(args[0], node), self.arg(args[1], node)])
            return True
        if t in _UNARY:
            self.emit(node, _UNARY[t], [self.arg(args[0], node)])
            return True
        if t in _CLAMPS:
            return self.clamp(node, t, args)
        if t in _BATCH_NORMS:
            return self.batch_norm(node, t, args)
        if t in _POOLS:
            return self.pool(node, t, args)
        if t in _REDUCTIONS:
            return self.reduce(node, t, args)
        if t in _PADS:
            return self.pad(node, t, args)
        if t in _UPSAMPLES:
            return self.upsample(node, t, args)
        if t in ("group_norm", "native_group_norm"):
            return self.group_norm(node, t, args)
        if t in ("matmul", "bmm"):
            ranks = [len(a.meta["val"].shape) for a in args[:2]]
            if min(ranks) < 2:
                raise ExportError(f"{node.name}: aten.{t} of a {min(ranks)}-d operand (NumPy's vector rule): the catalog's matmul takes matrices")
            self.emit(node, "vsdk.matmul", [self.arg(args[0], node), self.arg(args[1], node)])
            return True
        if t == "gelu":
            approx = node.kwargs.get("approximate", args[1] if len(args) > 1 else "none")
            self.emit(node, "vsdk.gelu_tanh" if approx == "tanh" else "vsdk.gelu", [self.arg(args[0], node)])
            return True
        if t == "linear":
            ins = [self.arg(args[0], node), self.arg(args[1], node)]
            if len(args) > 2 and args[2] is not None:
                ins.append(self.arg(args[2], node))
            self.emit(node, "vsdk.linear", ins)
            return True
        if t == "conv2d":
            defaults = [None, [1, 1], [0, 0], [1, 1], 1]
            bias, stride, padding, dilation, groups = list(args[2:]) + defaults[len(args) - 2 :]
            if isinstance(padding, str):
                return False
            ins = [self.arg(args[0], node), self.arg(args[1], node)]
            if bias is not None:
                ins.append(self.arg(bias, node))
            pads = [int(padding[0]), int(padding[1]), int(padding[0]), int(padding[1])]
            self.emit(node, "vsdk.conv2d", ins, {"strides": list(stride), "pads": pads, "dilations": list(dilation), "groups": int(groups)})
            return True
        if t == "layer_norm":
            x = self.arg(args[0], node)
            shape = list(args[1])
            w = args[2] if len(args) > 2 else None
            b = args[3] if len(args) > 3 else None
            eps = float(args[4]) if len(args) > 4 else 1e-5
            wn = self.arg(w, node) if w is not None else self.const(f"{node.name}.ones", self.torch.ones(shape))
            bn = self.arg(b, node) if b is not None else self.const(f"{node.name}.zeros", self.torch.zeros(shape))
            self.emit(node, "vsdk.layer_norm", [x, wn, bn], {"axis": -len(shape), "eps": eps})
            return True
        if t in ("softmax", "_softmax"):
            self.emit(node, "vsdk.softmax", [self.arg(args[0], node)], {"axis": int(args[1])})
            return True
        if t == "scaled_dot_product_attention":
            return self.sdpa(node)
        if t == "pow" and len(args) > 1 and isinstance(args[1], (int, float)) and float(args[1]) == 2.0:
            x = self.arg(args[0], node)
            self.emit(node, "vsdk.mul", [x, x])
            return True
        if t == "neg":
            self.emit(node, "vsdk.mul", [self.arg(args[0], node), self.scalar(-1.0, node.name)])
            return True
        if t == "cat":
            # PyTorch skips 1-D empty tensors in a cat whatever its axis (an empty KV cache's start).
            parts = [a for a in args[0] if tuple(a.meta["val"].shape) != (0,)]
            if len(parts) == 1:
                self.alias[node.name] = self.v(self.arg(parts[0], node))
                return True
            self.emit(node, "vsdk.concat", [self.arg(a, node) for a in parts], {"axis": int(args[1]) if len(args) > 1 else 0})
            return True
        if t in _RESHAPES:
            self.emit(node, "vsdk.reshape", [self.arg(args[0], node)], {"shape": list(self.spec(node).shape)})
            return True
        if t == "permute":
            self.emit(node, "vsdk.permute", [self.arg(args[0], node)], {"perm": [int(d) % len(self.spec(node).shape) for d in args[1]]})
            return True
        if t in ("transpose", "t"):
            r = len(self.spec(node).shape)
            d0, d1 = (args[1] % r, args[2] % r) if t == "transpose" else (0, 1)
            perm = list(range(r))
            perm[d0], perm[d1] = perm[d1], perm[d0]
            self.emit(node, "vsdk.permute", [self.arg(args[0], node)], {"perm": perm})
            return True
        if t == "slice":
            return self.slice(node)
        if t == "select":
            return self.select(node, args[0], int(args[1]), int(args[2]), node.name)
        if t in ("unbind", "split", "split_with_sizes", "chunk"):
            return self.parts(node, t)
        return False

    def slice(self, node) -> bool:
        args = list(node.args) + [None] * 5
        x, dim, start, end, step = args[:5]
        step = 1 if step is None else int(step)
        if step < 1:
            raise ExportError(f"slice with step {step} (PyTorch allows only positive steps)")
        shape = self.g.specs[self.v(x.name)].shape if self.v(x.name) in self.g.specs else tuple(x.meta["val"].shape)
        dim = int(dim or 0) % len(shape)
        n = shape[dim]
        s = 0 if start is None else int(start)
        e = n if end is None else int(end)
        s = max(0, min(n, s + n if s < 0 else s))
        e = max(0, min(n, e + n if e < 0 else e))
        offsets, sizes = [0] * len(shape), list(shape)
        offsets[dim], sizes[dim] = s, slice_count(s, e, step)
        attrs = {"offsets": offsets, "sizes": sizes}
        if step != 1:
            attrs["steps"] = [step if d == dim else 1 for d in range(len(shape))]
        self.emit(node, "vsdk.crop", [self.arg(x, node)], attrs)
        return True

    def select(self, node, x, dim: int, index: int, out: str, spec: Optional[Spec] = None) -> bool:
        shape = tuple(x.meta["val"].shape)
        dim %= len(shape)
        index %= shape[dim]
        offsets, sizes = [0] * len(shape), list(shape)
        offsets[dim], sizes[dim] = index, 1
        dtype = _DTYPES[str(x.meta["val"].dtype)]
        cropped = self.emit(node, "vsdk.crop", [self.arg(x, node)], {"offsets": offsets, "sizes": sizes}, output=f"{out}.crop", spec=Spec(tuple(sizes), dtype))
        final = spec or self.spec(node)
        self.emit(node, "vsdk.reshape", [cropped], {"shape": list(final.shape)}, output=out, spec=final)
        return True

    def parts(self, node, t: str) -> bool:
        x = node.args[0]
        shape = tuple(x.meta["val"].shape)
        vals = node.meta["val"]
        dtype = _DTYPES[str(x.meta["val"].dtype)]
        names = []
        if t == "unbind":
            dim = int(node.args[1]) if len(node.args) > 1 else 0
            for i, v in enumerate(vals):
                out = f"{node.name}.{i}"
                self.select(node, x, dim, i, out, Spec(tuple(int(d) for d in v.shape), dtype))
                names.append(out)
        else:
            dim = (int(node.args[2]) if len(node.args) > 2 else 0) % len(shape)
            offset = 0
            for i, v in enumerate(vals):
                sizes = [int(d) for d in v.shape]
                offsets = [0] * len(shape)
                offsets[dim] = offset
                out = f"{node.name}.{i}"
                self.emit(node, "vsdk.crop", [self.arg(x, node)], {"offsets": offsets, "sizes": sizes}, output=out, spec=Spec(tuple(sizes), dtype))
                names.append(out)
                offset += sizes[dim]
        self.lists[node.name] = names
        return True


class _Attention:
    """softmax(scale · q kᵀ) v written out with matmuls (DINOv2's official `Attention`, many LLMs):
    found before lowering, so it becomes one `vsdk.sdpa` as `F.scaled_dot_product_attention` does."""

    _MATMULS = ("matmul", "bmm")
    _PASS = ("dropout", "clone", "contiguous", "alias", "detach")

    def __init__(self, graph, state, param_of):
        self.state = state
        self.param_of = param_of
        self.fused: Dict[str, Tuple[Any, Any, Any, float]] = {}
        self.absorbed: set = set()
        for pv in graph.nodes:
            if pv.op == "call_function" and _short(pv.target) in self._MATMULS:
                self._match(pv)

    def _scalar(self, a) -> Optional[float]:
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            return float(a)
        if hasattr(a, "name") and a.op == "placeholder" and a.name in self.param_of:
            t = self.state.get(self.param_of[a.name])
            if t is not None and t.numel() == 1:
                return float(t.reshape(()))
        return None

    def _match(self, pv) -> None:
        taken: List[Any] = [pv]
        p, v = pv.args[0], pv.args[1]
        while hasattr(p, "op") and p.op == "call_function" and _short(p.target) in self._PASS and len(p.users) == 1:
            taken.append(p)
            p = p.args[0]
        if not (hasattr(p, "op") and _short(p.target) in ("softmax", "_softmax") and len(p.users) == 1):
            return
        rank = len(p.meta["val"].shape)
        if int(p.args[1]) % rank != rank - 1:
            return
        taken.append(p)
        scores, s0 = self._strip_taking(p.args[0], taken)
        if not (hasattr(scores, "op") and _short(scores.target) in self._MATMULS and len(scores.users) == 1):
            return
        taken.append(scores)
        q, s1 = self._strip_taking(scores.args[0], taken)
        kt, s2 = self._strip_taking(scores.args[1], taken)
        if not (hasattr(kt, "op") and kt.op == "call_function" and len(kt.users) == 1):
            return
        t = _short(kt.target)
        r = len(kt.meta["val"].shape)
        if t == "transpose" and sorted((int(kt.args[1]) % r, int(kt.args[2]) % r)) == [r - 2, r - 1]:
            pass
        elif t == "permute" and [int(d) % r for d in kt.args[1]] == list(range(r - 2)) + [r - 1, r - 2]:
            pass
        else:
            return
        taken.append(kt)
        k, s3 = self._strip_taking(kt.args[0], taken)
        qs, ks, vs = (tuple(x.meta["val"].shape) for x in (q, k, v))
        if not (len(qs) == len(ks) == len(vs) >= 2 and qs[:-2] == ks[:-2] == vs[:-2] and ks[-2] == vs[-2]):
            return
        scale = s0 * s1 * s2 * s3
        self.fused[pv.name] = (q, k, v, float(str(np.float32(scale))))
        self.absorbed.update(n.name for n in taken if n is not pv)

    def _strip_taking(self, n, taken: List[Any]) -> Tuple[Any, float]:
        """Follows single-use scalar multiplications and divisions (and dropout, clones) back from
        `n`, recording each node passed: (the value before them, their product)."""
        scale = 1.0
        while hasattr(n, "op") and n.op == "call_function" and len(n.users) == 1:
            t = _short(n.target)
            if t in ("mul", "div") and len(n.args) == 2:
                a, b = n.args
                sb, sa = self._scalar(b), self._scalar(a)
                if sb is not None:
                    taken.append(n)
                    scale, n = scale * (sb if t == "mul" else 1.0 / sb), a
                    continue
                if t == "mul" and sa is not None:
                    taken.append(n)
                    scale, n = scale * sa, b
                    continue
                break
            if t in self._PASS:
                taken.append(n)
                n = n.args[0]
                continue
            break
        return n, scale


def _causal_offset(torch, mask, length: int, keys: int) -> Optional[int]:
    """`P = keys − length` when `mask` is the causal mask of `length` queries after `P` cached keys,
    the same for every leading index: 0 (or True) where key j ≤ i + P, −∞ (or False) elsewhere;
    None for any other mask (one that broadcasts over queries or keys included)."""
    if mask.ndim < 2 or tuple(mask.shape[-2:]) != (length, keys) or keys < length:
        return None
    past = keys - length
    keep = torch.ones(length, keys, dtype=torch.bool).tril(past)
    want = keep if mask.dtype == torch.bool else torch.where(keep, 0.0, float("-inf")).to(mask.dtype)
    return past if bool((mask == want).all()) else None


def _rotate_half(graph) -> Dict[str, Tuple[Any, Any, Any, List[Any]]]:
    """transformers' `x * cos + rotate_half(x) * sin`, rotate_half(x) = `cat((-x2, x1), -1)` of
    x's two halves: {add node: (x, cos, sin, the nodes before the add, in graph order)}."""
    order = {n.name: k for k, n in enumerate(graph.nodes)}
    call = lambda n, t: hasattr(n, "op") and n.op == "call_function" and _short(n.target) == t
    found: Dict[str, Tuple[Any, Any, Any, List[Any]]] = {}
    for add in graph.nodes:
        if not (call(add, "add") and len(add.args) == 2 and add.kwargs.get("alpha", 1) == 1 and all(call(m, "mul") and len(m.users) == 1 for m in add.args)):
            continue
        for straight, turned in (add.args, add.args[::-1]):
            cat = next((a for a in turned.args if call(a, "cat") and len(a.users) == 1), None)
            if cat is None or len(cat.args[0]) != 2 or int(cat.args[1] if len(cat.args) > 1 else 0) not in (-1, len(cat.meta["val"].shape) - 1):
                continue
            neg, x1 = cat.args[0]
            if not (call(neg, "neg") and len(neg.users) == 1 and call(neg.args[0], "slice") and call(x1, "slice")):
                continue
            x2 = neg.args[0]
            x = x1.args[0]
            if x2.args[0] is not x or x not in straight.args or len(x2.users) != 1:
                continue
            width = x.meta["val"].shape[-1]
            half = width // 2
            # (start, end) of a unit-step slice; a stepped one (now a catalog crop) is no half.
            bounds = lambda sl: (None, None) if len(sl.args) > 4 and sl.args[4] not in (None, 1) else (
                int(sl.args[2] or 0) if len(sl.args) > 2 else 0, sl.args[3] if len(sl.args) > 3 else None)
            if width % 2 or bounds(x1) != (0, half) or bounds(x2)[0] != half or any(len(sl.users) != 1 for sl in (x1,)):
                continue
            cos = next((a for a in straight.args if a is not x and hasattr(a, "name")), None)
            sin = next((a for a in turned.args if a is not cat and hasattr(a, "name")), None)
            if cos is None or sin is None:
                continue
            parts = sorted({x1, x2, neg, cat, straight, turned}, key=lambda n: order[n.name])
            found[add.name] = (x, cos, sin, parts)
            break
    return found


def _repeat_kv(graph) -> Tuple[Dict[str, Dict[int, Any]], set]:
    """transformers' `repeat_kv` in front of an sdpa: `x[:, :, None].expand(B, H, g, L, D).reshape(B,
    H·g, L, D)` of a key or value `x [B, H, L, D]`. The sdpa reads `x` itself (grouped heads: query
    head h reads head h // g, what the repeat lays out), so the vendor's grouped-head kernel is the
    one certified: {sdpa node: {argument: x}} and the nodes passed over."""
    found: Dict[str, Dict[int, Any]] = {}
    skipped: set = set()
    for n in graph.nodes:
        if n.op != "call_function" or _short(n.target) != "scaled_dot_product_attention":
            continue
        for i in (1, 2):
            taken = []
            r = n.args[i]
            if not (hasattr(r, "op") and _short(r.target) in ("view", "_unsafe_view", "reshape") and len(r.users) == 1):
                continue
            taken.append(r)
            e = r.args[0]
            while hasattr(e, "op") and _short(e.target) in ("clone", "contiguous") and len(e.users) == 1:
                taken.append(e)  # a reshape of an expand copies first
                e = e.args[0]
            if not (hasattr(e, "op") and _short(e.target) == "expand" and len(e.users) == 1):
                continue
            taken.append(e)
            x = e.args[0]
            # Unsqueezes and whole-axis slices (`[:, :, None]`) between the key and its expand.
            while (
                hasattr(x, "op") and x.op == "call_function" and len(x.users) == 1
                and (_short(x.target) == "unsqueeze" or (_short(x.target) == "slice" and tuple(x.meta["val"].shape) == tuple(x.args[0].meta["val"].shape)))
            ):
                taken.append(x)
                x = x.args[0]
            src, rep, out = (tuple(t.meta["val"].shape) for t in (x, e, r))
            # The new axis right after the heads (`x[:, :, None]`): repeats of each head side by side.
            grouped = tuple(e.args[0].meta["val"].shape) == (*src[:2], 1, *src[2:]) if len(src) == 4 else False
            if grouped and len(rep) == 5 and rep[:2] == src[:2] and rep[3:] == src[2:] and out == (src[0], src[1] * rep[2], src[2], src[3]):
                found.setdefault(n.name, {})[i] = x
                skipped.update(t.name for t in taken)
    return found, skipped


def _view(node) -> bool:
    """An operator that only repeats or re-lays out its input."""
    return _short(node.target) in ("expand", "view", "reshape", "_unsafe_view", "permute", "transpose", "clone", "contiguous", "unsqueeze", "squeeze", "flatten", "alias", "detach")


def _path(p: str) -> str:
    """`L['self'].blocks[0].attn` or `blocks.0.attn` -> `blocks.0.attn`."""
    p = p.replace("L['self'].", "").replace("L['self']", "")
    p = p.replace("[", ".").replace("]", "").replace("'", "")
    return ".".join(x for x in p.split(".") if x and not x.startswith("_modules"))


def _flatten(xs: Sequence[Any]) -> List[Any]:
    out: List[Any] = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flatten(x))
        else:
            out.append(x)
    return out
