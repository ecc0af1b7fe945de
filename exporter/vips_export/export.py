"""The pipeline: a lowered graph -> stages -> document and weights -> golden file -> validation.

Everything is written into a sibling folder first and moved to its place only when the model passed
its own suite (or validation was turned off): a failed export leaves no half-written suite behind.
"""
from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from .document import Plan, plan, write
from .errors import ExportError, UnsupportedOperators, ValidationFailed
from .graph import Graph, c_order
from .lazy import need
from .sdk import Conformance, find_conformance
from .stages import cut, stage_key
from .validate import Runner, Validation, validate, write_summary

TIERS = ("fp32", "fp16", "bf16")


@dataclass
class Exported:
    suite: Path
    plan: Plan
    validation: Optional[Validation]


def read_notes(path: Optional[Path]) -> Dict[str, Any]:
    """A user's notes: YAML `{component: [..], stages: {glob: [..]}, paper: .., version: ..}`."""
    if path is None:
        return {}
    yaml = need("yaml")
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ExportError(f"{path}: the notes file cannot be read ({e})") from e
    shape = "a map with `component` (a list of notes), `stages` (glob -> a list of notes), `paper`, `version`, `title`"
    if not isinstance(data, dict) or not set(data) <= {"component", "stages", "paper", "version", "title"}:
        raise ExportError(f"{path}: a notes file is {shape}")
    notes = lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))  # noqa: E731
    if "component" in data and not notes(data["component"]):
        raise ExportError(f"{path}: `component` must be a note or a list of notes ({shape})")
    if "stages" in data and not (isinstance(data["stages"], dict) and all(isinstance(k, str) and notes(v) for k, v in data["stages"].items())):
        raise ExportError(f"{path}: `stages` must map stage globs to a note or a list of notes ({shape})")
    if isinstance(data.get("component"), str):
        data["component"] = [data["component"]]
    return data


def refuse_unsupported(graph: Graph, globs: Sequence[str]) -> None:
    if graph.unsupported:
        items = [replace(u, stage=u.stage or stage_key(u.module, globs) or "(model root)") for u in graph.unsupported]
        raise UnsupportedOperators(items)


def component_id(name: str) -> str:
    cid = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")
    return cid or "model"


def export(
    graph: Graph,
    runner: Optional[Runner],
    out: Path,
    *,
    model_label: str,
    component: Optional[str] = None,
    title: Optional[str] = None,
    stage_globs: Sequence[str] = (),
    notes_file: Optional[Path] = None,
    tiers: Sequence[str] = TIERS,
    conformance: Optional[str] = None,
    force: bool = False,
    exporter_notes: Sequence[str] = (),
    weights: str = "model",
    inputs: Optional[Dict[str, Any]] = None,
) -> Exported:
    out = Path(out)
    refuse_unsupported(graph, stage_globs)
    graph.check()
    if out.exists() and not force:
        raise ExportError(f"{out} exists: choose another folder or pass --force to replace it")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file, not a suite folder: remove it or choose another name")
    unknown = [t for t in tiers if t not in TIERS]
    if unknown:
        raise ExportError(f"unknown tier(s) {unknown}: choose from {', '.join(TIERS)}")
    notes = read_notes(notes_file)
    sdk = Conformance(find_conformance(conformance))
    stages = cut(graph, stage_globs)
    if not stages:
        raise ExportError(f"{model_label}: the model has no operator to certify")
    p = plan(graph, stages, weights=weights, given=inputs)
    partial = out.parent / f".{out.name}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    try:
        return _write(graph, runner, out, partial, p, sdk, model_label, cid_of(component, graph), title, notes, tiers, exporter_notes)
    except BaseException:
        if partial.exists():
            shutil.rmtree(partial)
        raise


def cid_of(component: Optional[str], graph: Graph) -> str:
    return component or component_id(graph.name)


def _write(graph, runner, out, partial, p, sdk, model_label, cid, title, notes, tiers, exporter_notes) -> Exported:
    """Everything into `partial`, then moved to `out` (or beside it, `.rejected`)."""
    weights_name = sha = None
    if p.weights:
        st = need("safetensors.numpy")
        weights_name = "weights.safetensors"
        st.save_file({k: c_order(v) for k, v in p.weights.items()}, str(partial / weights_name))
        (partial / weights_name).chmod(0o644)  # committed beside the document
        digest = hashlib.sha256()
        with open(partial / weights_name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        sha = digest.hexdigest()
    text = write(
        p,
        component=cid,
        title=title or notes.get("title") or f"{graph.name}, exported from {graph.framework.upper() if graph.framework == 'onnx' else 'PyTorch'}",
        model_label=model_label,
        weights_file=weights_name,
        weights_sha256=sha,
        notes=notes,
        exporter_notes=list(exporter_notes),
    )
    (partial / "suite.yaml").write_text(text)
    sdk.generate(partial)
    validation = None
    if runner is not None and tiers:
        validation = validate(p, runner, partial, sdk, tiers, partial / "validation")
        write_summary(validation, partial, model_label)
        if not validation.passed:
            rejected = out.parent / f"{out.name}.rejected"
            if rejected.exists():
                shutil.rmtree(rejected)
            partial.rename(rejected)
            bad = "\n".join(f"  {v.tier} {v.mode}: {f}" for v in validation.verdicts for f in v.failing)
            raise ValidationFailed(
                f"{model_label} fails its own suite: a bug in the exporter or the catalog "
                f"(the suite is kept in {rejected} for inspection; its validation.md has the table):\n{bad}"
            )
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    return Exported(out, p, validation)
