// Cost of the runtime's operations on a large table, through the C API as a serving stack calls
// them: mlatune_lookup (hits and misses), mlatune_open (integrity checks, digest, load) and
// mlatune_plan_decode at batch 256 (lookup, checks, the host work partition of a persistent
// winner). The lookup database has 80 discrete keys x 35 batch buckets x 36 kv buckets = 100 800
// buckets, as a finished tune leaves it (with its dispatch snapshot); BM_OpenRows opens the same
// buckets written as a tune in progress leaves them (WAL mode, no snapshot: the rows are read).
// The databases are written to temporary files at start-up.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
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

std::string g_path;       // the lookup database
std::string g_rows_path;  // the same buckets in WAL mode, without a dispatch snapshot
std::string g_plan_path;  // the plan database

std::vector<DecodeKey> discrete_keys() {
  std::vector<DecodeKey> keys;
  for (int32_t heads : {16, 32, 64, 128}) {
    for (int32_t qlen : {1, 2, 4, 8, 16}) {
      for (int32_t page : {16, 64}) {
        for (bool lse : {false, true}) {
          keys.push_back(test_db::make_key(heads, qlen, DType::kBF16, DType::kBF16, page, lse));
        }
      }
    }
  }
  return keys;
}

void write_bench_db(const std::string& path, bool finished = true) {
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
  // finished: as a finished tune leaves it (rollback-journal mode, with its dispatch snapshot);
  // else as a tune in progress (WAL mode, no snapshot).
  spec.wal = !finished;
  spec.snapshot = finished;
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
    const int32_t kv = std::max(k.qlen, 1 + static_cast<int32_t>(rng() % (kKvBuckets * kKvWidth)));
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

// working_set: how many distinct probes are cycled through (a power of two). All kProbeKeys
// spread over the whole 100 800-bucket table measure the cold case (each lookup misses the
// caches); a serving process sees a few shapes per model, which stay cached (the hot case).
void run_lookups(benchmark::State& state, bool hits, size_t working_set = kProbeKeys) {
  Handle h;
  const std::vector<mlatune_decode_key> keys = probe_keys(hits);
  const size_t mask = working_set - 1;
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
    i = (i + 1) & mask;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_LookupHit(benchmark::State& state) { run_lookups(state, true); }
void BM_LookupHitHot64(benchmark::State& state) { run_lookups(state, true, 64); }
void BM_LookupMiss(benchmark::State& state) { run_lookups(state, false); }

void run_opens(benchmark::State& state, const std::string& path, const char* loaded_from) {
  for (auto _ : state) {
    mlatune_db* db = nullptr;
    if (mlatune_open(path.c_str(), nullptr, &db) != MLATUNE_STATUS_OK) {
      state.SkipWithError(mlatune_last_error());
      break;
    }
    if (!std::strstr(mlatune_db_info(db), loaded_from)) [[unlikely]] {
      state.SkipWithError(mlatune_db_info(db));
      mlatune_close(db);
      break;
    }
    mlatune_close(db);
  }
}

void BM_Open(benchmark::State& state) {
  run_opens(state, g_path, "loaded from its dispatch snapshot");
}
void BM_OpenRows(benchmark::State& state) { run_opens(state, g_rows_path, "loaded from its rows"); }

// One key per winner kind, batch 1..256 x kv 1..8192: heads 16 bf16 page 64, lse 0 -> split KV
// (no host plan), lse 1 -> persistent (a host work partition over 64 workers).
const DecodeKey kPlanSplit = test_db::make_key(16, 1, DType::kBF16, DType::kBF16, 64, false);
const DecodeKey kPlanPersistent = test_db::make_key(16, 1, DType::kBF16, DType::kBF16, 64, true);

void write_plan_db(const std::string& path) {
  test_db::TestDbSpec spec;
  spec.buckets.push_back(
      {kPlanSplit, 1, 256, 1, 8192, false, "host_split_kv_v1", LaunchParams{4, 64, 0, 8}, 1.0});
  spec.buckets.push_back({kPlanPersistent, 1, 256, 1, 8192, false, "host_persistent_v1",
                          LaunchParams{1, 64, 0, 64}, 1.0});
  test_db::write_test_db(path, spec);
}

// Plans one batch-256 call with lengths drawn from [1, 8192] (a fresh set per 64 calls).
void run_plans(benchmark::State& state, const DecodeKey& key) {
  mlatune_db* db = nullptr;
  mlatune_plan* plan = nullptr;
  if (mlatune_open(g_plan_path.c_str(), nullptr, &db) != MLATUNE_STATUS_OK ||
      mlatune_plan_create(db, 256, &plan) != MLATUNE_STATUS_OK) {
    state.SkipWithError(mlatune_last_error());
    return;
  }
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> lens(64, std::vector<int32_t>(256));
  for (std::vector<int32_t>& l : lens) {
    for (int32_t& x : l) x = 1 + static_cast<int32_t>(rng() % 8192);
    l[rng() % 256] = 8192;
  }
  mlatune_decode_problem problem{};
  problem.key = to_c(key, 256, 8192);
  problem.q_scale = problem.kv_scale = 1.0f;
  problem.sm_scale = 0.04f;
  problem.max_pages_per_seq = 128;
  problem.num_pages = 256 * 128;
  size_t i = 0;
  for (auto _ : state) {
    if (mlatune_plan_decode(db, &problem, lens[i].data(), plan) != MLATUNE_STATUS_OK) {
      state.SkipWithError(mlatune_last_error());
      break;
    }
    i = (i + 1) & 63;
  }
  mlatune_plan_destroy(plan);
  mlatune_close(db);
}

void BM_PlanBatch256Split(benchmark::State& state) { run_plans(state, kPlanSplit); }
void BM_PlanBatch256Persistent(benchmark::State& state) { run_plans(state, kPlanPersistent); }

BENCHMARK(BM_LookupHit);
BENCHMARK(BM_LookupHitHot64);
BENCHMARK(BM_LookupMiss);
BENCHMARK(BM_Open)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OpenRows)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanBatch256Split);
BENCHMARK(BM_PlanBatch256Persistent)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mlatune

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  mlatune::g_path = (std::filesystem::temp_directory_path() /
                     ("mlatune_bench_lookup_" + std::to_string(::getpid()) + ".db"))
                        .string();
  mlatune::g_plan_path = mlatune::g_path + ".plan.db";
  mlatune::g_rows_path = mlatune::g_path + ".rows.db";
  mlatune::write_bench_db(mlatune::g_path);
  mlatune::write_bench_db(mlatune::g_rows_path, /*finished=*/false);
  mlatune::write_plan_db(mlatune::g_plan_path);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  mlatune::test_db::remove_db_files(mlatune::g_path);
  mlatune::test_db::remove_db_files(mlatune::g_plan_path);
  mlatune::test_db::remove_db_files(mlatune::g_rows_path);
  return 0;
}
