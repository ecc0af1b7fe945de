"""The original ONNX model run by ONNX Runtime with every value a stage reads or writes captured."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, Union

import numpy as np

from ...errors import ExportError
from ...lazy import need

_ELEM = {"float32": 1, "uint8": 2, "int32": 6, "int64": 7, "float16": 10, "float64": 11, "bfloat16": 16}


class OnnxRunner:
    """Runs the model at float32 (ONNX Runtime's CPU provider, its default optimisations)."""

    tiers_run = ("fp32",)

    def __init__(self, path: Union[str, Path]):
        self.path = Path(path)
        self.label = f"ONNX Runtime {need('onnxruntime').__version__} (CPU)"

    def run(self, feeds: Dict[str, np.ndarray], values: Iterable[str], specs, tier: str = "fp32", overrides=None) -> Dict[str, np.ndarray]:
        """The model's own values for `values` (ONNX value names) from `feeds`."""
        if tier != "fp32":
            raise ExportError(f"the ONNX front-end runs the model at fp32 only, not {tier}")
        onnx = need("onnx")
        ort = need("onnxruntime")
        model = onnx.load(str(self.path))
        for init in model.graph.initializer:
            if overrides and init.name in overrides:
                init.CopyFrom(onnx.numpy_helper.from_array(overrides[init.name].astype(onnx.helper.tensor_dtype_to_np_dtype(init.data_type)), init.name))
        have = {o.name for o in model.graph.output}
        wanted: List[str] = list(dict.fromkeys(values))
        for name in wanted:
            if name not in have:
                spec = specs[name]
                model.graph.output.append(onnx.helper.make_tensor_value_info(name, _ELEM[spec.dtype], list(spec.shape)))
        for inp in model.graph.input:
            if inp.name in feeds:
                dims = inp.type.tensor_type.shape.dim
                for d, v in zip(dims, feeds[inp.name].shape):
                    d.ClearField("dim_param")
                    d.dim_value = int(v)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            outs = session.run(wanted, feeds)
        except Exception as e:
            raise ExportError(f"{self.path}: ONNX Runtime could not run the model ({e})") from e
        return dict(zip(wanted, (np.asarray(o) for o in outs)))
