// A text as its lines and back (test inputs built or mutated line by line).
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace kpc::test {

/// The lines of t, without their newlines (a last line without one included).
inline std::vector<std::string> lines_of(const std::string& t) {
  std::vector<std::string> out;
  std::istringstream in(t);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// The lines, each followed by a newline.
inline std::string join_lines(const std::vector<std::string>& ls) {
  std::string s;
  for (const auto& l : ls) s += l + "\n";
  return s;
}

}  // namespace kpc::test
