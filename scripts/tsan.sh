#!/usr/bin/env bash
# The threaded parts under ThreadSanitizer: the runtime's live update (16 readers and a switching
# writer), plan/run and lookups, and the host kernels' thread pool. Builds only those test programs
# into ${MLATUNE_TSAN_BUILD_DIR:-build-tsan} (g++ -fsanitize=thread) and runs them with CTest; a
# data race fails the run (halt_on_error).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MLATUNE_TSAN_BUILD_DIR:-build-tsan}
tests=(live_update_test runtime_plan_test runtime_lookup_test host_variants_test)
bash scripts/install-deps.sh test
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLATUNE_SANITIZE=thread \
  -DMLATUNE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${tests[@]}"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" \
  -R "^(LiveUpdateTest|PlanRunTest|Lookup[A-Za-z]*Test|CApiTest|HostVariants|ThreadPool)\."
