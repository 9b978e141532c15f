// mlatune verify's core (tuner/verify.h): a fresh database re-validates; a winner whose kernel
// went wrong since, or whose code changed, is reported; a doctored stored config is refused.
#include "tuner/verify.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "db/sqlite_util.h"
#include "mla_decode/memory.h"
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

  VerifySummary verify(const Registry& r, VerifyOptions options = {}) {
    std::FILE* sink = std::tmpfile();
    VerifySummary s;
    try {
      s = verify_database(path_, r, options, sink);
    } catch (...) {
      std::fclose(sink);
      throw;
    }
    std::rewind(sink);
    report_.clear();
    for (int c; (c = std::fgetc(sink)) != EOF;) report_ += static_cast<char>(c);
    std::fclose(sink);
    return s;
  }
  static VerifyOptions isolated() {
    VerifyOptions o;
    o.isolated = true;
    o.watchdog_s = 2;
    return o;
  }

  ScriptedKernel exact_{"exact", 0, ScriptedKernel::Mode::kCorrect, "exact-v1"};
  Registry registry_;
  std::string path_;
  std::string report_;  // what the last verify() printed
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
  EXPECT_NE(report_.find("the variant's code differs from the tuned one"), std::string::npos)
      << report_;
  EXPECT_EQ(report_.find("not in this build"), std::string::npos) << report_;
}

TEST_F(VerifyTest, AVariantAbsentFromThisBuildIsStaleAndSaysSo) {
  // A database from another build: its variant is not here at all, which is not changed code.
  ScriptedKernel other("other", 0, ScriptedKernel::Mode::kCorrect, "other-v1");
  Registry r;
  r.add_borrowed(&other);
  const VerifySummary s = verify(r);
  EXPECT_EQ(s.stale, 2);
  EXPECT_EQ(s.passed, 0);
  EXPECT_NE(report_.find("STALE"), std::string::npos) << report_;
  EXPECT_NE(report_.find("the variant is not in this build"), std::string::npos) << report_;
  EXPECT_EQ(report_.find("code differs"), std::string::npos) << report_;
}

// Supervised verification (the CLI's mode): the same results in a worker process, and a winner
// that crashes or hangs the worker is a failure, after which the next winner is still verified.
TEST_F(VerifyTest, IsolatedFreshDatabasePassesWithTheSameReport) {
  const VerifySummary s = verify(registry_, isolated());
  EXPECT_EQ(s.passed, 2);
  EXPECT_EQ(s.failed + s.stale + s.no_valid, 0);
  const std::string isolated_report = report_;
  verify(registry_);
  EXPECT_EQ(isolated_report, report_);
}

TEST_F(VerifyTest, IsolatedCrashingWinnerFailsAndTheNextIsStillVerified) {
  exact_.set_mode(ScriptedKernel::Mode::kSegfault);
  const VerifySummary s = verify(registry_, isolated());
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.passed, 0);
  EXPECT_NE(report_.find("crashed the verify worker"), std::string::npos) << report_;
  EXPECT_NE(report_.find("verified 2 winners: 0 passed, 2 failed"), std::string::npos) << report_;
}

TEST_F(VerifyTest, IsolatedHangingWinnerIsKilledByTheWatchdog) {
  exact_.set_mode(ScriptedKernel::Mode::kHang);
  VerifyOptions o = isolated();
  o.max_restarts = 8;
  const VerifySummary s = verify(registry_, o);
  EXPECT_EQ(s.failed, 2);
  EXPECT_NE(report_.find("hung: no progress for 2 s"), std::string::npos) << report_;
}

// A failed winner after which the device is unusable ends the worker ("lost"); the next worker
// goes on after it. Here the winner claims the GPU backend, which a CPU-only build does not have:
// the gate records it as failed and the device probe after it fails. (A GPU build without a
// usable device is another case: building the inputs fails, which is no fault of the winner's,
// and verify stops with that error.)
TEST_F(VerifyTest, IsolatedUnusableDeviceAfterAFailureRestartsAfterIt) {
  try {
    memory_space(Backend::kHip);
    GTEST_SKIP() << "a GPU build: the winner would not fail for want of a backend";
  } catch (const LaunchError&) {
  }
  ScriptedKernel on_gpu("exact", 0, ScriptedKernel::Mode::kCorrect, "exact-v1");
  on_gpu.set_backend(Backend::kHip);
  Registry r;
  r.add_borrowed(&on_gpu);
  const VerifySummary s = verify(r, isolated());
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.passed, 0);
  size_t restarts = 0;
  for (size_t at = 0; (at = report_.find("did not survive", at)) != std::string::npos; ++at) {
    ++restarts;
  }
  EXPECT_EQ(restarts, 2u) << report_;
  EXPECT_NE(report_.find("verified 2 winners: 0 passed, 2 failed"), std::string::npos) << report_;
}

TEST_F(VerifyTest, IsolatedErrorsKeepTheirKind) {
  {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    db.exec("UPDATE provenance SET config_text = replace(config_text, '2.0e-3', '9.0e-1')");
  }
  EXPECT_THROW(verify(registry_, isolated()), DbError);
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
