#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite with CTest. Extra arguments go to
# cmake's configure step (e.g. -DMLATUNE_SANITIZE=address with MLATUNE_BUILD_DIR=build-asan).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh "$@"
ctest --test-dir "${MLATUNE_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
