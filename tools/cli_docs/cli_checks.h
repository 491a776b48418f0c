// Option value checks shared by kpc and kpc-applier. CLI11 converts "-1" to a size_t as
// 2^64-1 and its NonNegativeNumber names DBL_MAX in its message: a count or a duration given
// as a negative number is a usage error that says so instead.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kpc::cli_checks {

/// A whole number (decimal) of at least min: "--diff-lines: '-1' is not a whole number >= 0".
inline CLI::Validator whole_number_at_least(long long min) {
  return CLI::Validator(
      [min](std::string& s) -> std::string {
        try {
          size_t used = 0;
          long long v = std::stoll(s, &used, 10);
          if (used == s.size() && v >= min) return {};
        } catch (...) {
        }
        return "'" + s + "' is not a whole number >= " + std::to_string(min);
      },
      "");
}

}  // namespace kpc::cli_checks
