#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang-19 into ${MLATUNE_FUZZ_BUILD_DIR:-build-fuzz} and
# runs each for ${FUZZ_SECONDS:-60} seconds (FUZZ_TARGETS: a subset), two at a time, starting from
# the committed seed corpus fuzz/corpus/<target>/ (read only: new inputs go to a scratch corpus
# under the build directory). A crash, a leak, a timeout or a sanitizer report is written to
# <build>/findings/<target>/ and makes the script fail; the log of each run is printed.
# FUZZ_SEED=N makes a run reproducible (CI sets it): libFuzzer's random seed is fixed and the
# scratch corpus starts empty, so the inputs tried are a prefix (as far as the time allows) of one
# fixed sequence, the same on every machine; a longer local run with that seed covers CI's.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"launch_plan config db_open snapshot"}
build=${MLATUNE_FUZZ_BUILD_DIR:-build-fuzz}
bash scripts/install-deps.sh build checks
CC=clang-19 CXX=clang++-19 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMLATUNE_FUZZ=ON -DMLATUNE_BUILD_TESTS=OFF -DMLATUNE_BUILD_BENCH=OFF >/dev/null
names=()
for t in $targets; do names+=("fuzz_$t"); done
cmake --build "$build" -j "$(nproc)" --target "${names[@]}"

run_one() {
  local t=$1 work=$build/corpus/$1 findings=$build/findings/$1 seed=()
  if [[ -n ${FUZZ_SEED:-} ]]; then
    seed=(-seed="$FUZZ_SEED")
    rm -rf "$work"
  fi
  mkdir -p "$work" "$findings"
  "$build/fuzz/fuzz_$t" "$work" "fuzz/corpus/$t" "${seed[@]}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -max_len=65536 -artifact_prefix="$findings/" -print_final_stats=1 \
    >"$build/fuzz_$t.log" 2>&1
}
status=0
pids=()
for t in $targets; do
  run_one "$t" & pids+=($!)
  if ((${#pids[@]} == 2)); then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
for t in $targets; do
  echo "== fuzz_$t (${seconds} s)"
  grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::new_units_added|ERROR|SUMMARY" \
    "$build/fuzz_$t.log" | head -8 || true
  if compgen -G "$build/findings/$t/*" >/dev/null; then
    echo "findings: $(ls "$build/findings/$t")"; status=1
  fi
done
exit $status
