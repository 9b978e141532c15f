// mlatune snapshot --db FILE [--check]: (re)writes a database's dispatch snapshot from its rows, on
// any machine (nothing is tuned or run: the provenance, the rows and their digest are kept), or
// checks the stored one against the rows.
#include <cstdio>

#include "db/tuning_db.h"
#include "tuner/cli/guard.h"

namespace mlatune::cli {

void add_snapshot_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string db;
    bool check = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "snapshot",
      "write the dispatch snapshot the runtime loads, from the database's rows (CPU only; rows "
      "and provenance unchanged)");
  cmd->add_option("--db", opts->db, "dispatch database")->required();
  cmd->add_flag("--check", opts->check,
                "write nothing: report whether the stored snapshot is current and identical to "
                "what the rows say (exit code 4 if not)");
  cmd->callback([opts, &exit_code] {
    exit_code = run_guarded([&] {
      if (opts->check) {
        auto db = TuningDb::open_read_only(opts->db);
        const SnapshotReport r = db->snapshot_report(/*compare_with_rows=*/true);
        std::printf("%s: dispatch snapshot %s\n", opts->db.c_str(), r.detail.c_str());
        return r.usable ? kExitOk : kExitDatabase;
      }
      auto db = TuningDb::open_for_snapshot(opts->db);
      const DispatchSnapshot s = db->write_snapshot();
      size_t tuned = 0;
      for (const SnapshotEntry& e : s.entries) tuned += e.has_winner;
      std::printf(
          "wrote the dispatch snapshot of %s: %zu buckets (%zu with a winner, %zu without a valid "
          "kernel), %zu variants, made from winners digest %s; rows and provenance unchanged\n",
          opts->db.c_str(), s.entries.size(), tuned, s.entries.size() - tuned, s.variants.size(),
          to_hex(s.winners_digest).c_str());
      return kExitOk;
    });
  });
}

}  // namespace mlatune::cli
