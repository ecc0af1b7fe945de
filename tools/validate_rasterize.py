#!/usr/bin/env python3
"""`vsdk.rasterize` against a rasterizer we did not write: Mesa's llvmpipe (CPU,
headless EGL) through ModernGL, on TRELLIS.2's texture bake
(conformance/suites/trellis-texture-bake-quick, 256², or with `--full`
trellis-texture-bake, 1024²).

    apt-get install -y --no-install-recommends libegl1 libegl-mesa0 libgl1-mesa-dri libgl1
    pip install numpy pyyaml moderngl glcontext
    cargo build --release
    python3 tools/validate_rasterize.py [--full]

It reads the suite's inline `uv`, `vertices` and `faces`, computes the
`uv_to_clip` stage in float32 as the document's graph does, and draws the
triangles with llvmpipe into a float32 RGBA framebuffer: per pixel
(u, v, z/w, gl_PrimitiveID + 1), 0 where empty (docs/operators.md,
"Rasterization"). Then:

- `vips-conformance check` judges llvmpipe's `rast` as an engine's capture of
  the rasterize stage, isolated, at fp32: it must pass (triangle ids by dEQP's
  rule: an id that differs from ours only at an ambiguous edge pixel is
  accepted; missing / unexpected / wrong pixels fail); the same rast with its
  rows top-down, or u and v swapped, must fail it;
- the texels whose id differs from the CPU reference provider's
  (`run --save-outputs`), and how many of those the verdict called ambiguous;
- a chained `check` of the whole component with llvmpipe's `rast` flowing on:
  `clip` (numpy), `rast` (llvmpipe) and `texel_positions` (numpy's
  interpolation of llvmpipe's rast), each stage judged on the captures before
  it, and the texel positions end to end against the golden ones (texels
  where llvmpipe chose another triangle at an ambiguous edge left out).

It exits 1 unless every verdict is as expected.

VIPS_CONFORMANCE overrides the CLI binary (default target/release).
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = pathlib.Path(os.environ.get("VIPS_CONFORMANCE", ROOT / "target" / "release" / "vips-conformance"))

VERTEX = """
#version 330
in vec4 in_pos;
in vec2 in_bary;
out vec2 bary;
void main() {
    bary = in_bary;
    gl_Position = in_pos;  // the suite's clip-space positions as they are
}
"""

# Perspective-correct interpolation of the per-vertex (1,0), (0,1), (0,0) gives
# nvdiffrast's (u, v); gl_PrimitiveID counts the draw's triangles from 0.
FRAGMENT = """
#version 330
in vec2 bary;
out vec4 rast;
void main() {
    rast = vec4(bary, gl_FragCoord.z * 2.0 - 1.0, float(gl_PrimitiveID + 1));
}
"""


def load_suite(name):
    """The document and its inline tensors (uv, vertices, faces) as numpy arrays."""
    path = ROOT / "conformance" / "suites" / name
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the full suite's YAML is 450 kB
    doc = yaml.load((path / "suite.yaml").read_text(), Loader=loader)
    tensors = {}
    for key in ("uv", "vertices", "faces"):
        t = doc["tensors"][key]
        tensors[key] = np.array(t["source"]["values"], dtype=t["dtype"]).reshape(t["shape"])
    node = next(n for s in doc["stages"] if s["stage"] == "rasterize" for n in s["graph"])
    return path, tensors, node["attrs"]["height"], node["attrs"]["width"]


def uv_to_clip(uv):
    """The uv_to_clip stage in float32, one rounding per operator as its graph has them."""
    one, two = np.float32(1), np.float32(2)
    u, v = uv[..., 0:1], uv[..., 1:2]
    x = (u * two).astype(np.float32) - one
    y = ((one - v).astype(np.float32) * two).astype(np.float32) - one
    z = np.zeros_like(u)
    return np.concatenate([x, y, z, z + one], axis=-1).astype(np.float32)


def rasterize_llvmpipe(clip, faces, height, width):
    """[B, H, W, 4] float32 from llvmpipe; also GL_RENDERER / GL_VERSION."""
    import moderngl

    ctx = moderngl.create_standalone_context(backend="egl")
    renderer = f"{ctx.info['GL_RENDERER']} | {ctx.info['GL_VERSION']} | moderngl {moderngl.__version__}"
    if "llvmpipe" not in ctx.info["GL_RENDERER"]:
        sys.exit(f"not llvmpipe: {renderer}")
    prog = ctx.program(vertex_shader=VERTEX, fragment_shader=FRAGMENT)
    fbo = ctx.framebuffer(color_attachments=[ctx.texture((width, height), 4, dtype="f4")],
                          depth_attachment=ctx.depth_renderbuffer((width, height)))
    ctx.disable(moderngl.CULL_FACE)  # UV charts come in either winding
    ctx.enable(moderngl.DEPTH_TEST)
    ctx.depth_func = "<"  # GL_LESS: the first of equal depths wins, as the reference's lower index
    # Non-indexed: every triangle's own three vertices, so each carries its own barycentric corner.
    bary = np.tile(np.array([[1, 0], [0, 1], [0, 0]], dtype=np.float32), (len(faces), 1))
    out = []
    for pos in clip:  # one draw per batch entry, the same triangles
        data = np.concatenate([pos[faces.reshape(-1)], bary], axis=1).astype(np.float32)
        vbo = ctx.buffer(data.tobytes())
        vao = ctx.vertex_array(prog, [(vbo, "4f 2f", "in_pos", "in_bary")])
        fbo.use()  # the viewport: the whole framebuffer
        fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)
        vao.render(moderngl.TRIANGLES)
        # glReadPixels starts at the bottom row: row 0 is the bottom, as nvdiffrast's and ours.
        out.append(np.frombuffer(fbo.read(components=4, dtype="f4"), dtype=np.float32).reshape(height, width, 4))
        vao.release()
        vbo.release()
    return np.stack(out), renderer


def interpolate(attr, rast, faces):
    """vsdk.interpolate: u·a0 + v·a1 + (1 − u − v)·a2 in float64, rounded once; 0 where empty."""
    ids = rast[..., 3].astype(np.int64) - 1
    out = np.zeros(rast.shape[:-1] + (attr.shape[-1],), dtype=np.float32)
    for b in range(rast.shape[0]):
        hit = ids[b] >= 0
        t = faces[ids[b][hit]]
        u, v = (rast[b][hit][:, k:k + 1].astype(np.float64) for k in (0, 1))
        a = attr[b].astype(np.float64)
        out[b][hit] = (u * a[t[:, 0]] + v * a[t[:, 1]] + (1 - u - v) * a[t[:, 2]]).astype(np.float32)
    return out


def cli(*args):
    r = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"vips-conformance {args[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def check(suite, files, *extra):
    """`check` at fp32 on the captures: the results JSON."""
    tensors = [a for f in files for a in ("--tensors", f)]
    return json.loads(cli("check", suite, *tensors, "--tier", "fp32", "--json", *extra).stdout)


def main():
    full = "--full" in sys.argv[1:]
    name = "trellis-texture-bake" if full else "trellis-texture-bake-quick"
    suite, t, height, width = load_suite(name)
    clip = uv_to_clip(t["uv"])
    rast, renderer = rasterize_llvmpipe(clip, t["faces"], height, width)
    print(f"{name}: {len(t['faces'])} triangles at {height}x{width} on {renderer}")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        np.savez(tmp / "llvmpipe.npz", rast=rast)

        # Our CPU reference provider's rast, for the id comparison.
        ref_file = tmp / "cpu.safetensors"
        r = cli("run", suite, "--provider", "cpu", "--stage", "rasterize", "--tier", "fp32", "--json",
                "--no-differential", "--no-contract", "--save-outputs", ref_file)
        from safetensors.numpy import load_file
        ref = load_file(str(ref_file))["rast"]
        differ = rast[..., 3] != ref[..., 3]
        print(f"CPU provider's rasterize: {'PASS' if json.loads(r.stdout)['passed'] else 'FAIL'}; "
              f"covered texels: llvmpipe {(rast[..., 3] > 0).sum()}, CPU {(ref[..., 3] > 0).sum()}; "
              f"ids differ at {differ.sum()} texels ({(differ & (rast[..., 3] > 0) & (ref[..., 3] > 0)).sum()} "
              f"both covered, {(differ & (ref[..., 3] == 0)).sum()} only llvmpipe's, "
              f"{(differ & (rast[..., 3] == 0)).sum()} only ours)")

        # The verdict on llvmpipe's rast, isolated (golden clip in).
        report = check(suite, [tmp / "llvmpipe.npz"], "--stage", "rasterize")
        stage = report["tiers"][0]["stages"][0]
        out = stage["outputs"][0]
        px, j = out["pixels"], out["judgement"]
        print(f"check rasterize (isolated, fp32): {'PASS' if report['passed'] else 'FAIL'} ({stage['status']}), "
              f"max|e| {j['max_e']:.3g}; pixels {px['pixels']}: ambiguous {px['ambiguous']}, missing "
              f"{px['missing']}, unexpected {px['unexpected']}, wrong {px['wrong']}")
        if not report["passed"]:
            w = j["worst"]
            print(f"  worst: rast{w['index']} = {w['actual']} against {w['reference']} (bound {w['bound']}); "
                  f"reason: {j['reason']}")
        failed |= not report["passed"]
        # Each differing id is accepted only as ambiguous (else it was counted missing/unexpected/wrong).
        if report["passed"]:
            print(f"  so all {differ.sum()} differing ids were among the {px['ambiguous']} ambiguous texels")

        # Two of the pitfalls docs/operators.md names must fail the same check.
        for what, bad in [("rows top-down", rast[:, ::-1]), ("u and v swapped", rast[..., [1, 0, 2, 3]])]:
            np.savez(tmp / "bad.npz", rast=np.ascontiguousarray(bad))
            report = check(suite, [tmp / "bad.npz"], "--stage", "rasterize")
            out = report["tiers"][0]["stages"][0]["outputs"][0]
            px = out["pixels"]
            print(f"  llvmpipe's rast with {what}: {'PASS' if report['passed'] else 'FAIL'} (must fail; max|e| "
                  f"{float(out['judgement']['max_e']):.3g}, missing {px['missing']}, unexpected {px['unexpected']}, "
                  f"wrong {px['wrong']})")
            failed |= report["passed"]

        # The component chained with llvmpipe's rast flowing into the interpolation.
        texel_positions = interpolate(t["vertices"], rast, t["faces"])
        np.savez(tmp / "chain.npz", clip=clip, rast=rast, texel_positions=texel_positions)
        report = check(suite, [tmp / "chain.npz"], "--mode", "chained")
        tier = report["tiers"][0]
        stages = ", ".join(f"{s['stage']} {s['status'].upper()} max|e| {s['outputs'][0]['judgement']['max_e']:.3g}"
                           for s in tier["stages"])
        e2e = "; ".join(f"{e['tensor']} {'PASS' if e['passed'] else 'FAIL'} rel L2 {e['drift']['rel_l2_error']:.3g} "
                        f"(≤ {e['criterion']['rel_l2']:g}), cosine {e['drift']['cosine_similarity']:.9f}, "
                        f"{e.get('pixels_left_out', '?')} texels left out" for e in tier["end_to_end"])
        print(f"check chained (fp32): {'PASS' if report['passed'] else 'FAIL'}: {stages}; end to end: {e2e}")
        failed |= not report["passed"]
    print("verdict:", "FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
