"""vips-export: a model to a VIPS suite (docs/authoring.md).

    from vips_export import export_onnx
    export_onnx("model.onnx", "suites/my-model")

Front-ends (ONNX, PyTorch) lower the framework graph to catalog operators (graph.py); stages are cut at
module boundaries (stages.py); the document and its weights are written (document.py), the golden file
generated and the model judged by its own suite (validate.py) through `vips-conformance` (sdk.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

from .errors import ExportError, Unsupported, UnsupportedOperators, ValidationFailed
from .export import Exported, export

__all__ = ["export_onnx", "export_torch", "ExportError", "Unsupported", "UnsupportedOperators", "ValidationFailed", "Exported"]


def export_onnx(model: Union[str, Path], out: Union[str, Path], *, input_shapes: Optional[Dict[str, Sequence[int]]] = None, **options: Any) -> Exported:
    """Exports an .onnx file to the suite folder `out`; options as `export.export`."""
    from .frontends.onnx import OnnxRunner, load

    return export(load(model, input_shapes), OnnxRunner(model), Path(out), model_label=Path(model).name, **options)


def export_torch(module: Any, example_inputs: Sequence[Any], out: Union[str, Path], *, name: Optional[str] = None, **options: Any) -> Exported:
    """Exports an `nn.Module` (in eval mode) called on `example_inputs` to the suite folder `out`."""
    from .frontends.torch import load_module

    graph, runner, label = load_module(module, tuple(example_inputs), name)
    return export(graph, runner, Path(out), model_label=label, **options)
