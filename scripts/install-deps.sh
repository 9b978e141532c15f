#!/usr/bin/env bash
# Installs the Debian 12 packages mlatune needs, only those missing (idempotent).
set -euo pipefail
packages=(cmake ninja-build g++ libsqlite3-dev libcli11-dev libyaml-cpp-dev libbenchmark-dev
          libgtest-dev clang-19 libclang-rt-19-dev libfuzzer-19-dev libamdhip64-dev
          pkg-config python3 python3-numpy)
missing=()
for p in "${packages[@]}"; do
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
