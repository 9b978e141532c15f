#!/usr/bin/env bash
# The main job: install what is missing, build, tune configs/host-smoke.yaml on this machine's CPU
# into out/host-smoke.db (rewritten on every run), show its winners, verify them, answer a lookup,
# and show a lookup being refused.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build
# Only the CLI: the test suite and benchmarks are scripts/test.sh's (and their packages).
MLATUNE_TARGETS=mlatune_cli bash scripts/build.sh -DMLATUNE_BUILD_TESTS=OFF \
  -DMLATUNE_BUILD_BENCH=OFF
mlatune=build/tuner/mlatune
db=out/host-smoke.db
mkdir -p out
rm -f "$db" "$db-wal" "$db-shm"

"$mlatune" tune --config configs/host-smoke.yaml --db "$db"
echo
"$mlatune" show --db "$db"
echo
echo "== every winner re-validated from the config stored in the database:"
"$mlatune" verify --db "$db" | tail -1
echo
echo "== a tuned shape:"
"$mlatune" lookup --db "$db" --heads 16 --qlen 2 --q-dtype fp8_e4m3fn --kv-dtype fp8_e4m3fn \
  --page-size 16 --batch 3 --max-kv 300
echo
echo "== a shape nobody tuned (128 heads) is refused, exit code 5:"
set +e
"$mlatune" lookup --db "$db" --heads 128 --qlen 2 --q-dtype fp8_e4m3fn --kv-dtype fp8_e4m3fn \
  --page-size 16 --batch 3 --max-kv 300
status=$?
set -e
if [[ $status -ne 5 ]]; then
  echo "expected the untuned lookup to be refused with exit code 5, got $status" >&2
  exit 1
fi
echo "refused as expected."
