#!/usr/bin/env python3
"""Writes the VIPS documents of TRELLIS.2's texture bake, its deterministic
steps (trellis/pipelines/trellis2_texturing.py, `postprocess_mesh`, as PyPI
`trellis-3d-python` 0.1.30 ships it):

    uvs[:, 1] = 1 - uvs[:, 1]
    rast = dr.rasterize(ctx, cat([uvs * 2 - 1, 0, 1]), faces, resolution=[T, T])
    pos = dr.interpolate(vertices, rast, faces)

    conformance/suites/trellis-texture-bake-quick/suite.yaml  256^2, a mesh of 1 280 triangles (CI)
    --full: conformance/suites/trellis-texture-bake/suite.yaml  1024^2 (TRELLIS.2's default texture
        size), 5 120 triangles

The mesh: an icosphere (3 or 4 subdivisions) deformed by three seeded
low-frequency waves, inside [-0.5, 0.5]^3 as TRELLIS's meshes are, unwrapped
into six charts (each face to the axis its normal points along most,
projected along it; vertices on a chart's border duplicated, as every UV
seam is) packed into a 3 x 2 atlas. Within a chart the mesh is watertight:
its shared edges must have no holes. The grid_sample_3d lookup that follows
in TRELLIS.2 is not part of these suites yet.

    python3 tools/make_trellis_bake_suite.py            (the committed quick suite; --full: also the full one)

Edit this script, re-run it, then `vips-conformance generate <suite>`.
"""
import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_dinov2_suite import node, q, stage, tensor, yfloat  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent / "conformance" / "suites"
TRELLIS2 = "microsoft/TRELLIS.2 (2025): trellis/pipelines/trellis2_texturing.py"
NVDIFFRAST = "Laine et al. 2020, Modular Primitives for High-Performance Differentiable Rendering (nvdiffrast), ACM TOG 39(6)"
SEED = 9001

# Each chart's projection: the direction, then the two axes (a, b) with
# (a, b, direction) right-handed, so every projected triangle of an
# outward-facing chart winds counter-clockwise.
CHARTS = [
    ((1, 0, 0), 1, 2), ((-1, 0, 0), 2, 1),
    ((0, 1, 0), 2, 0), ((0, -1, 0), 0, 2),
    ((0, 0, 1), 0, 1), ((0, 0, -1), 1, 0),
]


def icosphere(level):
    t = (1 + 5 ** 0.5) / 2
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
         (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
         (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    verts = [np.array(p, dtype=np.float64) / np.linalg.norm(p) for p in v]
    for _ in range(level):
        mid, nf = {}, []

        def m(a, b):
            k = (min(a, b), max(a, b))
            if k not in mid:
                p = verts[a] + verts[b]
                verts.append(p / np.linalg.norm(p))
                mid[k] = len(verts) - 1
            return mid[k]
        for a, b, c in f:
            ab, bc, ca = m(a, b), m(b, c), m(c, a)
            nf += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        f = nf
    return np.array(verts), np.array(f, dtype=np.int64)


def mesh(level):
    """Positions in [-0.5, 0.5]^3, UVs in [0, 1]^2 (v up, trimesh's
    convention) and faces, seam vertices duplicated per chart."""
    rng = np.random.default_rng(SEED)
    p, faces = icosphere(level)
    r = np.ones(len(p))
    for _ in range(3):
        d = rng.normal(size=3)
        d /= np.linalg.norm(d)
        r += 0.12 * rng.uniform(0.5, 1.0) * np.sin(rng.uniform(1.5, 3.0) * (p @ d) * np.pi + rng.uniform(0, 2 * np.pi))
    p = p * r[:, None]
    p = p / (2.02 * np.abs(p).max())
    n = np.cross(p[faces[:, 1]] - p[faces[:, 0]], p[faces[:, 2]] - p[faces[:, 0]])
    chart = np.argmax(n @ np.array([c[0] for c in CHARTS], dtype=np.float64).T, axis=1)
    pos, uv, tri = [], [], []
    for ci, (direction, a, b) in enumerate(CHARTS):
        sel = faces[chart == ci]
        used = np.unique(sel)
        local = {int(k): i + len(pos) for i, k in enumerate(used)}
        plane = p[used][:, [a, b]]
        lo, hi = plane.min(axis=0), plane.max(axis=0)
        # The 3 x 2 atlas: each chart scaled uniformly into its cell with a margin.
        cell = np.array([ci % 3, ci // 3], dtype=np.float64)
        size = np.array([1 / 3, 1 / 2])
        scale = 0.94 * min(size / (hi - lo))
        off = cell * size + (size - scale * (hi - lo)) / 2
        uv += list((plane - lo) * scale + off)
        pos += list(p[used])
        tri += [[local[int(k)] for k in t] for t in sel]
    uv, pos, tri = np.array(uv), np.array(pos), np.array(tri, dtype=np.int64)
    # Every projected triangle counter-clockwise: no chart folds over.
    e1, e2 = uv[tri[:, 1]] - uv[tri[:, 0]], uv[tri[:, 2]] - uv[tri[:, 0]]
    assert (e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0] > 0).all(), "a chart folds"
    return pos.astype(np.float32), uv.astype(np.float32), tri.astype(np.int32)


class Variant:
    def __init__(self, name, title, level, texture, budget):
        self.name, self.title, self.level, self.T, self.budget = name, title, level, texture, budget


def values(a):
    if a.dtype == np.int32:
        return "[" + ", ".join(str(int(x)) for x in a.ravel()) + "]"
    return "[" + ", ".join(yfloat(float(x)) for x in a.ravel()) + "]"


def suite(v):
    pos, uv, tri = mesh(v.level)
    V, F, T = len(pos), len(tri), v.T
    out = [
        f"# Generated by tools/make_trellis_bake_suite.py: edit the script, not this file.",
        "vips: 1",
        "component:",
        f"  id: {v.name}",
        "  version: 0.1.0",
        f"  title: {q(v.title)}",
        f"  paper: {q(TRELLIS2)}",
        "  notes:",
    ]
    notes = [
        "Reference: TRELLIS.2's texture bake (trellis/pipelines/trellis2_texturing.py, postprocess_mesh, in PyPI "
        "`trellis-3d-python` 0.1.30): the UVs' V flipped, rasterized as clip-space positions [uv * 2 - 1, 0, 1] "
        f"with nvdiffrast at texture_size^2 ({T}^2), the mesh's 3-D positions interpolated at every texel. The "
        "trilinear lookup into the sparse PBR volume that follows (flex_gemm's grid_sample_3d) is not part of "
        "this suite yet.",
        f"Mesh: an icosphere of {F} triangles deformed by three seeded waves (seed {SEED}), inside [-0.5, 0.5]^3, "
        f"unwrapped into six charts packed in a 3 x 2 atlas ({V} vertices with the seams' duplicates). Charts are "
        "watertight: a texel inside one is covered exactly once.",
        "The Y flip, twice: nvdiffrast's row 0 is the raster's bottom (NDC y = -1), an image's row 0 its top; "
        "TRELLIS.2 flips V before rasterizing (uvs[:, 1] = 1 - uvs[:, 1]) so the texel rows come out as image rows, "
        "and flips it back in the exported mesh. The essay's ModernGL port got one of the two wrong: the texture "
        "came out upside down. The uv_to_clip stage writes the first flip out; the rasterize stage fixes the row "
        "order (docs/operators.md, vsdk.rasterize).",
        "nvdiffrast's CUDA and OpenGL rasterizers differ at edges: the CUDA one snaps vertices to 4 sub-pixel bits "
        "and breaks ties with its own rule, OpenGL's to the driver's precision with its top-left rule (nvdiffrast "
        "issues 89 and 225). Triangle ids are judged by dEQP's rule (docs/error-model.md, 'Discrete outputs'): "
        "texels whose centre lies within the sub-pixel budget of an edge accept either triangle (or the "
        "background on a chart's border), all others need the reference's id, and (u, v) is judged against the "
        "triangle the implementation chose.",
        "Golden values are computed in float64 by the CPU reference provider (`vips-conformance generate`) and "
        "stored as float32 (past the golden budget, as their SHA-256, regenerated: docs/golden-format.md).",
    ]
    out += [f"    - {q(n)}" for n in notes]
    out += [
        "",
        "# Rasterizers may snap vertices to 4 sub-pixel bits (nvdiffrast's CUDA one does): (u, v) then move by up to",
        "# 1/32 pixel over a triangle's size in pixels, and chained mode's interpolated positions by up to about",
        "# 5e-4 relative at 256^2 (measured: tests/trellis_bake.rs's snapping rasterizer); texels whose triangle it",
        "# chose otherwise at an edge are left out of that comparison (docs/error-model.md, 'Discrete outputs').",
        "tolerances:",
        "  fp32: { subpixel_bits: 4, end_to_end: { rel_l2: 2.0e-3, cosine: 0.99999 } }",
        "  fp16: { subpixel_bits: 4 }",
        "  bf16: { subpixel_bits: 4 }",
        "",
        "golden:",
        f"  budget_bytes: {v.budget}",
        "",
        "tensors:",
    ]
    out += [
        tensor("uv", "float32", [1, V, 2], {"values": values(uv)},
               "the mesh's UVs (mesh.visual.uv: v up), one row per vertex, seams duplicated"),
        tensor("vertices", "float32", [1, V, 3], {"values": values(pos)},
               "the mesh's 3-D positions, inside [-0.5, 0.5]^3"),
        tensor("faces", "int32", [F, 3], {"values": values(tri)}, "the mesh's triangles (vertex rows)"),
        tensor("one", "float32", [1], {"values": "[1.0]"}, "1, for 1 - v and uv * 2 - 1"),
        tensor("two", "float32", [1], {"values": "[2.0]"}, "2, for uv * 2 - 1"),
        tensor("zeros", "float32", [1, V, 1], {"seeded": {"seed": 0, "uniform": ["0.0", "0.0"]}},
               "z = 0 (uniform [0, 0] is exactly 0)"),
        tensor("ones", "float32", [1, V, 1], {"seeded": {"seed": 0, "uniform": ["1.0", "1.0"]}},
               "w = 1 (uniform [1, 1] is exactly 1)"),
        tensor("clip", "float32", [1, V, 4], "golden", "the clip-space positions nvdiffrast receives"),
        tensor("rast", "float32", [1, T, T, 4], "golden", "(u, v, z/w, triangle id + 1) per texel, row 0 the bottom"),
        tensor("texel_positions", "float32", [1, T, T, 3], "golden", "the mesh's 3-D position at every texel, 0 where empty"),
    ]
    out += ["", "stages:"]
    out.append(stage(
        "uv_to_clip",
        "The V flip, then clip-space positions [u * 2 - 1, (1 - v) * 2 - 1, 0, 1]",
        "trellis2_texturing.py, postprocess_mesh: uvs[:, 1] = 1 - uvs[:, 1]; torch.cat([uvs * 2 - 1, zeros, ones], "
        "dim=-1).unsqueeze(0)",
        TRELLIS2,
        ["uv", "one", "two", "zeros", "ones"], ["clip"],
        [
            node("vsdk.crop", ["uv"], "u", offsets=[0, 0, 0], sizes=[1, V, 1]),
            node("vsdk.crop", ["uv"], "v", offsets=[0, 0, 1], sizes=[1, V, 1]),
            node("vsdk.sub", ["one", "v"], "v_flipped"),
            node("vsdk.mul", ["u", "two"], "u2"),
            node("vsdk.sub", ["u2", "one"], "x"),
            node("vsdk.mul", ["v_flipped", "two"], "v2"),
            node("vsdk.sub", ["v2", "one"], "y"),
            node("vsdk.concat", ["x", "y", "zeros", "ones"], "clip", axis=2),
        ],
        ["finite: clip"],
        ["Without the flip, or with it done twice, every texel row lands mirrored: the rasterize stage then draws "
         "an upside-down atlas."],
        precision="float32",
    ))
    out.append(stage(
        "rasterize",
        f"Rasterize the UV layout at {T} x {T}: (u, v, z/w, triangle id + 1) per texel, 0 where empty",
        "nvdiffrast.torch.rasterize(RasterizeCudaContext(), uvs_torch, faces_torch, resolution=[T, T])",
        NVDIFFRAST,
        ["clip", "faces"], ["rast"],
        [node("vsdk.rasterize", ["clip", "faces"], "rast", height=T, width=T)],
        ["finite: rast"],
        ["Row 0 is the bottom row (NDC y = -1), texel centres at (i + 0.5) / T; (u, v) are the barycentrics of "
         "the triangle's first and second vertex. A rasterizer that writes row 0 at the top, ids from 0, "
         "centres at integer coordinates, or culls back faces fails here (docs/validation.md)."],
        precision="float32",
    ))
    out.append(stage(
        "interpolate",
        "The mesh's 3-D positions at every texel: u * p0 + v * p1 + (1 - u - v) * p2 of the texel's triangle",
        "nvdiffrast.torch.interpolate(vertices_torch.unsqueeze(0), rast, faces_torch)",
        NVDIFFRAST,
        ["vertices", "rast", "faces"], ["texel_positions"],
        [node("vsdk.interpolate", ["vertices", "rast", "faces"], "texel_positions")],
        ["finite: texel_positions"],
        ["TRELLIS.2 then samples its PBR volume at (texel_positions + 0.5) * resolution for every covered texel "
         "(rast[..., 3] > 0); empty texels are 0 here and inpainted there."],
        precision="float32",
    ))
    d = ROOT / v.name
    d.mkdir(parents=True, exist_ok=True)
    (d / "suite.yaml").write_text("\n".join(out) + "\n")
    print(f"wrote {d / 'suite.yaml'} ({V} vertices, {F} triangles, {T}^2)")


def committed(full):
    return [v for v in [
        Variant("trellis-texture-bake",
                "TRELLIS.2 texture bake: a UV-unwrapped mesh of 5 120 triangles rasterized at 1024^2, its 3-D "
                "positions interpolated at every texel", level=4, texture=1024, budget=4_000_000),
        Variant("trellis-texture-bake-quick",
                "TRELLIS.2 texture bake, quick: a UV-unwrapped mesh of 1 280 triangles rasterized at 256^2, its "
                "3-D positions interpolated at every texel", level=3, texture=256, budget=2_000_000),
    ] if full or v.name.endswith("-quick")]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="also write trellis-texture-bake (1024^2)")
    a = p.parse_args()
    for v in committed(a.full):
        suite(v)


if __name__ == "__main__":
    main()
