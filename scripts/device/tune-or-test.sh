#!/usr/bin/env bash
# Runs on a lent GPU machine from the repository root, over a bundle (BUNDLE, default dev-bundle):
# one device call that the card which comes cannot waste. On an H200 (CARD, matched against
# nvidia-smi's name) it tunes configs/deepseek-v3-tp8.yaml into $OUT/h200-deepseek-v3-tp8.db
# within LIMIT seconds (default 585), resuming RESUME_FROM (a partial database from an earlier
# call) when given, and exits with the tuner's status (the winners are shown, not verified:
# scripts/device/check-db.sh does that in the next call; what is left of LIMIT benchmarks the
# winners at batch 64 x KV 8192). On any other card it runs the bundle's GPU tests
# (scripts/device/gpu-suite.sh, no tune, no benchmark) and exits 7.
#   bash scripts/device/tune-or-test.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:?OUT: the folder whose files come back}
card=${CARD:-H200}
bundle=${BUNDLE:-dev-bundle}
export LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
if [[ $name != *"$card"* ]]; then
  echo "not an $card: running the bundle's GPU tests only"
  tests=$(ls "$bundle/tests")  # those bundled (bundle.sh's TESTS)
  TESTS=$tests RESULTS=$out/gpu-suite SKIP_TUNE=1 SKIP_BENCH=1 bash scripts/device/gpu-suite.sh
  echo "gpu-suite rc=$?"
  exit 7
fi
db=$out/h200-deepseek-v3-tp8.db
if [[ -n ${RESUME_FROM:-} ]]; then cp "$RESUME_FROM" "$db" || exit 1; fi
limit=${LIMIT:-585}
start=$SECONDS
VERIFY_LIMIT=0 bash scripts/device/tune-config.sh configs/deepseek-v3-tp8.yaml "$db" "$limit"
rc=$?
# Time left under LIMIT goes to the new winners' benchmark at batch 64 x KV 8192 (the corner of
# the GPU speed target, docs/design.md §5), in case the machine is gone before the next call.
left=$((limit - (SECONDS - start) - 5))
if ((rc == 0 && left > 20)); then
  timeout --signal=KILL "$left" "$bundle/bin/mlatune_bench_gpu_decode" --db="$db" \
    --shape=b64_kv8192 --benchmark_counters_tabular=true >"$out/corner_bench.txt" 2>&1
  echo "corner bench rc=$? (limit $left s)"
  grep -E "copy bandwidth|_median" "$out/corner_bench.txt"
fi
exit $rc
