// The validation gate against planted faults: each must be caught with the right disposition and
// a reason, and the exact kernel must pass with a wide margin.
#include "tuner/gate.h"

#include <gtest/gtest.h>

#include "tuner/test_variants.h"

namespace mlatune {
namespace {

using testing::Fault;
using testing::ReferenceKernel;

TuneConfig small_config(const std::string& dtypes = "bf16/bf16") {
  return parse_config(R"(
backend: host
spaces:
  - heads: [4]
    qlen: [3]
    dtypes: [)" + dtypes + R"(]
    page_size: [16]
    lse: [true]
    batch_edges: [3]
    kv_len_edges: [40]
tolerances:
  bf16/bf16: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
  fp8_e4m3fn/fp8_e4m3fn: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 2, repeats: 5, interior_points: 1}
)",
                      "gate_test.yaml");
}

class GateTest : public ::testing::Test {
 protected:
  GateTest() : config_(small_config()), validator_(config_.buckets().at(0), config_, 2) {}
  TrialRecord check(Fault f) { return validator_.validate(ReferenceKernel(f), LaunchParams{}); }
  TuneConfig config_;
  BucketValidator validator_;
};

TEST(ValidationPoints, CornersAndInteriorDeduplicated) {
  BucketKey b;
  b.key.qlen = 3;
  b.batch_lo = 5;
  b.batch_hi = 16;
  b.kv_lo = 1;
  b.kv_hi = 512;
  auto pts = validation_points(b, 1);
  ASSERT_EQ(pts.size(), 5u);
  EXPECT_EQ(pts[0].batch, 5);
  EXPECT_EQ(pts[0].max_kv_len, 3);  // kv_lo raised to qlen: shorter is not a valid call
  EXPECT_EQ(pts[1].batch, 16);
  EXPECT_EQ(pts[1].max_kv_len, 512);
  EXPECT_GT(pts[4].batch, 5);
  EXPECT_LT(pts[4].batch, 16);
  b.batch_hi = 5;
  b.kv_hi = 3;
  EXPECT_EQ(validation_points(b, 3).size(), 1u);
}

TEST(ValidationCases, PoisonAndMixedLengths) {
  TuneConfig c = small_config();
  BucketKey b = c.buckets().at(0);
  ValidationCase vc =
      make_validation_case(b, {3, 40}, 1, InputPattern::kRandom, c.sm_scale, c.validation);
  const std::vector<int32_t>& lens = vc.spec.kv_lens;
  ASSERT_EQ(lens.size(), 3u);
  EXPECT_EQ(*std::max_element(lens.begin(), lens.end()), 40);
  EXPECT_EQ(*std::min_element(lens.begin(), lens.end()), 3);  // minimum length
  HostCase h = generate_host_case(vc.spec);
  EXPECT_FALSE(validate_sequences(vc.shape(), lens, h.block_table).has_value());
  // Unused block-table slots hold ids outside the pool, and unused KV rows are NaN.
  int poisoned_slots = 0;
  for (int32_t id : h.block_table) poisoned_slots += (id < 0 || id >= vc.shape().num_pages);
  EXPECT_GE(poisoned_slots, 3);
  int64_t nan_rows = 0;
  for (int64_t r = 0; r < vc.shape().num_pages * vc.shape().page_size; ++r) {
    nan_rows += std::isnan(decode_element(vc.shape().kv_dtype, h.kv.data(), r * kHeadDimQK));
  }
  int64_t used = 0;
  for (int32_t l : lens) used += l;
  EXPECT_EQ(nan_rows, vc.shape().num_pages * vc.shape().page_size - used);
  EXPECT_EQ(static_cast<int64_t>(vc.checked_rows.size()), vc.shape().rows());
}

TEST(ValidationCases, LargePointsSampleRows) {
  TuneConfig c = small_config();
  c.validation.full_check_rows = 10;
  c.validation.sampled_sequences = 1;
  c.validation.sampled_rows = 5;
  ValidationCase vc = make_validation_case(c.buckets().at(0), {3, 40}, 1, InputPattern::kRandom,
                                           c.sm_scale, c.validation);
  // Every row of the longest sequence (qlen * heads = 12) plus up to 5 sampled ones.
  EXPECT_GE(vc.checked_rows.size(), 12u);
  EXPECT_LE(vc.checked_rows.size(), 17u);
  auto prepared = gate_backend(Backend::kHost).prepare(vc.spec, vc.checked_rows, 1);
  std::vector<uint16_t> zeros(static_cast<size_t>(vc.shape().out_elems()), 0);
  EXPECT_EQ(prepared->check(zeros.data(), nullptr, 1e-3, 1e-2).rows.size(), vc.checked_rows.size());
}

TEST_F(GateTest, ExactKernelPassesWithMargin) {
  TrialRecord t = check(Fault::kNone);
  EXPECT_EQ(t.disposition, Disposition::kPassed) << t.reason << " at " << t.worst_row;
  ASSERT_TRUE(t.max_rel_err.has_value());
  EXPECT_LT(*t.max_rel_err, 0.5);  // bf16 rounding only: half an ulp, well inside tolerance
  EXPECT_GT(t.rows_checked, 0);
  EXPECT_EQ(t.validation_points, static_cast<int32_t>(validator_.cases().size()));
  EXPECT_EQ(t.validation_runs, t.validation_points * 5);
  EXPECT_TRUE(t.max_lse_err.has_value());
}

TEST_F(GateTest, CausalLeakIsIncorrectByOrdersOfMagnitude) {
  TrialRecord t = check(Fault::kLeakCausal);
  EXPECT_EQ(t.disposition, Disposition::kIncorrect);
  EXPECT_NE(t.reason.find("exceeds tolerance"), std::string::npos) << t.reason;
  EXPECT_NE(t.worst_row.find("q 0"), std::string::npos) << t.worst_row;  // first token leaks most
  EXPECT_GT(*t.max_rel_err, 100.0);
}

TEST_F(GateTest, WriteOutsideOutputIsCaughtByGuard) {
  TrialRecord t = check(Fault::kWritePastEnd);
  EXPECT_EQ(t.disposition, Disposition::kIncorrect);
  EXPECT_NE(t.reason.find("past the end of out"), std::string::npos) << t.reason;
}

TEST_F(GateTest, UnwrittenRowIsNaN) {
  TrialRecord t = check(Fault::kSkipLastRow);
  EXPECT_EQ(t.disposition, Disposition::kIncorrect);
  EXPECT_NE(t.reason.find("NaN in the output"), std::string::npos) << t.reason;
}

TEST_F(GateTest, IntermittentFaultIsCaughtByRepeats) {
  TrialRecord t = check(Fault::kNondeterministic);
  EXPECT_EQ(t.disposition, Disposition::kIncorrect);
  EXPECT_NE(t.reason.find("nondeterministic"), std::string::npos) << t.reason;
}

TEST_F(GateTest, SingleWrongRowIsCaught) {
  TrialRecord t = check(Fault::kOneRowWrong);
  EXPECT_EQ(t.disposition, Disposition::kIncorrect);
  // The last row of the first case: last token, last head.
  EXPECT_NE(t.worst_row.find("head 3"), std::string::npos) << t.worst_row;
}

TEST_F(GateTest, LaunchFailureAndUnsupportedAreRecorded) {
  TrialRecord thrown = check(Fault::kThrow);
  EXPECT_EQ(thrown.disposition, Disposition::kLaunchError);
  EXPECT_NE(thrown.reason.find("planted launch failure"), std::string::npos);
  TrialRecord unsupported = check(Fault::kUnsupported);
  EXPECT_EQ(unsupported.disposition, Disposition::kUnsupported);
  EXPECT_EQ(unsupported.validation_runs, 0);
}

TEST(GateHostVariants, EveryHostVariantPassesFp8WithMargin) {
  TuneConfig c = small_config("fp8_e4m3fn/fp8_e4m3fn");
  BucketValidator v(c.buckets().at(0), c, 2);
  Registry r = builtin_registry();
  for (const Variant* var : r.all()) {
    if (var->backend() != Backend::kHost) continue;          // GPU builds register GPU variants too
    LaunchParams p = var->param_space().enumerate().back();  // most splits and tiles
    p.workers = 2;
    TrialRecord t = v.validate(*var, p);
    EXPECT_EQ(t.disposition, Disposition::kPassed)
        << var->name() << " " << p.to_string() << ": " << t.reason << " at " << t.worst_row;
    EXPECT_LT(t.max_rel_err.value_or(1e9), 0.5) << var->name();
  }
}

}  // namespace
}  // namespace mlatune
