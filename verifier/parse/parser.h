// The verifier's reader of iptables-restore input and iptables-save output.
//
// An independent oracle: it depends only on the IR and support libraries, never
// on the compiler's back end, so that what the compiler writes is checked by code
// that did not write it. It reads text exactly as iptables-restore (v1.8.x) does:
// one fgets() line at a time, `#` comments, blank lines, `*table`, `:CHAIN POLICY
// [p:b]`, optional `[p:b]` counter prefixes, the commands -A -I -D -R -N -X -F -Z
// -P -E, COMMIT, and the shell-like quoting of add_param_to_argv (double quotes,
// backslash escapes only inside quotes, a closing quote ends the word).
//
// Every match and target kube-proxy writes becomes a typed ir::Arg / ir::Target;
// anything else is kept explicitly as ArgKind::Unknown / TargetKind::Other.
// Like the real tool, parsing stops at the first line that iptables-restore would
// reject while reading it; ParseResult::error says where and why, and the program
// holds everything before it (the simulator applies it, then fails there).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/program.h"
#include "compiler/support/diag.h"

namespace kpc::verifier {

/// How the real tool reports the line that stopped it (docs/verifier.md).
enum class ParseErrorKind : uint8_t {
  Parameter,    ///< xtables_error(PARAMETER_PROBLEM): "<msg>\nError occurred at line: N", exit 2
  LineFailed,   ///< the line is not valid where it stands: "iptables-restore: line N failed", exit 1
  Unsupported,  ///< valid for iptables but not modelled by kpc (-L, -S, -C, host names, ...)
  UnknownTable, ///< "*name" of a table that does not exist (wording differs per flavour)
  CommitExpected,  ///< end of input inside a table: "COMMIT expected at line N" (N = last line + 1), exit 1
};

struct ParseError {
  ParseErrorKind kind = ParseErrorKind::Parameter;
  uint32_t line = 0;
  uint32_t col = 0;      ///< 1-based byte column of the offending word (1 if the whole line)
  std::string message;   ///< the real tool's wording ("%PROG%" stands for the program name)
};

struct ParseOptions {
  IPFamily family = IPFamily::V4;  ///< iptables-restore (V4) or ip6tables-restore (V6)
  ir::TableId table = ir::TableId::Filter;  ///< table of the line (parse_restore sets it per block)
};

struct ParseResult {
  ir::Program program;
  std::optional<ParseError> error;  ///< first line the real tool rejects while reading
  /// The input's last line is "COMMIT" without a newline. iptables-nft-restore
  /// accepts it; iptables-legacy-restore compares with "COMMIT\n" and rejects it.
  bool last_commit_unterminated = false;
  size_t unknown_args = 0;  ///< ArgKind::Unknown options and TargetKind::Other targets seen
  size_t lines = 0;
};

/// One word of a rule line, after quote removal.
struct Word {
  std::string text;
  uint32_t col = 0;     ///< 1-based column where the word starts
  bool quoted = false;  ///< a double quote occurred in it
};
/// Parses a whole restore program or save dump. Never throws on any input.
ParseResult parse_restore(std::string_view text, const ParseOptions& options = {});

/// The same reading, one event at a time, for inputs too large to hold as a
/// Program (the simulator applies each op as it is read).
class RestoreReader {
 public:
  enum class Event : uint8_t { TableStart, Op, Known, Commit, Error, End };
  /// Lines the caller has read before: the id it keeps for a "-A CHAIN ..." line of
  /// that table (byte for byte, no counters prefix), or kUnknownLine. Such a line is
  /// not parsed again: next() returns Event::Known (known_id(), known_chain()).
  static constexpr uint32_t kUnknownLine = 0xFFFFFFFFu;
  using KnownLines = std::function<uint32_t(ir::TableId, std::string_view line)>;

  RestoreReader(std::string_view text, const ParseOptions& options, uint32_t first_line = 1);
  void set_known_lines(KnownLines known) { known_ = std::move(known); }
  /// Reads from the middle of a program: as if "*table" had just been read.
  void start_in_table(ir::TableId table) {
    in_table_ = true;
    table_ = table;
  }
  Event next();
  /// Known: the caller's id and the chain the line appends to.
  uint32_t known_id() const { return known_id_; }
  std::string_view known_chain() const { return known_chain_; }
  /// Op: the line as read, if it is one a later read can recognise (an -A line
  /// without counters whose chain is written as a plain word); empty otherwise.
  std::string_view rememberable_line() const { return rememberable_; }
  ir::TableId table() const { return table_; }          ///< TableStart, and while in a table
  uint32_t line() const { return line_; }                ///< line of the last event
  size_t line_offset() const { return line_offset_; }    ///< byte offset where that line starts
  size_t position() const { return pos_; }               ///< byte offset of the next line to read
  ir::Op& op() { return op_; }                           ///< Op
  const ParseError& error() const { return *error_; }    ///< Error
  bool last_commit_unterminated() const { return last_commit_unterminated_; }
  size_t unknown_args() const { return unknown_args_; }

 private:
  std::string_view text_;
  ParseOptions options_;
  size_t pos_ = 0, line_offset_ = 0;
  uint32_t line_ = 0;
  bool in_table_ = false, done_ = false, last_commit_unterminated_ = false;
  ir::TableId table_ = ir::TableId::Filter;
  ir::Op op_;
  std::optional<ParseError> error_;
  std::vector<Word> words_;
  size_t unknown_args_ = 0;
  KnownLines known_;
  uint32_t known_id_ = kUnknownLine;
  std::string_view known_chain_, rememberable_;
};

/// Adds the parse error (if any) to diags as E0800 at file:line:col.
void report_parse_error(const ParseResult& result, uint32_t file, DiagSink& diags);

/// Splits a rule line as iptables-restore's add_param_to_argv does.
std::vector<Word> split_words(std::string_view line);

/// Parses the words of one rule line ("-A CHAIN ..." etc., counters already
/// removed) into an Op. Returns the error instead when the real tool would stop.
struct LineParse {
  std::optional<ir::Op> op;
  std::optional<ParseError> error;
  size_t unknown_args = 0;
};
LineParse parse_command(const std::vector<Word>& words, const ParseOptions& options, uint32_t line);
LineParse parse_command(const Word* words, size_t count, const ParseOptions& options, uint32_t line);

/// Parses rule text "-A CHAIN args..." (or just "args..." with chain_given) into a rule.
/// Convenience for tests and for re-reading a state's canonical rule text.
std::optional<ir::Rule> parse_rule_text(std::string_view text, IPFamily family, std::string* chain = nullptr,
                                        std::string* error = nullptr);

/// Target extensions of iptables 1.8.9 for a family (anything else after -j is a
/// chain name); ACCEPT, DROP, QUEUE and RETURN included. The list and where it comes
/// from: verifier/parse/rule_parser.cpp.
bool is_target_extension(std::string_view name, IPFamily family);
/// The same for either family.
bool is_target_extension(std::string_view name);
/// Match extensions of iptables 1.8.9 for a family: `-m NAME` of any other name is
/// refused at its line ("Couldn't load match `NAME'", exit 2). A listed extension
/// the parser does not model is kept as ArgKind::Unknown.
bool is_match_extension(std::string_view name, IPFamily family);

/// One option the rule parser gives a meaning of its own (as opposed to keeping it
/// as ArgKind::Unknown / TargetKind::Other words): the audit list of issue 12 —
/// every one must be in the packet semantics, or make a verdict "cannot prove".
struct KnownOption {
  std::string_view owner;   ///< match module ("tcp", "recent"), target ("DNAT"), or "" for base options
  std::string_view option;  ///< long name without "--" ("dport"), or the base option ("-p")
  bool target = false;
};
std::vector<KnownOption> known_options();
/// Target extensions of both families (the parser keeps those it does not type as
/// TargetKind::Other with their words).
std::vector<std::string_view> target_extension_names();

}  // namespace kpc::verifier
