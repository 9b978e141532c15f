-- mlatune dispatch database, schema version 3. The single source of truth: the build embeds this
-- file, the tuner executes it on a new database and sets PRAGMA user_version to the version above,
-- and the runtime refuses any other user_version.
--
-- Contents: provenance (one row), the variants used with their code identities, shape buckets,
-- every trial of every candidate with its disposition and evidence, one winner per tuned bucket
-- that must point at a passed trial of that bucket (enforced by triggers), and the dispatch
-- snapshot the runtime loads (made from those rows).

CREATE TABLE provenance (
  id               INTEGER PRIMARY KEY CHECK (id = 1),
  tool_version     TEXT    NOT NULL,
  backend          TEXT    NOT NULL CHECK (backend IN ('host', 'hip')),
  arch             TEXT    NOT NULL CHECK (length(arch) > 0),
  device_name      TEXT    NOT NULL CHECK (length(device_name) > 0),
  compute_units    INTEGER NOT NULL CHECK (compute_units > 0),
  driver_version   TEXT    NOT NULL,
  runtime_version  TEXT    NOT NULL,
  kernel_build_id  TEXT    NOT NULL,
  config_name      TEXT    NOT NULL,
  config_hash      TEXT    NOT NULL,
  -- The config file's bytes (SHA-256 = config_hash): `mlatune verify` re-validates with it.
  config_text      TEXT    NOT NULL,
  created_at       TEXT    NOT NULL,
  -- SHA-256 over every bucket, winner and the winning trials' evidence in canonical order
  -- (db/digest.cc); rewritten in the transaction of every bucket, checked by the runtime at open.
  winners_digest   TEXT    NOT NULL
) STRICT;

CREATE TABLE variants (
  name           TEXT PRIMARY KEY CHECK (name GLOB '[a-z]*' AND name NOT GLOB '*[^a-z0-9_]*'),
  backend        TEXT NOT NULL CHECK (backend IN ('host', 'hip')),
  code_identity  TEXT NOT NULL CHECK (length(code_identity) > 0),
  description    TEXT NOT NULL
) STRICT;

CREATE TABLE buckets (
  id            INTEGER PRIMARY KEY,
  heads         INTEGER NOT NULL CHECK (heads BETWEEN 1 AND 1024),
  qlen          INTEGER NOT NULL CHECK (qlen BETWEEN 1 AND 16),
  q_dtype       TEXT    NOT NULL CHECK (q_dtype IN ('bf16', 'fp8_e4m3fn', 'fp8_e4m3fnuz')),
  kv_dtype      TEXT    NOT NULL CHECK (kv_dtype IN ('bf16', 'fp8_e4m3fn', 'fp8_e4m3fnuz')),
  page_size     INTEGER NOT NULL CHECK (page_size BETWEEN 1 AND 4096),
  lse           INTEGER NOT NULL CHECK (lse IN (0, 1)),
  batch_lo      INTEGER NOT NULL CHECK (batch_lo >= 1),
  batch_hi      INTEGER NOT NULL CHECK (batch_hi >= batch_lo AND batch_hi <= 65536),
  kv_lo         INTEGER NOT NULL CHECK (kv_lo >= 1),
  kv_hi         INTEGER NOT NULL CHECK (kv_hi >= kv_lo AND kv_hi <= 16777216),
  -- 'tuned': a winner exists. 'no_valid_candidate': every candidate failed; lookups are refused.
  status        TEXT    NOT NULL CHECK (status IN ('tuned', 'no_valid_candidate')),
  completed_at  TEXT    NOT NULL,
  UNIQUE (heads, qlen, q_dtype, kv_dtype, page_size, lse, batch_lo, batch_hi, kv_lo, kv_hi)
) STRICT;

CREATE TABLE trials (
  id                 INTEGER PRIMARY KEY,
  bucket_id          INTEGER NOT NULL REFERENCES buckets (id),
  variant            TEXT    NOT NULL REFERENCES variants (name),
  kv_splits          INTEGER NOT NULL CHECK (kv_splits >= 1),
  kv_tile            INTEGER NOT NULL CHECK (kv_tile >= 0),
  block_rows         INTEGER NOT NULL CHECK (block_rows >= 0),
  workers            INTEGER NOT NULL CHECK (workers >= 0),
  -- 'pruned': never validated, because pre-timing put it too far behind a passed candidate.
  disposition        TEXT    NOT NULL CHECK (disposition IN
                       ('passed', 'incorrect', 'launch_error', 'unsupported', 'timed_out',
                        'pruned')),
  reason             TEXT    NOT NULL,  -- why it failed; '' when passed
  worst_row          TEXT    NOT NULL,  -- where the largest violation was ('' if none)
  validation_points  INTEGER NOT NULL CHECK (validation_points >= 0),
  validation_runs    INTEGER NOT NULL CHECK (validation_runs >= 0),
  rows_checked       INTEGER NOT NULL CHECK (rows_checked >= 0),
  max_abs_err        REAL,              -- worst |out - ref| over checked rows (NULL: not run)
  max_rel_err        REAL,              -- worst |out - ref| / (atol + rtol |ref|), 1.0 = at tolerance
  min_cosine         REAL,              -- worst per-row cosine similarity
  max_lse_err        REAL,              -- worst |lse - ref lse| (NULL when LSE not returned)
  time_median_us     REAL,              -- NULL unless passed and timed
  time_spread_us     REAL,              -- interquartile range of the samples
  time_samples       INTEGER,
  timing_method      TEXT    NOT NULL,  -- e.g. 'host steady_clock, cold cache 64 MiB flush, ...'
  CHECK (disposition <> 'passed' OR (reason = '' AND max_abs_err IS NOT NULL)),
  CHECK (disposition = 'passed' OR reason <> ''),
  UNIQUE (bucket_id, variant, kv_splits, kv_tile, block_rows, workers)
) STRICT;

CREATE TABLE winners (
  bucket_id  INTEGER PRIMARY KEY REFERENCES buckets (id),
  trial_id   INTEGER NOT NULL UNIQUE REFERENCES trials (id)
) STRICT;

CREATE INDEX trials_by_bucket ON trials (bucket_id);

-- The dispatch snapshot: the buckets and winners the runtime loads, as one versioned, sealed
-- binary blob (format and binding rules: db/snapshot.h), so that opening a large database reads
-- one row. Written from the rows above when a tune or a --resume completes and by
-- `mlatune snapshot`; never by hand. It is bound to the winners digest it was made from and to the
-- state of the file it was written in: after any other change the runtime reads the rows instead.
-- Optional: a file without it (as the first version-2 files were) is read from its rows.
CREATE TABLE dispatch_snapshot (
  id              INTEGER PRIMARY KEY CHECK (id = 1),
  -- Informative copy of the digest the snapshot was made from (for people and SQL); the runtime
  -- reads the copy inside data, which the blob's own SHA-256 covers.
  winners_digest  TEXT    NOT NULL,
  data            BLOB    NOT NULL
) STRICT;

-- A winner must be a passed trial of its own bucket, and that bucket must say 'tuned'.
CREATE TRIGGER winners_insert_requires_passed_trial BEFORE INSERT ON winners
WHEN NOT EXISTS (SELECT 1 FROM trials t JOIN buckets b ON b.id = t.bucket_id
                 WHERE t.id = NEW.trial_id AND t.bucket_id = NEW.bucket_id
                   AND t.disposition = 'passed' AND b.status = 'tuned')
BEGIN
  SELECT RAISE(ABORT, 'winner must reference a passed trial of the same, tuned bucket');
END;

CREATE TRIGGER winners_update_requires_passed_trial BEFORE UPDATE ON winners
WHEN NOT EXISTS (SELECT 1 FROM trials t JOIN buckets b ON b.id = t.bucket_id
                 WHERE t.id = NEW.trial_id AND t.bucket_id = NEW.bucket_id
                   AND t.disposition = 'passed' AND b.status = 'tuned')
BEGIN
  SELECT RAISE(ABORT, 'winner must reference a passed trial of the same, tuned bucket');
END;

-- A trial that won may not be edited into something else afterwards.
CREATE TRIGGER trials_winner_is_immutable BEFORE UPDATE ON trials
WHEN EXISTS (SELECT 1 FROM winners w WHERE w.trial_id = OLD.id)
BEGIN
  SELECT RAISE(ABORT, 'a winning trial cannot be modified');
END;
