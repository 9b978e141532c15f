#!/usr/bin/env bash
# Configures and builds mlatune (Release) into ${MLATUNE_BUILD_DIR:-build}: every target, or only
# those listed in ${MLATUNE_TARGETS}. Extra arguments go to cmake's configure step (e.g.
# -DMLATUNE_SANITIZE=address).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${MLATUNE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
targets=()
for t in ${MLATUNE_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
