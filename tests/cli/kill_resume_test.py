"""Crash-safe tuning: `mlatune tune` killed with SIGKILL at random moments (at least 20 times) and
resumed each time. After every kill the database passes PRAGMA integrity_check, holds no
half-written bucket, every winner is a passed trial of its own bucket, and the runtime opens it;
at the end the set of tuned buckets equals an uninterrupted run's, and a completed run's database
is loaded from its dispatch snapshot. Also: a second tuner on the
same database is refused while the first runs, and the runtime opens a database a tuner is
writing. Usage: kill_resume_test.py MLATUNE_CLI WORK_DIR (MLATUNE_LIBRARY names libmlatune)."""

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import mlatune  # noqa: E402

CLI, WORK = sys.argv[1], sys.argv[2]
MIN_KILLS = 20

# 2 qlen x 2 lse x 3 batch x 4 kv = 48 small buckets: about 2 s uninterrupted on 2 cores.
CONFIG = """name: kill-resume
backend: host
spaces:
  - heads: [4]
    qlen: [1, 2]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [false, true]
    batch_edges: [2, 4, 6]
    kv_len_edges: [40, 80, 120, 160]
tolerances:
  bf16/bf16: {atol: 1.0e-3, rtol: 1.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
timing: {warmup: 1, samples: 3, cold_cache: false}
variants: [host_online_softmax_v1, host_split_kv_v1]
params:
  host_online_softmax_v1: {workers: [1]}
  host_split_kv_v1: {kv_splits: [2], workers: [1]}
"""
KEY_COLUMNS = ("heads, qlen, q_dtype, kv_dtype, page_size, lse, batch_lo, batch_hi, kv_lo, "
               "kv_hi, status")
failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message, flush=True)


def tune(db, config, resume):
    args = [CLI, "tune", "--config", config, "--db", db] + (["--resume"] if resume else [])
    # Its own session: the kill takes the tuner and its supervised worker together.
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def wait_for_group(pgid):
    """Until every process of the killed group is gone: its supervised worker shares the tuner's
    lock on the database (it writes through it) and dies a moment after the tuner."""
    for _ in range(500):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    fail(f"process group {pgid} still alive 5 s after SIGKILL")


def buckets(db):
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return sorted(c.execute(f"SELECT {KEY_COLUMNS} FROM buckets").fetchall())


def check_consistent(db, moment):
    """The invariants a killed tuner must leave behind; returns the number of buckets."""
    c = sqlite3.connect(db)  # read-write: a reader may have to recover the WAL of a killed writer
    try:
        ok = c.execute("PRAGMA integrity_check").fetchall()
        if ok != [("ok",)]:
            fail(f"{moment}: integrity_check says {ok[:3]}")
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "buckets" not in tables:
            return 0  # killed while creating the schema: nothing was recorded yet
        checks = {
            "a tuned bucket without exactly one winner":
                "SELECT count(*) FROM buckets b WHERE b.status = 'tuned' AND "
                "(SELECT count(*) FROM winners w WHERE w.bucket_id = b.id) != 1",
            "a bucket without a valid candidate that has a winner":
                "SELECT count(*) FROM buckets b JOIN winners w ON w.bucket_id = b.id "
                "WHERE b.status != 'tuned'",
            "a winner that is not a passed trial of its bucket":
                "SELECT count(*) FROM winners w LEFT JOIN trials t ON t.id = w.trial_id "
                "WHERE t.id IS NULL OR t.bucket_id != w.bucket_id OR t.disposition != 'passed'",
            "a trial of a bucket that was not recorded (half-written bucket)":
                "SELECT count(*) FROM trials t WHERE t.bucket_id NOT IN (SELECT id FROM buckets)",
            "a recorded bucket without its trials (half-written bucket)":
                "SELECT count(*) FROM buckets b WHERE (SELECT count(*) FROM trials t "
                "WHERE t.bucket_id = b.id) < 2",
        }
        for what, sql in checks.items():
            n = c.execute(sql).fetchone()[0]
            if n:
                fail(f"{moment}: {n} x {what}")
        count = c.execute("SELECT count(*) FROM buckets").fetchone()[0]
    finally:
        c.close()
    if count:
        try:
            with mlatune.Database(db) as rt:
                s = rt.stats()
                if s["usable"] + s["no_valid"] + s["stale"] != count:
                    fail(f"{moment}: the runtime loaded {s} of {count} buckets")
        except mlatune.MlatuneError as e:
            fail(f"{moment}: the runtime refused the database: {e}")
    return count


def check_snapshot_used(db, moment):
    """A completed run leaves a dispatch snapshot the runtime loads instead of the rows."""
    try:
        with mlatune.Database(db) as rt:
            info = rt.info()
    except mlatune.MlatuneError as e:
        fail(f"{moment}: the runtime refused the database: {e}")
        return
    if "loaded from its dispatch snapshot" not in info:
        fail(f"{moment}: the runtime did not load the dispatch snapshot: {info}")


def main():
    os.makedirs(WORK, exist_ok=True)
    config = os.path.join(WORK, "kill-resume.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)
    reference_db, db = os.path.join(WORK, "reference.db"), os.path.join(WORK, "killed.db")
    for path in (reference_db, db):
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)

    start = time.monotonic()
    p = tune(reference_db, config, False)
    # While it writes: a second tuner is refused, and the runtime can read what is complete.
    time.sleep(0.3)
    second = subprocess.run([CLI, "tune", "--config", config, "--db", reference_db, "--resume"],
                            capture_output=True, text=True)
    if p.poll() is None:
        if second.returncode == 0 or "another mlatune tune" not in second.stderr:
            fail(f"a second tuner was not refused: rc {second.returncode}: {second.stderr}")
        try:
            with mlatune.Database(reference_db) as rt:
                rt.stats()
        except mlatune.MlatuneError as e:
            if e.status_name != "io error":  # not yet created is the only acceptable refusal
                fail(f"the runtime refused a database being tuned: {e}")
    else:
        print("note: the reference run ended before the concurrency checks", flush=True)
    out, err = p.communicate()
    if p.returncode != 0:
        fail(f"uninterrupted run failed: {err.decode()[-500:]}")
        return
    reference = buckets(reference_db)
    check_snapshot_used(reference_db, "the uninterrupted run")
    uninterrupted = time.monotonic() - start
    print(f"uninterrupted: {len(reference)} buckets in {uninterrupted:.1f} s", flush=True)

    rng = random.Random(int(os.environ.get("KILL_SEED", "2026")))
    kills, attempts, done = 0, 0, False
    progress = []  # buckets recorded after each kill
    # Delays up to a tenth of an uninterrupted run: many kills land mid-bucket, some before the
    # database or its first bucket exists, and each resume still makes some progress on average.
    longest = max(0.05, uninterrupted / 10)
    while not done and attempts < 300:
        attempts += 1
        p = tune(db, config, os.path.exists(db))
        delay = rng.uniform(0.0, longest if kills < MIN_KILLS else 4 * longest)
        try:
            p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            wait_for_group(p.pid)
            kills += 1
            progress.append(check_consistent(db, f"after kill {kills} ({delay * 1000:.0f} ms)")
                            if os.path.exists(db) else -1)
            continue
        err = p.stderr.read().decode()
        if p.returncode != 0:
            fail(f"attempt {attempts} exited {p.returncode}: {err[-500:]}")
            return
        done = kills >= MIN_KILLS
        if not done:  # finished before enough kills: start over on a fresh database
            check_consistent(db, "a completed run")
            if buckets(db) != reference:
                fail("a completed run's buckets differ from the uninterrupted run's")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(db + suffix):
                    os.unlink(db + suffix)
    if not done:
        fail(f"no completion with {MIN_KILLS} kills in {attempts} attempts ({kills} kills)")
        return
    check_consistent(db, "the end")
    check_snapshot_used(db, "the end")
    final = buckets(db)
    if final != reference:
        fail(f"final buckets differ: {len(final)} vs {len(reference)} uninterrupted")
    print("buckets recorded after each kill (-1: no database yet):", progress)
    if len(set(progress)) < 5:
        fail(f"the kills did not land at varied moments: {progress}")
    print(f"{kills} kills over {attempts} attempts; final {len(final)} buckets equal the "
          f"uninterrupted run's: {final == reference}", flush=True)


if __name__ == "__main__":
    main()
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
