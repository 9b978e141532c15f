// mlatune: tune MLA decode kernels into a validated dispatch database, and inspect it.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "tuner/cli/commands.h"

int main(int argc, char** argv) {
  using namespace mlatune::cli;
  CLI::App app{"mlatune: validated autotuning and strict dispatch for MLA decode kernels"};
  app.require_subcommand(1);
  app.set_version_flag("--version", MLATUNE_VERSION);
  int exit_code = kExitOk;
  add_tune_command(app, exit_code);
  add_variants_command(app, exit_code);
  add_show_command(app, exit_code);
  add_explain_command(app, exit_code);
  add_lookup_command(app, exit_code);
  add_verify_command(app, exit_code);
  add_snapshot_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "mlatune: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  return exit_code;
}
