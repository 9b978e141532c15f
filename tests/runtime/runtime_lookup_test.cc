// Lookups through the C API (and the core where options the C API lacks are needed): hits, misses,
// refusals of stale and failed buckets, argument checking, and concurrency.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime_fixture.h"
#include "runtime/winner_table.h"

namespace mlatune::test_db {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class LookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path();
    spec_ = standard_spec();
    write_test_db(path_, spec_);
    ASSERT_EQ(open_db(path_, &db_), MLATUNE_STATUS_OK) << mlatune_last_error();
  }

  mlatune_status lookup(const mlatune_decode_key& k, mlatune_selection* sel) {
    return mlatune_lookup(db_.get(), &k, sel);
  }

  std::string path_;
  TestDbSpec spec_;
  DbHandle db_;
};

void expect_selection(const TestBucket& b, const mlatune_selection& s) {
  const LaunchParams p = expected_params(b);
  EXPECT_STREQ(s.variant, b.variant.c_str());
  EXPECT_EQ(s.kv_splits, p.kv_splits);
  EXPECT_EQ(s.kv_tile, p.kv_tile);
  EXPECT_EQ(s.block_rows, p.block_rows);
  EXPECT_EQ(s.workers, p.workers);
  EXPECT_EQ(s.batch_lo, b.batch_lo);
  EXPECT_EQ(s.batch_hi, b.batch_hi);
  EXPECT_EQ(s.kv_lo, b.kv_lo);
  EXPECT_EQ(s.kv_hi, b.kv_hi);
  EXPECT_EQ(s.time_median_us, b.time_us);
}

bool all_zero(const mlatune_selection& s) {
  const mlatune_selection zero{};
  return std::memcmp(&s, &zero, sizeof s) == 0;
}

TEST_F(LookupTest, HitsEveryBucketOnItsCornersAndInterior) {
  for (const TestBucket& b : spec_.buckets) {
    if (b.no_valid) continue;
    const int32_t mid_batch = b.batch_lo + (b.batch_hi - b.batch_lo) / 2;
    const int32_t mid_kv = b.kv_lo + (b.kv_hi - b.kv_lo) / 2;
    for (auto [batch, kv] : {std::pair{b.batch_lo, b.kv_lo},
                             {b.batch_lo, b.kv_hi},
                             {b.batch_hi, b.kv_lo},
                             {b.batch_hi, b.kv_hi},
                             {mid_batch, mid_kv}}) {
      SCOPED_TRACE(b.key.to_string() + " batch=" + std::to_string(batch) +
                   " kv=" + std::to_string(kv));
      mlatune_selection s;
      ASSERT_EQ(lookup(decode_key(b.key, batch, kv), &s), MLATUNE_STATUS_OK)
          << mlatune_last_error();
      expect_selection(b, s);
    }
  }
}

TEST_F(LookupTest, AgreesWithBruteForceOnRandomCalls) {
  std::mt19937 rng(42);
  const DecodeKey keys[] = {key_a(), key_b(), key_c(),
                            make_key(16, 1, DType::kBF16, DType::kBF16, 64, true)};
  int hits = 0, misses = 0;
  for (int i = 0; i < 20000; ++i) {
    const DecodeKey& dk = keys[rng() % 4];
    const int32_t batch = 1 + static_cast<int32_t>(rng() % 80);
    // Log-uniform kv lengths, so every kv bucket (and the space beyond them) is visited.
    const int32_t kv = std::max<int32_t>(
        dk.qlen, static_cast<int32_t>(std::exp2(std::uniform_real_distribution<>(0, 17)(rng))));
    const mlatune_decode_key k = decode_key(dk, batch, kv);
    mlatune_selection s;
    const mlatune_status st = lookup(k, &s);
    const TestBucket* b = covering_bucket(spec_, k);
    SCOPED_TRACE(dk.to_string() + " batch=" + std::to_string(batch) + " kv=" + std::to_string(kv));
    if (!b) {
      ASSERT_EQ(st, MLATUNE_STATUS_UNTUNED);
      ++misses;
    } else if (b->no_valid) {
      ASSERT_EQ(st, MLATUNE_STATUS_NO_VALID_KERNEL);
    } else {
      ASSERT_EQ(st, MLATUNE_STATUS_OK) << mlatune_last_error();
      ASSERT_EQ(s.time_median_us, b->time_us);
      ++hits;
    }
  }
  EXPECT_GT(hits, 4000);
  EXPECT_GT(misses, 2000);
}

TEST_F(LookupTest, IrregularTilingHasGapsThatMiss) {
  mlatune_selection s;
  // Batch 11..20 is covered only for kv 101..200; batch 1..4 only up to kv 150.
  EXPECT_EQ(lookup(decode_key(key_c(), 15, 50), &s), MLATUNE_STATUS_UNTUNED);
  EXPECT_EQ(lookup(decode_key(key_c(), 3, 175), &s), MLATUNE_STATUS_UNTUNED);
  EXPECT_EQ(lookup(decode_key(key_c(), 21, 150), &s), MLATUNE_STATUS_UNTUNED);
  ASSERT_EQ(lookup(decode_key(key_c(), 5, 101), &s), MLATUNE_STATUS_OK);
  EXPECT_EQ(s.batch_lo, 5);
  ASSERT_EQ(lookup(decode_key(key_c(), 4, 101), &s), MLATUNE_STATUS_OK);
  EXPECT_EQ(s.batch_hi, 4);
  ASSERT_EQ(lookup(decode_key(key_c(), 10, 100), &s), MLATUNE_STATUS_OK);
  EXPECT_EQ(s.kv_hi, 100);
}

TEST_F(LookupTest, MissOutsideRangesNamesTheNearestBucketsOfTheKey) {
  mlatune_selection s;
  s.kv_splits = 77;
  ASSERT_EQ(lookup(decode_key(key_a(), 65, 70000), &s), MLATUNE_STATUS_UNTUNED);
  EXPECT_TRUE(all_zero(s)) << "a refused lookup must not leave a usable-looking selection";
  const std::string msg = mlatune_last_error();
  EXPECT_THAT(msg, HasSubstr("no bucket covers"));
  EXPECT_THAT(msg, HasSubstr("heads=16 qlen=1 q=bf16 kv=bf16 page=64 lse=0"));
  EXPECT_THAT(msg, HasSubstr("batch=65 max_kv_len=70000"));
  // The closest bucket is the far corner of the grid, listed first.
  EXPECT_THAT(msg, HasSubstr("nearest tuned buckets of this key: [batch=17..64 kv=8193..65536]"));
}

TEST_F(LookupTest, MissOfAnUntunedKeyNamesTheNearestTunedKeys) {
  mlatune_selection s;
  // Key A with page 32: one field differs from key A, several from the others.
  ASSERT_EQ(lookup(decode_key(make_key(16, 1, DType::kBF16, DType::kBF16, 32, false), 2, 100), &s),
            MLATUNE_STATUS_UNTUNED);
  const std::string msg = mlatune_last_error();
  EXPECT_THAT(msg, HasSubstr("page=32"));
  EXPECT_THAT(msg, HasSubstr("nearest tuned keys: [heads=16 qlen=1 q=bf16 kv=bf16 page=64 lse=0 "
                             "batch=1..64 kv=1..65536]"));
  // Three keys exist, so all three are named.
  EXPECT_THAT(msg, HasSubstr("heads=128 qlen=2"));
  EXPECT_THAT(msg, HasSubstr("heads=16 qlen=4"));
}

TEST_F(LookupTest, BucketWithoutAValidCandidateIsRefused) {
  mlatune_selection s;
  ASSERT_EQ(lookup(decode_key(key_b(), 12, 100), &s), MLATUNE_STATUS_NO_VALID_KERNEL);
  EXPECT_TRUE(all_zero(s));
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("no candidate passed validation"));
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("batch=9..16 kv=4..4096"));
  // Its neighbour is usable.
  EXPECT_EQ(lookup(decode_key(key_b(), 8, 100), &s), MLATUNE_STATUS_OK);
}

TEST_F(LookupTest, EveryInvalidFieldIsRefusedByName) {
  const mlatune_decode_key good = decode_key(key_b(), 2, 100);
  struct Case {
    const char* field;
    void (*mutate)(mlatune_decode_key&);
  };
  const Case cases[] = {
      {"heads", [](mlatune_decode_key& k) { k.heads = 0; }},
      {"heads", [](mlatune_decode_key& k) { k.heads = 1025; }},
      {"qlen", [](mlatune_decode_key& k) { k.qlen = 0; }},
      {"qlen", [](mlatune_decode_key& k) { k.qlen = 17; }},
      {"q_dtype", [](mlatune_decode_key& k) { k.q_dtype = 3; }},
      {"q_dtype", [](mlatune_decode_key& k) { k.q_dtype = -1; }},
      {"kv_dtype", [](mlatune_decode_key& k) { k.kv_dtype = 3; }},
      {"page_size", [](mlatune_decode_key& k) { k.page_size = 0; }},
      {"page_size", [](mlatune_decode_key& k) { k.page_size = 4097; }},
      {"lse", [](mlatune_decode_key& k) { k.lse = 2; }},
      {"batch", [](mlatune_decode_key& k) { k.batch = 0; }},
      {"batch", [](mlatune_decode_key& k) { k.batch = 65537; }},
      {"max_kv_len", [](mlatune_decode_key& k) { k.max_kv_len = 3; }},  // < qlen (4)
      {"max_kv_len", [](mlatune_decode_key& k) { k.max_kv_len = (1 << 24) + 1; }},
      {"max_kv_len", [](mlatune_decode_key& k) { k.max_kv_len = -5; }},
  };
  mlatune_selection s;
  ASSERT_EQ(lookup(good, &s), MLATUNE_STATUS_OK);
  for (const Case& c : cases) {
    mlatune_decode_key k = good;
    c.mutate(k);
    s.kv_splits = 99;
    EXPECT_EQ(lookup(k, &s), MLATUNE_STATUS_INVALID_ARGUMENT) << c.field;
    EXPECT_TRUE(all_zero(s)) << c.field;
    EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr(std::string(c.field) + "="));
  }
}

TEST_F(LookupTest, NullArgumentsAreRefused) {
  const mlatune_decode_key k = decode_key(key_a(), 1, 1);
  mlatune_selection s;
  EXPECT_EQ(mlatune_lookup(nullptr, &k, &s), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("db is NULL"));
  EXPECT_EQ(mlatune_lookup(db_.get(), nullptr, &s), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("key is NULL"));
  EXPECT_EQ(mlatune_lookup(db_.get(), &k, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("out is NULL"));

  int64_t a = 0, b = 0, c = 0;
  EXPECT_EQ(mlatune_table_stats(nullptr, &a, &b, &c), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_table_stats(db_.get(), nullptr, &b, &c), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_table_stats(db_.get(), &a, nullptr, &c), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_table_stats(db_.get(), &a, &b, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(mlatune_db_info(nullptr), "");
  mlatune_close(nullptr);  // a no-op
}

TEST_F(LookupTest, StatsAndInfoDescribeTheTable) {
  int64_t usable = -1, stale = -1, no_valid = -1;
  ASSERT_EQ(mlatune_table_stats(db_.get(), &usable, &stale, &no_valid), MLATUNE_STATUS_OK);
  EXPECT_EQ(usable, 13);
  EXPECT_EQ(stale, 0);
  EXPECT_EQ(no_valid, 1);
  const std::string info = mlatune_db_info(db_.get());
  EXPECT_THAT(info, HasSubstr(path_));
  EXPECT_THAT(info, HasSubstr(host_device_info().name));
  EXPECT_THAT(info, HasSubstr("test-config"));
  EXPECT_THAT(info, HasSubstr("13 usable, 0 stale, 1 without a valid kernel"));
  EXPECT_THAT(info, Not(HasSubstr("FOREIGN")));
}

TEST_F(LookupTest, ConcurrentLookupsAgreeWithSequentialOnes) {
  std::mt19937 rng(7);
  std::vector<mlatune_decode_key> keys;
  for (int i = 0; i < 4096; ++i) {
    const DecodeKey dk = (i % 3 == 0) ? key_a() : (i % 3 == 1) ? key_b() : key_c();
    keys.push_back(decode_key(dk, 1 + static_cast<int32_t>(rng() % 70),
                              4 + static_cast<int32_t>(rng() % 70000)));
  }
  std::vector<mlatune_status> want_status(keys.size());
  std::vector<mlatune_selection> want(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) want_status[i] = lookup(keys[i], &want[i]);

  std::atomic<int64_t> mismatches{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      mlatune_selection s;
      for (int round = 0; round < 50; ++round) {
        for (size_t i = 0; i < keys.size(); ++i) {
          const size_t j = (i * 7 + static_cast<size_t>(t) * 131) % keys.size();
          const mlatune_status st = mlatune_lookup(db_.get(), &keys[j], &s);
          if (st != want_status[j] || std::memcmp(&s, &want[j], sizeof s) != 0) ++mismatches;
          if (st == MLATUNE_STATUS_UNTUNED &&
              std::strstr(mlatune_last_error(), "no bucket covers") == nullptr) {
            ++mismatches;  // another thread's message, or a torn one
          }
          ++done;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(done.load(), int64_t{8} * 50 * 4096);
}

TEST_F(LookupTest, LastErrorIsPerThread) {
  mlatune_selection s;
  ASSERT_EQ(lookup(decode_key(key_a(), 65, 1), &s), MLATUNE_STATUS_UNTUNED);
  const std::string mine = mlatune_last_error();
  std::thread([] {
    EXPECT_STREQ(mlatune_last_error(), "");
    mlatune_db* db = nullptr;
    EXPECT_EQ(mlatune_open("/nonexistent/x.db", nullptr, &db), MLATUNE_STATUS_IO_ERROR);
  }).join();
  EXPECT_EQ(mine, mlatune_last_error());
  // A later success leaves the message of the last failure in place.
  ASSERT_EQ(lookup(decode_key(key_a(), 1, 1), &s), MLATUNE_STATUS_OK);
  EXPECT_EQ(mine, mlatune_last_error());
}

TEST(LookupStaleTest, EditedVariantIdentityMakesOnlyItsBucketsStale) {
  const std::string path = temp_path();
  const TestDbSpec spec = standard_spec();
  write_test_db(path, spec);
  edit_db(path, "UPDATE variants SET code_identity = 'old0123' WHERE name = 'host_tiled_kv_v1'",
          /*recompute_digest=*/true);
  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  int64_t usable = 0, stale = 0, no_valid = 0;
  ASSERT_EQ(mlatune_table_stats(db.get(), &usable, &stale, &no_valid), MLATUNE_STATUS_OK);
  int64_t want_stale = 0;
  for (const TestBucket& b : spec.buckets)
    want_stale += !b.no_valid && b.variant == "host_tiled_kv_v1";
  EXPECT_EQ(stale, want_stale);
  EXPECT_EQ(usable, 13 - want_stale);

  const std::string current(builtin_registry().find("host_tiled_kv_v1")->code_identity());
  for (const TestBucket& b : spec.buckets) {
    if (b.no_valid) continue;
    const mlatune_decode_key k = decode_key(b.key, b.batch_lo, b.kv_hi);
    mlatune_selection s;
    const mlatune_status st = mlatune_lookup(db.get(), &k, &s);
    if (b.variant == "host_tiled_kv_v1") {
      ASSERT_EQ(st, MLATUNE_STATUS_STALE);
      EXPECT_STREQ(s.variant, "");
      const std::string msg = mlatune_last_error();
      EXPECT_THAT(msg, HasSubstr("'host_tiled_kv_v1'"));
      EXPECT_THAT(msg, HasSubstr("old0123"));
      EXPECT_THAT(msg, HasSubstr(current));
    } else {
      EXPECT_EQ(st, MLATUNE_STATUS_OK) << mlatune_last_error();
    }
  }
}

TEST(LookupStaleTest, VariantAbsentFromThisBuildIsStale) {
  const std::string path = temp_path();
  TestDbSpec spec;
  TestBucket retired;
  retired.key = key_a();
  retired.batch_lo = 1, retired.batch_hi = 8, retired.kv_lo = 1, retired.kv_hi = 100;
  retired.variant = "host_retired_v0";
  retired.params = LaunchParams{999, 7, 0, 0};  // its old space; not checked for a stale winner
  TestBucket kept = retired;
  kept.batch_lo = 9, kept.batch_hi = 16;
  kept.variant = "host_online_softmax_v1";
  kept.params.reset();
  spec.buckets = {retired, kept};
  spec.extra_variants.push_back({"host_retired_v0", "host", "abc", "gone"});
  write_test_db(path, spec);

  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  mlatune_selection s;
  const mlatune_decode_key k1 = decode_key(key_a(), 4, 50);
  ASSERT_EQ(mlatune_lookup(db.get(), &k1, &s), MLATUNE_STATUS_STALE);
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("not part of this build"));
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("host_retired_v0"));
  const mlatune_decode_key k2 = decode_key(key_a(), 12, 50);
  EXPECT_EQ(mlatune_lookup(db.get(), &k2, &s), MLATUNE_STATUS_OK);
}

TEST(LookupCoreTest, InjectedRegistryDecidesStaleness) {
  const std::string path = temp_path();
  const TestDbSpec spec = standard_spec();
  write_test_db(path, spec);
  Registry only_split;
  only_split.add_borrowed(builtin_registry().find("host_split_kv_v1"));
  OpenOptions options;
  options.registry = &only_split;
  const auto table = WinnerTable::open(path, options);
  int64_t want_usable = 0;
  for (const TestBucket& b : spec.buckets)
    want_usable += !b.no_valid && b.variant == "host_split_kv_v1";
  EXPECT_EQ(table->stats().usable, want_usable);
  EXPECT_EQ(table->stats().stale, 13 - want_usable);

  // The core's lookup and explain, used directly.
  mlatune_selection s;
  const mlatune_decode_key k = decode_key(key_a(), 1, 1);  // bucket (0,0): split_kv
  ASSERT_EQ(table->lookup(k, &s), MLATUNE_STATUS_OK);
  EXPECT_STREQ(s.variant, "host_split_kv_v1");
  const mlatune_decode_key miss = decode_key(key_a(), 100, 1);
  ASSERT_EQ(table->lookup(miss, &s), MLATUNE_STATUS_UNTUNED);
  char small[24];
  table->explain(miss, small, sizeof small);
  EXPECT_EQ(std::strlen(small), sizeof small - 1) << "explain must truncate to the buffer";
  EXPECT_EQ(std::string(small), std::string("no bucket covers heads=16 qlen=1").substr(0, 23));
}

TEST(LookupEdgeTest, EmptyDatabaseRefusesEveryCall) {
  const std::string path = temp_path();
  write_test_db(path, TestDbSpec{});
  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  const mlatune_decode_key k = decode_key(key_a(), 1, 1);
  mlatune_selection s;
  EXPECT_EQ(mlatune_lookup(db.get(), &k, &s), MLATUNE_STATUS_UNTUNED);
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("no buckets"));
}

TEST(LookupEdgeTest, ExtremeButValidRangesAreServed) {
  const std::string path = temp_path();
  TestDbSpec spec;
  TestBucket b;
  b.key = make_key(1024, 16, DType::kFP8E4M3FNUZ, DType::kFP8E4M3FNUZ, 4096, true);
  b.batch_lo = 1, b.batch_hi = 65536, b.kv_lo = 16, b.kv_hi = 1 << 24;
  spec.buckets = {b};
  write_test_db(path, spec);
  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  mlatune_selection s;
  for (auto [batch, kv] : {std::pair{1, 16}, {65536, 1 << 24}}) {
    const mlatune_decode_key k = decode_key(b.key, batch, kv);
    EXPECT_EQ(mlatune_lookup(db.get(), &k, &s), MLATUNE_STATUS_OK) << mlatune_last_error();
  }
  const mlatune_decode_key below = decode_key(b.key, 1, 15);
  EXPECT_EQ(mlatune_lookup(db.get(), &below, &s), MLATUNE_STATUS_INVALID_ARGUMENT);  // < qlen
}

TEST(LookupEdgeTest, OverlappingBucketsAreCorrupt) {
  const std::string path = temp_path();
  TestDbSpec spec;
  TestBucket a;
  a.key = key_a();
  a.batch_lo = 1, a.batch_hi = 8, a.kv_lo = 1, a.kv_hi = 100;
  TestBucket b = a;
  b.batch_lo = 8, b.batch_hi = 16, b.kv_lo = 100, b.kv_hi = 200;  // shares (8, 100)
  spec.buckets = {a, b};
  write_test_db(path, spec);
  DbHandle db;
  EXPECT_EQ(open_db(path, &db), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("overlapping buckets"));
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("batch 8..16 kv 100..200"));

  // Touching but not overlapping is fine.
  spec.buckets[1].batch_lo = 9;
  write_test_db(path, spec);
  EXPECT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
}

TEST(CApiTest, StatusStringsVersionAndOptions) {
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_OK), "ok");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_IO_ERROR), "io error");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_CORRUPT), "corrupt");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_SCHEMA_MISMATCH), "schema mismatch");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_FOREIGN_DEVICE), "foreign device");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_UNTUNED), "untuned");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_STALE), "stale");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_NO_VALID_KERNEL), "no valid kernel");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_OUT_OF_MEMORY), "out of memory");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_INTERNAL), "internal");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_BAD_PLAN), "bad plan");
  EXPECT_STREQ(mlatune_status_string(MLATUNE_STATUS_LAUNCH_FAILED), "launch failed");
  EXPECT_STREQ(mlatune_status_string(static_cast<mlatune_status>(13)), "unknown status");
  EXPECT_STREQ(mlatune_status_string(static_cast<mlatune_status>(-1)), "unknown status");
  EXPECT_STREQ(mlatune_version(), MLATUNE_EXPECTED_VERSION);

  const std::string path = temp_path();
  write_test_db(path, standard_spec());
  DbHandle db;
  mlatune_open_options options{"current", 0};
  EXPECT_EQ(open_db(path, &db, &options), MLATUNE_STATUS_OK) << mlatune_last_error();
  options.expected_device = "gfx950";
  EXPECT_EQ(open_db(path, &db, &options), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(mlatune_last_error()), HasSubstr("current"));
  mlatune_db* raw = nullptr;
  EXPECT_EQ(mlatune_open(nullptr, nullptr, &raw), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_open("", nullptr, &raw), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_open(path.c_str(), nullptr, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace mlatune::test_db
