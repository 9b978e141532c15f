// Shared pieces of the runtime's GoogleTest suites: a standard database layout with a brute-force
// oracle, per-test temporary paths, and an owning handle for the C API.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlatune/mlatune.h"
#include "runtime/test_db.h"

namespace mlatune::test_db {

// A path under the build's test directory (or $MLATUNE_TEST_TMPDIR: a bundled test binary runs
// on a machine without the build tree), unique per test (ctest runs tests in parallel).
inline std::string temp_path(const std::string& suffix = ".db") {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  const char* dir = std::getenv("MLATUNE_TEST_TMPDIR");
  return std::string(dir && *dir ? dir : MLATUNE_TEST_TMPDIR) + "/runtime_" +
         t->test_suite_name() + "_" + t->name() + suffix;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct DbCloser {
  void operator()(mlatune_db* db) const { mlatune_close(db); }
};
using DbHandle = std::unique_ptr<mlatune_db, DbCloser>;

// Opens through the C API; returns the status and fills *db on success.
inline mlatune_status open_db(const std::string& path, DbHandle* db,
                              const mlatune_open_options* options = nullptr) {
  mlatune_db* raw = reinterpret_cast<mlatune_db*>(uintptr_t{0x1});  // must be reset to NULL
  const mlatune_status s = mlatune_open(path.c_str(), options, &raw);
  if (s != MLATUNE_STATUS_OK) {
    EXPECT_EQ(raw, nullptr) << "open failed but *out was not reset";
  }
  db->reset(s == MLATUNE_STATUS_OK ? raw : nullptr);
  return s;
}

inline mlatune_decode_key decode_key(const DecodeKey& k, int32_t batch, int32_t max_kv_len) {
  return mlatune_decode_key{k.heads,
                            k.qlen,
                            static_cast<int32_t>(k.q_dtype),
                            static_cast<int32_t>(k.kv_dtype),
                            k.page_size,
                            k.lse ? 1 : 0,
                            batch,
                            max_kv_len};
}

// The standard layout: a regular 3x3 grid (key A), a key with a bucket whose candidates all
// failed (key B), and an irregular, non-grid tiling with gaps (key C). Every tuned bucket has a
// distinct time, which identifies the bucket a lookup returned.
inline DecodeKey key_a() { return make_key(16, 1, DType::kBF16, DType::kBF16, 64, false); }
inline DecodeKey key_b() { return make_key(16, 4, DType::kFP8E4M3FN, DType::kFP8E4M3FN, 64, true); }
inline DecodeKey key_c() { return make_key(128, 2, DType::kBF16, DType::kFP8E4M3FNUZ, 1, false); }

inline TestDbSpec standard_spec() {
  TestDbSpec spec;
  const int32_t batch[][2] = {{1, 4}, {5, 16}, {17, 64}};
  const int32_t kv[][2] = {{1, 1024}, {1025, 8192}, {8193, 65536}};
  const char* variants[] = {"host_split_kv_v1", "host_tiled_kv_v1", "host_online_softmax_v1"};
  double t = 1.0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      TestBucket b;
      b.key = key_a();
      b.batch_lo = batch[i][0];
      b.batch_hi = batch[i][1];
      b.kv_lo = kv[j][0];
      b.kv_hi = kv[j][1];
      b.variant = variants[(i + j) % 3];
      b.time_us = t++;
      spec.buckets.push_back(b);
    }
  }
  TestBucket b;
  b.key = key_b();
  b.batch_lo = 1, b.batch_hi = 8, b.kv_lo = 4, b.kv_hi = 4096;
  b.variant = "host_online_softmax_v1";
  b.time_us = t++;
  spec.buckets.push_back(b);
  b.batch_lo = 9, b.batch_hi = 16;
  b.no_valid = true;
  spec.buckets.push_back(b);

  // Key C: batch 1..10 x kv 2..100, batch 5..20 x kv 101..200, batch 1..4 x kv 101..150.
  const int32_t c[][4] = {{1, 10, 2, 100}, {5, 20, 101, 200}, {1, 4, 101, 150}};
  for (const auto& r : c) {
    TestBucket cb;
    cb.key = key_c();
    cb.batch_lo = r[0], cb.batch_hi = r[1], cb.kv_lo = r[2], cb.kv_hi = r[3];
    cb.variant = "host_tiled_kv_v1";
    cb.time_us = t++;
    spec.buckets.push_back(cb);
  }
  return spec;
}

// Brute-force oracle: the bucket of `spec` covering the call, if any.
inline const TestBucket* covering_bucket(const TestDbSpec& spec, const mlatune_decode_key& k) {
  for (const TestBucket& b : spec.buckets) {
    const mlatune_decode_key bk = decode_key(b.key, k.batch, k.max_kv_len);
    if (std::memcmp(&bk, &k, sizeof k) == 0 && k.batch >= b.batch_lo && k.batch <= b.batch_hi &&
        k.max_kv_len >= b.kv_lo && k.max_kv_len <= b.kv_hi) {
      return &b;
    }
  }
  return nullptr;
}

// The launch parameters write_test_db gives a bucket.
inline LaunchParams expected_params(const TestBucket& b) {
  if (b.params) return *b.params;
  return builtin_registry().find(b.variant)->param_space().enumerate().back();
}

// Status and selection of lookups over key_a/b/c of standard_spec(), at batches and lengths on
// and around every bucket edge: the observable behaviour of a handle.
struct Answers {
  std::vector<mlatune_status> status;
  std::vector<std::string> selection;  // variant, params and bucket of a hit
  bool operator==(const Answers&) const = default;
};

Answers probe(const mlatune_db* db) {
  Answers a;
  for (const DecodeKey& k : {key_a(), key_b(), key_c()}) {
    for (int32_t batch : {1, 4, 5, 9, 16, 17, 64, 65}) {
      for (int32_t kv : {4, 100, 150, 1024, 1025, 8192, 65536}) {
        const mlatune_decode_key dk = decode_key(k, batch, kv);
        mlatune_selection s;
        a.status.push_back(mlatune_lookup(db, &dk, &s));
        char text[256];
        std::snprintf(text, sizeof text, "%s %d %d %d %d [%d..%d]x[%d..%d] %.17g", s.variant,
                      s.kv_splits, s.kv_tile, s.block_rows, s.workers, s.batch_lo, s.batch_hi,
                      s.kv_lo, s.kv_hi, s.time_median_us);
        a.selection.push_back(text);
      }
    }
  }
  return a;
}

}  // namespace mlatune::test_db
