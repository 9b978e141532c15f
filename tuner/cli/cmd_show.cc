// mlatune show --db FILE: the winners as a table.
#include <cstdio>
#include <map>
#include <string>

#include "db/tuning_db.h"
#include "tuner/cli/guard.h"
#include "tuner/staleness.h"

namespace mlatune::cli {

void add_show_command(CLI::App& app, int& exit_code) {
  auto db_path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("show", "print the winners of a dispatch database");
  cmd->add_option("--db", *db_path, "dispatch database")->required();
  cmd->callback([db_path, &exit_code] {
    exit_code = run_guarded([&] {
      auto db = TuningDb::open_read_only(*db_path);
      Provenance p = db->provenance();
      std::printf(
          "database %s\n  device: %s\n  config: %s (%s), tool %s, kernel build %s, "
          "created %s\n",
          db_path->c_str(), p.device.to_string().c_str(), p.config_name.c_str(),
          p.config_hash.substr(0, 12).c_str(), p.tool_version.c_str(), p.kernel_build_id.c_str(),
          p.created_at.c_str());
      std::printf("  dispatch snapshot: %s\n", db->snapshot_report(false).detail.c_str());
      // A winner is usable by this build only if its variant's code is the code validated; a
      // database from another build may name variants this one lacks.
      Registry registry = builtin_registry();
      std::map<std::string, Staleness> staleness;
      for (const VariantRecord& v : db->variants()) {
        staleness[v.name] = staleness_of(registry, v.name, v.code_identity);
      }
      std::printf("\n%5s %4s %-12s %-12s %4s %3s %11s %13s  %-24s %-30s %10s %9s %9s %7s %s\n",
                  "heads", "qlen", "q", "kv", "page", "lse", "batch", "kv_len", "winner",
                  "launch parameters", "median_us", "iqr_us", "max_err", "passed", "status");
      for (const BucketSummary& b : db->buckets()) {
        const DecodeKey& k = b.bucket.key;
        std::string batch =
            std::to_string(b.bucket.batch_lo) + "-" + std::to_string(b.bucket.batch_hi);
        std::string kv = std::to_string(b.bucket.kv_lo) + "-" + std::to_string(b.bucket.kv_hi);
        std::string passed = std::to_string(b.passed) + "/" + std::to_string(b.trials);
        std::printf("%5d %4d %-12s %-12s %4d %3d %11s %13s  ", k.heads, k.qlen,
                    std::string(dtype_name(k.q_dtype)).c_str(),
                    std::string(dtype_name(k.kv_dtype)).c_str(), k.page_size, k.lse ? 1 : 0,
                    batch.c_str(), kv.c_str());
        if (!b.winner) {
          std::printf("%-24s %-30s %10s %9s %9s %7s %s\n", "-", "-", "-", "-", "-", passed.c_str(),
                      "NO VALID KERNEL");
          continue;
        }
        const TrialRecord& w = *b.winner;
        const auto found = staleness.find(w.variant);  // every winner's variant is listed
        const Staleness stale = found == staleness.end() ? Staleness::kNotInBuild : found->second;
        const std::string status = stale == Staleness::kCurrent
                                       ? "ok"
                                       : "STALE (" + std::string(staleness_reason(stale)) + ")";
        std::printf("%-24s %-30s %10.2f %9.2f %9.2e %7s %s\n", w.variant.c_str(),
                    w.params.to_string().c_str(), w.time_median_us.value_or(0),
                    w.time_spread_us.value_or(0), w.max_abs_err.value_or(0), passed.c_str(),
                    status.c_str());
      }
      return kExitOk;
    });
  });
}

}  // namespace mlatune::cli
