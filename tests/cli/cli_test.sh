#!/usr/bin/env bash
# End-to-end tests of the mlatune CLI: exit codes, messages, and that no command loses data.
# Usage: cli_test.sh MLATUNE_BINARY SOURCE_DIR WORK_DIR
set -uo pipefail
mlatune=$1
src=$2
work=$3/cli-$$
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
tiny=$src/tests/cli/tiny.yaml
passed=0
failed=0

# expect CODE NEEDLE -- command...: runs the command, checks its exit code and that its combined
# output contains NEEDLE (skip with "").
expect() {
  local code=$1 needle=$2
  shift 3
  local out
  out=$("$@" 2>&1)
  local got=$?
  if [[ $got -ne $code ]]; then
    echo "FAIL: '$*' exited $got, expected $code; output:"; echo "$out" | tail -5
    failed=$((failed + 1)); return
  fi
  if [[ -n $needle && $out != *"$needle"* ]]; then
    echo "FAIL: '$*' output lacks '$needle'; output:"; echo "$out" | tail -5
    failed=$((failed + 1)); return
  fi
  passed=$((passed + 1))
}

# Usage errors.
expect 2 "" -- "$mlatune"
expect 2 "" -- "$mlatune" tune --config "$tiny"
expect 2 "" -- "$mlatune" frobnicate
expect 0 "tune" -- "$mlatune" --help
expect 0 "host_split_kv_v1" -- "$mlatune" variants

# Config errors name file:line:column.
printf 'backend: host\nspaces:\n  - heads: [16]\n    qlen: [0]\n' > "$work/bad.yaml"
expect 3 "bad.yaml:4:" -- "$mlatune" tune --config "$work/bad.yaml" --db "$work/x.db"
printf 'backend: host\nbogus_key: 1\n' > "$work/unknown.yaml"
expect 3 "unknown.yaml:2:1: " -- "$mlatune" tune --config "$work/unknown.yaml" --db "$work/x.db"
expect 3 "missing.yaml" -- "$mlatune" tune --config "$work/missing.yaml" --db "$work/x.db"
# ... also those found against this build's variants: the name or value, where it is written.
sed 's/host_split_kv_v1]/host_split_kv_v1, host_nope_v1]/' "$tiny" > "$work/unknown-variant.yaml"
expect 3 "unknown-variant.yaml:16:54: variants: unknown variant 'host_nope_v1'" -- \
  "$mlatune" tune --config "$work/unknown-variant.yaml" --db "$work/x.db"
sed 's/kv_splits: \[2\]/kv_splits: [5]/' "$tiny" > "$work/undeclared.yaml"
expect 3 "undeclared.yaml:19:34: params.host_split_kv_v1.kv_splits: 5 is outside the variant's" -- \
  "$mlatune" tune --config "$work/undeclared.yaml" --db "$work/x.db"
# A config that is no regular file is refused by stat(), before any open: a FIFO would block it,
# /dev/zero never ends.
mkfifo "$work/fifo.yaml"
expect 3 "$work/fifo.yaml: a FIFO (named pipe) (a config must be a regular file)" -- \
  timeout 20 "$mlatune" tune --config "$work/fifo.yaml" --db "$work/x.db"
expect 3 "/dev/zero: a character device" -- timeout 20 "$mlatune" tune --config /dev/zero \
  --db "$work/x.db"
expect 3 "$work: Is a directory" -- timeout 20 "$mlatune" tune --config "$work" --db "$work/x.db"
[[ ! -e $work/x.db ]] || { echo "FAIL: a config error created the database"; failed=$((failed + 1)); }

# A config whose inputs no machine holds (batch 65536 x 1 Mi keys, 88 TB): refused before any
# tuning or database, in a supervised worker and in-process alike.
sed 's/batch_edges: .*/batch_edges: [65536]/; s/kv_len_edges: .*/kv_len_edges: [1048576]/' \
  "$tiny" > "$work/huge.yaml"
for mode in "" --in-process; do
  expect 3 "need more memory for their generated inputs" -- "$mlatune" tune $mode \
    --config "$work/huge.yaml" --db "$work/huge.db"
done
[[ ! -e $work/huge.db ]] ||
  { echo "FAIL: a config too large to tune created the database"; failed=$((failed + 1)); }

# A GPU config where this build or machine has no GPU: refused before any database is made.
if ! command -v nvidia-smi >/dev/null && ! command -v rocm-smi >/dev/null; then
  expect 7 "device error" -- "$mlatune" tune --config "$src/configs/gpu-smoke.yaml" \
    --db "$work/gpu.db"
  [[ ! -e $work/gpu.db ]] ||
    { echo "FAIL: a refused GPU tune created the database"; failed=$((failed + 1)); }
fi

# A real (tiny) tune, then everything that reads it.
db=$work/tiny.db
expect 0 "tuned 2 buckets (2 with a winner" -- "$mlatune" tune --config "$tiny" --db "$db"
expect 0 "cli-tiny" -- "$mlatune" show --db "$db"
expect 0 "verified 2 winners: 2 passed, 0 failed, 0 stale" -- "$mlatune" verify --db "$db"
expect 0 "tuned 2 buckets (2 with a winner" -- "$mlatune" tune --in-process --config "$tiny" \
  --db "$work/in-process.db"
expect 0 "WINNER" -- "$mlatune" explain --db "$db" --heads 4 --qlen 2 --page-size 16 --lse \
  --batch 2 --max-kv 50
expect 0 "host_" -- "$mlatune" lookup --db "$db" --heads 4 --qlen 2 --page-size 16 --lse \
  --batch 1 --max-kv 80
# Untuned: outside every bucket, or a discrete key nobody tuned; the message names what is near.
expect 5 "untuned" -- "$mlatune" lookup --db "$db" --heads 4 --qlen 2 --page-size 16 --lse \
  --batch 3 --max-kv 50
expect 5 "heads=4" -- "$mlatune" lookup --db "$db" --heads 8 --qlen 2 --page-size 16 --lse \
  --batch 1 --max-kv 50
expect 2 "invalid argument" -- "$mlatune" lookup --db "$db" --heads 4 --qlen 2 --page-size 16 \
  --lse --batch 1 --max-kv 1
# Integer options are plain decimal, as in the config: no octal, hex, sign, blank or leading zero;
# the refusal names the option and the value.
for bad in 010 0x10 0b10 +5 " 5" 1e3 2147483648; do
  expect 2 "--max-kv: '$bad' is" -- "$mlatune" lookup --db "$db" --heads 4 --qlen 2 \
    --page-size 16 --lse --batch 1 --max-kv "$bad"
done
for option in --heads --qlen --page-size --batch; do
  args=(--heads 4 --qlen 2 --page-size 16 --batch 1 --max-kv 50)
  for i in "${!args[@]}"; do [[ ${args[i]} == "$option" ]] && args[i + 1]=04; done
  expect 2 "$option: '04' is not an integer" -- "$mlatune" explain --db "$db" --lse "${args[@]}"
done

# The dispatch snapshot: written by tune, current and identical to the rows; rewritten on demand
# (rows unchanged); reported as not used once the file changes; refused for what is no database.
expect 0 "dispatch snapshot: current: 2 buckets" -- "$mlatune" show --db "$db"
expect 0 "identical to its rows" -- "$mlatune" snapshot --db "$db" --check
expect 0 "identical to its rows" -- "$mlatune" snapshot --db "$work/in-process.db" --check
cp "$db" "$work/resnap.db"
expect 0 "wrote the dispatch snapshot of $work/resnap.db: 2 buckets (2 with a winner" -- \
  "$mlatune" snapshot --db "$work/resnap.db"
expect 0 "identical to its rows" -- "$mlatune" snapshot --db "$work/resnap.db" --check
/usr/bin/python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
c.execute(\"UPDATE buckets SET completed_at = 'later'\"); c.commit()" "$work/resnap.db"
expect 4 "not used: the file was changed after its dispatch snapshot" -- \
  "$mlatune" snapshot --db "$work/resnap.db" --check
expect 0 "wrote the dispatch snapshot" -- "$mlatune" snapshot --db "$work/resnap.db"
/usr/bin/python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('CREATE TABLE n (x)')" \
  "$work/other.db"
expect 4 "schema version 0, this tool writes snapshots for version" -- \
  "$mlatune" snapshot --db "$work/other.db"
expect 4 "No such file" -- "$mlatune" snapshot --db "$work/resnap.db.missing"
echo "not a database" > "$work/text-snap.db"
expect 4 "" -- "$mlatune" snapshot --db "$work/text-snap.db"
expect 4 "" -- "$mlatune" snapshot --db "$work/text-snap.db" --check

# An existing database is never overwritten; --resume continues and skips what is done.
sum=$(sha256sum "$db" | cut -d' ' -f1)
expect 4 "already exists" -- "$mlatune" tune --config "$tiny" --db "$db"
[[ $(sha256sum "$db" | cut -d' ' -f1) == "$sum" ]] ||
  { echo "FAIL: a refused tune changed the database"; failed=$((failed + 1)); }
expect 0 "2 already present" -- "$mlatune" tune --config "$tiny" --db "$db" --resume
expect 0 "identical to its rows" -- "$mlatune" snapshot --db "$db" --check
printf '# edited\n' | cat - "$tiny" > "$work/edited.yaml"
expect 4 "differs from this config" -- "$mlatune" tune --config "$work/edited.yaml" --db "$db" \
  --resume
expect 4 "needs an existing database" -- "$mlatune" tune --config "$tiny" --db "$work/none.db" \
  --resume
# A tuner killed while creating its file leaves it empty: resuming starts it afresh.
: > "$work/killed-at-birth.db"
expect 0 "tuned 2 buckets" -- "$mlatune" tune --config "$tiny" --db "$work/killed-at-birth.db" \
  --resume

# Interrupted and resumed: SIGKILL after the first bucket, then --resume finishes the rest.
printf '%s\n' "$(sed 's/kv_len_edges: \[40, 80\]/kv_len_edges: [40, 80, 120, 160]/' "$tiny")" \
  > "$work/four.yaml"
# In its own process group, so that the kill takes the tuner and its worker at once.
setsid "$mlatune" tune --config "$work/four.yaml" --db "$work/four.db" 2>"$work/four.log" &
pid=$!
for _ in $(seq 1 200); do
  grep -q '^\[1/4\]' "$work/four.log" 2>/dev/null && break
  sleep 0.05
done
kill -9 -- -$pid 2>/dev/null
wait $pid 2>/dev/null
for _ in $(seq 1 100); do kill -0 -- -$pid 2>/dev/null || break; sleep 0.05; done
expect 0 "tuned" -- "$mlatune" tune --config "$work/four.yaml" --db "$work/four.db" --resume
expect 0 "121-160" -- "$mlatune" show --db "$work/four.db"
expect 0 "" -- "$mlatune" lookup --db "$work/four.db" --heads 4 --qlen 2 --page-size 16 --lse \
  --batch 2 --max-kv 150

shape=(--heads 4 --qlen 2 --page-size 16 --lse --batch 1 --max-kv 50)
# Winners this build cannot run: their variants absent (a database from another build), or built
# with other code. show and explain tell the two apart.
cp "$db" "$work/other-build.db"
cp "$db" "$work/changed-code.db"
/usr/bin/python3 -c "import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute('DROP TRIGGER trials_winner_is_immutable')
c.execute(\"UPDATE variants SET name = name || '_elsewhere'\")
c.execute(\"UPDATE trials SET variant = variant || '_elsewhere'\"); c.commit()
c = sqlite3.connect(sys.argv[2]); c.execute(\"UPDATE variants SET code_identity = 'older'\")
c.commit()" "$work/other-build.db" "$work/changed-code.db"
expect 0 "STALE (variant not in this build)" -- "$mlatune" show --db "$work/other-build.db"
expect 0 "STALE (variant code changed)" -- "$mlatune" show --db "$work/changed-code.db"
"$mlatune" show --db "$work/other-build.db" | grep -q "code changed" &&
  { echo "FAIL: show calls absent variants changed code"; failed=$((failed + 1)); }
expect 0 "WINNER (STALE: variant not in this build" -- "$mlatune" explain \
  --db "$work/other-build.db" "${shape[@]}"
expect 0 "WINNER (STALE: variant code changed" -- "$mlatune" explain \
  --db "$work/changed-code.db" "${shape[@]}"

# Damaged databases are refused with exit code 4, never a crash.
head -c 3000 "$db" > "$work/truncated.db"
expect 4 "" -- "$mlatune" lookup --db "$work/truncated.db" --heads 4 --qlen 2 --page-size 16 \
  --lse --batch 1 --max-kv 50
echo "not a database" > "$work/text.db"
expect 4 "corrupt" -- "$mlatune" lookup --db "$work/text.db" --heads 4 --qlen 2 --page-size 16 \
  --lse --batch 1 --max-kv 50
expect 4 "" -- "$mlatune" show --db "$work/text.db"
expect 4 "" -- "$mlatune" show --db "$work/missing.db"
expect 4 "" -- "$mlatune" verify --db "$work/text.db"
expect 4 "" -- "$mlatune" verify --db "$work/missing.db"

# A --db that is no regular file is refused (exit 4) by every command, none of them blocking.
mkfifo "$work/fifo.db"
for target in "$work/fifo.db" "$work"; do
  kind=$([[ -p $target ]] && echo "FIFO" || echo "directory")
  for cmd in show verify snapshot "snapshot --check"; do
    expect 4 "$kind" -- timeout 20 "$mlatune" $cmd --db "$target"
  done
  expect 4 "$kind" -- timeout 20 "$mlatune" explain --db "$target" "${shape[@]}"
  expect 4 "$kind" -- timeout 20 "$mlatune" lookup --db "$target" "${shape[@]}"
  expect 4 "$kind" -- timeout 20 "$mlatune" tune --config "$tiny" --db "$target"
done

# A stray -wal beside a finished database (another database's log, with committed frames) is
# refused by every reader, naming it; nothing is created beside the file, the log is left as is.
cp "$db" "$work/stray.db"
/usr/bin/python3 -c "import sqlite3, shutil, sys
c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode = WAL')
c.execute('PRAGMA wal_autocheckpoint = 0'); c.execute('CREATE TABLE only_in_the_log (x)')
c.commit(); shutil.copy(sys.argv[1] + '-wal', sys.argv[2])" "$work/other-wal.db" "$work/stray.db-wal"
wal_sum=$(sha256sum "$work/stray.db-wal" | cut -d' ' -f1)
for cmd in show verify "snapshot --check" snapshot; do
  expect 4 "stray.db-wal (" -- timeout 20 "$mlatune" $cmd --db "$work/stray.db"
done
expect 4 "stray.db-wal (" -- timeout 20 "$mlatune" explain --db "$work/stray.db" "${shape[@]}"
expect 4 "stray.db-wal (" -- timeout 20 "$mlatune" lookup --db "$work/stray.db" "${shape[@]}"
expect 4 "stray.db-wal (" -- "$mlatune" tune --config "$tiny" --db "$work/stray.db" --resume
[[ ! -e $work/stray.db-shm ]] ||
  { echo "FAIL: reading a database with a stray -wal created a -shm"; failed=$((failed + 1)); }
[[ $(sha256sum "$work/stray.db-wal" | cut -d' ' -f1) == "$wal_sum" ]] ||
  { echo "FAIL: the stray -wal was changed"; failed=$((failed + 1)); }

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
