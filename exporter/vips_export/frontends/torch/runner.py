"""The exported PyTorch program run on the suite's inputs, every stage tensor captured by an FX
interpreter; at fp16 and bf16 the program's parameters and inputs are cast to that dtype, and every
float result is stored at it (PyTorch's own kernels at that precision, on the CPU)."""
from __future__ import annotations

import copy
from typing import Any, Dict, Sequence

import numpy as np

from ...errors import ExportError
from ...graph import c_order
from ...lazy import need

_TIER_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class TorchRunner:
    tiers_run = ("fp32", "fp16", "bf16")

    def __init__(self, ep: Any, graph: Any):
        torch = need("torch")
        self.ep = ep
        self.graph = graph
        self.label = f"PyTorch {torch.__version__} (CPU, the exported program)"

    def run(self, feeds: Dict[str, np.ndarray], values: Sequence[str], specs, tier: str = "fp32", overrides=None) -> Dict[str, np.ndarray]:
        torch = need("torch")
        dtype = getattr(torch, _TIER_DTYPES[tier])
        # A copy: `.to()` converts parameters in place, and they are the exported program's own (an
        # fp16 run would otherwise leave the bf16 run float16-rounded weights).
        module = copy.deepcopy(self.ep.module())
        with torch.no_grad():
            for name, value in (overrides or {}).items():
                target = _tensor(module, name)
                target.copy_(torch.from_numpy(value).to(target.dtype))
        module.to(dtype)
        wanted = set(values)
        got: Dict[str, Any] = {}

        class Capture(torch.fx.Interpreter):
            def run_node(self, n):
                # The export's dtype assertions hold at float32 only: the casts above change them.
                if n.target is torch.ops.aten._assert_tensor_metadata.default:
                    return None
                out = super().run_node(n)
                # A cast to float32 traced at float32 (a `.to(x.dtype)` vanished, positions made
                # float) would carry float32 into a 16-bit run: every float result is stored at the
                # tier's dtype, as eager PyTorch at that dtype and the suite's graph do.
                if isinstance(out, torch.Tensor) and out.is_floating_point() and out.dtype != dtype:
                    out = out.to(dtype)
                if n.name in wanted:
                    got[n.name] = out
                return out

        names = list(self.graph.inputs)
        args = [torch.from_numpy(c_order(feeds[n])).to(dtype) for n in names]
        with torch.no_grad():
            try:
                Capture(module).run(*args)
            except Exception as e:
                raise ExportError(f"the exported program failed at {tier}: {e}") from e
        missing = wanted - set(got)
        if missing:
            raise ExportError(f"the exported program did not compute {sorted(missing)[:5]}")
        return {k: v.detach().float().numpy() for k, v in got.items()}


def _tensor(module, name: str):
    """A parameter or buffer of the unlifted program by its fully qualified name."""
    try:
        return module.get_parameter(name)
    except AttributeError:
        return module.get_buffer(name)
