"""Factories for `vips-export --torch tests_torch.models:NAME` (timm, seeded random init)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Tuple

import timm
import torch


def _seeded(name: str, **kw: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, **kw).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # no all-ones LayerNorm, no zero bias
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * (0.1 if p.ndim == 1 else 0.02))
    return model


def vit_tiny() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _seeded("vit_tiny_patch16_224", img_size=64, num_classes=10), (torch.randn(1, 3, 64, 64),)


def vit_tiny_eps_1e5() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    model, x = vit_tiny()
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.eps = 1e-5
    return model, x


def vit_tiny_gelu_tanh() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    model, x = vit_tiny()
    for m in model.modules():
        if isinstance(m, torch.nn.GELU):
            m.approximate = "tanh"
    return model, x


def resnet18() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _seeded("resnet18"), (torch.randn(1, 3, 64, 64),)


def efficientnet_b0() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _seeded("efficientnet_b0"), (torch.randn(1, 3, 64, 64),)


def mobilenetv3_small_100() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _seeded("mobilenetv3_small_100"), (torch.randn(1, 3, 64, 64),)


def llama_block() -> Tuple[torch.nn.Module, Tuple[torch.Tensor, ...]]:
    """tools/llama_block.py's 64-wide Llama-3-style block after a 12-token cache."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import llama_block as block

    return block.tiny()


def vit_base() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    """ViT-B/16 at its real size: 86 M parameters, 224x224."""
    return _seeded("vit_base_patch16_224"), (torch.randn(1, 3, 224, 224),)


class _ExplicitAttention(torch.nn.Module):
    """Attention written with matmuls, as DINOv2's official `Attention` and many LLM ports do."""

    def __init__(self, dim: int = 48, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
        a = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, n, c))


class _Blocks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(*[_ExplicitAttention() for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def explicit_attention() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return _Blocks().eval(), (torch.randn(1, 9, 48),)


class _StridedSlices(torch.nn.Module):
    """Slices with steps, as space-to-depth stems (YOLOv5's Focus) and strided subsampling write them."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(12, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Focus: the four phases of a 2x2 grid side by side in the channels.
        y = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], dim=1)
        return torch.relu(self.conv(y))[:, 1::3, 1:8:3]


def strided_slices() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _StridedSlices().eval(), (torch.randn(1, 3, 16, 16),)


class _LlamaAttention(torch.nn.Module):
    """Hugging Face transformers' own `LlamaAttention` (random-init config, no download: 32 wide,
    4 query heads of 8 over 2 key/value heads, so `repeat_kv` repeats each twice) over 6 tokens, its
    mask made by transformers' `create_causal_mask` from a padding mask whose first `padding` tokens
    are padding: an additive float32-lowest mask for `eager`, a boolean one for `sdpa`. The rotary
    tables are passed but the caller exports with `apply_rotary_pos_emb` patched out (the ONNX
    front-end has no rotary fusion, and `rotate_half`'s Neg no catalog operator)."""

    def __init__(self, impl: str, padding: int) -> None:
        super().__init__()
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaAttention

        self.cfg = LlamaConfig(
            hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            attn_implementation=impl,
        )
        torch.manual_seed(48)
        self.attn = LlamaAttention(self.cfg, layer_idx=0).eval()
        g = torch.Generator().manual_seed(48)
        with torch.no_grad():
            for p in self.attn.parameters():
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
        self.register_buffer("padding", (torch.arange(6) >= padding).long()[None])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask

        pos = torch.arange(x.shape[1])[None]
        mask = create_causal_mask(config=self.cfg, inputs_embeds=x, attention_mask=self.padding, cache=None, position_ids=pos)
        flat = torch.zeros(1, x.shape[1], self.cfg.head_dim)
        return self.attn(x, position_embeddings=(flat + 1, flat), attention_mask=mask)[0]


def llama_attention(impl: str, padding: int = 0) -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    return _LlamaAttention(impl, padding).eval(), (torch.randn(1, 6, 32),)


class _Decoder(torch.nn.Module):
    """A UNet decoder's operators as PyTorch writes them: F.pad in four modes (pairs from the last axis
    backwards), GroupNorm, nearest and nearest-exact upsamples, bilinear both ways round its corners
    (with a scale_factor: mapped by 1/s), and attention over positions written with matmuls."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3)
        self.norm = torch.nn.GroupNorm(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        F = torch.nn.functional
        y = self.conv(F.pad(x, (2, 1, 1, 0), mode="reflect"))
        y = F.silu(self.norm(F.pad(y, (0, 1, 2, 0), value=-0.25)))
        y = F.interpolate(F.pad(y, (1, 1, 1, 1), mode="replicate"), scale_factor=2, mode="nearest")
        y = F.interpolate(F.pad(y, (1, 0, 0, 1), mode="circular"), scale_factor=(0.6, 0.7), mode="bilinear")
        y = F.interpolate(y, size=(9, 7), mode="bilinear", align_corners=True)
        t = y.flatten(2)  # [N, C, HW]
        # Sharp weights: a near-uniform softmax makes every output of a channel the same sum, whose
        # rounding errors then agree (the bias test counts them as independent; see the issue notes).
        a = torch.softmax(t.transpose(1, 2) @ t * 2.0, dim=-1)  # [N, HW, HW]
        y = (t @ a).reshape(y.shape)
        return F.interpolate(y, size=(5, 4), mode="nearest-exact")


def decoder() -> Tuple[torch.nn.Module, Tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return _Decoder().eval(), (torch.randn(1, 4, 8, 8),)
