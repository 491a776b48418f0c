// Whole-program reading, line by line as iptables-restore's main loop does
// (iptables-restore.c / xtables-restore.c, v1.8.x): fgets() chunks of at most
// 10239 bytes, a line is blank only if it is exactly "\n", `#` lines anywhere,
// "COMMIT\n" only inside a table, `*table` only outside one, `:CHAIN POLICY`
// via strtok, and every other line inside a table is a command for do_command.
#include <cstdio>

#include "compiler/support/text.h"
#include "verifier/parse/parser.h"

namespace kpc::verifier {
namespace {

constexpr size_t kFgetsChunk = 10239;  // char buffer[10240]
constexpr size_t kMaxParam = 1023;     // struct xt_param_buf { char buffer[1024]; }
constexpr size_t kMaxWords = 250;      // MAX_ARGC 255 minus argv[0], "-t", table and the terminator

// strtok(s, " \t\n") style: the next token and the rest.
std::string_view next_token(std::string_view& s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string_view::npos) {
    s = {};
    return {};
  }
  size_t e = s.find_first_of(" \t\n", b);
  std::string_view tok = s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
  s = e == std::string_view::npos ? std::string_view{} : s.substr(e + 1);
  return tok;
}

// add_param_to_argv; returns an error message or "".
std::string split_words_checked(std::string_view line, uint32_t col0, std::vector<Word>& out, size_t* count) {
  // Reuses the Word strings of the previous line (no allocation per word on long inputs).
  size_t n = 0;
  bool quote_open = false, escaped = false, quoted = false;
  std::string param;
  uint32_t start_col = 0;
  auto add = [&](char c, size_t pos) -> bool {
    if (param.empty()) start_col = col0 + static_cast<uint32_t>(pos);
    param += c;
    return param.size() <= kMaxParam;
  };
  auto emit = [&](size_t pos) -> bool {
    if (param.empty() && start_col == 0) start_col = col0 + static_cast<uint32_t>(pos);
    if (n == out.size()) out.emplace_back();
    Word& w = out[n++];
    w.text.assign(param);
    w.col = start_col;
    w.quoted = quoted;
    param.clear();
    start_col = 0;
    quoted = false;
    return n <= kMaxWords;
  };
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\n' && !quote_open && param.empty()) continue;
    if (!quote_open && param.empty() && c != '"' && c != ' ' && c != '\t') {
      // Fast path: a plain word ending at white space or the end of the line.
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\n' && line[j] != '"') ++j;
      if (j - i <= kMaxParam && (j == line.size() || line[j] != '"')) {
        if (n == out.size()) out.emplace_back();
        Word& w = out[n++];
        w.text.assign(line.data() + i, j - i);
        w.col = col0 + static_cast<uint32_t>(i);
        w.quoted = false;
        if (n > kMaxWords) return "Parser cannot handle more arguments";
        i = j;
        continue;
      }
    }
    if (!quote_open && param.empty() && c == '"') {
      // Fast path: a quoted word without backslashes (kube-proxy's comments), taken
      // whole. Same result as the loop below: the text between the quotes, its column
      // that of its first character (of the quote if empty), ended by the closing quote.
      size_t close = line.find('"', i + 1);
      if (close != std::string_view::npos && close - i - 1 <= kMaxParam &&
          line.substr(i + 1, close - i - 1).find('\\') == std::string_view::npos) {
        if (n == out.size()) out.emplace_back();
        Word& w = out[n++];
        w.text.assign(line.data() + i + 1, close - i - 1);
        w.col = col0 + static_cast<uint32_t>(close == i + 1 ? i : i + 1);
        w.quoted = true;
        if (n > kMaxWords) return "Parser cannot handle more arguments";
        i = close;
        continue;
      }
    }
    if (quote_open) {
      if (escaped) {
        if (!add(c, i)) return "Parameter too long!";
        escaped = false;
        continue;
      } else if (c == '\\') {
        escaped = true;
        continue;
      } else if (c == '"') {
        quote_open = false;
      } else {
        if (!add(c, i)) return "Parameter too long!";
        continue;
      }
    } else if (c == '"') {
      quote_open = true;
      quoted = true;
      if (param.empty()) start_col = col0 + static_cast<uint32_t>(i);
      continue;
    }
    switch (c) {
      case '"': break;  // closing quote: ends the word, even an empty one
      case ' ':
      case '\t':
      case '\n':
        if (param.empty()) continue;
        break;
      default:
        if (!add(c, i)) return "Parameter too long!";
        continue;
    }
    if (!emit(i)) return "Parser cannot handle more arguments";
  }
  if (!param.empty()) {
    quoted = false;
    if (!emit(line.size())) return "Parser cannot handle more arguments";
  }
  *count = n;
  return "";
}

}  // namespace

std::vector<Word> split_words(std::string_view line) {
  std::vector<Word> w;
  size_t n = 0;
  split_words_checked(line, 1, w, &n);
  w.resize(n);
  return w;
}

RestoreReader::RestoreReader(std::string_view text, const ParseOptions& options, uint32_t first_line)
    : text_(text), options_(options), line_(first_line - 1) {}

RestoreReader::Event RestoreReader::next() {
  rememberable_ = {};  // set again only by an -A line's Op event
  if (done_) return Event::End;
  auto error = [&](ParseErrorKind k, uint32_t col, std::string msg) {
    error_ = ParseError{k, line_, col, std::move(msg)};
    done_ = true;
    return Event::Error;
  };
  while (pos_ < text_.size()) {
    size_t nl = text_.find('\n', pos_);
    size_t len = nl == std::string_view::npos ? text_.size() - pos_ : nl - pos_ + 1;
    if (len > kFgetsChunk) len = kFgetsChunk;
    line_offset_ = pos_;
    std::string_view raw = text_.substr(pos_, len);
    pos_ += len;
    ++line_;
    // C string semantics: everything after a NUL byte is invisible to the tool.
    std::string_view buf = raw.substr(0, raw.find('\0'));
    if (!buf.empty() && buf[0] == '\n') continue;
    if (!buf.empty() && buf[0] == '#') continue;
    bool at_eof = pos_ >= text_.size();
    if (in_table_ && (buf == "COMMIT\n" || (buf == "COMMIT" && at_eof))) {
      if (buf == "COMMIT") last_commit_unterminated_ = true;
      in_table_ = false;
      return Event::Commit;
    }
    if (!in_table_ && !buf.empty() && buf[0] == '*') {
      std::string_view rest = buf.substr(1);
      std::string_view name = next_token(rest);
      if (name.empty()) return error(ParseErrorKind::Parameter, 1, "%PROG%: line " + std::to_string(line_) + " table name invalid");
      auto t = ir::table_from_name(name);
      if (!t) return error(ParseErrorKind::UnknownTable, 2, std::string(name));
      table_ = *t;
      in_table_ = true;
      return Event::TableStart;
    }
    if (in_table_ && !buf.empty() && buf[0] == ':') {
      std::string_view rest = buf.substr(1);
      std::string_view chain = next_token(rest);
      if (chain.empty()) return error(ParseErrorKind::Parameter, 1, "%PROG%: line " + std::to_string(line_) + " chain name invalid");
      if (chain.size() >= 29)
        return error(ParseErrorKind::Parameter, 2, "Invalid chain name `" + std::string(chain) + "' (28 chars max)");
      std::string_view policy = next_token(rest);
      if (policy.empty()) return error(ParseErrorKind::Parameter, 1, "%PROG%: line " + std::to_string(line_) + " policy invalid");
      op_ = ir::Op{};
      op_.kind = ir::OpKind::DeclareChain;
      op_.chain = std::string(chain);
      op_.arg = std::string(policy);
      op_.line = line_;
      return Event::Op;
    }
    if (!in_table_) return error(ParseErrorKind::LineFailed, 1, "line " + std::to_string(line_) + " failed");
    if (known_ && buf.size() > 3 && buf[0] == '-' && buf[1] == 'A' && buf[2] == ' ') {
      if (uint32_t id = known_(table_, buf); id != kUnknownLine) {
        size_t end = buf.find(' ', 3);  // a remembered line's chain is a plain word followed by a space
        known_id_ = id;
        known_chain_ = buf.substr(3, end - 3);
        return Event::Known;
      }
    }
    // A command line, with an optional "[pkts:bytes]" prefix.
    std::string_view cmd = buf;
    uint32_t col0 = 1;
    if (!cmd.empty() && cmd[0] == '[') {
      size_t close = cmd.find(']');
      if (close == std::string_view::npos) return error(ParseErrorKind::Parameter, 1, "Bad line " + std::to_string(line_) + ": need ]");
      std::string_view inner = cmd.substr(1, close - 1);
      size_t colon = inner.find(':');
      // strtok(buffer+1, ":") then strtok(NULL, "]"): both parts must be non-empty after skipping delimiters.
      if (inner.find_first_not_of(':') == std::string_view::npos)
        return error(ParseErrorKind::Parameter, 1, "Bad line " + std::to_string(line_) + ": need :");
      if (colon == std::string_view::npos || inner.substr(colon).find_first_not_of(':') == std::string_view::npos)
        return error(ParseErrorKind::Parameter, 1, "Bad line " + std::to_string(line_) + ": need ]");
      cmd = cmd.substr(close + 1);
      col0 = static_cast<uint32_t>(close + 2);
    }
    size_t nwords = 0;
    std::string err = split_words_checked(cmd, col0, words_, &nwords);
    if (!err.empty()) return error(ParseErrorKind::Parameter, 1, err);
    ParseOptions line_options = options_;
    line_options.table = table_;
    LineParse lp = parse_command(words_.data(), nwords, line_options, line_);
    unknown_args_ += lp.unknown_args;
    if (lp.error) {
      error_ = std::move(*lp.error);
      done_ = true;
      return Event::Error;
    }
    op_ = std::move(*lp.op);
    // Recognisable later only if the chain is the plain word after "-A " (then the
    // first space after it ends it: a chain read from quotes or escapes never matches).
    if (op_.kind == ir::OpKind::Append && cmd.data() == buf.data() && buf.size() > 4 + op_.chain.size() &&
        buf.compare(0, 3, "-A ") == 0 && buf.compare(3, op_.chain.size(), op_.chain) == 0 &&
        buf[3 + op_.chain.size()] == ' ')
      rememberable_ = buf;
    return Event::Op;
  }
  done_ = true;
  if (in_table_) {
    error_ = ParseError{ParseErrorKind::CommitExpected, line_ + 1, 1, "COMMIT expected at line " + std::to_string(line_ + 1)};
    return Event::Error;
  }
  return Event::End;
}

ParseResult parse_restore(std::string_view text, const ParseOptions& options) {
  ParseResult r;
  r.program.family = options.family;
  RestoreReader reader(text, options);
  for (;;) {
    auto ev = reader.next();
    if (ev == RestoreReader::Event::End) break;
    switch (ev) {
      case RestoreReader::Event::TableStart:
        r.program.tables.push_back(ir::TableBlock{reader.table(), {}, reader.line(), 0});
        break;
      case RestoreReader::Event::Op: r.program.tables.back().ops.push_back(std::move(reader.op())); break;
      case RestoreReader::Event::Known: break;  // no known lines given
      case RestoreReader::Event::Commit: r.program.tables.back().commit_line = reader.line(); break;
      case RestoreReader::Event::Error: r.error = reader.error(); break;
      case RestoreReader::Event::End: break;
    }
    if (r.error) break;
  }
  r.last_commit_unterminated = reader.last_commit_unterminated();
  r.unknown_args = reader.unknown_args();
  r.lines = reader.line();
  return r;
}

void report_parse_error(const ParseResult& result, uint32_t file, DiagSink& diags) {
  if (!result.error) return;
  const ParseError& e = *result.error;
  // The real tool's format strings often end (or start) with a newline, which its
  // stderr shows as a blank line; a diagnostic is one line.
  std::string_view text = e.message;
  while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  std::string msg(text);
  if (e.kind == ParseErrorKind::UnknownTable) msg = "unknown table '" + e.message + "'";
  if (e.kind == ParseErrorKind::Unsupported) msg = "not modelled by kpc: " + msg;
  diags.report(DiagCode::RestoreSyntax, Pos{file, e.line, e.col ? e.col : 1}, "", "", printable(msg));
}

}  // namespace kpc::verifier
