"""The ONNX front-end: needs only onnx, numpy and onnxruntime."""
from .loader import load
from .runner import OnnxRunner

__all__ = ["load", "OnnxRunner"]
