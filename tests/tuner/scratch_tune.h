// Tunes a config into a throw-away database in the test tmpdir, for tests that look at what the
// tuner recorded.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "mla_decode/registry.h"
#include "tuner/tune.h"

namespace mlatune::testing {

struct TunedBucket {
  BucketSummary summary;
  std::vector<TrialRecord> trials;  // every candidate's, in the database's order
};

// Every bucket of `config`, tuned with the variants of `registry` (quietly) into
// MLATUNE_TEST_TMPDIR/<stem>-<pid>.db, which is removed afterwards; the run's summary into
// *summary when given; `hooks` go to tune (e.g. a scripted timer).
inline std::vector<TunedBucket> tune_into_scratch_db(const TuneConfig& config,
                                                     const Registry& registry,
                                                     const std::string& stem,
                                                     TuneSummary* summary = nullptr,
                                                     const TuneHooks& hooks = {}) {
  const std::string path =
      std::string(MLATUNE_TEST_TMPDIR) + "/" + stem + "-" + std::to_string(getpid()) + ".db";
  std::filesystem::remove(path);
  const auto candidates = enumerate_candidates(config, registry);
  std::vector<TunedBucket> out;
  {
    auto db =
        TuningDb::open_for_tuning(path, TuningDb::Mode::kCreate, make_provenance(config, registry),
                                  variant_records(candidates));
    Progress quiet(stderr, false, 1);
    const TuneSummary s = tune(config, candidates, *db, quiet, hooks);
    if (summary) *summary = s;
    db->finalize();
    for (const BucketSummary& b : db->buckets()) out.push_back({b, db->trials(b.id)});
  }
  std::filesystem::remove(path);
  return out;
}

}  // namespace mlatune::testing
