"""timm's CNNs with seeded, trained-looking weights, as `vips-export --torch` factories.

    PYTHONPATH=tools vips-export --torch timm_cnns:resnet18 -o /tmp/resnet18

Random initialisation leaves batch norms at mean 0, variance 1 and weights at their init: every
parameter gets a seeded perturbation instead, and each batch norm running statistics of the size
training leaves (means ~N(0, 0.5), variances from 0.2 to 2), so that no layer is an identity.
`VSDK_TIMM_SIZE` sets the input side (default 224). Needs torch and timm (no download).
"""
from __future__ import annotations

import os
from typing import Tuple

import timm
import torch


def _model(name: str, seed: int = 48) -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    torch.manual_seed(seed)
    m = timm.create_model(name, pretrained=False).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * (0.05 if p.ndim == 1 else 0.01))
        for mod in m.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                c = mod.num_features
                mod.running_mean.copy_(torch.randn(c, generator=g) * 0.5)
                mod.running_var.copy_(0.2 + 1.8 * torch.rand(c, generator=g))
    side = int(os.environ.get("VSDK_TIMM_SIZE", "224"))
    x = torch.randn(1, 3, side, side, generator=g)
    return m, (x,)


def resnet18() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _model("resnet18")


def resnet50() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _model("resnet50")


def efficientnet_b0() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _model("efficientnet_b0")


def mobilenetv3_small_100() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _model("mobilenetv3_small_100")
