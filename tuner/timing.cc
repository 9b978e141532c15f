#include "tuner/timing.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "mla_decode/memory.h"
#include "tuner/heartbeat.h"

namespace mlatune {
namespace {

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Collects the median and IQR aggregates of the one benchmark it is given; prints nothing.
class AggregateCollector : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) error = r.error_message;
      if (r.run_type != Run::RT_Aggregate) {
        ++samples;
        continue;
      }
      if (r.aggregate_name == "median") median_us = r.GetAdjustedRealTime();
      if (r.aggregate_name == "iqr") iqr_us = r.GetAdjustedRealTime();
    }
  }
  double median_us = -1, iqr_us = -1;
  int32_t samples = 0;
  std::string error;
};

void init_benchmark_library() {
  static std::once_flag once;
  std::call_once(once, [] {
    static char name[] = "mlatune";
    static char* argv[] = {name, nullptr};
    int argc = 1;
    benchmark::Initialize(&argc, argv);
  });
}

}  // namespace

TimingResult time_candidate(const Variant& variant, const LaunchParams& params,
                            const PreparedCase& input, const std::string& input_label,
                            const TimingSettings& settings, const TimerFactory& make_timer) {
  init_benchmark_library();
  MemorySpace& memory = memory_space(variant.backend());
  const DecodeShape& s = input.spec().shape;
  DeviceBuffer out(memory, static_cast<size_t>(s.out_elems()) * sizeof(uint16_t));
  DeviceBuffer lse(memory, s.return_lse ? static_cast<size_t>(s.rows()) * sizeof(float) : 0);
  DeviceBuffer ws(memory, variant.workspace_bytes(s, params));
  DecodeArgs a = input.args();
  a.out = static_cast<uint16_t*>(out.data());
  a.lse = static_cast<float*>(lse.data());
  a.workspace = ws.data();
  a.workspace_bytes = ws.size();
  // Planned once, as a serving stack plans a decode step on the host before launching it.
  const std::vector<int32_t> plan = plan_launch(variant, s, params, input.spec().kv_lens);
  a.plan = plan.empty() ? nullptr : plan.data();
  a.plan_words = plan.size();

  for (int32_t i = 0; i < settings.warmup; ++i) {
    heartbeat();
    variant.run(s, params, a);
  }
  memory.synchronize();

  std::unique_ptr<IntervalTimer> timer = make_timer ? make_timer(memory) : memory.make_timer();
  std::string launch_error;
  auto body = [&](benchmark::State& state) {
    for (auto _ : state) {
      try {
        heartbeat();
        if (settings.cold_cache) memory.flush_caches(static_cast<size_t>(settings.flush_bytes));
        timer->start();
        variant.run(s, params, a);
        timer->stop();
        state.SetIterationTime(timer->seconds());
      } catch (const std::exception& e) {
        launch_error = e.what();
        state.SkipWithError("launch failed");
        break;
      }
    }
  };
  benchmark::ClearRegisteredBenchmarks();
  benchmark::RegisterBenchmark("candidate", body)
      ->Iterations(1)
      ->Repetitions(settings.samples)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->ComputeStatistics("iqr", [](const std::vector<double>& v) {
        return quantile(v, 0.75) - quantile(v, 0.25);
      });
  AggregateCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  benchmark::ClearRegisteredBenchmarks();
  memory.synchronize();
  if (!launch_error.empty()) throw LaunchError(launch_error);
  if (!collector.error.empty() || collector.median_us < 0) {
    throw LaunchError("timing failed: " +
                      (collector.error.empty() ? std::string("no median") : collector.error));
  }
  TimingResult r;
  r.median_us = collector.median_us;
  r.iqr_us = std::max(0.0, collector.iqr_us);
  r.samples = collector.samples;
  r.method = std::string(memory.timer_description()) + " around run(), Google Benchmark manual " +
             "time, " + std::to_string(settings.warmup) + " warm-up, " + std::to_string(r.samples) +
             " samples, median + IQR, " +
             (settings.cold_cache ? std::to_string(settings.flush_bytes >> 20) +
                                        " MiB cache flush before each sample"
                                  : std::string("warm cache")) +
             ", input " + input_label;
  return r;
}

}  // namespace mlatune
