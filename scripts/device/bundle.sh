#!/usr/bin/env bash
# Packs an nvidia build (BUILD, default build-nvidia) for a GPU machine into BUNDLE (default
# dev-bundle, git-ignored): the mlatune CLI, the GPU test binaries, libmlatune and the Debian
# shared libraries they need (gathered by the script BUNDLE_LIBS names, which is not part of this
# repository and must be given). TESTS (default: every GPU test) names the test binaries to take.
set -euo pipefail
: "${BUNDLE_LIBS:?names the script that copies the Debian shared libraries of a build into DIR/lib}"
cd "$(dirname "$0")/../.."
build=${BUILD:-build-nvidia}
bundle=${BUNDLE:-dev-bundle}
rm -rf "$bundle" && mkdir -p "$bundle/bin" "$bundle/tests" "$bundle/lib"
cp "$build/tuner/mlatune" "$build/bench/mlatune_bench_gpu_decode" "$bundle/bin/"
cp -P "$build"/runtime/libmlatune.so* "$bundle/lib/"
all_tests="memory_test gpu_reference_test hip_gate_test portable_split_test mma_split_test
  mma_fp8kv_test mma_fp8kv_persistent_test wgmma_split_test wgmma_fp8kv_test gpu_planted_test
  stream_graph_test lookup_alloc_test"
for t in ${TESTS:-$all_tests}; do
  cp "$build/tests/$t" "$bundle/tests/"
done
# Symbols stripped: what travels to the device is limited (64 MiB with the working tree).
strip "$bundle"/bin/* "$bundle"/tests/*
LD_LIBRARY_PATH=$bundle/lib bash "$BUNDLE_LIBS" "$bundle"
du -sh "$bundle"
