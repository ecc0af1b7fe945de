"""Shared fixtures: the committed ONNX models and the SDK's command line.

The tests need `vips-conformance` built (`cargo build -p vips-conformance`; tools/test builds the
workspace first) and onnx, onnxruntime, numpy, safetensors and pyyaml; without them they fail, naming
what is missing, rather than skip.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
EXPORTER = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("vips_export") is None:  # tools/test installs it with pip first
    sys.path.insert(0, str(EXPORTER))  # a checkout without an install
MODELS = ["vit", "deit_distilled", "clip_image", "mixer", "dinov2_reg"]


@pytest.fixture(scope="session")
def conformance() -> str:
    from vips_export.sdk import find_conformance

    return find_conformance()


def vips_export(args: List[str]) -> subprocess.CompletedProcess:
    """The `vips-export` command, as a user runs it (the installed script where there is one)."""
    script = shutil.which("vips-export")
    command = [script] if script else [sys.executable, "-m", "vips_export.cli"]
    env = None if script else {**os.environ, "PYTHONPATH": str(EXPORTER)}
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env)


def sdk(exe: str, args: List[str]) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *args], capture_output=True, text=True)
