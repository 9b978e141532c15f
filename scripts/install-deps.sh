#!/usr/bin/env bash
# Installs the Debian 12 packages a job needs, only those missing (idempotent).
#   install-deps.sh [GROUP...]   (default: build)
#   build   building the CLI and the runtime library, tuning on the CPU (the main job)
#   test    build + the test suite's own needs (GoogleTest/GoogleMock; Python with numpy, and
#           venv, setuptools and wheel for the binding's pip install test) and pkg-config for
#           the example consumers
#   checks  only CI's extra checks: clang-19 with its sanitizer runtimes and libFuzzer (fuzz/),
#           HIP headers for the gfx942 device-code compile check
set -euo pipefail
build=(cmake ninja-build g++ libsqlite3-dev libcli11-dev libyaml-cpp-dev libbenchmark-dev)
test=("${build[@]}" libgtest-dev libgmock-dev python3 python3-numpy python3-venv python3-setuptools
      python3-wheel pkg-config)
checks=(clang-19 libclang-rt-19-dev libfuzzer-19-dev libamdhip64-dev)

packages=()
for group in "${@:-build}"; do
  case $group in
    build) packages+=("${build[@]}") ;;
    test) packages+=("${test[@]}") ;;
    checks) packages+=("${checks[@]}") ;;
    *) echo "install-deps.sh: unknown group '$group' (build, test, checks)" >&2; exit 2 ;;
  esac
done
missing=()
for p in $(printf '%s\n' "${packages[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
