// Cost of the runtime's two operations on a realistic large table: mlatune_lookup (hits and
// misses, through the C API as a serving stack calls it) and mlatune_open (integrity checks,
// digest, load). The database has 8 discrete keys x 35 batch buckets x 36 kv buckets = 10 080
// buckets and is written to a temporary file at start-up.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "mlatune/mlatune.h"
#include "runtime/test_db.h"

namespace mlatune {
namespace {

constexpr int kBatchBuckets = 35;
constexpr int kKvBuckets = 36;
constexpr int32_t kBatchWidth = 16;  // batch buckets 1..16, 17..32, ..., 545..560
constexpr int32_t kKvWidth = 4096;   // kv buckets 1..4096, ..., up to 147 456
constexpr int kProbeKeys = 1 << 14;  // cycled through, so that branches cannot be learnt

std::string g_path;

std::vector<DecodeKey> discrete_keys() {
  std::vector<DecodeKey> keys;
  for (int32_t heads : {16, 32, 64, 128}) {
    for (bool lse : {false, true}) {
      keys.push_back(test_db::make_key(heads, 1, DType::kBF16, DType::kBF16, 64, lse));
    }
  }
  return keys;
}

void write_bench_db(const std::string& path) {
  test_db::TestDbSpec spec;
  const char* variants[] = {"host_split_kv_v1", "host_tiled_kv_v1", "host_online_softmax_v1"};
  int n = 0;
  for (const DecodeKey& k : discrete_keys()) {
    for (int i = 0; i < kBatchBuckets; ++i) {
      for (int j = 0; j < kKvBuckets; ++j) {
        test_db::TestBucket b;
        b.key = k;
        b.batch_lo = 1 + i * kBatchWidth;
        b.batch_hi = (i + 1) * kBatchWidth;
        b.kv_lo = 1 + j * kKvWidth;
        b.kv_hi = (j + 1) * kKvWidth;
        b.variant = variants[n++ % 3];
        spec.buckets.push_back(b);
      }
    }
  }
  spec.wal = true;
  test_db::write_test_db(path, spec);
}

mlatune_decode_key to_c(const DecodeKey& k, int32_t batch, int32_t kv) {
  return {k.heads,
          k.qlen,
          static_cast<int32_t>(k.q_dtype),
          static_cast<int32_t>(k.kv_dtype),
          k.page_size,
          k.lse ? 1 : 0,
          batch,
          kv};
}

std::vector<mlatune_decode_key> probe_keys(bool hits) {
  const std::vector<DecodeKey> keys = discrete_keys();
  std::mt19937 rng(2024);
  std::vector<mlatune_decode_key> out;
  for (int i = 0; i < kProbeKeys; ++i) {
    DecodeKey k = keys[rng() % keys.size()];
    int32_t batch = 1 + static_cast<int32_t>(rng() % (kBatchBuckets * kBatchWidth));
    const int32_t kv = 1 + static_cast<int32_t>(rng() % (kKvBuckets * kKvWidth));
    if (!hits) {
      // Half untuned discrete keys, half tuned keys with a batch beyond every bucket.
      if (i % 2) {
        k.page_size = 32;
      } else {
        batch += kBatchBuckets * kBatchWidth;
      }
    }
    out.push_back(to_c(k, batch, kv));
  }
  return out;
}

struct Handle {
  Handle() {
    if (mlatune_open(g_path.c_str(), nullptr, &db) != MLATUNE_STATUS_OK) {
      std::fprintf(stderr, "mlatune_open: %s\n", mlatune_last_error());
      std::exit(1);
    }
  }
  ~Handle() { mlatune_close(db); }
  mlatune_db* db = nullptr;
};

void run_lookups(benchmark::State& state, bool hits) {
  Handle h;
  const std::vector<mlatune_decode_key> keys = probe_keys(hits);
  const mlatune_status want = hits ? MLATUNE_STATUS_OK : MLATUNE_STATUS_UNTUNED;
  mlatune_selection sel;
  size_t i = 0;
  for (auto _ : state) {
    const mlatune_status s = mlatune_lookup(h.db, &keys[i], &sel);
    if (s != want) [[unlikely]] {
      state.SkipWithError(mlatune_last_error());
      break;
    }
    benchmark::DoNotOptimize(sel);
    i = (i + 1) & (kProbeKeys - 1);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_LookupHit(benchmark::State& state) { run_lookups(state, true); }
void BM_LookupMiss(benchmark::State& state) { run_lookups(state, false); }

void BM_Open(benchmark::State& state) {
  for (auto _ : state) {
    mlatune_db* db = nullptr;
    if (mlatune_open(g_path.c_str(), nullptr, &db) != MLATUNE_STATUS_OK) {
      state.SkipWithError(mlatune_last_error());
      break;
    }
    mlatune_close(db);
  }
}

BENCHMARK(BM_LookupHit);
BENCHMARK(BM_LookupMiss);
BENCHMARK(BM_Open)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mlatune

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  mlatune::g_path = (std::filesystem::temp_directory_path() /
                     ("mlatune_bench_lookup_" + std::to_string(::getpid()) + ".db"))
                        .string();
  mlatune::write_bench_db(mlatune::g_path);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  mlatune::test_db::remove_db_files(mlatune::g_path);
  return 0;
}
