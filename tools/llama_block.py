"""A Llama decoder block from Hugging Face `transformers`' own modules (random-init config, no
download), decoding a few tokens after a KV cache, as a `vips-export --torch` factory:

    PYTHONPATH=tools vips-export --torch llama_block:llama3_8b -o /tmp/llama-block

`llama3_8b` is Llama-3-8B's block at full width (4096 hidden, 32 query and 8 key/value heads of 128,
SwiGLU 14336, RMSNorm eps 1e-5, rotary base 500000); `tiny` the same shape of model at 64 wide. The
block takes `x [1, L, hidden]` and the cache's keys and values `[1, Hkv, P, head]` (the tokens before),
and returns the hidden state after the block. Rotary positions `P … P + L − 1` and the causal mask
(query i sees keys 0 … P + i) are built inside, as a decoding step does. Weights: seeded normals of
the size training leaves (std 0.02; RMSNorm gains near 1). Needs torch and transformers.
"""
from __future__ import annotations

import os
from typing import Tuple

import torch
from transformers import DynamicCache, LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding


class Block(torch.nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.layer = LlamaDecoderLayer(cfg, layer_idx=0).eval()
        self.rope = LlamaRotaryEmbedding(cfg)

    def forward(self, x: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor) -> torch.Tensor:
        length, past = x.shape[1], past_k.shape[2]
        pos = torch.arange(past, past + length).unsqueeze(0)
        cos, sin = self.rope(x, pos)
        mask = torch.full((length, past + length), float("-inf")).triu(past + 1)[None, None]
        cache = DynamicCache(config=self.cfg)
        cache.update(past_k, past_v, 0)
        return self.layer(x, attention_mask=mask, position_embeddings=(cos, sin), position_ids=pos, past_key_values=cache, use_cache=True)


def _block(hidden: int, heads: int, kv_heads: int, mlp: int, seed: int = 48) -> Tuple[torch.nn.Module, Tuple[torch.Tensor, ...]]:
    head = hidden // heads
    cfg = LlamaConfig(
        hidden_size=hidden, intermediate_size=mlp, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head, rms_norm_eps=1e-5, rope_theta=500000.0, attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    block = Block(cfg).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in block.named_parameters():
            if p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
    length, past = int(os.environ.get("VSDK_LLAMA_TOKENS", "4")), int(os.environ.get("VSDK_LLAMA_PAST", "12"))
    x = torch.randn(1, length, hidden, generator=g)
    kv = lambda: torch.randn(1, kv_heads, past, head, generator=g)
    return block, (x, kv(), kv())


def llama3_8b() -> Tuple[torch.nn.Module, Tuple[torch.Tensor, ...]]:
    return _block(4096, 32, 8, 14336)


def tiny() -> Tuple[torch.nn.Module, Tuple[torch.Tensor, ...]]:
    return _block(64, 8, 2, 160)
