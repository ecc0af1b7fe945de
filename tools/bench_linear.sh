#!/usr/bin/env bash
# Measures vsdk.linear on the CPU provider and PyTorch's F.linear in one run, on
# the same machine, both with 2 threads. Record the figures in docs/benchmarks.md.
# Needs: python3 with torch (pip install torch).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== PyTorch"
python3 tools/bench_linear_torch.py
echo "== CPU provider (criterion; elem/s = FLOP/s)"
RAYON_NUM_THREADS=2 cargo bench -p vsdk-provider-cpu --bench linear -- --noplot 2>&1 |
  grep -E '^linear_|time:|thrpt:'
echo "== PyTorch again (to see drift over the run)"
python3 tools/bench_linear_torch.py
