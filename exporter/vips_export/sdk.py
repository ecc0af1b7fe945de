"""The SDK's command line, as the exporter uses it: `generate` the golden file, `check` captures."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from .errors import ExportError


def find_conformance(explicit: Optional[str] = None) -> str:
    """`--conformance`, $VSDK_CONFORMANCE, `vips-conformance` on PATH, or, run from a checkout (or an
    editable install), that checkout's build."""
    for candidate in (explicit, os.environ.get("VSDK_CONFORMANCE")):
        if candidate:
            if not Path(candidate).is_file():
                raise ExportError(f"vips-conformance not found at {candidate}")
            return candidate
    on_path = shutil.which("vips-conformance")
    if on_path:
        return on_path
    repo = Path(__file__).resolve().parents[2]
    for profile in ("release", "debug"):
        built = repo / "target" / profile / "vips-conformance"
        if built.is_file():
            return str(built)
    raise ExportError(
        "vips-conformance was not found (not on PATH, no $VSDK_CONFORMANCE, no build in this checkout): "
        "build it with `cargo build -p vips-conformance` or give --conformance PATH"
    )


@dataclass
class Verdict:
    tier: str
    mode: str
    exit_code: int
    passed: bool
    failing: List[str]  # "stage: reason" for each stage that did not pass
    results_file: Path


class Conformance:
    def __init__(self, exe: str):
        self.exe = exe

    def _run(self, args: Sequence[str]) -> subprocess.CompletedProcess:
        try:
            return subprocess.run([self.exe, *args], capture_output=True, text=True)
        except OSError as e:
            raise ExportError(f"{self.exe} cannot be run ({e}): give the vips-conformance program with --conformance") from e

    def generate(self, suite: Path) -> str:
        p = self._run(["generate", str(suite.resolve())])
        if p.returncode != 0:
            raise ExportError(f"vips-conformance generate {suite} failed (exit {p.returncode}):\n{p.stderr.strip()}{p.stdout.strip()}")
        return p.stdout.strip()

    def check(self, suite: Path, captures: Path, tier: str, mode: str, results: Path) -> Verdict:
        p = self._run(["check", str(suite.resolve()), "--tensors", str(captures.resolve()), "--tier", tier, "--mode", mode, "--quiet", "--output", str(results)])
        if p.returncode not in (0, 1):
            raise ExportError(f"vips-conformance check ({tier}, {mode}) could not judge the captures (exit {p.returncode}):\n{p.stderr.strip()}")
        failing: List[str] = []
        try:
            report = json.loads(results.read_text())
            passed = bool(report.get("passed")) and p.returncode == 0
            for t in report.get("tiers", []):
                for s in t.get("stages", []):
                    if s.get("status") != "pass":
                        dd = s.get("drill_down") or {}
                        where = f" (first operator out of bounds: node {dd.get('node')} `{dd.get('op')}` -> `{dd.get('output')}`)" if dd else ""
                        failing.append(f"{s.get('stage')}: {s.get('status')}{': ' + s['reason'] if s.get('reason') else ''}{where}")
                for e in t.get("end_to_end") or []:
                    if e.get("passed") is False:
                        failing.append(f"end to end `{e.get('tensor')}`: drift {e.get('drift')} against {e.get('criterion')}")
        except (OSError, ValueError, TypeError) as e:
            raise ExportError(f"{results}: the SDK's results could not be read ({e})") from e
        return Verdict(tier, mode, p.returncode, passed, failing, results)
