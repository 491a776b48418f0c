// Small text helpers shared by every module (no dependencies beyond std).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kpc {

/// Makes untrusted text safe to show on one terminal line: control characters,
/// DEL and bytes >= 0x80 that are not part of valid UTF-8 become \xNN escapes.
std::string printable(std::string_view s);

/// Checks that s is valid UTF-8 without NUL or C0 control characters other than
/// tab, LF and CR. On failure returns false and sets *bad_offset.
bool is_clean_text(std::string_view s, size_t* bad_offset);

std::vector<std::string_view> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
std::string to_lower(std::string_view s);

}  // namespace kpc
