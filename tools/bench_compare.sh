#!/usr/bin/env bash
# The comparison benchmark and NumPy's, in one run on the same machine.
# Record the figures in docs/benchmarks.md. Needs python3 with numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== NumPy"
python3 tools/bench_compare_numpy.py
echo "== SDK (criterion; thrpt = bytes of both tensors per second)"
cargo bench -p vips-sdk --bench compare -- --noplot 2>&1 | grep -E '^64Mi|time:|thrpt:' | grep -v '%'
