"""The exporter's core graph: catalog operators over named values, front-end independent.

A front-end (ONNX, PyTorch) lowers its framework graph to this form: every node is one catalog kernel
(docs/operators.md) with its attributes, the module path it came from (for stage cuts and names), and
the framework operator(s) it replaces (for the document's `impl` and for errors). Constants are
numpy arrays; every value has a static shape and dtype.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .errors import Unsupported

# numpy dtype name -> the document's dtype name.
DTYPES = {
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
    "uint8": "uint8",
    "int32": "int32",
    "int64": "int64",
    "bfloat16": "bfloat16",
}


@dataclass(frozen=True)
class Spec:
    shape: Tuple[int, ...]
    dtype: str  # a document dtype name

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Node:
    op: str  # catalog kernel, e.g. "vsdk.linear"
    inputs: List[str]
    output: str
    attrs: Dict[str, Any] = field(default_factory=dict)
    module: str = ""  # dotted module path ("" = the model's own forward)
    origin: str = ""  # the framework operator(s) this node stands for, with their names
    source: Optional[str] = None  # file:line of the model's code, where known


@dataclass
class Graph:
    """A model lowered to catalog operators."""

    name: str
    framework: str  # "onnx" or "torch"
    inputs: Dict[str, Spec]  # the model's activation inputs, in order
    outputs: List[str]
    consts: Dict[str, np.ndarray]  # weights and folded constants, by value name
    specs: Dict[str, Spec]  # every value's spec (inputs, consts, node outputs)
    nodes: List[Node]
    unsupported: List[Unsupported] = field(default_factory=list)
    # A value name -> the name a front-end's runner captures it under (an ONNX value, an FX node).
    framework_names: Dict[str, str] = field(default_factory=dict)
    module_classes: Dict[str, str] = field(default_factory=dict)  # module path -> class name
    output_names: Dict[str, str] = field(default_factory=dict)  # a model output -> its document name
    # A const -> its name in the model (a parameter or initializer), where it has a clean one.
    const_names: Dict[str, str] = field(default_factory=dict)
    # A const that is a model parameter as it is (or transposed: an ONNX MatMul weight back in
    # nn.Linear's layout) -> (the framework's name for it, transposed). `--weights seeded` replaces
    # these, in the document and in the model the runner runs.
    params: Dict[str, Tuple[str, bool]] = field(default_factory=dict)
    # Consts computed at export from parameters (a folded interpolation): the framework computes them
    # again when the model runs, perhaps to other roundings, so validation captures them as fed.
    computed: Dict[str, str] = field(default_factory=dict)  # const -> what it was computed from

    def check(self) -> None:
        """Every node reads defined values, in order (a front-end bug otherwise)."""
        defined = set(self.inputs) | set(self.consts)
        for n in self.nodes:
            for i in n.inputs:
                if i not in defined:
                    raise AssertionError(f"node {n.op} ({n.origin}) reads `{i}` before it is defined")
            if n.output not in self.specs:
                raise AssertionError(f"node {n.op} ({n.origin}) has no spec for `{n.output}`")
            defined.add(n.output)


def c_order(a: np.ndarray) -> np.ndarray:
    """`a` laid out row-major (safetensors and ONNX Runtime read memory as it lies; numpy's
    `ascontiguousarray` would also turn a 0-d array into shape (1,))."""
    return np.require(a, requirements="C")


def slice_count(start: int, end: int, step: int) -> int:
    """How many elements `x[start:end:step]` has (bounds already clamped, step positive):
    ⌈(end − start) / step⌉, not rounded down (`x[1:8:3]` reads 1, 4 and 7)."""
    return max(0, -(-(end - start) // step))


def dtype_name(a: np.ndarray) -> str:
    name = str(a.dtype)
    if name not in DTYPES:
        raise ValueError(f"dtype {name} has no VIPS equivalent")
    return DTYPES[name]
