#!/usr/bin/env bash
# The full-size TRELLIS conditioning suite (dinov2-vitl14-reg-518), outside CI
# (about an hour on 2 cores): its committed golden file is what `generate`
# computes, and the CPU provider passes it in both modes at three tiers.
# Prints each command's wall time and peak RSS (the largest of the CLI's and,
# once reaped, its worker's);
# record them in docs/benchmarks.md. CI runs the same stages' quick variant
# (dinov2-vitl14-reg-518-quick, conformance/tests/dinov2.rs).
#
#   tools/bench_large_suite.sh [SUITE] [extra `run` options, e.g. --no-differential]
set -euo pipefail
cd "$(dirname "$0")/.."
suite="${1:-dinov2-vitl14-reg-518}"
shift || true
cargo build --release -q
cli=target/release/vips-conformance
out="${TMPDIR:-/tmp}/vsdk-large-suite"
mkdir -p "$out"
measure() {
  /usr/bin/time -f "  wall %e s, peak RSS %M KiB" "$@" >"$out/last.log" 2>"$out/time.log" || {
    cat "$out/last.log" "$out/time.log"
    exit 1
  }
  tail -n 1 "$out/time.log"
}
echo "== generate --check $suite (the committed golden file is what the reference computes)"
measure "$cli" generate --check "$suite"
for mode in isolated chained; do
  echo "== run $suite --provider cpu --mode $mode, fp32 fp16 bf16 $*"
  measure "$cli" run "$suite" --provider cpu --mode "$mode" --tier fp32 --tier fp16 --tier bf16 \
    --timings --output "$out/$mode.json" "$@"
  grep -E "^verdict|passed, " "$out/last.log" || true
done
