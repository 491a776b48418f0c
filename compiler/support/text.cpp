#include "compiler/support/text.h"

#include <cstdio>
#include <cstring>

namespace kpc {

namespace {

// Length of the UTF-8 sequence starting at s[i], or 0 if it is not valid UTF-8 as
// RFC 3629 defines it: no overlong forms, no UTF-16 surrogates (U+D800-U+DFFF), nothing
// above U+10FFFF, no truncated sequences. The decoded code point goes to *cp.
size_t utf8_length(std::string_view s, size_t i, char32_t* cp = nullptr) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) {
    if (cp) *cp = c;
    return 1;
  }
  size_t n;
  char32_t v;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (RFC 3629 table)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, v = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
    if (c == 0xED) hi = 0x9F;  // surrogates U+D800-U+DFFF
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, v = c & 0x07;
    if (c == 0xF0) lo = 0x90;  // overlong below U+10000
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // continuation byte, C0/C1 (overlong 2-byte), F5-FF
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (byte(i + k) & 0x3F);
  }
  if (cp) *cp = v;
  return n;
}

// Code points that must not reach a terminal or log line raw even though they are valid
// UTF-8: C0 controls and DEL, C1 controls (U+0085 NEL breaks lines, U+009B is CSI), the
// line/paragraph separators U+2028/U+2029, and the bidi embeddings, overrides and isolates
// (U+202A-U+202E, U+2066-U+2069), which can make a diagnostic display as something else.
bool must_escape(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

void append_escaped(std::string& out, std::string_view bytes) {
  for (char ch : bytes) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned char>(ch));
    out += buf;
  }
}

// Length of the longest prefix of s no longer than max bytes that does not split
// a valid UTF-8 sequence.
size_t utf8_prefix(std::string_view s, size_t max) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_length(s, i);
    if (n == 0) n = 1;
    if (i + n > max) break;
    i += n;
  }
  return i;
}

}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    size_t n = utf8_length(s, i, &cp);
    if (n > 0 && !must_escape(cp)) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // An escaped character is shown byte by byte; an invalid sequence one byte at a time
    // (the next byte may start a valid character).
    size_t k = n > 0 ? n : 1;
    append_escaped(out, s.substr(i, k));
    i += k;
  }
  return out;
}

std::string printable_capped(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return printable(s);
  // Keep the start (where the quoted value begins) and the end (the explanation that
  // usually follows a quoted value), and say how much was left out.
  size_t tail_max = max_bytes / 2;
  size_t head = utf8_prefix(s, max_bytes - tail_max);
  const size_t tail_base = s.size() - tail_max;
  size_t tail_start = tail_base;
  while (tail_start < s.size() && tail_start < tail_base + 3 &&
         (static_cast<unsigned char>(s[tail_start]) & 0xC0) == 0x80)
    ++tail_start;  // do not start inside a UTF-8 sequence
  return printable(s.substr(0, head)) + "\u2026(" + std::to_string(tail_start - head) + " more bytes)\u2026" +
         printable(s.substr(tail_start));
}

bool is_clean_text(std::string_view s, size_t* bad_offset) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
        *bad_offset = i;
        return false;
      }
      ++i;
      continue;
    }
    size_t n = utf8_length(s, i);
    if (n == 0) {
      *bad_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

size_t find_text(std::string_view hay, std::string_view needle) {
  if (needle.empty()) return 0;
  const void* p = memmem(hay.data(), hay.size(), needle.data(), needle.size());
  return p ? static_cast<size_t>(static_cast<const char*>(p) - hay.data()) : std::string_view::npos;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace kpc
