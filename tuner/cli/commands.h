// The mlatune subcommands, one file each. Each add_*_command registers itself on the app; its
// callback runs the command and stores the process exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace mlatune::cli {

// Exit codes of the mlatune CLI (also documented in README.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,       // a bug or an unexpected system error
  kExitUsage = 2,          // bad command line
  kExitConfig = 3,         // the config file is missing or invalid (message names file:line)
  kExitDatabase = 4,       // the database is missing, damaged, foreign, or refuses the operation
  kExitRefused = 5,        // lookup: the shape is untuned, stale, or has no valid kernel
  kExitNoValidKernel = 6,  // tune finished, but some buckets have no valid candidate
  kExitNoDevice = 7,       // the config's backend has no device in this build or machine
  kExitVerifyFailed = 8    // verify: some winner failed re-validation or is stale
};

void add_tune_command(CLI::App& app, int& exit_code);
void add_variants_command(CLI::App& app, int& exit_code);
void add_show_command(CLI::App& app, int& exit_code);
void add_explain_command(CLI::App& app, int& exit_code);
void add_lookup_command(CLI::App& app, int& exit_code);
void add_verify_command(CLI::App& app, int& exit_code);
void add_snapshot_command(CLI::App& app, int& exit_code);

}  // namespace mlatune::cli
