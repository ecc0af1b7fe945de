"""`vips-export`: a model to a VIPS suite folder in one command (docs/authoring.md).

    vips-export model.onnx -o suites/my-model
    vips-export --torch my_pkg.models:make_model --input-shape x=1,3,64,64 -o suites/my-model

Exit codes: 0 the suite was written and the model passed it; 1 the model failed its own suite (kept
beside as DIR.rejected); 2 a usage error, an unreadable model or operators without a lowering (all
listed, nothing written); 3 a bug in vips-export (a trace follows).
"""
from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .errors import ExportError, ValidationFailed
from .export import TIERS, export


def _shapes(items: Sequence[str]) -> Dict[str, List[int]]:
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",") if d]
        except ValueError:
            raise ExportError(f"--input-shape {item}: expected NAME=D0,D1,... with integer sizes") from None
        if not name or not shapes[name]:
            raise ExportError(f"--input-shape {item}: expected NAME=D0,D1,...")
    return shapes


def _inputs(items: Sequence[str]) -> Dict[str, Any]:
    import numpy as np

    given = {}
    for item in items:
        name, _, path = item.partition("=")
        if not name or not path:
            raise ExportError(f"--input {item}: expected NAME=FILE.npy")
        try:
            given[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ExportError(f"--input {item}: {path} is not a readable .npy file ({e})") from e
    return given


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vips-export", description="Turn an ONNX or PyTorch model into a VIPS conformance suite.")
    p.add_argument("model", nargs="?", help="an .onnx file")
    p.add_argument("--torch", metavar="MODULE:FACTORY", help="a PyTorch model: a function returning an nn.Module (or (module, example_inputs))")
    p.add_argument("-o", "--out", required=True, type=Path, help="the suite folder to write (vips-conformance run ./DIR takes it)")
    p.add_argument("--stage", action="append", default=[], metavar="GLOB", help="cut stages at module paths matching GLOB (repeatable); default: each repeated block, each top-level module")
    p.add_argument("--notes", type=Path, help="a YAML file of notes merged into the document (component, stages: {glob: [...]})")
    p.add_argument("--id", help="the component id (default: from the model's name)")
    p.add_argument("--title", help="the component's title")
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...", help="the shape of an input (required for symbolic sizes other than a batch)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="run the model on this input (a real image) instead of a seeded one; stored beside the weights")
    p.add_argument("--weights", choices=("model", "seeded"), default="model", help="model: the model's own, in weights.safetensors pinned by SHA-256 (default); seeded: every parameter replaced by a seeded normal with its own mean and std, nothing stored")
    p.add_argument("--tiers", default=",".join(TIERS), help="tiers the model is validated at (default fp32,fp16,bf16; empty: no validation)")
    p.add_argument("--conformance", help="the vips-conformance program (default: $VSDK_CONFORMANCE, PATH, or the build of the checkout this package runs from)")
    p.add_argument("--force", action="store_true", help="replace DIR if it exists")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        if bool(args.model) == bool(args.torch):
            raise ExportError("give either an .onnx file or --torch MODULE:FACTORY")
        shapes = _shapes(args.input_shape)
        tiers = [t for t in args.tiers.split(",") if t]
        if args.torch:
            from .frontends.torch import load_factory

            graph, runner, label = load_factory(args.torch, shapes)
        else:
            from .frontends.onnx import OnnxRunner, load

            graph = load(args.model, shapes)
            runner = OnnxRunner(args.model)
            label = Path(args.model).name
        result = export(
            graph,
            runner,
            args.out,
            model_label=label,
            component=args.id,
            title=args.title,
            stage_globs=args.stage,
            notes_file=args.notes,
            tiers=tiers,
            conformance=args.conformance,
            force=args.force,
            weights=args.weights,
            inputs=_inputs(args.input),
        )
    except ValidationFailed as e:
        print(f"vips-export: {e}", file=sys.stderr)
        return 1
    except ExportError as e:
        print(f"vips-export: {e}", file=sys.stderr)
        return 2
    except Exception:  # a bug of ours: say so, with what a report needs
        print("vips-export: internal error (a bug in vips-export: please report it with this trace):", file=sys.stderr)
        traceback.print_exc()
        return 3
    p = result.plan
    stored = f", {len(p.weights)} tensors in weights.safetensors (pinned by SHA-256)" if p.weights else ""
    seeded = f", {len(p.seeded_weights)} parameters seeded" if p.seeded_weights else ""
    print(f"wrote {result.suite}: {len(p.stages)} stages, {sum(len(s.nodes) for s in p.stages)} operators{stored}{seeded}")
    if result.validation:
        print(result.validation.table())
    print(f"next: vips-conformance run {result.suite}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
