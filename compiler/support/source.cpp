#include "compiler/support/source.h"

#include <algorithm>

namespace kpc {

uint32_t SourceManager::add(std::string name, std::string text) {
  File f{std::move(name), std::move(text), {0}};
  for (size_t i = 0; i < f.text.size(); ++i)
    if (f.text[i] == '\n') f.line_starts.push_back(i + 1);
  files_.push_back(std::move(f));
  return static_cast<uint32_t>(files_.size());
}

Pos SourceManager::position(uint32_t file, size_t offset) const {
  const auto& starts = files_.at(file - 1).line_starts;
  auto it = std::upper_bound(starts.begin(), starts.end(), offset);
  size_t line = static_cast<size_t>(it - starts.begin());  // 1-based: first start is line 1
  size_t col = offset - starts[line - 1] + 1;
  return Pos{file, static_cast<uint32_t>(line), static_cast<uint32_t>(col)};
}

}  // namespace kpc
