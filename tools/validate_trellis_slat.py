#!/usr/bin/env python3
"""Independent validation of the TRELLIS structured-latent flow suites against
TRELLIS's own sparse modules (PyPI `trellis-3d-python`, pure PyTorch on the
CPU, the spconv backend for the submanifold convolutions).

    pip install torch safetensors numpy pyyaml spconv && pip install --no-deps trellis-3d-python easydict
    cargo build --release
    python3 tools/validate_trellis_slat.py [SUITE ...] [--tier fp32 ...] [--mode isolated|chained ...]
                                           [--save DIR] [--stages NAME,NAME,...]
    python3 tools/validate_trellis_slat.py [SUITE ...] --golden

Default: trellis-slat-flow-quick, fp32, both modes. trellis-3d-python is
TRELLIS.2's package: its `SLatFlowModel` has no residual IO blocks, so the
model is TRELLIS v1's `SLatFlowModel` (microsoft/TRELLIS,
structured_latent_flow.py) put together here from the package's modules:
`SparseResBlock3d` (written out below as v1 defines it: LayerNorm32,
SparseConv3d, SparseLinear, SparseDownsample, SparseUpsample, the emb
layers), TimestepEmbedder, AbsolutePositionEmbedder and
ModulatedSparseTransformerCrossBlock as they are. The downsample's pooling is
v1's too: its `scatter_reduce(zeros, reduce='mean')` leaves include_self at
True, a parent's features are Σ / (n + 1); the package's (TRELLIS.2's)
passes include_self=False, the true mean, and fails the v1 suite. The suite's weights load
under their checkpoint names (each tensor's description; a convolution's
[27, Cin, Cout] goes to spconv's [Cout, 3, 3, 3, Cin]). Every stage output is
captured and `vips-conformance check` judges the captures, as it judges a
provider. The package's sparse attention has only flash-attn and xformers
paths; for one batch item full attention is dense attention over its rows,
so it runs as torch's scaled_dot_product_attention here.

spconv runs with one thread (`torch.set_num_threads(1)`): with two, its CPU
convolution returns wrong rows now and then (traveller59/spconv#679,
docs/validation.md). Its CPU path computes in float32 only, so the tiers are
fp32; fp16 and bf16 would need TRELLIS's float16 convolutions on a GPU.

--golden runs the modules in float64 (spconv itself has no float64 CPU path:
the convolutions are computed from spconv's own neighbour pairs, `indice
pairs`, in float64), each stage fed its golden inputs, and compares with the
golden values.
"""
import os
import pathlib
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

os.environ.setdefault("ATTN_BACKEND", "sdpa")
os.environ.setdefault("SPARSE_CONV_BACKEND", "spconv")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from validate_trellis_flow import check, document, export, float64_throughout, number  # noqa: E402

import trellis.modules.sparse as sp  # noqa: E402
import trellis.modules.sparse.attention.modules as sparse_attention  # noqa: E402
from trellis.models.sparse_structure_flow import TimestepEmbedder  # noqa: E402
from trellis.modules.norm import LayerNorm32  # noqa: E402
from trellis.modules.sparse.transformer import ModulatedSparseTransformerCrossBlock  # noqa: E402
from trellis.modules.transformer.blocks import AbsolutePositionEmbedder  # noqa: E402


def dense_attention(*args):
    """The package's sparse_scaled_dot_product_attention for one batch item, by SDPA."""
    if len(args) == 1:
        qkv = args[0]
        q, k, v = qkv.feats.unbind(dim=1)  # [T, H, C] each
        s = qkv
    else:
        s, kv = args
        q = s.feats
        assert kv.shape[0] == 1, "one batch item"
        k, v = kv[0].unbind(dim=1)  # [L, H, C]
    o = F.scaled_dot_product_attention(*(x.permute(1, 0, 2)[None] for x in (q, k, v)))
    return s.replace(o[0].permute(1, 0, 2))


sparse_attention.sparse_scaled_dot_product_attention = dense_attention


class SparseResBlock3d(nn.Module):
    """TRELLIS v1's residual block, from the package's modules."""

    def __init__(self, channels, emb_channels, out_channels, downsample=False, upsample=False):
        super().__init__()
        self.norm1 = LayerNorm32(channels, elementwise_affine=True, eps=1e-6)
        self.norm2 = LayerNorm32(out_channels, elementwise_affine=False, eps=1e-6)
        self.conv1 = sp.SparseConv3d(channels, out_channels, 3)
        self.conv2 = sp.SparseConv3d(out_channels, out_channels, 3)
        self.emb_layers = nn.Sequential(nn.SiLU(), nn.Linear(emb_channels, 2 * out_channels, bias=True))
        self.skip_connection = sp.SparseLinear(channels, out_channels) if channels != out_channels else nn.Identity()
        self.updown = sp.SparseDownsample(2) if downsample else sp.SparseUpsample(2) if upsample else None

    def body(self, x, emb):
        """Everything after the up- or downsample."""
        emb_out = self.emb_layers(emb).type(x.dtype)
        scale, shift = torch.chunk(emb_out, 2, dim=1)
        h = x.replace(self.norm1(x.feats))
        h = h.replace(F.silu(h.feats))
        h = self.conv1(h)
        h = h.replace(self.norm2(h.feats)) * (1 + scale) + shift
        h = h.replace(F.silu(h.feats))
        h = self.conv2(h)
        return h + self.skip_connection(x)


class SLatFlowV1(nn.Module):
    """TRELLIS v1's SLatFlowModel (io_block_channels [io], 2 IO residual blocks, skips)."""

    def __init__(self, v):
        super().__init__()
        C, io = v["C"], v["io"]
        self.t_embedder = TimestepEmbedder(C)
        self.pos_embedder = AbsolutePositionEmbedder(C)
        self.input_layer = sp.SparseLinear(8, io)
        self.input_blocks = nn.ModuleList([SparseResBlock3d(io, C, io), SparseResBlock3d(io, C, C, downsample=True)])
        self.blocks = nn.ModuleList([
            ModulatedSparseTransformerCrossBlock(C, v["cond_channels"], num_heads=v["heads"], mlp_ratio=4,
                                                 attn_mode="full", qk_rms_norm=True, share_mod=False)
            for _ in range(v["blocks"])])
        self.out_blocks = nn.ModuleList([SparseResBlock3d(2 * C, C, io, upsample=True),
                                         SparseResBlock3d(2 * io, C, io)])
        self.out_layer = sp.SparseLinear(io, 8)


def variant_of(suite):
    doc = yaml.safe_load(document(suite).read_text())
    tensors, stages = doc["tensors"], doc["stages"]
    return {
        "C": tensors["t_w2"]["shape"][0],
        "io": tensors["in_w"]["shape"][0],
        "heads": tensors["b00_q_gamma"]["shape"][0],
        "blocks": sum(1 for s in stages if s["stage"].startswith("block_")),
        "cond_channels": tensors["cond"]["shape"][2],
    }


def model_for(t, keys, v, dtype):
    model = SLatFlowV1(v)
    state = model.state_dict()
    loaded = set()
    for name, description in keys.items():
        key = description.split(" ")[0]
        if key not in state:
            continue
        w = torch.from_numpy(t[name].astype(np.float32))
        if key.endswith(".conv.weight"):
            # [27, Cin, Cout], k = 9 kx + 3 ky + kz -> spconv's [Cout, kx, ky, kz, Cin]
            w = w.reshape(3, 3, 3, w.shape[1], w.shape[2]).permute(4, 0, 1, 2, 3).contiguous()
        assert w.shape == state[key].shape, f"{key}: {tuple(w.shape)} for {tuple(state[key].shape)}"
        state[key] = w
        loaded.add(key)
    missing = set(state) - loaded
    assert not missing, f"no suite tensor for {sorted(missing)[:8]}"
    model.load_state_dict(state)
    model = model.eval().to(dtype)
    for m in model.modules():
        if isinstance(m, sp.SparseConv3d):
            # spconv fuses the bias into its kernel in eval mode, which its CPU
            # path refuses ("cpu don't support act and bias"); in train mode it
            # adds the bias after the convolution (the module has no dropout or
            # batch statistics: nothing else changes).
            m.conv.train()
    return model


class Float64Conv:
    """spconv has no float64 CPU convolution: the submanifold convolution in
    float64 over spconv's own neighbour pairs (its indice pairs; offset
    k = 9 kx + 3 ky + kz, the weight's layout)."""

    def __init__(self, module):
        self.module = module

    def __call__(self, x):
        import spconv.pytorch as spconv

        conv = self.module.conv
        # A float32 twin with an indice key, run once for its pairs.
        twin = spconv.SubMConv3d(conv.in_channels, conv.out_channels, 3, bias=False, indice_key="pairs")
        data = x.replace(x.feats.float()).data
        pairs = twin(data).indice_dict["pairs"]
        # A submanifold convolution's pairs are symmetric: spconv stores the
        # first 13 offsets' (in -> out) pairs, the mirrored offset 26 - k
        # takes them (out -> in), and the centre is every row on itself.
        pin, pout = pairs.indice_pairs[0], pairs.indice_pairs[1]  # [27, N]
        counts = pairs.indice_pair_num
        w = conv.weight.double()  # [Cout, 3, 3, 3, Cin]
        w = w.reshape(w.shape[0], 27, w.shape[-1])
        f = x.feats.double()
        y = f @ w[:, 13, :].T
        for k in range(13):
            n = int(counts[k])
            i, o = pin[k, :n].long(), pout[k, :n].long()
            y.index_add_(0, o, f[i] @ w[:, k, :].T)
            y.index_add_(0, i, f[o] @ w[:, 26 - k, :].T)
        if conv.bias is not None:
            y += conv.bias.double()
        return x.replace(y)


def run_stages(model, t, v, chained, dtype, only=None):
    """Every stage output from golden inputs (isolated) or the model's own (chained)."""
    out = {}

    def given(name):
        if chained and name in out:
            return out[name]
        x = torch.from_numpy(np.asarray(t[name]))
        return x.to(dtype) if x.is_floating_point() else x

    coords = given("coords").int()

    def sparse(feats, at):
        return sp.SparseTensor(feats, at)

    def want(stage):
        return only is None or chained or stage in only

    if dtype == torch.float64:
        # timestep_embedding casts t to float32 (t.float()): the same formula
        # in float64, the frequencies as it computes them.
        half = model.t_embedder.frequency_embedding_size // 2
        freqs = torch.exp(-np.log(10000) * torch.arange(half, dtype=torch.float32) / half).to(dtype)
        args = given("t_model")[:, None] * freqs[None]
        out["t_emb"] = model.t_embedder.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))
    else:
        out["t_emb"] = model.t_embedder(given("t_model"))
    out["h_in"] = model.input_layer(sparse(given("x_t"), coords)).feats
    ib0, ib1 = model.input_blocks
    t_emb = given("t_emb")
    if want("input_block_0"):
        out["skip_0"] = ib0.body(sparse(given("h_in"), coords), t_emb).feats
    fine = sparse(given("skip_0"), coords)
    down = ib1.updown(fine)
    _, inverse = down.get_spatial_cache("upsample_2")
    # TRELLIS v1's pooling (microsoft/TRELLIS, trellis/modules/sparse/spatial.py), not the package's
    # (TRELLIS.2 passes include_self=False): scatter_reduce's mean with include_self left True.
    feats = fine.feats
    out["pooled"] = torch.scatter_reduce(
        torch.zeros(down.coords.shape[0], feats.shape[1], dtype=feats.dtype), 0,
        inverse[:, None].expand(-1, feats.shape[1]), feats, reduce="mean")
    out["coarse_coords"], out["inverse"] = down.coords, inverse
    coarse = down.coords.int()
    if want("input_block_1"):
        out["skip_1"] = ib1.body(sparse(given("pooled"), coarse), t_emb).feats
    out["pos_emb"] = model.pos_embedder(coarse[:, 1:]).to(dtype)
    out["h_0"] = (given("skip_1") + given("pos_emb"))[None]
    cond = given("cond")
    for i, block in enumerate(model.blocks):
        if want(f"block_{i:02d}"):
            out[f"h_{i + 1}"] = block(sparse(given(f"h_{i}")[0], coarse), t_emb, cond).feats[None]
    last = given(f"h_{v['blocks']}")[0]
    # The upsample through the downsample's cache, as SparseUpsample runs it.
    joined = down.replace(torch.cat([last, given("skip_1")], dim=1))
    ob0, ob1 = model.out_blocks
    out["up"] = ob0.updown(joined).feats
    if want("output_block_0"):
        out["o_0"] = ob0.body(sparse(given("up"), coords), t_emb).feats
    if want("output_block_1"):
        out["o_1"] = ob1.body(sparse(torch.cat([given("o_0"), given("skip_0")], dim=1), coords), t_emb).feats
    o_1 = given("o_1")
    out["v_cond"] = model.out_layer(sparse(F.layer_norm(o_1, o_1.shape[-1:]), coords)).feats
    s, dt = float(t["cfg_neg"][0]), float(t["dt"][0])
    out["x_prev"] = given("x_t") - dt * ((1 + s) * given("v_cond") - s * given("v_uncond"))
    keep = torch.float64 if dtype == torch.float64 else torch.float32
    return {k: (x.detach().to(keep) if x.is_floating_point() else x.int()).numpy().reshape(t[k].shape)
            for k, x in out.items()}


def golden(suite):
    float64_throughout()
    t, keys = export(suite)
    v = variant_of(suite)
    model = model_for(t, keys, v, torch.float64)
    for m in model.modules():
        if isinstance(m, sp.SparseConv3d):
            m.forward = Float64Conv(m)
    got = run_stages(model, t, v, chained=False, dtype=torch.float64)
    print(f"Suite `{suite}`, torch {torch.__version__}, float64, each stage fed its golden input.\n")
    print("| tensor | max abs error | relative L2 error |")
    print("|---|---|---|")
    for name, x in got.items():
        want = t[name].astype(np.float64)
        d = x.astype(np.float64) - want
        rel = np.linalg.norm(d) / max(np.linalg.norm(want), 1e-300)
        print(f"| {name} | {np.abs(d).max():.2e} | {rel:.2e} |")


def main():
    argv = sys.argv[1:]
    valued = {"--tier", "--mode", "--save", "--stages"}
    opt = lambda name: [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
    tiers = opt("--tier") or ["fp32"]
    modes = opt("--mode") or ["isolated", "chained"]
    save = pathlib.Path(opt("--save")[-1]) if opt("--save") else None
    only = opt("--stages")[-1].split(",") if opt("--stages") else None
    skip = {i + 1 for i, a in enumerate(argv) if a in valued}
    suites = [a for i, a in enumerate(argv) if not a.startswith("--") and i not in skip] or ["trellis-slat-flow-quick"]
    if any(tier != "fp32" for tier in tiers):
        sys.exit("spconv's CPU convolution computes in float32 only: --tier fp32")
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)  # spconv#679
    if "--golden" in argv:
        for s in suites:
            golden(s)
        return
    print(f"torch {torch.__version__} on the CPU (1 thread), trellis-3d-python modules (spconv backend, "
          "SDPA attention), judged by `vips-conformance check`.\n")
    print("| suite | tier | mode | verdict | largest stage max\\|e\\| (stage) | median stage max\\|e\\| | "
          "end to end: rel L2, cosine |")
    print("|---|---|---|---|---|---|---|")
    failed = False
    for suite in suites:
        t, keys = export(suite)
        v = variant_of(suite)
        model = model_for(t, keys, v, torch.float32)
        for mode in modes:
            captured = run_stages(model, t, v, chained=mode == "chained", dtype=torch.float32, only=only)
            report = check(suite, captured, "fp32", mode, save and save / f"{suite}.fp32.{mode}", only)
            tr = report["tiers"][0]
            margins = [(max((number(o["judgement"]["max_e"]) for o in s["outputs"]), default=0.0), s["stage"])
                       for s in tr["stages"]]
            worst = max(margins)
            median = sorted(m for m, _ in margins)[len(margins) // 2]
            bad = [s["stage"] for s in tr["stages"] if s["status"] != "pass"]
            e2e = "; ".join(f"{e['tensor']}: {e['drift']['rel_l2_error']:.2e}, "
                            f"{e['drift']['cosine_similarity']:.6f}" for e in tr["end_to_end"]) or "-"
            verdict = "PASS" if report["passed"] else f"FAIL ({', '.join(bad) or 'end to end'})"
            failed |= not report["passed"]
            print(f"| {suite} | fp32 | {mode} | {verdict} | {worst[0]:.3f} ({worst[1]}) | {median:.3f} | {e2e} |",
                  flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
