// mlatune lookup --db FILE <shape>: what the runtime library answers for a decode call.
#include <cstdio>

#include "mlatune/mlatune.h"
#include "tuner/cli/guard.h"
#include "tuner/cli/shape_options.h"

namespace mlatune::cli {

void add_lookup_command(CLI::App& app, int& exit_code) {
  auto db_path = std::make_shared<std::string>();
  auto shape = std::make_shared<ShapeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "lookup", "ask the runtime library which validated kernel serves a decode call");
  cmd->add_option("--db", *db_path, "dispatch database")->required();
  shape->add_to(*cmd);
  cmd->callback([db_path, shape, &exit_code] {
    mlatune_db* db = nullptr;
    mlatune_status st = mlatune_open(db_path->c_str(), nullptr, &db);
    if (st != MLATUNE_STATUS_OK) {
      std::fprintf(stderr, "mlatune: cannot open %s: %s: %s\n", db_path->c_str(),
                   mlatune_status_string(st), mlatune_last_error());
      exit_code = st == MLATUNE_STATUS_INVALID_ARGUMENT ? kExitUsage : kExitDatabase;
      return;
    }
    mlatune_decode_key key = shape->key();
    mlatune_selection sel{};
    st = mlatune_lookup(db, &key, &sel);
    if (st == MLATUNE_STATUS_OK) {
      std::printf(
          "%s: %s splits=%d tile=%d rows=%d workers=%d (bucket batch %d-%d, kv %d-%d, "
          "median %.2f us)\n",
          shape->describe().c_str(), sel.variant, sel.kv_splits, sel.kv_tile, sel.block_rows,
          sel.workers, sel.batch_lo, sel.batch_hi, sel.kv_lo, sel.kv_hi, sel.time_median_us);
      exit_code = kExitOk;
    } else {
      std::fprintf(stderr, "mlatune: lookup refused (%s): %s\n", mlatune_status_string(st),
                   mlatune_last_error());
      exit_code = st == MLATUNE_STATUS_INVALID_ARGUMENT ? kExitUsage : kExitRefused;
    }
    mlatune_close(db);
  });
}

}  // namespace mlatune::cli
