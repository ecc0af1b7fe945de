"""The suite document (suite.yaml) a reviewer reads, and the tensors it pins.

Model inputs are seeded (a few bytes, regenerated bit for bit: seeded.py); weights are the model's own,
in `weights.safetensors` beside the document, pinned by its SHA-256 (docs/vips-format.md, `weights`);
constants of a few elements are written in the document. Stage outputs are golden: `generate` computes
them with the float64 reference.
"""
from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import seeded
from .errors import ExportError
from .graph import Graph, Spec, c_order
from .stages import Stage, local_names, stage_output_names

SMALL = 16  # constants of at most this many elements are written in the document


@dataclass
class Plan:
    """Everything the document names, and the values the model runs on."""

    graph: Graph
    stages: List[Stage]
    names: Dict[str, str]  # a global value -> its document name
    local: Dict[str, Dict[str, str]]  # stage -> intermediate value -> local name
    weights: Dict[str, np.ndarray]  # document name -> array, for weights.safetensors
    values: Dict[str, np.ndarray]  # document name -> small constant
    inputs: Dict[str, np.ndarray]  # model input value -> the seeded array the model runs on
    seeds: Dict[str, int] = field(default_factory=dict)
    # `--weights seeded`: document name -> (seed, mean, std), and the model's parameters replaced by
    # the same values (framework name -> array in the framework's layout) for the runner.
    seeded_weights: Dict[str, Tuple[int, str, float, float]] = field(default_factory=dict)
    overrides: Dict[str, np.ndarray] = field(default_factory=dict)



WEIGHTS = ("model", "seeded")


def plan(
    graph: Graph,
    stages: List[Stage],
    input_seed: int = 0,
    weights: str = "model",
    given: Optional[Dict[str, np.ndarray]] = None,
) -> Plan:
    """`weights`: `model`, the model's own (by reference); `seeded`, every parameter of more than
    SMALL elements replaced by a seeded normal with the parameter's own mean and std, or uniform over its
    range where it is non-negative and a normal would not be (a suite with no
    file of weights; the model is validated with the same values). `given`: model inputs the user
    supplies (a real image), stored beside the weights instead of seeded."""
    names: Dict[str, str] = {}
    for v in graph.inputs:
        names[v] = v
    taken = set(names.values())

    def unique(base: str) -> str:
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    if weights not in WEIGHTS:
        raise ExportError(f"--weights must be one of {', '.join(WEIGHTS)}, not {weights}")
    # The plan's own consts: seeding replaces some, and the caller's graph stays as it was.
    graph = replace(graph, consts=dict(graph.consts))
    producers = {}
    for n in graph.nodes:
        for i in n.inputs:
            producers.setdefault(i, n)
    values: Dict[str, np.ndarray] = {}
    stored: Dict[str, np.ndarray] = {}
    seeded_weights: Dict[str, Tuple[int, str, float, float]] = {}
    overrides: Dict[str, np.ndarray] = {}
    for c, a in graph.consts.items():
        if c not in producers:
            continue
        name = unique(graph.const_names.get(c) or c)
        names[c] = name
        if a.size <= SMALL:
            values[name] = a
        elif weights == "seeded" and c in graph.params and a.dtype.kind == "f":
            mean, std = seeded.stats(a)
            seed = seeded.seed_for(name)
            low, high = float(a.min()), float(a.max())
            if low >= 0 and mean - 4 * std < 0:
                # A non-negative parameter a normal would take below 0 (a batch norm's running
                # variance: its root would be NaN): uniform over the parameter's own range.
                new = seeded.uniform(seed, a.shape, low, high, str(a.dtype))
                seeded_weights[name] = (seed, "uniform", low, high)
            else:
                new = seeded.normal(seed, a.shape, mean, std, str(a.dtype))
                seeded_weights[name] = (seed, "normal", mean, std)
            graph.consts[c] = new
            fw, transposed = graph.params[c]
            overrides[fw] = c_order(new.T if transposed else new)
        else:
            stored[name] = a
    outs = {o: graph.output_names.get(o, o) for o in graph.outputs}
    for v, name in stage_output_names(stages, graph, outs).items():
        names[v] = unique(name)
    local = {s.name: local_names(s, graph, names) for s in stages}
    inputs = {}
    seeds = {}
    given = dict(given or {})
    for k, (v, spec) in enumerate(graph.inputs.items()):
        if v in given:
            a = c_order(np.asarray(given.pop(v)))
            if tuple(a.shape) != spec.shape or str(a.dtype) != spec.dtype:
                raise ExportError(f"input `{v}`: given {a.dtype} {list(a.shape)}, the model takes {spec.dtype} {list(spec.shape)}")
            inputs[v] = a
            stored[names[v]] = a
            continue
        if not spec.dtype.startswith(("float", "bfloat")):
            raise ExportError(f"input `{v}` is {spec.dtype}: seeded inputs are float only; give its values with --input {v}=FILE.npy (token ids, an image)")
        seeds[v] = 1000 + input_seed + k
        inputs[v] = seeded.normal(seeds[v], spec.shape, 0.0, 1.0, spec.dtype)
    if given:
        raise ExportError(f"given inputs {sorted(given)} are not inputs of the model (its inputs: {sorted(graph.inputs)})")
    return Plan(graph, stages, names, local, stored, values, inputs, seeds, seeded_weights, overrides)


_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def ystr(s: str) -> str:
    return s if _SAFE.match(s) and s not in ("true", "false", "null", "yes", "no") else json.dumps(s, ensure_ascii=False)


def yfloat(x: float) -> str:
    """A float YAML 1.1 readers also take for one (a dot before the exponent)."""
    s = repr(float(x))
    if "e" in s and "." not in s.split("e")[0]:
        m, e = s.split("e")
        s = f"{m}.0e{e}"
    return s


def yval(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return yfloat(float(v))
    if isinstance(v, str):
        return ystr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yval(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{ystr(k)}: {yval(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} into the document")


def _describe(stage: Stage, graph: Graph, names: Dict[str, str]) -> str:
    """The algorithm in words: the stage's operators in order, with what sets them apart."""
    parts: List[str] = []
    for n in stage.nodes:
        op = n.op.split(".")[-1]
        if n.op == "vsdk.linear":
            w = graph.specs[n.inputs[1]].shape
            parts.append(f"linear {w[1]}→{w[0]}{'' if len(n.inputs) > 2 else ' (no bias)'}")
        elif n.op == "vsdk.layer_norm":
            parts.append(f"layer_norm (eps {n.attrs['eps']:g})")
        elif n.op == "vsdk.sdpa":
            q = graph.specs[n.inputs[0]].shape
            heads = q[-3] if len(q) >= 3 else 1
            parts.append(f"sdpa ({heads} heads × {q[-1]}, scale {n.attrs['scale']:.6g})")
        elif n.op == "vsdk.conv2d":
            w = graph.specs[n.inputs[1]].shape
            parts.append(f"conv2d {w[1]}→{w[0]} {w[2]}×{w[3]} stride {n.attrs['strides'][0]}")
        elif n.op in ("vsdk.add", "vsdk.mul", "vsdk.sub", "vsdk.div"):
            other = [names.get(i, "") for i in n.inputs if i in graph.consts]
            parts.append(f"{op} {other[0]}" if other else op)
        else:
            parts.append(op)
    # Runs of one movement op read as one.
    out: List[str] = []
    for p in parts:
        if out and out[-1].split(" ×")[0] == p and p in ("reshape", "permute", "crop"):
            k = int(out[-1].split(" ×")[1]) + 1 if " ×" in out[-1] else 2
            out[-1] = f"{p} ×{k}"
        else:
            out.append(p)
    return " → ".join(out)


def _impl(stage: Stage, graph: Graph, model_label: str) -> str:
    where = f"`{stage.module}`" if stage.module else "the model's own forward"
    if stage.module in graph.module_classes:
        return f"{graph.module_classes[stage.module]} {where} of {model_label}"
    if graph.framework == "onnx":
        return f"the ONNX nodes of {where} in {model_label}"
    classes = dict.fromkeys(graph.module_classes[n.module] for n in stage.nodes if n.module in graph.module_classes)
    return f"{where} of {model_label}" + (f" ({', '.join(classes)})" if classes else "")


def stage_notes(notes: Dict[str, Any], stage: Stage) -> List[str]:
    out: List[str] = []
    for pattern, items in (notes.get("stages") or {}).items():
        if fnmatch.fnmatchcase(stage.name, pattern) or fnmatch.fnmatchcase(stage.module, pattern):
            out.extend([items] if isinstance(items, str) else list(items))
    return out


def write(
    p: Plan,
    *,
    component: str,
    title: str,
    model_label: str,
    weights_file: Optional[str],
    weights_sha256: Optional[str],
    notes: Dict[str, Any],
    exporter_notes: List[str],
    budget_bytes: int = 8_000_000,
) -> str:
    g = p.graph
    L: List[str] = []
    L.append(f"# Exported by vips-export from {model_label}: read it, add notes, commit it (docs/authoring.md).")
    L.append("vips: 1")
    L.append("component:")
    L.append(f"  id: {ystr(component)}")
    L.append(f"  version: {ystr(str(notes.get('version', '0.1.0')))}")
    L.append(f"  title: {json.dumps(title, ensure_ascii=False)}")
    if notes.get("paper"):
        L.append(f"  paper: {json.dumps(str(notes['paper']), ensure_ascii=False)}")
    comp_notes = list(notes.get("component") or []) + exporter_notes
    if comp_notes:
        L.append("  notes:")
        L.extend(f"    - {json.dumps(str(n), ensure_ascii=False)}" for n in comp_notes)
    L.append("")
    if weights_file:
        L.append("weights:")
        L.append(f"  file: {ystr(weights_file)}")
        L.append(f'  sha256: "{weights_sha256}"')
        L.append("")
    L.append("golden:")
    L.append(f"  budget_bytes: {budget_bytes}")
    L.append("")
    L.append("tensors:")

    def entry(name: str, spec: Spec, source: str, description: Optional[str] = None) -> None:
        d = f", description: {json.dumps(description, ensure_ascii=False)}" if description else ""
        L.append(f"  {ystr(name)}: {{ dtype: {spec.dtype}, shape: {yval(list(spec.shape))}, source: {source}{d} }}")

    for v, spec in g.inputs.items():
        if v in p.seeds:
            entry(p.names[v], spec, f"{{ seeded: {{ seed: {p.seeds[v]}, normal: [0.0, 1.0] }} }}", "model input")
        else:
            entry(p.names[v], spec, f"{{ weights: {ystr(p.names[v])} }}", "model input, as given")
    for c in g.consts:
        if c not in p.names:
            continue
        name = p.names[c]
        spec = g.specs[c]
        if name in p.values:
            flat = p.values[name].astype(np.float64).reshape(-1).tolist()
            entry(name, spec, f"{{ values: {yval(flat)} }}")
        elif name in p.seeded_weights:
            seed, kind, a, b = p.seeded_weights[name]
            what = "mean and std" if kind == "normal" else "range"
            entry(name, spec, f"{{ seeded: {{ seed: {seed}, {kind}: [{yfloat(a)}, {yfloat(b)}] }} }}", f"seeded with the model parameter's own {what}")
        else:
            why = f"computed when exported ({g.computed[c]}): the model computes it in its forward; the suite holds it as a weight" if c in g.computed else None
            entry(name, spec, f"{{ weights: {ystr(name)} }}", why)
    for s in p.stages:
        for o in s.outputs:
            entry(p.names[o], g.specs[o], "golden", f"output of stage {s.name}")
    L.append("")
    L.append("stages:")
    for s in p.stages:
        names = dict(p.names)
        names.update(p.local[s.name])
        L.append(f"  - stage: {ystr(s.name)}")
        L.append(f"    algorithm: {json.dumps(_describe(s, g, names), ensure_ascii=False)}")
        L.append(f"    impl: {json.dumps(_impl(s, g, model_label), ensure_ascii=False)}")
        L.append(f"    inputs: {yval([names[i] for i in s.inputs])}")
        L.append(f"    outputs: {yval([names[o] for o in s.outputs])}")
        L.append("    graph:")
        for n in s.nodes:
            attrs = f", attrs: {yval(n.attrs)}" if n.attrs else ""
            L.append(f"      - {{ op: {n.op}, inputs: {yval([names[i] for i in n.inputs])}, outputs: [{ystr(names[n.output])}]{attrs} }}")
        L.append("    verify:")
        L.extend(f"      - finite: {ystr(names[o])}" for o in s.outputs if g.specs[o].dtype.startswith(("float", "bfloat")))
        sn = stage_notes(notes, s)
        origins = sorted({n.origin.split(" ")[0] for n in s.nodes if ";" in n.origin})
        if origins:
            sn.append(f"Fused from the framework's decomposition on export: {', '.join(_fused_summary(s))}.")
        if sn:
            L.append("    notes:")
            L.extend(f"      - {json.dumps(str(x), ensure_ascii=False)}" for x in sn)
        L.append("")
    return "\n".join(L).rstrip() + "\n"


def _fused_summary(stage: Stage) -> List[str]:
    seen: Dict[str, str] = {}
    for n in stage.nodes:
        if ";" in n.origin and n.op not in seen:
            ops = [part.strip().split(" ")[0] for part in n.origin.split(";")]
            seen[n.op] = f"{n.op} from {'/'.join(dict.fromkeys(ops))}"
    return list(seen.values())
