// mlatune verify --db FILE [--allow-foreign-device]: re-validates every winner of a dispatch
// database on this machine's device (tuner/verify.h), in a supervised worker process.
#include <cstdio>

#include "tuner/cli/guard.h"
#include "tuner/verify.h"

namespace mlatune::cli {

void add_verify_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string db;
    bool allow_foreign = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "re-validate every winner of a database on this device, with its stored config");
  cmd->add_option("--db", opts->db, "dispatch database")->required();
  cmd->add_flag("--allow-foreign-device", opts->allow_foreign,
                "verify a database tuned on another device (its winners are re-validated here)");
  cmd->callback([opts, &exit_code] {
    exit_code = run_guarded([&] {
      VerifyOptions options;
      options.allow_foreign_device = opts->allow_foreign;
      options.isolated = true;  // a winner that crashes or hangs is a failure, not the end
      const VerifySummary s = verify_database(opts->db, builtin_registry(), options, stdout);
      return s.failed + s.stale > 0 ? kExitVerifyFailed : kExitOk;
    });
  });
}

}  // namespace mlatune::cli
