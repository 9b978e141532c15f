// Command-line options describing one concrete decode call (lookup, explain).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "mlatune/mlatune.h"

namespace mlatune::cli {

struct ShapeOptions {
  int heads = 16, qlen = 1, page_size = 0, batch = 0, max_kv = 0;
  std::string q_dtype = "bf16", kv_dtype = "bf16";
  bool lse = false;

  void add_to(CLI::App& cmd);
  mlatune_decode_key key() const;  // dtype names validated by CLI11 beforehand
  std::string describe() const;
};

}  // namespace mlatune::cli
