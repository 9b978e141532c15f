#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, over a bundle (BUNDLE, default dev-bundle, from
# scripts/device/bundle.sh): what a serving engineer checks of a tuned database DB on this device,
# logs into RESULTS (default out/check-db):
#   1. the Python decode loop (examples/python/decode_loop_torch.py) through the runtime on torch
#      tensors, bf16 KV and fp8 KV, page size 64, against a PyTorch reference;
#   2. the decode benchmark of the database's winners against the device's copy bandwidth
#      (mlatune_bench_gpu_decode --db=DB);
#   3. `mlatune verify` of every winner, within VERIFY_LIMIT seconds (default 300; 0 skips it).
# ALLOW_FOREIGN=1: DB was tuned on another card of the same arch (e.g. the H200 database on an
# H100): 1 and 3 run with --allow-foreign-device, 2 is skipped (its timings would not be DB's).
# Exits non-zero if any of them fails.
#   bash scripts/device/check-db.sh DB
set -uo pipefail
db=${1:?usage: check-db.sh DB}
bundle=${BUNDLE:-dev-bundle}
out=${RESULTS:-out/check-db}
mkdir -p "$out"
export LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
export MLATUNE_LIBRARY=$bundle/lib/libmlatune.so.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
foreign=()
[[ ${ALLOW_FOREIGN:-0} == 1 ]] && foreign=(--allow-foreign-device)
status=0
for kv in bf16 fp8_e4m3fn; do
  echo "== python decode loop, $kv KV"
  python3 examples/python/decode_loop_torch.py --db "$db" --kv-dtype "$kv" "${foreign[@]}" 2>&1 |
    tee "$out/example_$kv.txt" || status=1
done
if ((${#foreign[@]} == 0)); then
  echo "== decode benchmark of the winners"
  "$bundle/bin/mlatune_bench_gpu_decode" --db="$db" --benchmark_counters_tabular=true \
    >"$out/gpu_decode_bench.txt" 2>&1 || status=1
  grep -E "copy bandwidth|_median" "$out/gpu_decode_bench.txt"
fi
limit=${VERIFY_LIMIT:-300}
if ((limit > 0)); then
  echo "== verify (limit $limit s)"
  start=$SECONDS
  timeout --signal=KILL "$limit" "$bundle/bin/mlatune" verify --db "$db" "${foreign[@]}" \
    >"$out/verify.txt" 2>&1
  rc=$?
  echo "verify rc=$rc after $((SECONDS - start)) s"
  tail -3 "$out/verify.txt"
  ((rc == 0)) || status=1
fi
exit $status
