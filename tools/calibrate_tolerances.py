#!/usr/bin/env python3
"""Measures the per-stage errors of correct implementations of the DINOv2
suites, for tools/make_dinov2_suite.py to turn into tolerances.

Correct implementations: the CPU provider at fp32, fp16 and bf16, and the
plain-C template at fp32 (a different summation order and accumulation
precision). For each suite, stage and tier it records the largest max-abs
error any of them shows against the golden values, in
conformance/suites/<suite>/calibration.json.

    cargo build --release && python3 tools/calibrate_tolerances.py
    python3 tools/make_dinov2_suite.py && target/release/vips-conformance generate <suite>

(generate only rewrites the golden file's document hash: the values do not
depend on tolerances.)
"""
import glob
import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI = ROOT / "target" / "release" / "vips-conformance"
TEMPLATE = sorted(glob.glob(str(ROOT / "target/release/build/vsdk-template-c-*/out/libvsdk_provider_template_c.so")))[-1]
RUNS = [("cpu", "fp32"), ("cpu", "fp16"), ("cpu", "bf16"), (TEMPLATE, "fp32")]


def main():
    for suite in ["dinov2-vits14", "dinov2-vits14-quick"]:
        worst = {}
        for provider, tier in RUNS:
            out = subprocess.run(
                [str(CLI), "run", suite, "--provider", provider, "--tier", tier, "--json", "--reference", "none"],
                capture_output=True, text=True, check=False,
            )
            report = json.loads(out.stdout)
            for stage in report["tiers"][0]["stages"]:
                if stage["status"] == "not_supported":
                    continue
                err = max(o["metrics"]["max_abs_error"] for o in stage["outputs"])
                key = worst.setdefault(tier, {})
                key[stage["stage"]] = max(key.get(stage["stage"], 0.0), err)
        path = ROOT / "conformance" / "suites" / suite / "calibration.json"
        implementations = ["cpu fp32/fp16/bf16", "template-c fp32"]
        path.write_text(json.dumps({"implementations": implementations, "max_abs_error": worst}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
