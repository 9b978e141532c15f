#include "tuner/tune.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>

#include "mla_decode/host/thread_pool.h"
#include "mla_decode/memory.h"
#include "tuner/gate.h"
#include "tuner/timing.h"

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
      throw ConfigError(config.path + ": params." + std::string(v.name()) + "." + field + ": " +
                        std::to_string(x) + " is outside the variant's declared values [" +
                        allowed + "]");
    }
  }
  return configured;
}

std::string format_us(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}

}  // namespace

std::vector<Candidate> enumerate_candidates(const TuneConfig& config, const Registry& registry) {
  for (const std::string& name : config.variants) {
    if (!registry.find(name)) {
      throw ConfigError(config.path + ": variants: unknown variant '" + name +
                        "' (see `mlatune variants`)");
    }
  }
  for (const auto& [name, space] : config.params) {
    if (!registry.find(name)) {
      throw ConfigError(config.path + ": params: unknown variant '" + name + "'");
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
    throw ConfigError(config.path + ": no variant of backend '" + config.backend + "' is selected");
  }
  return out;
}

std::optional<size_t> pick_winner(const std::vector<TrialRecord>& trials,
                                  const std::vector<Candidate>& candidates, double tie_fraction) {
  std::optional<double> best;
  for (const TrialRecord& t : trials) {
    if (t.disposition == Disposition::kPassed && t.time_median_us) {
      best = std::min(best.value_or(*t.time_median_us), *t.time_median_us);
    }
  }
  if (!best) return std::nullopt;
  std::optional<size_t> winner;
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    if (t.disposition != Disposition::kPassed || !t.time_median_us) continue;
    if (*t.time_median_us > *best * (1.0 + tie_fraction)) continue;
    if (!winner) {
      winner = i;
      continue;
    }
    const Candidate& a = candidates[i];
    const Candidate& b = candidates[*winner];
    auto rank = [](const Candidate& c) {
      return std::pair(c.variant->complexity(c.params), c.variant->name());
    };
    if (rank(a) < rank(b)) winner = i;
  }
  return winner;
}

Provenance make_provenance(const TuneConfig& config, const Registry& registry) {
  Provenance p;
  p.tool_version = MLATUNE_VERSION;
  p.device = current_device_info(config.backend);
  p.kernel_build_id = kernel_build_id(registry);
  p.config_name = config.name;
  p.config_hash = config.hash;
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

TuneSummary tune(const TuneConfig& config, const std::vector<Candidate>& candidates, TuningDb& db,
                 Progress& progress) {
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
    BucketValidator validator(b, config, hardware_workers());
    ValidationCase timing_input = make_timing_case(b, config.sm_scale);
    // The timing inputs in each backend's memory, uploaded once for all of the bucket's candidates.
    std::map<Backend, std::unique_ptr<DeviceCase>> timing_inputs;
    std::vector<TrialRecord> trials;
    for (size_t ci = 0; ci < candidates.size(); ++ci) {
      const Candidate& c = candidates[ci];
      TrialRecord t = validator.validate(*c.variant, c.params);
      t.timing_method = "not timed";
      if (t.disposition == Disposition::kPassed) {
        try {
          std::unique_ptr<DeviceCase>& dev = timing_inputs[c.variant->backend()];
          if (!dev)
            dev = std::make_unique<DeviceCase>(memory_space(c.variant->backend()), timing_input);
          TimingResult r = time_candidate(*c.variant, c.params, timing_input, *dev, config.timing);
          t.time_median_us = r.median_us;
          t.time_spread_us = r.iqr_us;
          t.time_samples = r.samples;
          t.timing_method = r.method;
        } catch (const std::exception& e) {
          t.disposition = Disposition::kLaunchError;
          t.reason = std::string("failed while timing: ") + e.what();
        }
      }
      trials.push_back(std::move(t));
      progress.candidate_done(static_cast<int64_t>(ci + 1));
    }
    std::optional<size_t> winner = pick_winner(trials, candidates, config.timing.tie_fraction);
    db.write_bucket(b, trials, winner);
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
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace mlatune
