#include "tuner/verify.h"

#include <unistd.h>

#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>

#include "common/sha256.h"
#include "db/tuning_db.h"
#include "mla_decode/host/thread_pool.h"
#include "mla_decode/memory.h"
#include "runtime/winner_table.h"
#include "tuner/gate.h"
#include "tuner/staleness.h"
#include "tuner/worker_process.h"

namespace mlatune {
namespace {

enum class Outcome { kPassed, kFailed, kStale };

struct WinnerHooks {
  std::function<void(int64_t index, const std::string& what)> started;
  std::function<void(int64_t index, Outcome, const Variant*)> finished;
};

// Verifies the winners from the `first`-th on (winners numbered in bucket order), printing the
// header line when first == 0. Returns the counts of those winners, and no_valid of the whole
// database.
VerifySummary verify_winners(const std::string& path, const Registry& registry,
                             bool allow_foreign_device, std::FILE* out, int64_t first,
                             const WinnerHooks& hooks) {
  auto db = TuningDb::open_read_only(path);
  const Provenance p = db->provenance();
  if (sha256_hex(p.config_text) != p.config_hash) {
    throw DbError(SQLITE_CORRUPT, path + ": the stored config does not match its hash " +
                                      p.config_hash.substr(0, 12) + " (damaged or doctored)");
  }
  TuneConfig config =
      parse_config(p.config_text, path + " (stored config '" + p.config_name + "')");
  config.name = p.config_name;
  const DeviceInfo device = current_device_info(config.backend);
  // The runtime's own checks first: integrity, schema, device, stale winners.
  OpenOptions options;
  options.expected_device = device;
  options.allow_foreign_device = allow_foreign_device;
  options.registry = &registry;
  try {
    WinnerTable::open(path, options);
  } catch (const RuntimeError& e) {
    throw DbError(SQLITE_ERROR, e.what());
  }
  std::map<std::string, std::string> identity;
  for (const VariantRecord& v : db->variants()) identity[v.name] = v.code_identity;

  if (first == 0) {
    std::fprintf(out, "verifying %s (config %s, tuned on %s) on %s\n", path.c_str(),
                 p.config_name.c_str(), p.device.to_string().c_str(), device.to_string().c_str());
    std::fflush(out);
  }
  VerifySummary s;
  int64_t index = -1;
  for (const BucketSummary& b : db->buckets()) {
    if (!b.winner) {
      ++s.no_valid;
      continue;
    }
    if (++index < first) continue;
    const TrialRecord& w = *b.winner;
    const Variant* v = registry.find(w.variant);
    const std::string what = b.bucket.to_string() + " " + w.variant + " " + w.params.to_string();
    if (hooks.started) hooks.started(index, what);
    Outcome outcome;
    const Staleness stale = staleness_of(registry, w.variant, identity[w.variant]);
    if (stale != Staleness::kCurrent) {
      outcome = Outcome::kStale;
      ++s.stale;
      std::fprintf(out, "STALE %s: %s\n", what.c_str(),
                   stale == Staleness::kNotInBuild
                       ? "the variant is not in this build (a database from another build?)"
                       : "the variant's code differs from the tuned one");
    } else {
      BucketValidator validator(b.bucket, config, hardware_workers());
      const TrialRecord t = validator.validate(*v, w.params);
      if (t.disposition == Disposition::kPassed) {
        outcome = Outcome::kPassed;
        ++s.passed;
        std::fprintf(out, "ok    %s: worst %.3gx tolerance (tuned %.3gx), %lld rows\n",
                     what.c_str(), t.max_rel_err.value_or(0), w.max_rel_err.value_or(0),
                     static_cast<long long>(t.rows_checked));
      } else {
        outcome = Outcome::kFailed;
        ++s.failed;
        std::fprintf(out, "FAIL  %s: %s: %s at %s\n", what.c_str(),
                     std::string(disposition_name(t.disposition)).c_str(), t.reason.c_str(),
                     t.worst_row.c_str());
      }
    }
    std::fflush(out);
    if (hooks.finished) hooks.finished(index, outcome, v);
  }
  return s;
}

// Lines the verify worker sends (worker_process.h):
//   start I WHAT | result I passed|failed|stale | lost | novalid N | error KIND MESSAGE | done
// "lost": the device did not survive the failed winner before it; the worker stops and the next
// worker goes on after that winner.
VerifySummary verify_isolated(const std::string& path, const Registry& registry,
                              const VerifyOptions& options, std::FILE* out) {
  VerifySummary total;
  int64_t next = 0;
  for (int restarts = 0;; ++restarts) {
    int64_t in_flight = -1;
    std::string what;
    std::string error;
    bool done = false;
    bool lost = false;
    auto on_line = [&](const std::string& line) {
      std::istringstream in(line);
      std::string verb;
      in >> verb;
      if (verb == "start") {
        in >> in_flight;
        std::getline(in >> std::ws, what);
      } else if (verb == "result") {
        int64_t i = 0;
        std::string outcome;
        in >> i >> outcome;
        ++(outcome == "passed" ? total.passed : outcome == "stale" ? total.stale : total.failed);
        in_flight = -1;
        next = i + 1;
      } else if (verb == "lost") {
        lost = true;
      } else if (verb == "novalid") {
        in >> total.no_valid;
      } else if (verb == "error") {
        std::getline(in >> std::ws, error);
      } else if (verb == "done") {
        done = true;
      }
    };
    auto body = [&](const worker::Channel& ch) {
      return worker::report_errors(ch, [&] {
        WinnerHooks hooks;
        hooks.started = [&ch](int64_t i, const std::string& w) {
          ch.send("start " + std::to_string(i) + " " + w);
        };
        hooks.finished = [&ch](int64_t i, Outcome o, const Variant* v) {
          ch.send("result " + std::to_string(i) + " " +
                  (o == Outcome::kPassed  ? "passed"
                   : o == Outcome::kStale ? "stale"
                                          : "failed"));
          if (o != Outcome::kFailed) return;
          // A fault can leave the device unusable for every later winner: find out now.
          try {
            memory_space(v->backend()).synchronize();
          } catch (const std::exception&) {
            ch.send("lost");
            std::fflush(nullptr);
            _exit(worker::kExitDeviceLost);
          }
        };
        const VerifySummary part =
            verify_winners(path, registry, options.allow_foreign_device, out, next, hooks);
        ch.send("novalid " + std::to_string(part.no_valid));
        ch.send("done");
      });
    };
    std::fflush(out);  // the worker inherits `out`'s buffer
    const worker::Ended end = worker::run_supervised(body, on_line, options.watchdog_s);
    if (done) break;
    if (!error.empty()) worker::rethrow(error);
    if (lost && in_flight < 0) {
      std::fprintf(out, "(the device did not survive that failure: going on in a new worker)\n");
      std::fflush(out);
    } else if (in_flight < 0) {
      throw std::runtime_error("the verify worker died (" + end.describe() +
                               ") while no winner was running");
    } else {
      ++total.failed;
      const std::string why = end.watchdog
                                  ? "hung: no progress for " +
                                        std::to_string(static_cast<int>(options.watchdog_s)) +
                                        " s; the watchdog killed the verify worker"
                                  : "crashed the verify worker: " + end.describe();
      std::fprintf(out, "FAIL  %s: %s\n", what.c_str(), why.c_str());
      std::fflush(out);
      next = in_flight + 1;
    }
    if (restarts + 1 >= options.max_restarts) {
      throw std::runtime_error("the verify worker was restarted " + std::to_string(restarts + 1) +
                               " times; giving up");
    }
  }
  return total;
}

}  // namespace

VerifySummary verify_database(const std::string& path, const Registry& registry,
                              const VerifyOptions& options, std::FILE* out) {
  const VerifySummary s =
      options.isolated
          ? verify_isolated(path, registry, options, out)
          : verify_winners(path, registry, options.allow_foreign_device, out, 0, WinnerHooks{});
  std::fprintf(out,
               "verified %lld winners: %lld passed, %lld failed, %lld stale (%lld buckets have "
               "no valid kernel)\n",
               static_cast<long long>(s.passed + s.failed + s.stale),
               static_cast<long long>(s.passed), static_cast<long long>(s.failed),
               static_cast<long long>(s.stale), static_cast<long long>(s.no_valid));
  return s;
}

}  // namespace mlatune
