"""The PyTorch front-end: `torch.export` to ATen, then to catalog operators."""
from .loader import load_factory, load_module

__all__ = ["load_factory", "load_module"]
