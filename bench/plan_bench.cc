// Cost of the persistent-scheduling planner (kernels/mla_decode/work_plan.h) on the host, per
// decode step: batch 256 with random lengths up to 128k keys, tiles of 64 keys, over 132 and 264
// workers (one or two workgroups per SM of an H200). Issue 4's budget for a whole plan is 2 us.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "mla_decode/work_plan.h"

namespace mlatune {
namespace {

std::vector<int32_t> random_lens(int32_t batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> lens(batch);
  for (int32_t& l : lens) l = 1 + static_cast<int32_t>(rng() % 131072);
  return lens;
}

void BM_PlanWork(benchmark::State& state) {
  const auto batch = static_cast<int32_t>(state.range(0));
  const auto workers = static_cast<int32_t>(state.range(1));
  const std::vector<int32_t> lens = random_lens(batch, 1);
  for (auto _ : state) {
    WorkPlan plan = plan_work(lens, 64, workers, 131072);
    benchmark::DoNotOptimize(plan.pieces.data());
  }
}
BENCHMARK(BM_PlanWork)->Args({1, 132})->Args({64, 132})->Args({256, 132})->Args({256, 264});

}  // namespace
}  // namespace mlatune

BENCHMARK_MAIN();
