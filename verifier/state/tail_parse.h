// TailParser: parses the rule lines of the last part of a restore program on a
// second thread while apply_text() applies the first part.
//
// Parsing a rule line (split, typed parse, canonical save text) is a pure function of
// the line's bytes, the family and the table, so it can run ahead of the state
// machine; what it produces is only a hint: the "-A" lines it parsed are interned and
// remembered as known lines (RuleStore::remember_line), and the sequential pass then
// finds them known instead of parsing them. A wrong guess of the table a line is in
// only makes a hint that is never used; the state machine itself never runs here.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "verifier/state/state.h"

namespace kpc::verifier {

class TailParser {
 public:
  /// Starts parsing text from the first line that begins at or after byte `from`
  /// (nothing, if no "*table" line precedes it: the table is unknown there).
  TailParser(std::string_view text, size_t from, IPFamily family);
  ~TailParser();
  TailParser(const TailParser&) = delete;
  TailParser& operator=(const TailParser&) = delete;

  /// Byte offset of the first line the thread parses (text.size() if none).
  size_t start() const { return start_; }
  /// Waits for the thread, then interns every parsed rule into store and remembers its line.
  void merge_into(RuleStore& store);

 private:
  struct Parsed {  // the hashes are computed here too: less work for the main thread
    ir::TableId table;
    bool is_goto;
    std::string_view line;
    uint32_t text_at, text_size, jump_at, jump_size;  ///< in bytes_ (it grows: offsets, not views)
    uint64_t line_hash, text_hash, jump_hash, chain_hash;
  };
  void run(ir::TableId table);

  std::string_view text_;
  IPFamily family_;
  size_t start_;
  std::vector<Parsed> parsed_;
  std::string bytes_;  ///< every parsed rule's canonical text and jump target, back to back
  std::atomic<bool> cancel_{false};  ///< set when the main pass stops early (an error)
  std::thread thread_;
};

}  // namespace kpc::verifier
