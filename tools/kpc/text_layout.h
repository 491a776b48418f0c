// The default text of diff, verify, drift and trace is for a reviewer: no line wider than
// kTextColumns, and none of the comparison's own words (the interface names the symbolic
// engine invents for "an interface no rule names"). `--verbose` keeps the text as produced.
#pragma once

#include <string>
#include <string_view>

namespace kpc::cli {

constexpr size_t kTextColumns = 100;

/// "kpc-other0" -> "another interface", "calikpc0" -> "cali+" (iptables' wildcard), then every
/// line longer than width broken at spaces, continued with the line's indent plus four.
std::string reviewer_text(std::string_view text, size_t width = kTextColumns);

}  // namespace kpc::cli
