#include "tuner/cli/decimal_option.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>

namespace mlatune::cli {
namespace {

// Empty when `s` is a plain decimal int; otherwise why not (CLI11 prefixes the option's name).
std::string plain_decimal_error(const std::string& s) {
  const std::string_view digits = std::string_view(s).substr(s.starts_with('-') ? 1 : 0);
  const bool well_formed = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return c >= '0' && c <= '9';
  }) && (digits.size() == 1 || digits[0] != '0');
  if (!well_formed) {
    return "'" + s + "' is not an integer (write plain decimal digits, without leading zeros)";
  }
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return "'" + s + "' is out of range [" + std::to_string(std::numeric_limits<int>::min()) +
           ", " + std::to_string(std::numeric_limits<int>::max()) + "]";
  }
  return "";
}

}  // namespace

CLI::Option* add_decimal_option(CLI::App& cmd, const std::string& name, int& value,
                                const std::string& description) {
  // A check runs on the text before CLI11 converts it, so its own parsing never sees a bad value.
  const CLI::Validator plain_decimal([](std::string& s) { return plain_decimal_error(s); }, "INT",
                                     "plain decimal");
  return cmd.add_option(name, value, description)->check(plain_decimal);
}

}  // namespace mlatune::cli
