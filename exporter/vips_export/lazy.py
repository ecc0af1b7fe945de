"""Heavy frameworks imported only when a front-end needs them (Polygraphy's `lazy_import`), so the
package works with what a user has installed and says which module is missing."""
from __future__ import annotations

import importlib
from types import ModuleType

from .errors import ExportError

_WHY = {
    "onnx": "pip install onnx (the ONNX front-end)",
    "onnxruntime": "pip install onnxruntime (the ONNX front-end runs the model to validate it)",
    "torch": "pip install torch (the PyTorch front-end)",
    "safetensors": "pip install safetensors",
}


def need(module: str) -> ModuleType:
    """Imports `module` or raises an ExportError naming it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        hint = _WHY.get(top, f"pip install {top}")
        raise ExportError(f"module `{module}` is needed here and cannot be imported ({e}): {hint}") from e
