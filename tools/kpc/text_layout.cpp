#include "tools/kpc/text_layout.h"

#include <regex>

namespace kpc::cli {

namespace {

// UTF-8 aware column count (the reports use "→" and "—"): continuation bytes take no column.
size_t columns(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The byte offset where the first `cols` columns end.
size_t offset_of_column(std::string_view s, size_t cols) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == cols) return i;
      ++n;
    }
  }
  return s.size();
}

void wrap_line(std::string line, size_t width, std::string* out) {
  size_t indent = line.find_first_not_of(' ');
  if (indent == std::string::npos) indent = 0;
  const std::string cont(std::min(indent + 4, width / 2), ' ');
  size_t floor = indent;  // never break inside the indent
  while (columns(line) > width) {
    size_t limit = offset_of_column(line, width);
    size_t brk = line.rfind(' ', limit);
    if (brk == std::string::npos || brk <= floor) brk = limit;  // one word wider than the line: cut it
    size_t keep = line.find_last_not_of(' ', brk == 0 ? 0 : brk - 1);  // no trailing blanks
    out->append(line, 0, keep == std::string::npos ? brk : keep + 1);
    out->push_back('\n');
    size_t rest = line.find_first_not_of(' ', brk);
    line = cont + (rest == std::string::npos ? std::string() : line.substr(rest));
    floor = cont.size();
  }
  out->append(line);
}

}  // namespace

std::string reviewer_text(std::string_view text, size_t width) {
  static const std::regex other("kpc-other0"), prefixed("([A-Za-z0-9_.@-]*)kpc0\\b");
  std::string words = std::regex_replace(std::string(text), other, "another interface");
  words = std::regex_replace(words, prefixed, "$1+");
  std::string out;
  size_t start = 0;
  while (start < words.size()) {
    size_t end = words.find('\n', start);
    bool nl = end != std::string::npos;
    if (!nl) end = words.size();
    wrap_line(words.substr(start, end - start), width, &out);
    if (nl) out.push_back('\n');
    start = end + 1;
  }
  return out;
}

}  // namespace kpc::cli
