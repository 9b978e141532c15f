// mlatune tune --config FILE --db FILE [--resume] [--in-process]
#include <unistd.h>

#include <cstdio>

#include "db/tuning_db.h"
#include "mla_decode/memory.h"
#include "tuner/cli/guard.h"
#include "tuner/isolation.h"
#include "tuner/tune.h"

namespace mlatune::cli {
namespace {
// A config that cannot be read is a config error (exit code 3), like one that does not parse.
TuneConfig read_config(const std::string& path) {
  try {
    return load_config(path);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(e.what());
  }
}
}  // namespace

void add_tune_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string config, db;
    bool resume = false;
    bool in_process = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "validate and time every candidate for every bucket of a config; record winners");
  cmd->add_option("--config", opts->config, "YAML shape space (configs/*.yaml)")->required();
  cmd->add_option("--db", opts->db, "dispatch database to create (or continue with --resume)")
      ->required();
  cmd->add_flag("--resume", opts->resume,
                "continue an interrupted run: skip buckets already recorded");
  cmd->add_flag("--in-process", opts->in_process,
                "run the candidates in this process instead of a supervised worker (a crashing "
                "or hanging candidate then ends the run)");
  cmd->callback([opts, &exit_code] {
    exit_code = run_guarded([&] {
      TuneConfig config = read_config(opts->config);
      const TuningDb::Mode mode = opts->resume ? TuningDb::Mode::kResume : TuningDb::Mode::kCreate;
      const bool live = isatty(fileno(stderr)) == 1;
      Registry registry = builtin_registry();
      TuneSummary s;
      if (!opts->in_process) {
        // The worker checks the device (exit code 7 without one) and runs every candidate; this
        // process only refuses a backend the build lacks, before naming missing variants.
        require_backend_built(config.backend);
        std::vector<Candidate> candidates = enumerate_candidates(config, registry);
        IsolationSettings isolation;
        isolation.watchdog_s = watchdog_seconds(config);
        s = tune_isolated(config, candidates, registry, opts->db, mode, live, isolation);
      } else {
        // The device first: a GPU config on a CPU-only build or machine is refused as such, not
        // as a config naming variants this build lacks.
        const DeviceInfo device = current_device_info(config.backend);
        std::vector<Candidate> candidates = enumerate_candidates(config, registry);
        auto db = open_checked_for_tuning(opts->db, mode, config, registry, candidates);
        const int64_t buckets = static_cast<int64_t>(config.buckets().size());
        std::fprintf(stderr, "tuning %s: %lld buckets x %zu candidates on %s\n",
                     config.name.c_str(), static_cast<long long>(buckets), candidates.size(),
                     device.to_string().c_str());
        Progress progress(stderr, live, buckets);
        s = tune(config, candidates, *db, progress);
        db->finalize();
      }
      std::printf(
          "tuned %lld buckets (%lld with a winner, %lld without a valid candidate, %lld "
          "already present) in %.1f s into %s\n",
          static_cast<long long>(s.tuned + s.no_valid), static_cast<long long>(s.tuned),
          static_cast<long long>(s.no_valid), static_cast<long long>(s.skipped), s.seconds,
          opts->db.c_str());
      return s.no_valid > 0 ? kExitNoValidKernel : kExitOk;
    });
  });
}

}  // namespace mlatune::cli
