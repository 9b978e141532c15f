#!/usr/bin/env bash
# Runs on a GPU machine from the repository root, over a bundle (BUNDLE, default dev-bundle):
# tunes CONFIG into DB within LIMIT seconds (default 570; the run is killed there and can be
# continued with the same command: an existing DB is resumed), then, if it finished, shows the
# winners and verifies them (within VERIFY_LIMIT seconds when set; VERIFY_LIMIT=0 skips the
# verify). Prints the tuner's elapsed time.
#   bash scripts/device/tune-config.sh CONFIG DB [LIMIT]
set -uo pipefail
config=${1:?usage: tune-config.sh CONFIG DB [LIMIT]}
db=${2:?usage: tune-config.sh CONFIG DB [LIMIT]}
limit=${3:-570}
bundle=${BUNDLE:-dev-bundle}
export LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
resume=()
[[ -e $db ]] && resume=(--resume)
log=${db%.db}.tune.log
start=$SECONDS
timeout --signal=KILL "$limit" "$bundle/bin/mlatune" tune --config "$config" --db "$db" \
  "${resume[@]}" 2>>"$log"
rc=$?
echo "tune rc=$rc after $((SECONDS - start)) s (limit $limit s)"
tail -3 "$log"
if ((rc == 0 || rc == 6)); then
  "$bundle/bin/mlatune" show --db "$db" >"${db%.db}.show.txt" 2>&1
  if [[ ${VERIFY_LIMIT:-} != 0 ]]; then
    vstart=$SECONDS
    # timeout 0: no limit.
    timeout --signal=KILL "${VERIFY_LIMIT:-0}" "$bundle/bin/mlatune" verify --db "$db" \
      >"${db%.db}.verify.txt" 2>&1
    echo "verify rc=$? after $((SECONDS - vstart)) s"
    tail -1 "${db%.db}.verify.txt"
  fi
fi
exit $rc
