"""Stages cut at module boundaries, and the names a reviewer reads.

Default cut: each element of a repeated container (`blocks.0`, `blocks.1`, ...: a module path part
that is a number) is one stage, every other top-level module one stage, and the model's own forward
code between them a stage named after the parameters it reads. `--stage GLOB` (repeatable) cuts at the
module paths a glob matches instead (`blocks.*`, `encoder.layer.*`), the most specific match winning.
A stage that only moves data (reshape, permute, crop, concat) and reads no parameter is merged into
the stage before it: a certificate should not count a reshape as a component.

Names: parameters keep the model's names (`blocks.0.attn.qkv.weight`); a stage's outputs are named
after the stage (`blocks.0.out`); intermediates are local to their stage (vips-format.md), named after
their module path inside the stage (`attn.qkv`) or their operator.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from .graph import Graph, Node

MOVEMENT = {"vsdk.reshape", "vsdk.permute", "vsdk.crop", "vsdk.concat", "vsdk.cast"}


@dataclass
class Stage:
    name: str
    module: str  # the module path the stage stands for ("" = the model's own code)
    nodes: List[Node] = field(default_factory=list)
    inputs: List[str] = field(default_factory=list)  # value names read from outside the stage
    outputs: List[str] = field(default_factory=list)  # value names read after it (or model outputs)


def stage_key(module: str, globs: Sequence[str]) -> str:
    parts = module.split(".") if module else []
    if globs:
        for end in range(len(parts), 0, -1):
            prefix = ".".join(parts[:end])
            if any(fnmatch.fnmatchcase(prefix, g) for g in globs):
                return prefix
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return parts[0] if parts else ""


def cut(graph: Graph, globs: Sequence[str] = ()) -> List[Stage]:
    runs: List[Stage] = []
    for n in graph.nodes:
        key = stage_key(n.module, globs)
        if runs and runs[-1].module == key:
            runs[-1].nodes.append(n)
        else:
            runs.append(Stage(name="", module=key, nodes=[n]))
    # Movement-only runs without parameters join the run before (the first joins the one after).
    merged: List[Stage] = []
    for r in runs:
        if merged and _pure(r, graph):
            merged[-1].nodes.extend(r.nodes)
        elif len(merged) == 1 and _pure(merged[0], graph):
            r.nodes[:0] = merged[0].nodes
            merged[0] = r
        else:
            merged.append(r)
    _name(merged, graph)
    _connect(merged, graph)
    return merged


def _pure(stage: Stage, graph: Graph) -> bool:
    return all(n.op in MOVEMENT for n in stage.nodes) and not any(i in graph.consts for n in stage.nodes for i in n.inputs)


def _name(stages: List[Stage], graph: Graph) -> None:
    used: Dict[str, int] = {}
    for s in stages:
        if s.module:
            base = s.module
        else:
            params = [graph.const_names.get(i, "").removesuffix(".computed") for n in s.nodes for i in n.inputs if i in graph.consts]
            params = [p for p in params if p and "." not in p]
            base = "_".join(dict.fromkeys(params)) if params else s.nodes[0].op.split(".")[-1]
        base = re.sub(r"[^A-Za-z0-9_.\-]", "_", base)
        used[base] = used.get(base, 0) + 1
        s.name = base if used[base] == 1 else f"{base}_{used[base]}"


def _connect(stages: List[Stage], graph: Graph) -> None:
    where: Dict[str, int] = {}
    for i, s in enumerate(stages):
        for n in s.nodes:
            where[n.output] = i
    for i, s in enumerate(stages):
        produced = {n.output for n in s.nodes}
        for n in s.nodes:
            for v in n.inputs:
                if v not in produced and v not in s.inputs:
                    s.inputs.append(v)
                    if v in where:
                        src = stages[where[v]]
                        if v not in src.outputs:
                            src.outputs.append(v)
    for o in graph.outputs:
        if o in where and o not in stages[where[o]].outputs:
            stages[where[o]].outputs.append(o)
    for s in stages:
        order = {n.output: k for k, n in enumerate(s.nodes)}
        s.outputs.sort(key=lambda v: order[v])


def local_names(stage: Stage, graph: Graph, global_names: Dict[str, str]) -> Dict[str, str]:
    """Names for the stage's intermediates, unique within the stage and distinct from global names."""
    taken = set(global_names.values())
    names: Dict[str, str] = {}
    prefix = stage.module + "." if stage.module else ""
    for n in stage.nodes:
        if n.output in global_names:
            continue
        if n.module == stage.module:
            rel = ""
        else:
            rel = n.module[len(prefix):] if n.module.startswith(prefix) else n.module
        base = f"{rel}.{n.op.split('.')[-1]}" if rel else n.op.split(".")[-1]
        name, k = base, 1
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        names[n.output] = name
    return names


def stage_output_names(stages: List[Stage], graph: Graph, model_outputs: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Global names of every stage output: the model's output names, else `<stage>.out[_k]`."""
    names: Dict[str, str] = {}
    for s in stages:
        for k, v in enumerate(s.outputs):
            if model_outputs and v in model_outputs:
                names[v] = model_outputs[v]
            else:
                names[v] = f"{s.name}.out" if len(s.outputs) == 1 else f"{s.name}.out{k}"
    return names
