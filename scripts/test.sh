#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite with CTest. Extra arguments go to
# cmake's configure step (e.g. -DMLATUNE_SANITIZE=address with MLATUNE_BUILD_DIR=build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
# Tests and benchmarks on (the main job may have configured the same build folder without them).
bash scripts/build.sh -DMLATUNE_BUILD_TESTS=ON -DMLATUNE_BUILD_BENCH=ON "$@"
ctest --test-dir "${MLATUNE_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
