#!/usr/bin/env python3
"""PyTorch eager's side of the GPU forward comparison (docs/benchmarks.md,
"GPU providers"): the official DINOv2 builders (facebookresearch/dinov2 on
PYTHONPATH; torch.hub's dinov2_vits14 and dinov2_vitl14_reg without their
checkpoints: weights do not change the time) on `cuda`, `forward_features`
in inference mode, at the suites' image sizes and in the tiers' dtypes.

    PYTHONPATH=/path/to/dinov2 python3 tools/bench_torch_gpu.py [ROUNDS] > torch.json

Every figure is the median of ROUNDS (default 50) timed calls after 10
warm-ups, each bracketed by torch.cuda.synchronize(). float32 runs with
TF32 off (PyTorch's default for matmul), as the provider's fp32 tier needs.
"""
import json
import statistics
import sys
import time

import torch
from dinov2.hub.backbones import dinov2_vitl14_reg, dinov2_vits14

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
MODELS = [("dinov2-vits14", dinov2_vits14, 224), ("dinov2-vitl14-reg-518", dinov2_vitl14_reg, 518)]


def timed(f):
    for _ in range(10):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t = time.perf_counter()
        f()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rounds": ROUNDS, "ms": {}}
    for name, build, size in MODELS:
        for dname, dtype in DTYPES.items():
            model = build(pretrained=False).to("cuda", dtype).eval()
            x = torch.randn(1, 3, size, size, device="cuda", dtype=dtype)
            with torch.inference_mode():
                out["ms"][f"{name} {dname}"] = timed(lambda: model.forward_features(x))
            del model
            print(json.dumps({f"{name} {dname}": out["ms"][f"{name} {dname}"]}), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
