#!/usr/bin/env bash
# The cost of running the provider in a worker process: the quick DINOv2
# suite on the CPU provider, in process (--no-isolate) and isolated (the
# sandboxed worker, every run judged), rounds
# alternated back to back, same seed; prints the medians (docs/benchmarks.md).
# Usage: tools/bench_isolation.sh [ROUNDS] [SUITE] [extra run options...]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-9}
suite=${2:-dinov2-vits14-quick}
shift $(( $# > 2 ? 2 : $# ))
cargo build --release -q -p vips-conformance -p vsdk-provider-cpu -p vips-sdk
cli=target/release/vips-conformance
export VSDK_PROVIDER_PATH=target/release
now() { date +%s.%N; }
declare -a inproc isolated
for ((i = 0; i < rounds; i++)); do
  for mode in inproc isolated; do
    flag=""
    [ "$mode" = inproc ] && flag="--no-isolate"
    t0=$(now)
    $cli run "$suite" --seed 1 $flag "$@" >/dev/null
    t1=$(now)
    t=$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')
    if [ "$mode" = inproc ]; then inproc+=("$t"); else isolated+=("$t"); fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mi=$(median "${inproc[@]}")
ms=$(median "${isolated[@]}")
printf 'suite %s, %d rounds, options: %s\n' "$suite" "$rounds" "${*:-(defaults)}"
printf 'in process: median %.3f s\nisolated:   median %.3f s\noverhead:   %+.1f %%\n' \
  "$mi" "$ms" "$(awk -v i="$mi" -v s="$ms" 'BEGIN {print (s - i) / i * 100}')"
