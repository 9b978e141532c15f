#!/usr/bin/env bash
# Compile checks of the GPU backend on a machine without a GPU:
#   1. -DMLATUNE_GPU=nvidia (nvcc, sm_90a) into ${MLATUNE_NVIDIA_BUILD_DIR:-build-nvidia}: every
#      target that holds GPU code or code that differs in GPU builds (the libraries, the CLI, the
#      GPU benchmark, tests/gpu, and the tests with MLATUNE_WITH_HIP branches; the other tests
#      are the CPU build's, compiled by the same g++ flags); skipped, with a message, only when
#      /usr/local/cuda/bin/nvcc is absent;
#   2. the device code of every kernels/**/*.hip compiled for AMD gfx942 with Debian's clang-19 and
#      HIP headers (libamdhip64-dev), plus their host code checked against the real HIP API.
#      Nothing is linked: Debian has no gfx942 device libraries, and no clang here knows gfx950.
# Exits non-zero if the nvidia build fails or any .hip file fails for gfx942 (every file is tried
# and the failures listed). Runs nothing on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test checks

nvcc=/usr/local/cuda/bin/nvcc
clang=clang++-19

echo "== GPU compile check 1/2: MLATUNE_GPU=nvidia build"
if [[ -x $nvcc ]]; then
  start=$SECONDS
  targets="mlatune mlatune_cli mlatune_bench_gpu_decode"
  for src in $(ls tests/gpu/*_test.cc; grep -l 'MLATUNE_WITH_HIP' tests/*/*_test.cc) ; do
    targets+=" $(basename "$src" .cc)"
  done
  targets=$(tr ' ' '\n' <<<"$targets" | sort -u | tr '\n' ' ')
  MLATUNE_BUILD_DIR=${MLATUNE_NVIDIA_BUILD_DIR:-build-nvidia} MLATUNE_TARGETS=$targets \
    bash scripts/build.sh -DMLATUNE_GPU=nvidia
  echo "nvidia build: ok ($((SECONDS - start)) s)"
else
  echo "SKIPPED: $nvcc not found (install the CUDA toolkit to check the NVIDIA build)"
fi

echo "== GPU compile check 2/2: device code for gfx942 ($clang)"
command -v "$clang" >/dev/null || {
  echo "$clang not found: run scripts/install-deps.sh checks" >&2
  exit 1
}
mapfile -t sources < <(find kernels -name '*.hip' | sort)
if ((${#sources[@]} == 0)); then
  echo "no .hip sources under kernels/"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The build generates mla_decode/code_identity.h; here a stand-in declares every identity the
# sources name (their values do not matter to a compile check).
mkdir -p "$tmp/include/mla_decode"
{
  echo "#pragma once"
  echo "#include <string_view>"
  echo "namespace mlatune::code_identity {"
  { grep -ho 'code_identity::k_[A-Za-z0-9_]*' "${sources[@]}" || true; } | sort -u |
    sed 's/^code_identity::\(.*\)$/inline constexpr std::string_view \1 = "compile-check";/'
  echo "}  // namespace mlatune::code_identity"
} >"$tmp/include/mla_decode/code_identity.h"

# The flags of the real build (C++20, warnings as errors, the kernels' include paths and
# definitions); -nogpulib because Debian's device libraries stop before gfx942. Helpers that only
# NVIDIA-only kernel bodies use (compiled out for AMD) are unused in this pass: that alone is not
# an error here (the nvidia build, where they are used, keeps -Werror for them).
flags=(-x hip --offload-arch=gfx942 --rocm-path=/usr -nogpulib -O3 -std=c++20 -Wall -Wextra
       -Werror -Wno-unused-function -Wno-unused-const-variable -I kernels -I kernels/include -I "$tmp/include" -DMLATUNE_WITH_HIP=1
       '-DMLATUNE_VERSION="compile-check"')
start=$SECONDS
failed=()
for src in "${sources[@]}"; do
  out=$tmp/$(echo "$src" | tr / _)
  # Device code, then the host side against the real HIP runtime headers: the latter catches
  # CUDA-only API use that the NVIDIA build's compat header would let through.
  if "$clang" "${flags[@]}" --offload-device-only -S "$src" -o "$out.s" &&
     "$clang" "${flags[@]}" --offload-host-only -fsyntax-only "$src"; then
    echo "gfx942: $src ok"
  else
    echo "gfx942: $src FAILED" >&2
    failed+=("$src")
  fi
done
if ((${#failed[@]} > 0)); then
  echo "gfx942 compile check failed for: ${failed[*]}" >&2
  exit 1
fi
echo "gfx942 compile check: ${#sources[@]} files ok ($((SECONDS - start)) s)"
