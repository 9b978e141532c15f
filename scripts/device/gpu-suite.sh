#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, over an nvidia build bundled into BUNDLE
# (default dev-bundle: the build's bin/, tests/ and lib/ from scripts/device/bundle.sh): the GPU
# test binaries (or those named in TESTS), a tuning run of configs/gpu-smoke.yaml with its
# winners (SKIP_TUNE=1 skips it), and the decode throughput benchmark (SKIP_BENCH=1 skips it).
# Logs and the database go to ${RESULTS:-out/gpu-suite}.
set -uo pipefail
bundle=${BUNDLE:-dev-bundle}
out=${RESULTS:-out/gpu-suite}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
# Where tests that write files (lookup_alloc_test) put them: the build tree is not here.
mkdir -p "$out/tmp"
MLATUNE_TEST_TMPDIR=$(cd "$out/tmp" && pwd)
export MLATUNE_TEST_TMPDIR
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv |
  tee "$out/gpu.txt"
status=0
all_tests="memory_test gpu_reference_test hip_gate_test portable_split_test mma_split_test
  mma_fp8kv_test mma_fp8kv_persistent_test wgmma_split_test wgmma_fp8kv_test gpu_planted_test
  stream_graph_test lookup_alloc_test"
for t in ${TESTS:-$all_tests}; do
  echo "== $t"
  "$bundle/tests/$t" --gtest_brief=1 > "$out/$t.log" 2>&1 || status=1
  tail -3 "$out/$t.log"
done
if [[ -z ${SKIP_TUNE:-} ]]; then
  echo "== tune configs/gpu-smoke.yaml"
  rm -f "$out/gpu-smoke.db"
  "$bundle/bin/mlatune" tune --config configs/gpu-smoke.yaml --db "$out/gpu-smoke.db" \
    2> "$out/tune.log" | tee "$out/tune.txt" || status=1
  tail -2 "$out/tune.log"
  "$bundle/bin/mlatune" show --db "$out/gpu-smoke.db" > "$out/show.txt" 2>&1 || status=1
  cat "$out/show.txt"
fi
if [[ -z ${SKIP_BENCH:-} ]]; then
  echo "== bench: GPU decode vs copy bandwidth ${BENCH_DB:+(winners of $BENCH_DB)}"
  "$bundle/bin/mlatune_bench_gpu_decode" ${BENCH_DB:+--db=$BENCH_DB} \
    --benchmark_counters_tabular=true 2>&1 | tee "$out/gpu_decode_bench.txt" || status=1
fi
exit $status
