#include "tuner/tune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "mla_decode/host/thread_pool.h"
#include "mla_decode/memory.h"
#include "tuner/gate.h"
#include "tuner/heartbeat.h"
#include "tuner/timing.h"
#include "tuner/validation_case.h"

namespace mlatune {
namespace {

// Config values for one parameter, or the variant's declared ones when the config gives none.
std::vector<int32_t> pick_values(const std::vector<int32_t>& configured,
                                 const std::vector<int32_t>& declared, const char* field,
                                 const Variant& v, const TuneConfig& config) {
  if (configured.empty()) return declared;
  for (int32_t x : configured) {
    if (std::find(declared.begin(), declared.end(), x) == declared.end()) {
      std::string allowed;
      for (int32_t d : declared) allowed += (allowed.empty() ? "" : ", ") + std::to_string(d);
      throw config.error_at(
          "params." + std::string(v.name()) + "." + field, std::to_string(x),
          std::to_string(x) + " is outside the variant's declared values [" + allowed + "]");
    }
  }
  return configured;
}

// `bytes` in GB (MB below 1 GB), for messages.
std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  char buf[32];
  std::snprintf(buf, sizeof buf, b >= 1e9 ? "%.1f GB" : "%.1f MB", b >= 1e9 ? b / 1e9 : b / 1e6);
  return buf;
}

// The bytes of the inputs of `cases`.
int64_t inputs_bytes(const std::vector<ValidationCase>& cases) {
  int64_t sum = 0;
  for (const ValidationCase& c : cases) sum += input_bytes(c.spec);
  return sum;
}

std::string format_us(double us, int decimals = 1) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f us", decimals, us);
  return buf;
}

}  // namespace

std::vector<Candidate> enumerate_candidates(const TuneConfig& config, const Registry& registry) {
  for (const std::string& name : config.variants) {
    if (!registry.find(name)) {
      throw config.error_at("variants", name,
                            "unknown variant '" + name + "' (see `mlatune variants`)");
    }
  }
  for (const auto& [name, space] : config.params) {
    if (!registry.find(name)) {
      throw config.error_at("params", name,
                            "unknown variant '" + name + "' (see `mlatune variants`)");
    }
  }
  std::vector<Candidate> out;
  for (const Variant* v : registry.all()) {
    if (backend_name(v->backend()) != config.backend) continue;
    if (!config.variants.empty() && std::find(config.variants.begin(), config.variants.end(),
                                              v->name()) == config.variants.end()) {
      continue;
    }
    ParamSpace space = v->param_space();
    auto it = config.params.find(std::string(v->name()));
    if (it != config.params.end()) {
      const ParamSpace& c = it->second;
      space.kv_splits = pick_values(c.kv_splits, space.kv_splits, "kv_splits", *v, config);
      space.kv_tile = pick_values(c.kv_tile, space.kv_tile, "kv_tile", *v, config);
      space.block_rows = pick_values(c.block_rows, space.block_rows, "block_rows", *v, config);
      space.workers = pick_values(c.workers, space.workers, "workers", *v, config);
    }
    for (const LaunchParams& p : space.enumerate()) out.push_back({v, p});
  }
  if (out.empty()) {
    throw config.error_at("backend", config.backend,
                          "no variant of backend '" + config.backend + "' is selected" +
                              (config.variants.empty() ? "" : " by variants"));
  }
  return out;
}

std::optional<size_t> pick_winner(const std::vector<TrialRecord>& trials,
                                  const std::vector<Candidate>& candidates, double tie_fraction) {
  // The timed trials' medians, one per timing point; a trial timed at one point (or read back
  // from a database, where only the combined median is kept) has its recorded median alone.
  std::vector<size_t> timed;
  std::vector<std::vector<double>> points;
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    if (t.disposition != Disposition::kPassed || !t.time_median_us) continue;
    timed.push_back(i);
    points.push_back(t.point_medians_us.empty() ? std::vector<double>{*t.time_median_us}
                                                : t.point_medians_us);
  }
  if (timed.empty()) return std::nullopt;
  // Trials timed at different numbers of points (not made by one tune) compare by their
  // recorded medians only.
  if (std::any_of(points.begin(), points.end(),
                  [&](const std::vector<double>& p) { return p.size() != points[0].size(); })) {
    for (size_t k = 0; k < timed.size(); ++k) points[k] = {*trials[timed[k]].time_median_us};
  }
  std::vector<double> fastest = points[0];
  for (const std::vector<double>& p : points) {
    for (size_t x = 0; x < p.size(); ++x) fastest[x] = std::min(fastest[x], p[x]);
  }
  // A trial's slowdown: how many times the fastest median it takes at its worst point.
  std::vector<double> slowdown(timed.size(), 0.0);
  for (size_t k = 0; k < timed.size(); ++k) {
    for (size_t x = 0; x < fastest.size(); ++x) {
      slowdown[k] = std::max(slowdown[k], points[k][x] / fastest[x]);
    }
  }
  const double least = *std::min_element(slowdown.begin(), slowdown.end());
  auto rank = [&](size_t k) {
    const Candidate& c = candidates[timed[k]];
    return std::tuple(c.variant->complexity(c.params), slowdown[k], c.variant->name());
  };
  std::optional<size_t> winner;
  for (size_t k = 0; k < timed.size(); ++k) {
    if (slowdown[k] > least * (1.0 + tie_fraction)) continue;
    if (!winner || rank(k) < rank(*winner)) winner = k;
  }
  return timed[*winner];
}

Provenance make_provenance(const TuneConfig& config, const Registry& registry) {
  Provenance p;
  p.tool_version = MLATUNE_VERSION;
  p.device = current_device_info(config.backend);
  p.kernel_build_id = kernel_build_id(registry);
  p.config_name = config.name;
  p.config_hash = config.hash;
  p.config_text = config.text;
  return p;
}

std::vector<VariantRecord> variant_records(const std::vector<Candidate>& candidates) {
  std::vector<VariantRecord> out;
  for (const Candidate& c : candidates) {
    if (!out.empty() && out.back().name == c.variant->name()) continue;
    out.push_back({std::string(c.variant->name()), std::string(backend_name(c.variant->backend())),
                   std::string(c.variant->code_identity()), std::string(c.variant->description())});
  }
  return out;
}

int64_t bucket_input_peak(const BucketKey& b, const TuneConfig& config) {
  const std::vector<ValidationCase> timing =
      make_timing_cases(b, config.sm_scale, config.timing.top_corner);
  const BucketValidator validator(b, config, 1);
  // The pre-timing set is one of the timing set's.
  return std::max(inputs_bytes(validator.cases()), inputs_bytes(timing));
}

void check_inputs_fit(const TuneConfig& config, const std::vector<BucketKey>& buckets,
                      std::string_view where, std::optional<int64_t> available) {
  if (!available) return;
  const BucketKey* worst = nullptr;
  int64_t worst_bytes = 0;
  int64_t too_large = 0;
  for (const BucketKey& b : buckets) {
    int64_t need = 0;
    try {
      need = bucket_input_peak(b, config);
    } catch (const std::invalid_argument& e) {  // e.g. more pages than a pool can index
      throw ConfigError(config.path + ": bucket " + b.to_string() +
                        " cannot be tuned: " + e.what());
    }
    if (need <= *available) continue;
    ++too_large;
    if (need > worst_bytes) {
      worst = &b;
      worst_bytes = need;
    }
  }
  if (!worst) return;
  const std::string what = std::to_string(too_large) + " bucket(s) need more memory for their " +
                           "generated inputs than the " + format_bytes(*available) + " " +
                           std::string(where) + " has available, the largest " +
                           worst->to_string() + " (" + format_bytes(worst_bytes) + " at once)";
  throw ConfigError(config.path + ": " + what +
                    "; narrow batch_edges or kv_len_edges, or tune on a device with more memory");
}

void check_inputs_fit(const TuneConfig& config, const std::vector<Candidate>& candidates,
                      const std::vector<BucketKey>& buckets) {
  std::set<Backend> backends;
  for (const Candidate& c : candidates) backends.insert(c.variant->backend());
  for (Backend backend : backends) {
    check_inputs_fit(config, buckets, "memory of backend " + std::string(backend_name(backend)),
                     memory_space(backend).available_bytes());
  }
}

std::unique_ptr<TuningDb> open_checked_for_tuning(const std::string& path, TuningDb::Mode mode,
                                                  const TuneConfig& config,
                                                  const Registry& registry,
                                                  const std::vector<Candidate>& candidates) {
  auto open = [&] {
    return TuningDb::open_for_tuning(path, mode, make_provenance(config, registry),
                                     variant_records(candidates));
  };
  if (mode == TuningDb::Mode::kCreate) {
    check_inputs_fit(config, candidates, config.buckets());  // before the file exists
    return open();
  }
  std::unique_ptr<TuningDb> db = open();
  std::vector<BucketKey> todo;
  for (const BucketKey& b : config.buckets()) {
    if (!db->has_bucket(b)) todo.push_back(b);
  }
  check_inputs_fit(config, candidates, todo);
  return db;
}

namespace {

// Times a validated candidate on each of the bucket's timing inputs (midpoint first); a failure
// becomes its disposition. With several points the recorded median is the geometric mean of the
// points' medians and the spread that mean times the largest relative spread of a point.
void time_passed(const Candidate& c, const std::vector<const PreparedCase*>& inputs,
                 const std::vector<ValidationCase>& cases, const TimingSettings& settings,
                 const TimerFactory& make_timer, TrialRecord& t) {
  try {
    double log_sum = 0, worst_rel_spread = 0;
    t.point_medians_us.clear();
    int32_t samples = 0;
    std::string method, points;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TimingResult r =
          time_candidate(*c.variant, c.params, *inputs[i], cases[i].label, settings, make_timer);
      log_sum += std::log(r.median_us);
      t.point_medians_us.push_back(r.median_us);
      worst_rel_spread = std::max(worst_rel_spread, r.iqr_us / r.median_us);
      samples += r.samples;
      if (i == 0) method = r.method;
      // Three decimals: enough to replay pick_winner from a database's record.
      points += (i ? ", " : "") + cases[i].label + ": " + format_us(r.median_us, 3);
    }
    const double median = std::exp(log_sum / static_cast<double>(inputs.size()));
    t.time_median_us = median;
    t.time_spread_us = median * worst_rel_spread;
    t.time_samples = samples;
    t.timing_method = inputs.size() == 1
                          ? method
                          : method + "; geometric mean of the medians at " +
                                std::to_string(inputs.size()) + " points (" + points + ")";
  } catch (const std::exception& e) {
    t.disposition = Disposition::kLaunchError;
    t.reason = std::string("failed while timing: ") + e.what();
  }
}

TrialRecord unrun_record(const Candidate& c, Disposition d, std::string reason) {
  TrialRecord t;
  t.variant = std::string(c.variant->name());
  t.params = c.params;
  t.disposition = d;
  t.reason = std::move(reason);
  t.timing_method = "not timed";
  return t;
}

// The trials of one bucket, one per candidate, in candidate order, in three phases so that the
// device holds one set of inputs at a time (the largest buckets' inputs add up to more than an
// 80 GB card holds): pre-timing on the midpoint's inputs; validation on the validation cases;
// timing of the candidates that passed on the timing inputs (midpoint and top corner). Inputs are
// generated where the variant runs, so making the midpoint's twice costs milliseconds.
// *peak_bytes is raised to the most input bytes held at once.
std::vector<TrialRecord> run_bucket(size_t bucket_index, const BucketKey& b,
                                    const TuneConfig& config,
                                    const std::vector<Candidate>& candidates,
                                    const TuneHooks& hooks, Progress& progress,
                                    int64_t& peak_bytes) {
  BucketValidator validator(b, config, hardware_workers());
  const std::vector<ValidationCase> timing_cases =
      make_timing_cases(b, config.sm_scale, config.timing.top_corner);
  const ValidationCase& timing_case = timing_cases.front();  // the midpoint: pre-timing
  std::set<Backend> backends;
  for (const Candidate& c : candidates) backends.insert(c.variant->backend());

  // Each backend's timing inputs (the first `count` timing cases), made once per phase.
  std::map<Backend, std::vector<std::unique_ptr<PreparedCase>>> prepared_timing;
  // Inputs are made outside any candidate: a failure there is the bucket's, not a candidate's.
  auto make_inputs = [&](const char* what, int64_t bytes, const std::function<void()>& make) {
    peak_bytes = std::max(peak_bytes, bytes * static_cast<int64_t>(backends.size()));
    try {
      make();
    } catch (const LaunchError& e) {
      throw LaunchError(b.to_string() + ": making the " + what + " inputs (" + format_bytes(bytes) +
                        ") failed: " + e.what());
    }
  };
  auto prepare_timing = [&](size_t count) {
    const std::vector<ValidationCase> used(timing_cases.begin(), timing_cases.begin() + count);
    make_inputs(count == 1 ? "pre-timing" : "timing", inputs_bytes(used), [&] {
      for (Backend backend : backends) {
        auto& v = prepared_timing[backend];
        for (size_t i = 0; i < count; ++i) {
          heartbeat();
          v.push_back(gate_backend(backend).prepare(timing_cases[i].spec, {}, hardware_workers()));
        }
      }
    });
  };
  auto timing_inputs = [&](Backend backend) {
    std::vector<const PreparedCase*> out;
    for (const auto& p : prepared_timing.at(backend)) out.push_back(p.get());
    return out;
  };

  std::vector<std::optional<TrialRecord>> trials(candidates.size());
  size_t done = 0;
  auto record = [&](size_t ci, TrialRecord t) {
    if (hooks.candidate_failed &&
        (t.disposition == Disposition::kLaunchError || t.disposition == Disposition::kTimedOut)) {
      hooks.candidate_failed(bucket_index, ci, t);
    }
    trials[ci] = std::move(t);
    progress.candidate_done(static_cast<int64_t>(++done));
  };
  auto start = [&](size_t ci) {
    if (hooks.candidate_started) hooks.candidate_started(bucket_index, ci);
  };

  // Candidates a supervisor found to crash or hang the process are recorded, never run again.
  std::vector<size_t> runnable;
  for (size_t ci = 0; ci < candidates.size(); ++ci) {
    auto q = hooks.quarantined.find({bucket_index, ci});
    if (q != hooks.quarantined.end()) {
      record(ci, unrun_record(candidates[ci], q->second.first, q->second.second));
    } else {
      runnable.push_back(ci);
    }
  }

  // Phase 1: pre-time every supported candidate (the validation order, fastest first).
  const TimingSettings& ts = config.timing;
  std::vector<std::pair<double, size_t>> order;  // (pre-timing median, candidate)
  if (ts.prune_factor == 0) {
    for (size_t ci : runnable) order.emplace_back(0.0, ci);
  } else {
    prepare_timing(1);
    TimingSettings quick = ts;
    quick.warmup = 1;
    quick.samples = std::max(ts.prune_samples, 1);
    for (size_t ci : runnable) {
      const Candidate& c = candidates[ci];
      if (!validator.supports(*c.variant, c.params).ok) {
        record(ci, validator.validate(*c.variant, c.params));  // records the refusal
        continue;
      }
      start(ci);
      try {
        const TimingResult r =
            time_candidate(*c.variant, c.params, *prepared_timing.at(c.variant->backend()).front(),
                           timing_case.label, quick, hooks.make_timer);
        order.emplace_back(r.median_us, ci);
      } catch (const std::exception& e) {
        record(ci, unrun_record(c, Disposition::kLaunchError,
                                std::string("failed while pre-timing: ") + e.what()));
      }
    }
    std::stable_sort(order.begin(), order.end());
    prepared_timing.clear();
  }

  // Phase 2: validate, fastest first; with prune_factor, those over prune_factor x the fastest
  // that passed are pruned instead.
  if (!order.empty()) {
    make_inputs("validation", inputs_bytes(validator.cases()), [&] {
      for (Backend backend : backends) validator.prepare(backend);
    });
  }
  std::vector<std::pair<size_t, TrialRecord>> passed;
  std::optional<double> fastest_passed;
  for (const auto& [quick_us, ci] : order) {
    if (ts.prune_factor > 0 && fastest_passed && quick_us > *fastest_passed * ts.prune_factor) {
      char why[160];
      std::snprintf(why, sizeof why,
                    "not validated: pre-timing median %.1f us is %.2fx the %.1f us of the "
                    "fastest candidate that passed (prune_factor %.2f)",
                    quick_us, quick_us / *fastest_passed, *fastest_passed, ts.prune_factor);
      record(ci, unrun_record(candidates[ci], Disposition::kPruned, why));
      continue;
    }
    start(ci);
    TrialRecord t = validator.validate(*candidates[ci].variant, candidates[ci].params);
    t.timing_method = "not timed";
    if (t.disposition != Disposition::kPassed) {
      record(ci, std::move(t));
      continue;
    }
    if (!fastest_passed) fastest_passed = quick_us;
    passed.emplace_back(ci, std::move(t));
  }
  validator.release();

  // Phase 3: time the candidates that passed.
  if (!passed.empty()) prepare_timing(timing_cases.size());
  for (auto& [ci, t] : passed) {
    const Candidate& c = candidates[ci];
    start(ci);
    time_passed(c, timing_inputs(c.variant->backend()), timing_cases, ts, hooks.make_timer, t);
    record(ci, std::move(t));
  }
  std::vector<TrialRecord> out;
  out.reserve(trials.size());
  for (auto& t : trials) out.push_back(std::move(*t));
  return out;
}

}  // namespace

TuneSummary tune(const TuneConfig& config, const std::vector<Candidate>& candidates, TuningDb& db,
                 Progress& progress, const TuneHooks& hooks) {
  auto start = std::chrono::steady_clock::now();
  const std::vector<BucketKey> buckets = config.buckets();
  TuneSummary summary;
  summary.buckets = static_cast<int64_t>(buckets.size());
  for (size_t bi = 0; bi < buckets.size(); ++bi) {
    const BucketKey& b = buckets[bi];
    if (db.has_bucket(b)) {
      ++summary.skipped;
      progress.bucket_skipped(b.to_string());
      continue;
    }
    progress.bucket_started(static_cast<int64_t>(bi), b.to_string(),
                            static_cast<int64_t>(candidates.size()));
    std::vector<TrialRecord> trials =
        run_bucket(bi, b, config, candidates, hooks, progress, summary.peak_input_bytes);
    std::optional<size_t> winner = pick_winner(trials, candidates, config.timing.tie_fraction);
    db.write_bucket(b, trials, winner);
    if (hooks.bucket_recorded) hooks.bucket_recorded(bi, winner.has_value());
    int64_t passed = std::count_if(trials.begin(), trials.end(), [](const TrialRecord& t) {
      return t.disposition == Disposition::kPassed;
    });
    std::string counts = std::to_string(passed) + "/" + std::to_string(trials.size()) + " passed";
    if (winner) {
      ++summary.tuned;
      const TrialRecord& w = trials[*winner];
      progress.bucket_done(w.variant + " " + w.params.to_string() + " " +
                           format_us(*w.time_median_us) + ", " + counts);
    } else {
      ++summary.no_valid;
      progress.bucket_done("NO VALID CANDIDATE, " + counts);
    }
  }
  if (summary.peak_input_bytes > 0) {
    progress.message("generated inputs: at most " + format_bytes(summary.peak_input_bytes) +
                     " held at once");
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace mlatune
