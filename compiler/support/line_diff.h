// A unified diff of two texts (diff -u's format), bounded in time, memory and length:
// what `kpc golden` shows for a program that differs from its expected file.
#pragma once

#include <string>
#include <string_view>

namespace kpc {

struct UnifiedDiffOptions {
  size_t context = 3;     ///< unchanged lines around each change
  size_t max_lines = 60;  ///< hunk lines shown at most; the rest is counted ("... N more")
  /// Line edits the exact (Myers) diff looks for. Beyond it the region between the first
  /// and the last differing line is shown as one replacement (still correct, less minimal):
  /// memory stays O(max_edits^2) whatever the files' size.
  size_t max_edits = 1000;
  size_t max_line_bytes = 400;  ///< longer lines are shortened (printable_capped)
};

/// "" when a == b; else "--- a_name\n+++ b_name\n@@ -l,n +l,n @@\n ..." with every line made
/// printable (the expected file is user input), "\ No newline at end of file" where it applies.
std::string unified_diff(std::string_view a, std::string_view b, std::string_view a_name, std::string_view b_name,
                         const UnifiedDiffOptions& options = {});

}  // namespace kpc
