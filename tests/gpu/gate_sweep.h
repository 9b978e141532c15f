// A GPU variant through the on-device gate (tuner/gate.h) as the tuner runs it, over every bucket
// of a test config and every launch given: each trial must pass. For the variants' gate tests,
// with the small shape their refusal tests start from.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "mla_decode/problem.h"
#include "mla_decode/variant.h"
#include "tuner/gate.h"

namespace mlatune::gpu_test {

// The small two-sequence shape (16 heads, qlen 1, bf16 q, page 64) the refusal tests start from.
inline DecodeShape small_shape(DType kv_dtype) {
  DecodeShape s;
  s.batch = 2;
  s.qlen = 1;
  s.heads = 16;
  s.page_size = 64;
  s.q_dtype = DType::kBF16;
  s.kv_dtype = kv_dtype;
  s.sm_scale = 0.04f;
  s.num_pages = 4;
  s.max_pages_per_seq = 2;
  s.max_kv_len = 100;
  return s;
}

struct GateSweep {
  int trials = 0;
  double worst = 0;  // worst error of any trial, as a multiple of its tolerance
};

// Expects every (bucket of `config_yaml`, launch) trial of `v` to pass (failures name the bucket,
// the launch, the reason and the worst row); prints and returns the count and the worst error.
inline GateSweep sweep_gate(const Variant& v, const char* config_yaml, const char* config_name,
                            const std::vector<LaunchParams>& launches) {
  const TuneConfig config = parse_config(config_yaml, config_name);
  GateSweep r;
  for (const BucketKey& b : config.buckets()) {
    BucketValidator validator(b, config, 2);
    for (const LaunchParams& lp : launches) {
      SCOPED_TRACE(b.to_string() + " " + lp.to_string());
      const TrialRecord t = validator.validate(v, lp);
      EXPECT_EQ(t.disposition, Disposition::kPassed) << t.reason << " at " << t.worst_row;
      r.worst = std::max(r.worst, t.max_rel_err.value_or(1e9));
      ++r.trials;
    }
  }
  std::printf("[ stats ] %s: %d trials, worst error %.3fx of the tolerance\n",
              std::string(v.name()).c_str(), r.trials, r.worst);
  return r;
}

}  // namespace mlatune::gpu_test
