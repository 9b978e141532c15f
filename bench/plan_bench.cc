// Cost of the persistent-scheduling planner on the host, per decode step: batch 256 with random
// lengths up to 128k keys, tiles of 64 keys, over 132 and 264 workers (one or two workgroups per
// SM of an H200), written into a buffer sized once as the runtime's plan object is. The runtime's
// budget for a whole plan is 2 us (docs/design.md §7). BM_WriteLaunchPlan is the allocation-free
// writer (plan_writer.h) that planning uses; BM_PlanWorkEncode the same plan through plan_work and
// encode_plan (work_plan.h), which hip_mma_fp8kv_persistent_v1 still uses (plan_writer.h says why).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "mla_decode/launch_plan.h"
#include "mla_decode/plan_writer.h"
#include "mla_decode/work_plan.h"

namespace mlatune {
namespace {

std::vector<int32_t> random_lens(int32_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> lens(batch);
  for (int32_t& l : lens) l = 1 + static_cast<int32_t>(rng() % 131072);
  return lens;
}

template <bool kWriter>
void plan_launches(benchmark::State& state) {
  const auto batch = static_cast<int32_t>(state.range(0));
  const auto workers = static_cast<int32_t>(state.range(1));
  const std::vector<int32_t> lens = random_lens(batch, 1);
  std::vector<int32_t> words(static_cast<size_t>(max_plan_words(batch, workers)));
  for (auto _ : state) {
    if constexpr (kWriter) {
      benchmark::DoNotOptimize(write_launch_plan(lens, 64, workers, 131072, words));
    } else {
      benchmark::DoNotOptimize(encode_plan(plan_work(lens, 64, workers, 131072), words));
    }
    benchmark::ClobberMemory();
  }
}
void BM_WriteLaunchPlan(benchmark::State& state) { plan_launches<true>(state); }
void BM_PlanWorkEncode(benchmark::State& state) { plan_launches<false>(state); }
BENCHMARK(BM_WriteLaunchPlan)->Args({1, 132})->Args({64, 132})->Args({256, 132})->Args({256, 264});
BENCHMARK(BM_PlanWorkEncode)->Args({1, 132})->Args({64, 132})->Args({256, 132})->Args({256, 264});

}  // namespace
}  // namespace mlatune

BENCHMARK_MAIN();
