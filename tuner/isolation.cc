#include "tuner/isolation.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "mla_decode/memory.h"
#include "tuner/worker_process.h"

namespace mlatune {
namespace {

using worker::Channel;

// Lines the worker sends (worker_process.h):
//   start B C | bucket B tuned|none | fault B C REASON | error KIND MESSAGE | done
struct WorkerJob {
  const TuneConfig* config;
  const std::vector<Candidate>* candidates;
  const Registry* registry;
  std::string db_path;
  TuningDb::Mode mode;
  bool live;
  bool announce;  // print the "tuning ..." line (first worker only)
  std::map<std::pair<size_t, size_t>, std::pair<Disposition, std::string>> quarantined;
};

int run_worker(const WorkerJob& job, const Channel& ch) {
  return worker::report_errors(ch, [&] {
    const TuneConfig& config = *job.config;
    const DeviceInfo device = current_device_info(config.backend);
    std::unique_ptr<TuningDb> db =
        open_checked_for_tuning(job.db_path, job.mode, config, *job.registry, *job.candidates);
    const int64_t buckets = static_cast<int64_t>(config.buckets().size());
    if (job.announce) {
      std::fprintf(stderr, "tuning %s: %lld buckets x %zu candidates on %s (isolated worker)\n",
                   config.name.c_str(), static_cast<long long>(buckets), job.candidates->size(),
                   device.to_string().c_str());
    }
    Progress progress(stderr, job.live, buckets);
    TuneHooks hooks;
    hooks.quarantined = job.quarantined;
    hooks.candidate_started = [&ch](size_t b, size_t c) {
      ch.send("start " + std::to_string(b) + " " + std::to_string(c));
    };
    hooks.candidate_failed = [&](size_t b, size_t c, const TrialRecord& t) {
      // A fault can leave the device unusable for every later candidate: find out now.
      try {
        memory_space((*job.candidates)[c].variant->backend()).synchronize();
      } catch (const std::exception& e) {
        ch.send("fault " + std::to_string(b) + " " + std::to_string(c) + " " + t.reason +
                " (the device was unusable afterwards: " + e.what() + ")");
        std::fflush(stderr);
        _exit(worker::kExitDeviceLost);
      }
    };
    hooks.bucket_recorded = [&ch](size_t b, bool has_winner) {
      ch.send("bucket " + std::to_string(b) + (has_winner ? " tuned" : " none"));
    };
    tune(config, *job.candidates, *db, progress, hooks);
    db->finalize();
    db.reset();
    ch.send("done");
  });
}

// What a finished worker left behind.
struct WorkerEnd {
  bool done = false;  // it sent "done"
  std::optional<std::pair<size_t, size_t>> in_flight;
  std::string fault;                // reason of a "fault" line
  std::string error;                // "KIND MESSAGE" of an "error" line
  std::string death;                // how it died, when not by exit
  bool watchdog = false;            // killed by the watchdog
  std::map<size_t, bool> recorded;  // bucket -> has a winner
};

WorkerEnd supervise(const WorkerJob& job, double watchdog_s) {
  WorkerEnd end;
  auto handle = [&](const std::string& line) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "start") {
      size_t b = 0, c = 0;
      in >> b >> c;
      end.in_flight = std::pair(b, c);
    } else if (verb == "bucket") {
      size_t b = 0;
      std::string outcome;
      in >> b >> outcome;
      end.recorded[b] = outcome == "tuned";
      end.in_flight.reset();
    } else if (verb == "fault") {
      size_t b = 0, c = 0;
      in >> b >> c;
      end.in_flight = std::pair(b, c);
      std::getline(in >> std::ws, end.fault);
    } else if (verb == "error") {
      std::getline(in >> std::ws, end.error);
    } else if (verb == "done") {
      end.done = true;
    }
  };
  const worker::Ended how = worker::run_supervised(
      [&job](const Channel& ch) { return run_worker(job, ch); }, handle, watchdog_s);
  end.watchdog = how.watchdog;
  if (how.signal != 0 || (how.exit_code != 0 && end.error.empty() && end.fault.empty())) {
    end.death = how.describe();
  }
  return end;
}

}  // namespace

double watchdog_seconds(const TuneConfig& config) {
  return std::max(60.0, 3.0 * config.timing.candidate_timeout_s);
}

TuneSummary tune_isolated(const TuneConfig& config, const std::vector<Candidate>& candidates,
                          const Registry& registry, const std::string& db_path, TuningDb::Mode mode,
                          bool live_progress, const IsolationSettings& settings) {
  const auto start = std::chrono::steady_clock::now();
  WorkerJob job{&config, &candidates, &registry, db_path, mode, live_progress, true, {}};
  TuneSummary summary;
  summary.buckets = static_cast<int64_t>(config.buckets().size());
  std::map<size_t, bool> recorded;
  for (int restarts = 0;; ++restarts) {
    const WorkerEnd end = supervise(job, settings.watchdog_s);
    recorded.insert(end.recorded.begin(), end.recorded.end());
    if (end.done) break;
    if (!end.error.empty()) worker::rethrow(end.error);
    if (!end.in_flight) {
      throw std::runtime_error(
          "the tuning worker " +
          (end.watchdog ? "hung (no progress for " + std::to_string(settings.watchdog_s) + " s)"
                        : "died (" + end.death + ")") +
          " while no candidate was running (preparing a bucket's inputs "
          "or writing the database)");
    }
    std::pair<Disposition, std::string> verdict;
    if (end.watchdog) {
      verdict = {Disposition::kTimedOut, "hung: no progress for " +
                                             std::to_string(static_cast<int>(settings.watchdog_s)) +
                                             " s; the watchdog killed the tuning worker"};
    } else if (!end.fault.empty()) {
      verdict = {Disposition::kLaunchError, "device fault: " + end.fault};
    } else {
      verdict = {Disposition::kLaunchError, "crashed the tuning worker: " + end.death};
    }
    const Candidate& c = candidates.at(end.in_flight->second);
    std::fprintf(stderr, "mlatune: %s %s of bucket %zu: %s; restarting the worker\n",
                 std::string(c.variant->name()).c_str(), c.params.to_string().c_str(),
                 end.in_flight->first + 1, verdict.second.c_str());
    job.quarantined[*end.in_flight] = verdict;
    if (restarts + 1 >= settings.max_restarts) {
      throw std::runtime_error("the tuning worker was restarted " + std::to_string(restarts + 1) +
                               " times; giving up");
    }
    job.mode = TuningDb::Mode::kResume;
    job.announce = false;
  }
  for (const auto& [bucket, has_winner] : recorded)
    ++(has_winner ? summary.tuned : summary.no_valid);
  // Every bucket not recorded by this run's workers was in the database before it.
  summary.skipped = summary.buckets - static_cast<int64_t>(recorded.size());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace mlatune
