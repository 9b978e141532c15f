#!/usr/bin/env bash
# Configures and builds mlatune (Release) into ${MLATUNE_BUILD_DIR:-build}. Extra arguments go to
# cmake's configure step (e.g. -DMLATUNE_SANITIZE=address).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${MLATUNE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
