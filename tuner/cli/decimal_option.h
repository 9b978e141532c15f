// Integer command-line options that accept plain decimal only, as the YAML config does: CLI11's
// own conversion reads "010" as octal and accepts "0x10" and "0b10".
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace mlatune::cli {

// Adds option `name` to `cmd`, stored in `value`: an optional '-', then decimal digits without
// leading zeros, within int's range. Anything else is a usage error naming the option and value.
CLI::Option* add_decimal_option(CLI::App& cmd, const std::string& name, int& value,
                                const std::string& description);

}  // namespace mlatune::cli
