#!/usr/bin/env python3
"""Independent validation of the TRELLIS sparse-structure flow suites against
TRELLIS's own modules (PyPI `trellis-3d-python`, pure PyTorch on the CPU with
the SDPA attention backend).

    pip install torch safetensors numpy pyyaml && pip install --no-deps trellis-3d-python easydict
    cargo build --release
    python3 tools/validate_trellis_flow.py [SUITE ...] [--tier fp32|fp16|bf16 ...]
                                           [--mode isolated|chained ...] [--save DIR]
                                           [--stages NAME,NAME,...]
    python3 tools/validate_trellis_flow.py [SUITE ...] --golden

Default: trellis-ss-flow-quick, tiers fp32, fp16 and bf16, both modes. The
official `SparseStructureFlowModel` is built as the document describes it
(resolution, widths, heads, blocks, pe_mode 'ape', qk_rms_norm, share_mod
False) and loaded with the suite's weights under their checkpoint names (each
tensor's description). It runs stage by stage on the suite's inputs (isolated:
each stage fed its golden inputs at the tier; chained: the model's own previous
outputs), every stage output is captured, and `vips-conformance check` judges
the captures with the SDK's error model, exactly as it judges a provider.

Tiers: fp32 runs the model in float32. fp16 is TRELLIS's own `use_fp16`
(`dtype='float16'`: the blocks' Linear layers in float16, everything else in
float32, LayerNorm32 and the q/k RMSNorm computing in float32); bf16 is the
same conversion to bfloat16 (TRELLIS has no bf16 mode; this is what
`convert_to(torch.bfloat16)` gives). The parameters the blocks keep in float32
(norm2's weight and bias, the RMSNorm gammas) are passed to `check` as
`NAME@STAGE` captures in float32, as the model used them.

The sampler step is TRELLIS v1's FlowEulerGuidanceIntervalSampler step, written
out here from microsoft/TRELLIS (trellis-3d-python ships TRELLIS.2's guidance
formula): v = (1 + s) v_cond - s v_uncond; x_prev = x_t - (t - t_prev) v, with
t - t_prev a Python float.

--stages judges only the stages named (a full-shape pass of every stage costs
about an hour of `check` per tier and mode on 2 cores); in isolated mode only
their blocks run.

--golden instead runs the official modules in float64, each stage fed its
golden inputs, and compares with the golden values.
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from safetensors.numpy import load_file, save_file

os.environ.setdefault("ATTN_BACKEND", "sdpa")
from trellis.models.sparse_structure_flow import SparseStructureFlowModel  # noqa: E402
from trellis.modules.transformer.blocks import AbsolutePositionEmbedder  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = pathlib.Path(os.environ.get("VIPS_CONFORMANCE", ROOT / "target" / "release" / "vips-conformance"))
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def document(suite):
    if "/" in suite:
        return pathlib.Path(suite) / "suite.yaml"
    return ROOT / "conformance" / "suites" / suite / "suite.yaml"


def variant_of(suite):
    """The model's configuration as the document states it."""
    doc = yaml.safe_load(document(suite).read_text())
    tensors, stages = doc["tensors"], doc["stages"]
    C = tensors["in_w"]["shape"][0]
    heads = tensors["b00_q_gamma"]["shape"][0]
    blocks = sum(1 for s in stages if s["stage"].startswith("block_"))
    R = tensors["x_t"]["shape"][2]
    cond = tensors["cond"]["shape"]
    return {"C": C, "heads": heads, "blocks": blocks, "R": R, "cond_channels": cond[2]}


def export(suite):
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "suite.safetensors"
        subprocess.run([str(CLI), "export", suite, "--out", str(path)], check=True, capture_output=True)
        t = load_file(str(path))
    info = json.loads(subprocess.run([str(CLI), "inspect", str(document(suite)), "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    keys = {row["name"]: row["description"] for row in info["tensors"] if row.get("description")}
    return t, keys


def model_for(t, keys, v, tier):
    model = SparseStructureFlowModel(
        resolution=v["R"], in_channels=8, model_channels=v["C"], cond_channels=v["cond_channels"], out_channels=8,
        num_blocks=v["blocks"], num_heads=v["heads"], mlp_ratio=4, patch_size=1, pe_mode="ape",
        qk_rms_norm=True, share_mod=False)
    state = model.state_dict()
    loaded = 0
    for name, key in keys.items():
        if key in state:
            state[key] = torch.from_numpy(t[name].astype(np.float32))
            loaded += 1
    model.load_state_dict(state)
    # pos_emb is a buffer the model computes itself (the suite's stage checks it).
    assert loaded == len([k for k in state if k != "pos_emb"]), f"loaded {loaded} of {len(state)} tensors"
    model = model.eval()
    if tier == "fp64":
        return model.to(torch.float64)
    if tier != "fp32":
        model.convert_to(DTYPES[tier])
    return model


def step_constants(t):
    """s, and t - t_prev as the sampler's Python float, from the document's float32 constants."""
    return float(t["cfg_neg"][0]), float(t["dt"][0])


def stages(model, t, v, tier, chained, only=None):
    """Every stage output (or those of the blocks in `only`), from golden
    inputs (isolated) or the model's own (chained)."""
    out, fed = {}, {}
    wide = torch.float64 if tier == "fp64" else torch.float32
    low = DTYPES[tier]

    # Stages with `precision: float32` (all but the blocks) take float32 inputs at every tier.
    def given(name, at_tier=True):
        if chained and name in out:
            return out[name]
        x = torch.from_numpy(t[name].astype(np.float32))
        # The golden input as the tier holds it, computed on in the model's dtype.
        return x.to(low).to(wide) if at_tier and tier != "fp64" else x.to(wide)

    # timestep_embedding (float32 at every tier, as TRELLIS keeps it)
    t_model = given("t_model", at_tier=False)
    if tier == "fp64":
        # timestep_embedding casts t to float32 (t.float()): the same
        # formula in float64, the frequencies as it computes them.
        half = model.t_embedder.frequency_embedding_size // 2
        freqs = torch.exp(-np.log(10000) * torch.arange(half, dtype=torch.float32) / half).to(wide)
        args = t_model[:, None] * freqs[None]
        out["t_emb"] = model.t_embedder.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))
    else:
        out["t_emb"] = model.t_embedder(t_model)
    # position_embedding: the model's own buffer (float32), or the same
    # module on float64 coordinates
    if tier == "fp64":
        R = v["R"]
        coords = torch.stack(torch.meshgrid(*[torch.arange(R)] * 3, indexing="ij"), dim=-1).reshape(-1, 3)
        out["pos_emb"] = AbsolutePositionEmbedder(v["C"], 3)(coords.to(wide))[None]
    else:
        out["pos_emb"] = model.pos_emb[None].to(wide)
    # input_layer
    x = given("x_t", at_tier=False)
    h = x.view(*x.shape[:2], -1).permute(0, 2, 1).contiguous()
    out["h_0"] = model.input_layer(h) + given("pos_emb", at_tier=False)
    dtype = model.dtype if tier != "fp64" else torch.float64
    t_emb, cond = given("t_emb").to(dtype), given("cond").to(dtype)
    for i, block in enumerate(model.blocks):
        if only is not None and not chained and f"block_{i:02d}" not in only:
            continue
        h = given(f"h_{i}").to(dtype)
        out[f"h_{i + 1}"] = block(h, t_emb, cond, None)
        if tier in ("fp16", "bf16"):
            # Kept in float32 by convert_to: what the block computed with.
            stage = f"block_{i:02d}"
            fed[f"b{i:02d}_norm2_w@{stage}"] = block.norm2.weight
            fed[f"b{i:02d}_norm2_b@{stage}"] = block.norm2.bias
            fed[f"b{i:02d}_q_gamma@{stage}"] = block.self_attn.q_rms_norm.gamma
            fed[f"b{i:02d}_k_gamma@{stage}"] = block.self_attn.k_rms_norm.gamma
    last = given(f"h_{v['blocks']}", at_tier=False).to(wide)
    hn = F.layer_norm(last, last.shape[-1:])
    vout = model.out_layer(hn)
    out["v_cond"] = vout.permute(0, 2, 1).reshape(t["v_cond"].shape)
    s, dt = step_constants(t)
    v_cond, v_uncond, x_t = (given(n, at_tier=False).to(wide) for n in ("v_cond", "v_uncond", "x_t"))
    v_guided = (1 + s) * v_cond - s * v_uncond
    out["x_prev"] = x_t - dt * v_guided
    keep = torch.float64 if tier == "fp64" else torch.float32
    captured = {k: x.detach().to(keep).numpy() for k, x in {**out, **fed}.items()}
    return {k: x.reshape(t[k.split("@")[0]].shape) for k, x in captured.items()}


def check(suite, captured, tier, mode, save=None, only=None):
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "captured.safetensors"
        save_file({k: np.require(x, requirements="C") for k, x in captured.items()}, str(path))
        select = ["--stage", "{" + ",".join(only) + "}"] if only else []
        r = subprocess.run([str(CLI), "check", suite, "--tensors", str(path), "--tier", tier, "--mode", mode,
                            "--json", *select], capture_output=True, text=True)
        if save is not None:
            save.parent.mkdir(parents=True, exist_ok=True)
            path.replace(save.parent / f"{save.name}.safetensors")
            (save.parent / f"{save.name}.json").write_text(r.stdout)
    if r.returncode not in (0, 1):
        sys.exit(f"vips-conformance check failed: {r.stderr}")
    return json.loads(r.stdout)


def number(x):
    x = float("inf") if x is None else float(x)
    return float("inf") if x != x else x


def float64_throughout():
    """TRELLIS's LayerNorm32 and MultiHeadRMSNorm compute in float32 whatever
    the model's dtype (`.float()`): for the float64 comparison they compute
    the same formulas in the input's dtype."""
    import trellis.modules.attention.modules as attention
    import trellis.modules.norm as norm

    norm.LayerNorm32.forward = torch.nn.LayerNorm.forward
    attention.MultiHeadRMSNorm.forward = lambda self, x: F.normalize(x, dim=-1) * self.gamma * self.scale


def golden(suite):
    float64_throughout()
    t, keys = export(suite)
    v = variant_of(suite)
    model = model_for(t, keys, v, "fp64")
    got = stages(model, t, v, "fp64", chained=False)
    print(f"Suite `{suite}`, torch {torch.__version__}, float64, each stage fed its golden input.\n")
    print("| tensor | max abs error | relative L2 error |")
    print("|---|---|---|")
    for name, x in got.items():
        want = t[name].astype(np.float64)
        d = x.astype(np.float64) - want
        print(f"| {name} | {np.abs(d).max():.2e} | {np.linalg.norm(d) / np.linalg.norm(want):.2e} |")


def main():
    argv = sys.argv[1:]
    valued = {"--tier", "--mode", "--save", "--stages"}
    opt = lambda name: [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
    tiers = opt("--tier") or ["fp32", "fp16", "bf16"]
    modes = opt("--mode") or ["isolated", "chained"]
    save = pathlib.Path(opt("--save")[-1]) if opt("--save") else None
    only = opt("--stages")[-1].split(",") if opt("--stages") else None
    skip = {i + 1 for i, a in enumerate(argv) if a in valued}
    suites = [a for i, a in enumerate(argv) if not a.startswith("--") and i not in skip] or ["trellis-ss-flow-quick"]
    for tier in tiers:
        if tier not in ("fp32", "fp16", "bf16"):
            sys.exit(f"unknown tier {tier!r}: fp32, fp16 or bf16")
    torch.set_grad_enabled(False)
    if "--golden" in argv:
        for s in suites:
            golden(s)
        return
    print(f"torch {torch.__version__} on the CPU ({torch.get_num_threads()} threads), trellis-3d-python "
          "(ATTN_BACKEND=sdpa), judged by `vips-conformance check`.\n")
    print("| suite | tier | mode | verdict | largest stage max\\|e\\| (stage) | median stage max\\|e\\| | "
          "largest rms_t (stage) | end to end: rel L2, cosine |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    for suite in suites:
        t, keys = export(suite)
        v = variant_of(suite)
        for tier in tiers:
            model = model_for(t, keys, v, tier)
            for mode in modes:
                captured = stages(model, t, v, tier, chained=mode == "chained", only=only)
                report = check(suite, captured, tier, mode, save and save / f"{suite}.{tier}.{mode}", only)
                tr = report["tiers"][0]
                margins = [(max((number(o["judgement"]["max_e"]) for o in s["outputs"]), default=0.0), s["stage"])
                           for s in tr["stages"]]
                worst = max(margins)
                median = sorted(m for m, _ in margins)[len(margins) // 2]
                rms = [(number(o["judgement"]["rms_t"]), s["stage"]) for s in tr["stages"] for o in s["outputs"]
                       if o["judgement"].get("rms_t") is not None]
                rms_t = f"{max(rms)[0]:.3g} ({max(rms)[1]})" if rms else "-"
                bad = [s["stage"] for s in tr["stages"] if s["status"] != "pass"]
                e2e = "; ".join(f"{e['tensor']}: {e['drift']['rel_l2_error']:.2e}, "
                                f"{e['drift']['cosine_similarity']:.6f}" for e in tr["end_to_end"]) or "-"
                verdict = "PASS" if report["passed"] else f"FAIL ({', '.join(bad) or 'end to end'})"
                failed |= not report["passed"]
                print(f"| {suite} | {tier} | {mode} | {verdict} | {worst[0]:.3f} ({worst[1]}) | {median:.3f} | "
                      f"{rms_t} | {e2e} |", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
