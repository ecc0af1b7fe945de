#!/bin/sh
# Runs the three quick suites on a provider library at fp32, fp16 and bf16, in
# isolated and chained mode (differential round and kernel contract on, the
# defaults), one conformance process at a time, and prints one summary line
# per (suite, mode, tier).
#
#   testing/clean-room/run_all.sh LIB [RUNNER] [OUTDIR]
#
# RUNNER defaults to /tmp/cleanroom/bin/vips-conformance (a private copy of
# target/debug/vips-conformance with vips-sdk-worker and
# libvsdk_provider_cpu.so, the float64 reference, beside it).
set -u
LIB=${1:?usage: run_all.sh LIB [RUNNER] [OUTDIR]}
RUNNER=${2:-/tmp/cleanroom/bin/vips-conformance}
OUT=${3:-/tmp/cleanroom/out/$(basename "$LIB" .so)}
SUITES=${VSDK_SUITES_PATH:-$(cd "$(dirname "$0")/../.." && pwd)/conformance/suites}
export VSDK_SUITES_PATH="$SUITES"
export VSDK_REFERENCE_CACHE=${VSDK_REFERENCE_CACHE:-/tmp/cleanroom/refcache}
mkdir -p "$OUT"
status=0
for suite in resnet50-quick mobilenetv3-small-quick llama3-8b-block-quick; do
  for mode in isolated chained; do
    "$RUNNER" run "$suite" --provider "$LIB" -q --tier fp32 --tier fp16 --tier bf16 --mode "$mode" \
      --output "$OUT/$suite-$mode.json" >"$OUT/$suite-$mode.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=1
    python3 - "$OUT/$suite-$mode.txt" "$suite" "$mode" "$rc" <<'EOF'
import re, sys
text, suite, mode, rc = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4]
for block in re.split(r'\n(?=tier )', text)[1:]:
    tier = block.split(',')[0].split()[1]
    st = re.search(r'(\d+) passed, (\d+) failed, (\d+) not supported', block)
    dif = re.search(r'differential round[^:]*:\s*(\d+) of\s*(\d+)', block)
    con = re.search(r'kernel contract[^:]*:\s*(\d+) of\s*(\d+)', block)
    e2e = re.search(r'end to end[^\n]*: (PASS|FAIL)', block)
    print(f"{suite:24} {mode:8} {tier:5} stages {st.group(1)}/{int(st.group(1))+int(st.group(2))+int(st.group(3))}"
          f"  differential {dif.group(1)}/{dif.group(2)}  contract {con.group(1)}/{con.group(2)}"
          + (f"  end-to-end {e2e.group(1)}" if e2e else "") + f"  (exit {rc})")
EOF
  done
done
exit $status
