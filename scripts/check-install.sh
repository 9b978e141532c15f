#!/usr/bin/env bash
# Checks what `cmake --install` gives consumers. Builds the runtime library and the CLI lean
# (Release; no tests, benchmarks or GPU) into ${MLATUNE_INSTALL_BUILD_DIR:-build-install},
# installs them into a fresh prefix there and checks the installed files; then builds
# examples/cpp_consumer (find_package) and examples/c_consumer (pkg-config) against that prefix
# alone, and runs both on the shipped H200 database (refused on this CPU build: foreign device) and
# on a host database tuned by the installed CLI (a selection, and a refused untuned shape). Extra
# arguments go to cmake's configure step (e.g. -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/install-deps.sh test

src=$PWD
build_dir=$(realpath -m "${MLATUNE_INSTALL_BUILD_DIR:-build-install}")
prefix=$build_dir/prefix
work=$build_dir/check
version=$(sed -n 's/^project(mlatune VERSION \([0-9.]*\) .*/\1/p' CMakeLists.txt)
major=${version%%.*}

fail() {
  echo "install check: FAILED: $*" >&2
  exit 1
}

# expect EXIT_CODE PATTERN COMMAND...: runs COMMAND, shows its output, checks its exit code and
# that its output (stdout and stderr) matches PATTERN (grep -E).
expect() {
  local want=$1 pattern=$2 out rc=0
  shift 2
  out=$("$@" 2>&1) || rc=$?
  echo "\$ ${*//"$build_dir/"/} -> exit $rc"
  printf '    %s\n' "${out//$'\n'/$'\n'    }"
  [[ $rc -eq $want ]] || fail "expected exit code $want, got $rc"
  grep -Eq -- "$pattern" <<<"$out" || fail "expected output matching '$pattern'"
}

[[ -n $version ]] || fail "no project version in CMakeLists.txt"
rm -rf "$prefix" "$work" "$build_dir/consumer-cpp" "$build_dir/consumer-c"
mkdir -p "$work" "$build_dir/consumer-c"

echo "== build into $build_dir"
MLATUNE_BUILD_DIR=$build_dir bash scripts/build.sh -DMLATUNE_BUILD_TESTS=OFF \
  -DMLATUNE_BUILD_BENCH=OFF -DMLATUNE_GPU=off -DMLATUNE_SANITIZE=none -DMLATUNE_FUZZ=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" "$@"

echo "== install into $prefix"
cmake --install "$build_dir"
# GNUInstallDirs picks lib, lib64 or lib/<multiarch> depending on the platform and prefix.
pc_file=$(find "$prefix" -name mlatune.pc)
[[ -n $pc_file ]] || fail "no mlatune.pc installed"
libdir=$(realpath --relative-to="$prefix" "$(dirname "$(dirname "$pc_file")")")
lib=$prefix/$libdir/libmlatune.so
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build_dir/CMakeCache.txt")

echo "== installed layout"
expected=(bin/mlatune include/mlatune/mlatune.h include/mlatune/mlatune.hpp
          "$libdir/cmake/mlatune/mlatuneConfig.cmake"
          "$libdir/cmake/mlatune/mlatuneConfigVersion.cmake"
          "$libdir/cmake/mlatune/mlatuneTargets.cmake"
          "$libdir/cmake/mlatune/mlatuneTargets-${build_type,,}.cmake"
          "$libdir/libmlatune.so" "$libdir/libmlatune.so.$major" "$libdir/libmlatune.so.$version"
          "$libdir/pkgconfig/mlatune.pc"
          lib/python3/dist-packages/mlatune/__init__.py
          lib/python3/dist-packages/mlatune/_checks.py
          lib/python3/dist-packages/mlatune/_install_layout.py)
diff <(printf '%s\n' "${expected[@]}" | sort) \
     <(cd "$prefix" && find . -type f -o -type l | sed 's|^\./||' | sort) ||
  fail "the installed files differ from the expected layout (<: expected, >: installed)"
[[ $(readlink "$lib") == "libmlatune.so.$major" &&
   $(readlink "$lib.$major") == "libmlatune.so.$version" ]] || fail "wrong soname links"
dynamic=$(objdump -p "$lib.$version")
soname=$(awk '$1 == "SONAME" {print $2}' <<<"$dynamic")
[[ $soname == "libmlatune.so.$major" ]] || fail "SONAME is '$soname'"
! grep -Eq '^ *(RPATH|RUNPATH) ' <<<"$dynamic" || fail "libmlatune has an RPATH"
symbols=$(nm -D --defined-only "$lib.$version" | awk '{print $NF}')
grep -qx mlatune_open <<<"$symbols" || fail "libmlatune does not export mlatune_open"
foreign_symbols=$(grep -v '^mlatune_' <<<"$symbols" || true)
[[ -z $foreign_symbols ]] || fail "libmlatune exports more than mlatune_*: $foreign_symbols"
echo "SONAME $soname; $(wc -l <<<"$symbols") symbols, all mlatune_*;" \
     "needs $(awk '$1 == "NEEDED" {printf "%s ", $2}' <<<"$dynamic")"
# Consumers link libmlatune.so only: the package must not name the internal static libraries,
# SQLite or threads, nor any path of the source or build tree.
package=$(grep -hv '^ *#' "$prefix/$libdir"/cmake/mlatune/*.cmake)
leak_pattern='INTERFACE_LINK_LIBRARIES|mlatune_(runtime_core|db_core|kernels|warnings)'
leak_pattern+='|SQLite::|Threads::'
! grep -Eq "$leak_pattern" <<<"$package" || fail "the CMake package leaks link dependencies"
leaks=$(cat "$prefix/$libdir"/cmake/mlatune/*.cmake "$pc_file" | sed "s|$prefix||g" |
        grep -F -e "$src" -e "$build_dir" || true)
[[ -z $leaks ]] || fail "the installed package names the source or build tree: $leaks"

echo "== examples/cpp_consumer, find_package(mlatune) from $prefix"
cmake -S examples/cpp_consumer -B "$build_dir/consumer-cpp" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_CXX_FLAGS="-Wall -Wextra -Wpedantic -Werror" >/dev/null
cmake --build "$build_dir/consumer-cpp"
found=$(sed -n 's/^mlatune_DIR:PATH=//p' "$build_dir/consumer-cpp/CMakeCache.txt")
[[ $found == "$prefix/$libdir/cmake/mlatune" ]] || fail "find_package found mlatune in '$found'"
while read -r include_dir; do
  [[ $include_dir == "$prefix"/* ]] || fail "cpp_consumer includes from $include_dir"
done < <(grep -oE -- '-(I|isystem ?)[^ "]+' "$build_dir/consumer-cpp/compile_commands.json" |
         sed -E 's/^-(I|isystem ?)//')
cpp_consumer=$build_dir/consumer-cpp/cpp_consumer

echo "== examples/c_consumer, pkg-config from $prefix/$libdir/pkgconfig"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[[ $(pkg-config --modversion mlatune) == "$version" ]] || fail "mlatune.pc has the wrong version"
read -ra pc_flags <<<"$(pkg-config --cflags --libs mlatune)"
echo "pkg-config --cflags --libs mlatune: ${pc_flags[*]}"
c_consumer=$build_dir/consumer-c/c_consumer
# The rpath only spares the runs below an LD_LIBRARY_PATH.
"${CC:-cc}" -std=c11 -Wall -Wextra -Wpedantic -Werror -o "$c_consumer" examples/c_consumer/main.c \
  "${pc_flags[@]}" -Wl,-rpath,"$(pkg-config --variable=libdir mlatune)"

for exe in "$cpp_consumer" "$c_consumer"; do
  resolved=$(ldd "$exe" | awk '$1 == "libmlatune.so.'"$major"'" {print $3}')
  [[ $resolved == "$prefix/$libdir/libmlatune.so.$major" ]] ||
    fail "$exe loads libmlatune from '$resolved'"
done

echo "== the consumers on real databases"
# A host database from the installed CLI: tests/cli/tiny.yaml tunes its two buckets in a second.
"$prefix/bin/mlatune" tune --config tests/cli/tiny.yaml --db "$work/host.db" --in-process
tuned_shape=(4 2 bf16 bf16 16 1 2 60)  # heads qlen q kv page lse batch max_kv: bucket kv 41..80
untuned_shape=(128 2 bf16 bf16 16 1 2 60)
# The CLI's answer through the same library, to check the consumers print the right winner.
variant=$("$prefix/bin/mlatune" lookup --db "$work/host.db" --heads 4 --qlen 2 --page-size 16 \
          --lse --batch 2 --max-kv 60 | sed -n 's/^[^:]*: \([a-z0-9_]*\) .*/\1/p')
[[ -n $variant ]] || fail "mlatune lookup found no winner for the tuned shape"
for exe in "$cpp_consumer" "$c_consumer"; do
  expect 4 '^cannot open .*: foreign device: ' "$exe" db/h200-deepseek-v3-tp8.db
  expect 0 "^selected $variant \\(" "$exe" "$work/host.db" "${tuned_shape[@]}"
  expect 5 '^lookup refused \(untuned\): ' "$exe" "$work/host.db" "${untuned_shape[@]}"
  # A bad argument is bad usage (exit 2, as examples/README.md says), whichever it is.
  expect 2 "^bad Q_DTYPE 'fp16': " "$exe" "$work/host.db" 4 2 fp16 bf16 16 1 2 60
  expect 2 "^bad KV_DTYPE '': " "$exe" "$work/host.db" 4 2 bf16 '' 16 1 2 60
  expect 2 "^bad BATCH '2x': " "$exe" "$work/host.db" 4 2 bf16 bf16 16 1 2x 60
  expect 2 "^bad HEADS 'four': " "$exe" "$work/host.db" four 2 bf16 bf16 16 1 2 60
  expect 2 "^bad MAX_KV '4294967356': " "$exe" "$work/host.db" 4 2 bf16 bf16 16 1 2 4294967356
  expect 2 "^bad LSE '2': " "$exe" "$work/host.db" 4 2 bf16 bf16 16 2 2 60
done

echo "install check: OK ($((SECONDS - start)) s)"
