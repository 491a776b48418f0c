// Source files and positions. Every diagnostic points at FILE:LINE:COL, so the
// loader keeps each input file's text here and hands out compact positions
// (file index + line + column, 1-based) instead of copying file names around.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kpc {

/// A position in an input file. file == 0 means "no position" (e.g. a default).
struct Pos {
  uint32_t file = 0;  ///< 1-based index into SourceManager; 0 = unknown
  uint32_t line = 0;  ///< 1-based
  uint32_t col = 0;   ///< 1-based, in bytes
  bool known() const { return file != 0; }
  friend bool operator==(const Pos&, const Pos&) = default;
  friend auto operator<=>(const Pos&, const Pos&) = default;
};

/// Owns the text of every input file for the lifetime of a run.
class SourceManager {
 public:
  /// Registers a file's name and contents; returns its 1-based index.
  uint32_t add(std::string name, std::string text);
  const std::string& name(uint32_t file) const { return files_.at(file - 1).name; }
  const std::string& text(uint32_t file) const { return files_.at(file - 1).text; }
  size_t size() const { return files_.size(); }
  /// Converts a byte offset in a file into a line/column position.
  Pos position(uint32_t file, size_t offset) const;

 private:
  struct File {
    std::string name;
    std::string text;
    std::vector<size_t> line_starts;  // byte offset of each line's first character
  };
  std::vector<File> files_;
};

}  // namespace kpc
