"""The model judged by its own suite before the suite is written out (issue 46, point 3).

The original model (ONNX Runtime or PyTorch) runs on the suite's own inputs and weights with every
stage output and every stage input as fed captured (`x@stage`), and `vips-conformance check` judges
the captures at each tier in both modes. A model that fails its own export is a bug in the exporter or
the catalog: the failing stage and operator are reported.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Protocol, Sequence

import numpy as np

from .document import Plan
from .graph import c_order
from .sdk import Conformance, Verdict

MODES = ("chained", "isolated")


class Runner(Protocol):
    tiers_run: Sequence[str]
    label: str

    def run(
        self, feeds: Dict[str, np.ndarray], values: Sequence[str], specs, tier: str, overrides: Dict[str, np.ndarray]
    ) -> Dict[str, np.ndarray]:
        """The model's values named `values` (framework names) from `feeds`, with the parameters named
        in `overrides` replaced."""
        ...


def captures(p: Plan, runner: Runner, tier: str, fed_as_float32: bool = False) -> Dict[str, np.ndarray]:
    """The capture set of one run: stage outputs by name, intermediates as `node@stage`, and stage
    inputs as fed as `name@stage`: every earlier stage's output, every constant the model computes
    again when it runs (its value may round otherwise than the folded one), and with
    `fed_as_float32` (a float32 engine judged at a 16-bit tier) the model's inputs and weights too,
    so each stage is judged from what the engine really fed it."""
    g = p.graph
    fw = g.framework_names
    produced = {o for s in p.stages for o in s.outputs}
    # Intermediates too (`node@stage`): a failing stage's drill-down then names the operator.
    inner = [(s, n.output) for s in p.stages for n in s.nodes if n.output not in produced and n.output in fw]
    computed = sorted({i for s in p.stages for i in s.inputs if i in g.computed and i in fw})
    wanted = [o for s in p.stages for o in s.outputs] + [v for _, v in inner] + computed
    feeds = {fw[v]: a for v, a in p.inputs.items()}
    got = runner.run(feeds, [fw[v] for v in wanted], {fw[v]: g.specs[v] for v in wanted}, tier, p.overrides)
    caps: Dict[str, np.ndarray] = {}
    for s in p.stages:
        for o in s.outputs:
            caps[p.names[o]] = c_order(got[fw[o]])
        for i in s.inputs:
            if i in produced or i in computed:
                caps[f"{p.names[i]}@{s.name}"] = c_order(got[fw[i]])
            elif fed_as_float32:
                value = p.inputs[i] if i in p.inputs else g.consts[i]
                if value.dtype.kind == "f":
                    caps[f"{p.names[i]}@{s.name}"] = value.astype(np.float32)
    for s, v in inner:
        caps[f"{p.local[s.name][v]}@{s.name}"] = c_order(got[fw[v]])
    return caps


@dataclass
class Validation:
    verdicts: List[Verdict]
    engine: str
    notes: List[str]

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def table(self) -> str:
        rows = [f"| {v.tier} | {v.mode} | {'PASS' if v.passed else 'FAIL'} | {'; '.join(v.failing) or '-'} |" for v in self.verdicts]
        return "\n".join(["| tier | mode | verdict | failing stages |", "|---|---|---|---|", *rows])


def validate(p: Plan, runner: Runner, suite: Path, conformance: Conformance, tiers: Sequence[str], work: Path) -> Validation:
    work.mkdir(parents=True, exist_ok=True)
    verdicts: List[Verdict] = []
    notes: List[str] = []
    fp32_caps = None
    for tier in tiers:
        if tier in runner.tiers_run:
            caps = captures(p, runner, tier)
            source = f"{runner.label} at {tier}"
        else:
            if fp32_caps is None:
                fp32_caps = captures(p, runner, "fp32", fed_as_float32=True)
            caps = fp32_caps
            source = f"{runner.label} at fp32 (it does not run at {tier}), judged at {tier} from the float32 inputs and weights it was fed"
        notes.append(f"{tier}: captures of {source}")
        file = work / f"captures-{tier}.npz"
        np.savez(file, **{k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in caps.items()})
        for mode in MODES:
            verdicts.append(conformance.check(suite, file, tier, mode, work / f"check-{tier}-{mode}.json"))
    return Validation(verdicts, runner.label, notes)


def write_summary(v: Validation, suite: Path, model_label: str) -> None:
    text = [
        f"# Validation: {model_label} judged by its own suite",
        "",
        f"Engine: {v.engine}. Every stage output and every stage input as fed was captured and judged",
        "with `vips-conformance check` (docs/authoring.md).",
        "",
        v.table(),
        "",
        *[f"- {n}" for n in v.notes],
        "",
    ]
    (suite / "validation.md").write_text("\n".join(text))
    (suite / "validation.json").write_text(
        json.dumps(
            {
                "engine": v.engine,
                "passed": v.passed,
                "checks": [{"tier": x.tier, "mode": x.mode, "passed": x.passed, "failing": x.failing} for x in v.verdicts],
            },
            indent=2,
        )
        + "\n"
    )
