// mlatune verify's core (tuner/verify.h): a fresh database re-validates; a winner whose kernel
// went wrong since, or whose code changed, is reported; a doctored stored config is refused.
#include "tuner/verify.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "db/sqlite_util.h"
#include "tuner/test_variants.h"
#include "tuner/tune.h"

namespace mlatune {
namespace {

using testing::ScriptedKernel;

const char* kConfig = R"(
name: verify
backend: host
spaces:
  - heads: [4]
    qlen: [1, 2]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [true]
    batch_edges: [2]
    kv_len_edges: [40]
tolerances:
  bf16/bf16: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
timing: {warmup: 1, samples: 3, cold_cache: false}
variants: [exact]
)";

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.add_borrowed(&exact_);
    path_ = std::string(MLATUNE_TEST_TMPDIR) + "/verify-" + std::to_string(getpid()) + ".db";
    std::filesystem::remove(path_);
    const TuneConfig config = parse_config(kConfig, "verify.yaml");
    auto candidates = enumerate_candidates(config, registry_);
    auto db =
        TuningDb::open_for_tuning(path_, TuningDb::Mode::kCreate,
                                  make_provenance(config, registry_), variant_records(candidates));
    Progress quiet(stderr, false, 2);
    ASSERT_EQ(tune(config, candidates, *db, quiet).tuned, 2);
    db->finalize();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  VerifySummary verify(const Registry& r) {
    std::FILE* sink = std::tmpfile();
    VerifySummary s = verify_database(path_, r, false, sink);
    std::fclose(sink);
    return s;
  }

  ScriptedKernel exact_{"exact", 0, ScriptedKernel::Mode::kCorrect, "exact-v1"};
  Registry registry_;
  std::string path_;
};

TEST_F(VerifyTest, FreshDatabasePasses) {
  const VerifySummary s = verify(registry_);
  EXPECT_EQ(s.passed, 2);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.stale, 0);
}

TEST_F(VerifyTest, AWinnerThatWentWrongFails) {
  exact_.set_mode(ScriptedKernel::Mode::kOneRowWrong);
  const VerifySummary s = verify(registry_);
  EXPECT_EQ(s.passed, 0);
  EXPECT_EQ(s.failed, 2);
}

TEST_F(VerifyTest, ChangedCodeIsStaleAndNotRun) {
  ScriptedKernel changed("exact", 0, ScriptedKernel::Mode::kSegfault, "exact-v2");
  Registry r;
  r.add_borrowed(&changed);
  const VerifySummary s = verify(r);  // would crash if it ran the changed kernel
  EXPECT_EQ(s.stale, 2);
  EXPECT_EQ(s.passed, 0);
}

TEST_F(VerifyTest, DoctoredStoredConfigIsRefused) {
  {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    db.exec("UPDATE provenance SET config_text = replace(config_text, '2.0e-3', '9.0e-1')");
  }
  EXPECT_THROW(verify(registry_), DbError);
}

}  // namespace
}  // namespace mlatune
