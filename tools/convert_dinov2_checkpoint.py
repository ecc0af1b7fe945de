#!/usr/bin/env python3
"""Converts the official DINOv2 hub checkpoint (.pth) to safetensors with the
same key names, for `vips-conformance generate --tensors`.

    python3 tools/convert_dinov2_checkpoint.py dinov2_vits14_pretrain.pth dinov2_vits14.safetensors
"""
import sys

import torch
from safetensors.torch import save_file

state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
# Training checkpoints saved with block chunks name keys blocks.{chunk}.{i}.*: flatten them.
flat = {}
for key, value in state.items():
    parts = key.split(".")
    if parts[0] == "blocks" and len(parts) > 3 and parts[2].isdigit():
        key = ".".join(["blocks", parts[2]] + parts[3:])
    flat[key] = value.float().contiguous()
save_file(flat, sys.argv[2])
print(f"wrote {sys.argv[2]}: {len(flat)} tensors")
