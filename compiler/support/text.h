// Small text helpers shared by every module (no dependencies beyond std).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kpc {

/// Makes untrusted text safe to show on one terminal line: control characters (C0,
/// DEL, C1), the line/paragraph separators U+2028/U+2029, bidi embedding/override/isolate
/// controls (U+202A-U+202E, U+2066-U+2069) and bytes that are not part of valid UTF-8
/// (RFC 3629) become \xNN escapes, one per byte.
std::string printable(std::string_view s);

/// printable() of at most max_bytes of s: longer text keeps its first and last bytes
/// (about max_bytes/2 each, cut on UTF-8 boundaries) around "…(N more bytes)…", so one
/// hostile value (a 10 MB "IP address") cannot make a 10 MB diagnostic line.
std::string printable_capped(std::string_view s, size_t max_bytes);

/// The longest diagnostic field (file name, object, path, message, note) shown in full.
inline constexpr size_t kMaxDiagFieldBytes = 400;

/// Checks that s is valid UTF-8 (RFC 3629: no overlongs, surrogates or code points above
/// U+10FFFF) without NUL or C0 control characters other than
/// tab, LF and CR. On failure returns false and sets *bad_offset.
bool is_clean_text(std::string_view s, size_t* bad_offset);

std::vector<std::string_view> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
/// hay.find(needle), through memmem: string_view::find runs memchr on the needle's
/// first byte, which for " --name " in a rule's text stops at every space.
size_t find_text(std::string_view hay, std::string_view needle);
std::string to_lower(std::string_view s);

}  // namespace kpc
