// The memory a tuning run needs for its generated inputs: a bucket holds its pre-timing,
// validation and timing inputs one set at a time (tune.cc; held all at once, the largest buckets
// of configs/deepseek-v3-tp8.yaml took 92 GB and ran an 80 GB H100 out of memory), and a run whose
// largest set cannot fit the backend's available memory is refused before anything is tuned.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "mla_decode/memory.h"
#include "tuner/gate.h"
#include "tuner/scratch_tune.h"
#include "tuner/test_variants.h"
#include "tuner/tune.h"
#include "tuner/validation_case.h"

namespace mlatune {
namespace {

using testing::ScriptedKernel;
using testing::tune_into_scratch_db;

// Two buckets of 4 heads, the larger up to batch 20 x 40 keys; pre-timing on.
const char* kConfig = R"(
name: inputs
backend: host
spaces:
  - heads: [4]
    qlen: [1]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [false]
    batch_edges: [2, 20]
    kv_len_edges: [40]
tolerances:
  bf16/bf16: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
timing: {warmup: 1, samples: 3, cold_cache: false, top_corner: true, prune_factor: 2.0}
)";

int64_t sum_bytes(const std::vector<ValidationCase>& cases) {
  int64_t bytes = 0;
  for (const ValidationCase& c : cases) bytes += input_bytes(c.spec);
  return bytes;
}

TEST(InputMemory, ABucketHoldsOneSetOfInputsAtATime) {
  ScriptedKernel a("a", 0, ScriptedKernel::Mode::kCorrect);
  ScriptedKernel b("b", 0, ScriptedKernel::Mode::kCorrect);
  Registry r;
  r.add_borrowed(&a);
  r.add_borrowed(&b);
  const TuneConfig config = parse_config(kConfig, "inputs.yaml");
  TuneSummary summary;
  tune_into_scratch_db(config, r, "inputs", &summary);
  int64_t one_set = 0, all_sets = 0;
  for (const BucketKey& k : config.buckets()) {
    const std::vector<ValidationCase> timing = make_timing_cases(k, config.sm_scale, true);
    const BucketValidator validator(k, config, 1);
    const int64_t validation = sum_bytes(validator.cases());
    one_set = std::max({one_set, input_bytes(timing.front().spec), validation, sum_bytes(timing)});
    all_sets = std::max(all_sets, validation + sum_bytes(timing));
    EXPECT_EQ(bucket_input_peak(k, config), std::max(validation, sum_bytes(timing)));
  }
  EXPECT_EQ(summary.peak_input_bytes, one_set);
  EXPECT_LT(one_set, all_sets);
}

TEST(InputMemory, InputBytesCountTheKvPoolQAndTable) {
  const TuneConfig config = parse_config(kConfig, "inputs.yaml");
  const ValidationCase c = make_timing_cases(config.buckets().at(1), 0.1, true).back();
  const DecodeShape& s = c.shape();
  const int64_t kv = c.spec.gen.num_pages * s.page_size * kHeadDimQK * 2;  // bf16
  EXPECT_EQ(input_bytes(c.spec),
            kv + s.q_elems() * 2 + int64_t{s.batch} * (s.max_pages_per_seq + 1) * 4);
  EXPECT_GE(c.spec.gen.num_pages * s.page_size, int64_t{s.batch} * s.max_kv_len);
}

TEST(InputMemory, BucketsThatCannotFitAreRefusedUpFront) {
  const TuneConfig config = parse_config(kConfig, "inputs.yaml");
  const std::vector<BucketKey> buckets = config.buckets();
  const int64_t small = bucket_input_peak(buckets.at(0), config);
  const int64_t large = bucket_input_peak(buckets.at(1), config);
  ASSERT_LT(small, large);
  EXPECT_NO_THROW(check_inputs_fit(config, buckets, "test memory", large));
  EXPECT_NO_THROW(check_inputs_fit(config, buckets, "test memory", std::nullopt));
  try {
    check_inputs_fit(config, buckets, "test memory", large - 1);
    ADD_FAILURE() << "a bucket one byte too large was accepted";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("inputs.yaml: 1 bucket(s)"), std::string::npos) << m;
    EXPECT_NE(m.find(buckets.at(1).to_string()), std::string::npos) << m;
    EXPECT_NE(m.find("test memory"), std::string::npos) << m;
  }
  try {
    check_inputs_fit(config, buckets, "test memory", small - 1);
    ADD_FAILURE() << "buckets too large were accepted";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("2 bucket(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("the largest " + buckets.at(1).to_string()), std::string::npos) << m;
  }
}

// A new database is not created for a run that cannot fit; a resumed one is refused once open,
// for the buckets it lacks, and left as it was.
TEST(InputMemory, OpeningForTuningRefusesWhatCannotFit) {
  ScriptedKernel a("a", 0, ScriptedKernel::Mode::kCorrect);
  Registry r;
  r.add_borrowed(&a);
  std::string text = kConfig;
  text.replace(text.find("batch_edges: [2, 20]"), 20, "batch_edges: [65536]");
  text.replace(text.find("kv_len_edges: [40]"), 18, "kv_len_edges: [1048576]");
  text.replace(text.find("page_size: [16]"), 15, "page_size: [64]");
  const TuneConfig huge = parse_config(text, "huge.yaml");  // 1 bucket of about 77 TB
  const std::vector<Candidate> candidates = enumerate_candidates(huge, r);
  const std::string path =
      std::string(MLATUNE_TEST_TMPDIR) + "/input-memory-" + std::to_string(getpid()) + ".db";
  std::filesystem::remove(path);
  EXPECT_THROW(open_checked_for_tuning(path, TuningDb::Mode::kCreate, huge, r, candidates),
               ConfigError);
  EXPECT_FALSE(std::filesystem::exists(path));
  TuningDb::open_for_tuning(path, TuningDb::Mode::kCreate, make_provenance(huge, r),
                            variant_records(candidates));
  const auto size = std::filesystem::file_size(path);
  EXPECT_THROW(open_checked_for_tuning(path, TuningDb::Mode::kResume, huge, r, candidates),
               ConfigError);
  EXPECT_EQ(std::filesystem::file_size(path), size);
  std::filesystem::remove(path);
}

// A bucket whose largest case needs more pages than a pool can index (65536 x 1 Mi keys in pages
// of 16) is refused as a config error naming it, not an internal one.
TEST(InputMemory, ABucketWhoseInputsCannotBeMadeIsAConfigError) {
  std::string text = kConfig;
  text.replace(text.find("batch_edges: [2, 20]"), 20, "batch_edges: [65536]");
  text.replace(text.find("kv_len_edges: [40]"), 18, "kv_len_edges: [1048576]");
  const TuneConfig config = parse_config(text, "pages.yaml");
  try {
    check_inputs_fit(config, config.buckets(), "test memory", int64_t{1} << 62);
    ADD_FAILURE() << "a bucket of 2^32 pages was accepted";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pages.yaml: bucket " + config.buckets().at(0).to_string()), std::string::npos)
        << m;
    EXPECT_NE(m.find("num_pages"), std::string::npos) << m;
  }
}

// tune() asks the backend: on this Linux host, /proc/meminfo's MemAvailable, at most the RAM.
TEST(InputMemory, TheHostReportsItsAvailableMemory) {
  const std::optional<int64_t> available = memory_space(Backend::kHost).available_bytes();
  ASSERT_TRUE(available.has_value());
  EXPECT_GT(*available, 0);
  EXPECT_LE(*available, int64_t{sysconf(_SC_PHYS_PAGES)} * sysconf(_SC_PAGE_SIZE));
}

}  // namespace
}  // namespace mlatune
