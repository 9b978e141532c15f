// Timing of validated candidates (design.md §5), on Google Benchmark's machinery: manual time per
// sample, repetitions, median and interquartile-range aggregates.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "mla_decode/gate_backend.h"
#include "mla_decode/memory.h"
#include "mla_decode/variant.h"
#include "tuner/config.h"

namespace mlatune {

struct TimingResult {
  double median_us = 0;
  double iqr_us = 0;  // interquartile range of the samples
  int32_t samples = 0;
  std::string method;  // how it was measured, stored with the trial
};

// Makes the timer that measures each timed run in a memory space. Empty: the space's own timer
// (host clock, device events). Tests give one that reads a scripted clock, so that what they
// assert about timings does not depend on the load of the machine.
using TimerFactory = std::function<std::unique_ptr<IntervalTimer>(MemorySpace&)>;

// Times `variant` with `params` on `input` (prepared in the memory of the variant's backend,
// described by `input_label` in the method): settings.warmup untimed runs, then settings.samples
// samples of one run each, measured by the memory space's timer (host clock or device events)
// around the run only; with cold_cache, settings.flush_bytes of memory are written before every
// sample to evict the caches; `make_timer`, when given, makes the timer instead. Throws
// LaunchError if a run fails.
TimingResult time_candidate(const Variant& variant, const LaunchParams& params,
                            const PreparedCase& input, const std::string& input_label,
                            const TimingSettings& settings, const TimerFactory& make_timer = {});

}  // namespace mlatune
