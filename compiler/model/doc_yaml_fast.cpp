// Fast path of the YAML reader: a hand-written, single-pass reader for the YAML that
// kubectl prints and that people write for Kubernetes, producing exactly the DocNode
// trees (kinds, texts, keys, every Pos) and diagnostics that the yaml-cpp reader
// (read_yaml_reference, doc_yaml.cpp) produces. yaml-cpp's scanner matches every
// character against composed regexes and allocates per token; this reader classifies
// bytes with a table and builds each node once, which makes it several times faster.
//
// It is a second implementation checked against a reference, so the rule is: accept
// only what it can prove yaml-cpp reads the same way, and *decline* everything else.
// A decline reports nothing and leaves the output untouched; read_yaml then re-reads
// the whole file with yaml-cpp. Declining is always safe; disagreeing never is.
// tests/unit/doc_yaml_fast_test.cpp and tests/property/doc_yaml_fast_props_test.cpp
// check the two readers against each other.
//
// The subset (anything else declines):
//   * streams of documents separated by `---` / `...` lines (nothing but a comment may
//     follow a marker on its line); `%` directives decline;
//   * comments: whole-line, or after a value when preceded by a space;
//   * block mappings and block sequences indented with spaces, including kubectl's
//     style of `- ` items at the same column as their parent key, compact `- key: v`
//     maps and `- - x` nested sequences inside items, empty values (`key:`, `-`);
//   * literal block scalars `|`, `|-`, `|+` as values and items (kubectl prints
//     last-applied-configuration annotations that way);
//   * single-line plain scalars (typed by resolve_plain_scalar, null spellings by
//     is_yaml_null_plain), single-line single- and double-quoted scalars (double-quoted
//     escapes: \0 \a \b \t \n \v \f \r \e \<space> \" \' \\ \/ \xXX \uXXXX \UXXXXXXXX);
//   * flow sequences and flow mappings that open and close on one line, holding
//     scalars and further flow collections (`{}`, `[]`, `[a, "b"]`,
//     `{type: InternalIP, address: 1.2.3.4}`, `{"a":1}`).
// Decline reasons (yaml_fast_decline_reason() names the one met) include: tabs, CR, NUL,
// other control characters and DEL anywhere; a first byte that steers yaml-cpp's
// encoding detection (0xEF 0xFE 0xFF 0xBB 0xBF: byte-order marks, UTF-16/32); anchors
// `&`, aliases `*`, tags `!`, folded block scalars `>`, block scalars with an
// indentation indicator, at the root, empty, opening with a whitespace-only line or
// ending in spaces at the end of input; complex keys `?`; multi-line plain/quoted
// scalars and flow collections; plain scalars starting with an unusual character,
// with `-` not followed by a letter, digit or `.`, or with `:` not followed by one of
// those or `:` `/` (so "-1", "::1" and "::ffff:1.2.3.4" are read); the merge key `<<`
// (left to the reference reader, which owns its semantics); keys longer than 1000
// bytes (yaml-cpp's 1024-character simple-key limit);
// escapes \N \_ \L \P (yaml-cpp 0.7 emits raw bytes for them) and invalid escapes;
// trailing commas, empty entries and compact `a: b` pairs in flow collections;
// anything after a closing quote or bracket other than a comment; lines indented in a
// way that is not one of the shapes above (including every indentation error); content
// after a complete root node without a document marker; nesting deeper than 400.
//
// Limits and semantic errors (E0012 depth, E0013 node count, E0014 duplicate keys) are
// detected in the same event order as the yaml-cpp Builder (collections open in
// pre-order; scalars, keys and nulls count when read; collections are checked for
// duplicates and counted when they close), and reported only if the *whole* file lies
// inside the subset. yaml-cpp stops at its first error, so if the whole file is
// well-formed YAML that yaml-cpp reads like we do, its first error is our first one;
// documents finished before it are returned, as yaml-cpp's reader does.
//
// Where yaml-cpp puts marks, established by probing yaml-cpp 0.7 and checked by the tests:
//   * scalars at their first character (the opening quote for quoted scalars);
//   * block maps at their first key, block sequences at their first `-`, flow
//     collections at their bracket, keys at their scalar;
//   * empty values (`key:`, `-`, empty documents) at the next token: the first
//     character of the next line that is not blank or a comment, or, at the end of the
//     input, column 1 of the line after the last newline -- except that when the input
//     ends c bytes into a line (trailing spaces or a comment without a line break), an
//     empty value in a collection indented deeper than c (or a sequence at c) is marked
//     at column c+1 (yaml-cpp unwinds those indentation levels before it resets the
//     column at the end of the stream).
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/model/doc.h"

namespace kpc {

namespace {
struct Decline {};
thread_local std::string t_decline_reason;
}  // namespace

std::string yaml_fast_decline_reason() { return t_decline_reason; }

bool is_yaml_null_plain(std::string_view v) {
  return v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL";
}

namespace {

// Byte classes. The input is pre-checked to contain no control bytes but '\n' (and a
// NUL only as the terminator std::string guarantees at text[size()]).
enum : uint8_t {
  kStopBlock = 1,  // ends or needs a look in a plain scalar in block context
  kStopFlow = 2,   // same in flow context
  kPlainStart = 4, // may start a plain scalar (with the '-' rule applied separately)
};

struct ByteTable {
  uint8_t c[256] = {};
  constexpr ByteTable() {
    for (const char* p = " :\n"; *p; ++p) c[static_cast<uint8_t>(*p)] |= kStopBlock | kStopFlow;
    c[0] |= kStopBlock | kStopFlow;
    for (const char* p = ",[]{}?"; *p; ++p) c[static_cast<uint8_t>(*p)] |= kStopFlow;
    for (int b = 'a'; b <= 'z'; ++b) c[b] |= kPlainStart;
    for (int b = 'A'; b <= 'Z'; ++b) c[b] |= kPlainStart;
    for (int b = '0'; b <= '9'; ++b) c[b] |= kPlainStart;
    for (const char* p = "._/~$()+=^;<\\-:"; *p; ++p) c[static_cast<uint8_t>(*p)] |= kPlainStart;
    for (int b = 0x80; b < 0x100; ++b) c[b] |= kPlainStart;
  }
};
constexpr ByteTable kBytes;

inline bool is_alnum_dot(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.';
}

// Input bytes yaml-cpp treats specially or that we do not model: C0 controls other than
// LF (tab, CR, NUL, yaml-cpp's 0x04 end-of-stream marker, ...) and DEL.
bool has_unsupported_bytes(const char* s, size_t n) {
  const unsigned char* u = reinterpret_cast<const unsigned char*>(s);
  constexpr size_t kBlock = 4096;
  for (size_t i = 0; i < n; i += kBlock) {
    size_t e = i + kBlock < n ? i + kBlock : n;
    unsigned bad = 0;
    for (size_t j = i; j < e; ++j) {  // branch-free so that it vectorizes
      unsigned char c = u[j];
      bad |= static_cast<unsigned>((c < 0x20) & (c != '\n')) | static_cast<unsigned>(c == 0x7F);
    }
    if (bad) return true;
  }
  return false;
}

class FastReader {
 public:
  FastReader(const std::string& text, uint32_t file, const ReadLimits& limits, std::vector<DocNode>* out)
      : s_(text.c_str()), n_(text.size()), file_(file), limits_(limits), out_(out) {}

  // Throws Decline when the input leaves the subset.
  void run() {
    if (n_ > 0) {  // bytes that steer yaml-cpp's encoding detection (BOMs, UTF-16/32)
      unsigned char b = static_cast<unsigned char>(s_[0]);
      if (b == 0xEF || b == 0xFE || b == 0xFF || b == 0xBB || b == 0xBF)
        decline("first byte is a byte-order-mark byte");
    }
    if (has_unsupported_bytes(s_, n_)) decline("control character, tab, CR or DEL");
    frames_.reserve(32);
    children_.reserve(256);
    keys_.reserve(256);
    while (true) {
      size_t k = 0;
      while (s_[p_ + k] == ' ') ++k;
      char c = s_[p_ + k];
      if (c == '\n') {
        p_ += k;
        newline();
        continue;
      }
      if (c == '#') {
        p_ += k;
        skip_comment();
        continue;
      }
      if (c == '\0') {  // end of input (no other NUL survives the pre-check)
        p_ += k;
        break;
      }
      if (k == 0) {
        if (c == '%') decline("% directive");
        if (marker_at(p_, '-')) {
          doc_start(here(p_));
          p_ += 3;
          end_marker_line();
          continue;
        }
        if (marker_at(p_, '.')) {
          doc_end(here(p_));
          p_ += 3;
          end_marker_line();
          continue;
        }
        if ((c == '-' || c == '.') && s_[p_ + 1] == c && s_[p_ + 2] == c)
          decline("line starting with --- or ... that is not a marker");  // `---x` and the like
      }
      p_ += k;
      content_line(static_cast<int>(k));
    }
    at_eof();
  }

  bool failed() const { return failed_; }
  DiagCode error_code() const { return err_code_; }
  Pos error_pos() const { return err_pos_; }
  const std::string& error_message() const { return err_msg_; }

 private:
  enum class Slot : uint8_t { None, MapValue, SeqItem };
  // Where the stream is relative to yaml-cpp's documents: None (between documents),
  // Open (`---` read, root not started), Root (root block collection open), Done
  // (root complete, no `...` yet), Tail (root complete and `...` read).
  enum class Doc : uint8_t { None, Open, Root, Done, Tail };
  enum class PlainEnd : uint8_t { Eol, Comment, Colon, Flow };

  struct Frame {
    bool is_map;
    int indent;  // 0-based column of the keys / the dashes
    Pos pos;
    size_t child_base;
    size_t key_base;
  };

  [[noreturn]] void decline(const char* why) const {
    t_decline_reason = std::to_string(line_) + ":" + std::to_string(p_ - line_start_ + 1) + ": " + why;
    throw Decline{};
  }

  Pos here(size_t at) const { return Pos{file_, line_, static_cast<uint32_t>(at - line_start_ + 1)}; }
  int col(size_t at) const { return static_cast<int>(at - line_start_); }
  Pos eof_pos() const { return Pos{file_, line_, 1}; }

  void newline() {  // s_[p_] == '\n'
    ++p_;
    ++line_;
    line_start_ = p_;
  }

  void skip_comment() {  // s_[p_] == '#'; stops before the line break
    const void* nl = std::memchr(s_ + p_, '\n', n_ - p_);
    p_ = nl ? static_cast<size_t>(static_cast<const char*>(nl) - s_) : n_;
  }

  bool blank_or_end(char c) const { return c == ' ' || c == '\n' || c == '\0'; }

  bool marker_at(size_t at, char ch) const {
    return s_[at] == ch && s_[at + 1] == ch && s_[at + 2] == ch && blank_or_end(s_[at + 3]);
  }

  bool block_entry_at(size_t at) const { return s_[at] == '-' && blank_or_end(s_[at + 1]); }

  void skip_spaces() {
    while (s_[p_] == ' ') ++p_;
  }

  // After a complete value (or a marker): spaces, then an optional comment preceded by
  // at least one space, then the end of the line, which is consumed.
  void end_line() {
    skip_spaces();
    char c = s_[p_];
    if (c == '#' && s_[p_ - 1] == ' ') {  // p_ > 0 here: something precedes on the line
      skip_comment();
      c = s_[p_];
    }
    if (c == '\n') newline();
    else if (c != '\0') decline("unexpected text after a complete value");
  }

  void end_marker_line() { end_line(); }

  // ---- semantic checks, in the yaml-cpp Builder's event order ----------------------

  void fail(DiagCode code, Pos pos, std::string msg) {
    failed_ = true;
    err_code_ = code;
    err_pos_ = pos;
    err_msg_ = std::move(msg);
  }

  void count(Pos pos) {
    if (failed_) return;
    if (++nodes_ > limits_.max_nodes) fail(DiagCode::AliasLimit, pos, "too many nodes in one file");
  }

  void open_check(Pos pos) {
    if (depth_ >= 400) decline("nesting deeper than 400");  // stay clear of yaml-cpp's own recursion guard
    if (!failed_ && depth_ >= limits_.max_depth)
      fail(DiagCode::NestingTooDeep, pos, "nesting deeper than " + std::to_string(limits_.max_depth) + " levels");
    ++depth_;
  }

  // Builds a collection from the top of the child/key stacks, then checks and counts it.
  DocNode finish_collection(bool is_map, Pos pos, size_t child_base, size_t key_base) {
    DocNode node;
    node.kind = is_map ? DocNode::Kind::Map : DocNode::Kind::Seq;
    node.pos = pos;
    size_t nc = children_.size() - child_base;
    if (nc) {
      node.items.reserve(nc);
      for (size_t i = child_base; i < children_.size(); ++i) node.items.push_back(std::move(children_[i]));
      children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(child_base), children_.end());
    }
    if (is_map) {
      size_t nk = keys_.size() - key_base;
      if (nk) {
        node.keys.reserve(nk);
        for (size_t i = key_base; i < keys_.size(); ++i) node.keys.push_back(std::move(keys_[i]));
        keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(key_base), keys_.end());
      }
      if (!failed_)
        if (const DocNode::Key* dup = find_duplicate_key(node))
          fail(DiagCode::DuplicateKey, dup->pos, "duplicate key \"" + dup->name + "\"");
    }
    --depth_;
    count(pos);
    return node;
  }

  // ---- node construction ------------------------------------------------------------

  DocNode plain_node(size_t b, size_t e, Pos pos) {
    DocNode n;
    n.pos = pos;
    std::string_view v(s_ + b, e - b);
    if (!is_yaml_null_plain(v)) {
      n.kind = resolve_plain_scalar(v);
      n.text.assign(v.data(), v.size());
    }
    count(pos);
    return n;
  }

  DocNode string_node(std::string&& text, Pos pos) {
    DocNode n;
    n.kind = DocNode::Kind::String;
    n.pos = pos;
    n.text = std::move(text);
    count(pos);
    return n;
  }

  DocNode null_node(Pos pos) {
    DocNode n;
    n.pos = pos;
    count(pos);
    return n;
  }

  // A completed node goes to the innermost open block collection, or becomes the root.
  void emit(DocNode&& n) {
    if (frames_.empty()) {
      root_ = std::move(n);
      doc_ = Doc::Done;
      return;
    }
    children_.push_back(std::move(n));
  }

  void add_key(std::string&& name, Pos pos) {
    if (name.size() == 2 && name[0] == '<' && name[1] == '<') decline("merge key <<");  // merge key
    count(pos);
    keys_.push_back(DocNode::Key{std::move(name), pos});
  }

  void open_frame(bool is_map, int indent, Pos pos) {
    open_check(pos);
    frames_.push_back(Frame{is_map, indent, pos, children_.size(), keys_.size()});
  }

  void close_frame() {
    Frame f = frames_.back();
    frames_.pop_back();
    emit(finish_collection(f.is_map, f.pos, f.child_base, f.key_base));
  }

  // ---- scalars ----------------------------------------------------------------------

  // Scans a single-line plain scalar from p_. Leaves p_ at what ended it: the space of
  // " #", a ':' followed by a blank (or, in flow, by , ] }), a line break / end of
  // input, or (flow only) one of , [ ] { } ?. Returns [b, e) without trailing spaces.
  template <bool kFlow>
  PlainEnd scan_plain(size_t* b, size_t* e) {
    constexpr uint8_t kStop = kFlow ? kStopFlow : kStopBlock;
    const char* s = s_;
    size_t i = p_, last = p_;
    *b = p_;
    PlainEnd why;
    for (;;) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (!(kBytes.c[c] & kStop)) {
        ++i;
        continue;
      }
      if (c == ' ') {
        if (s[i - 1] != ' ') last = i;
        if (s[i + 1] == '#') {
          why = PlainEnd::Comment;
          break;
        }
        ++i;
        continue;
      }
      if (c == ':') {
        char d = s[i + 1];
        if (d == ' ' || d == '\n' || d == '\0' || (kFlow && (d == ',' || d == ']' || d == '}'))) {
          why = PlainEnd::Colon;
          break;
        }
        ++i;
        continue;
      }
      why = (c == '\n' || c == '\0') ? PlainEnd::Eol : PlainEnd::Flow;
      break;
    }
    if (s[i - 1] != ' ') last = i;
    p_ = i;
    *e = last;
    return why;
  }

  bool plain_start(size_t at) const {
    unsigned char c = static_cast<unsigned char>(s_[at]);
    if (!(kBytes.c[c] & kPlainStart)) return false;
    if (c == '-') return is_alnum_dot(s_[at + 1]);  // "-1", "-x"; "- " is an entry
    if (c == ':') return is_alnum_dot(s_[at + 1]) || s_[at + 1] == ':' || s_[at + 1] == '/';  // "::1"
    return true;
  }

  static void append_utf8(std::string& out, uint32_t v) {
    if (v <= 0x7F) {
      out.push_back(static_cast<char>(v));
    } else if (v <= 0x7FF) {
      out.push_back(static_cast<char>(0xC0 | (v >> 6)));
      out.push_back(static_cast<char>(0x80 | (v & 0x3F)));
    } else if (v <= 0xFFFF) {
      out.push_back(static_cast<char>(0xE0 | (v >> 12)));
      out.push_back(static_cast<char>(0x80 | ((v >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (v & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (v >> 18)));
      out.push_back(static_cast<char>(0x80 | ((v >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((v >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (v & 0x3F)));
    }
  }

  uint32_t hex_escape(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char c = s_[p_++];
      uint32_t d;
      if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
      else decline("bad hex digit in escape");
      v = (v << 4) | d;
    }
    if ((v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF) decline("escape is not a Unicode scalar value");
    return v;
  }

  // A single-line quoted scalar; p_ at the opening quote, left after the closing one.
  std::string quoted() {
    const char q = s_[p_++];
    const char* s = s_;
    size_t seg = p_;
    std::string out;
    if (q == '\'') {
      for (;;) {
        char c = s[p_];
        if (c == '\'') {
          if (s[p_ + 1] != '\'') break;
          out.append(s + seg, p_ + 1 - seg);  // keeps one quote
          p_ += 2;
          seg = p_;
          continue;
        }
        if (c == '\n' || c == '\0') decline("multi-line or unterminated single-quoted scalar");
        ++p_;
      }
    } else {
      for (;;) {
        char c = s[p_];
        if (c == '"') break;
        if (c == '\n' || c == '\0') decline("multi-line or unterminated double-quoted scalar");
        if (c != '\\') {
          ++p_;
          continue;
        }
        out.append(s + seg, p_ - seg);
        char e = s[p_ + 1];
        p_ += 2;
        switch (e) {
          case '0': out.push_back('\0'); break;
          case 'a': out.push_back('\a'); break;
          case 'b': out.push_back('\b'); break;
          case 't': out.push_back('\t'); break;
          case 'n': out.push_back('\n'); break;
          case 'v': out.push_back('\v'); break;
          case 'f': out.push_back('\f'); break;
          case 'r': out.push_back('\r'); break;
          case 'e': out.push_back('\x1B'); break;
          case ' ': out.push_back(' '); break;
          case '"': out.push_back('"'); break;
          case '\'': out.push_back('\''); break;
          case '\\': out.push_back('\\'); break;
          case '/': out.push_back('/'); break;
          case 'x': append_utf8(out, hex_escape(2)); break;
          case 'u': append_utf8(out, hex_escape(4)); break;
          case 'U': append_utf8(out, hex_escape(8)); break;
          default: decline("unsupported escape");  // \N \_ \L \P, escaped line breaks, invalid escapes
        }
        seg = p_;
      }
    }
    if (out.empty()) out.assign(s + seg, p_ - seg);  // the common case: one allocation at most
    else out.append(s + seg, p_ - seg);
    ++p_;  // closing quote
    return out;
  }

  // A literal block scalar (`|`, `|-`, `|+`) as a value or item; p_ at the '|'. Consumes
  // its lines and leaves p_ at the start of the first line that is not part of it.
  // Mirrors yaml-cpp's ScanBlockScalar/ScanScalar(DONT_FOLD): the indentation is that of
  // the first non-empty line (it must exceed the enclosing collection's); each line
  // contributes its text past that indentation plus "\n"; whitespace-only lines no
  // deeper than it count as empty; the first less-indented non-empty line ends it.
  std::string block_scalar() {
    if (frames_.empty()) decline("block scalar at the root");
    const size_t top = static_cast<size_t>(frames_.back().indent);
    ++p_;
    char chomp = ' ';
    if (s_[p_] == '-' || s_[p_] == '+') chomp = s_[p_++];
    if (s_[p_] >= '0' && s_[p_] <= '9') decline("block scalar indentation indicator");
    size_t hs = p_;
    skip_spaces();
    if (s_[p_] == '#' && p_ > hs) skip_comment();
    if (s_[p_] != '\n') decline("text after a block scalar header, or end of input");
    newline();
    std::string text;
    while (s_[p_] == '\n') {  // leading empty lines (no spaces: those would move the indentation)
      text.push_back('\n');
      newline();
    }
    size_t indent = 0;
    while (s_[p_ + indent] == ' ') ++indent;
    char c = s_[p_ + indent];
    if (c == '\n' || c == '\0') decline("block scalar opening with a whitespace-only line");
    if (indent <= top) decline("empty block scalar");
    for (;;) {
      size_t sp = 0;
      while (s_[p_ + sp] == ' ') ++sp;
      c = s_[p_ + sp];
      if (c == '\0') {
        if (sp == 0) break;  // ends at a line start: yaml-cpp reads to the end
        decline("block scalar ending in spaces without a line break");
      }
      if (c != '\n' && sp < indent) break;  // less indented content (or comment) ends it
      if (sp > indent || c != '\n') {
        const void* nl = std::memchr(s_ + p_ + indent, '\n', n_ - (p_ + indent));
        if (!nl) {  // the last line, without a line break: its text and no "\n"
          text.append(s_ + p_ + indent, n_ - (p_ + indent));
          p_ = n_;
          break;
        }
        size_t e = static_cast<size_t>(static_cast<const char*>(nl) - s_);
        text.append(s_ + p_ + indent, e - (p_ + indent));
        p_ = e;
      } else {
        p_ += sp;
      }
      text.push_back('\n');
      newline();
    }
    size_t last = text.find_last_not_of('\n');
    if (chomp == '+') return text;
    if (last == std::string::npos) text.clear();
    else text.erase(chomp == '-' ? last + 1 : std::min(last + 2, text.size()));
    return text;
  }

  // ---- flow collections (one line) --------------------------------------------------

  DocNode flow_value() {
    char c = s_[p_];
    if (c == '[' || c == '{') return flow_collection();
    Pos pos = here(p_);
    if (c == '"' || c == '\'') return string_node(quoted(), pos);
    if (!plain_start(p_)) decline("unsupported start of a flow scalar");
    size_t b, e;
    if (scan_plain<true>(&b, &e) != PlainEnd::Flow)  // ':' is a compact pair, '#' or a line break multi-line
      decline("flow plain scalar ended by ':', '#', '?', '[', '{' or a line break");
    char t = s_[p_];
    if (t != ',' && t != ']' && t != '}') decline("unexpected character after a flow scalar");
    return plain_node(b, e, pos);
  }

  DocNode flow_collection() {  // p_ at '[' or '{'
    Pos pos = here(p_);
    bool is_map = s_[p_] == '{';
    const char close = is_map ? '}' : ']';
    open_check(pos);
    ++p_;
    size_t child_base = children_.size(), key_base = keys_.size();
    skip_spaces();
    if (s_[p_] == close) {
      ++p_;
    } else {
      for (;;) {
        if (is_map) {
          size_t kstart = p_;
          Pos kpos = here(p_);
          char c = s_[p_];
          if (c == '"' || c == '\'') {
            std::string name = quoted();
            skip_spaces();
            if (s_[p_] != ':') decline("flow key without ':'");
            if (p_ - kstart > 1000) decline("key longer than 1000 bytes");
            add_key(std::move(name), kpos);
            ++p_;
          } else {
            if (!plain_start(p_)) decline("unsupported start of a flow key");
            size_t b, e;
            if (scan_plain<true>(&b, &e) != PlainEnd::Colon) decline("flow key without ': '");
            if (s_[p_ + 1] != ' ') decline("empty value in a flow mapping");  // `{a:,` and `{a:}`
            if (p_ - kstart > 1000) decline("key longer than 1000 bytes");
            std::string_view v(s_ + b, e - b);
            add_key(is_yaml_null_plain(v) ? std::string() : std::string(v), kpos);
            ++p_;
          }
          skip_spaces();
        }
        children_.push_back(flow_value());
        skip_spaces();
        char c = s_[p_];
        if (c == ',') {
          ++p_;
          skip_spaces();
          if (s_[p_] == close || s_[p_] == ',') decline("trailing comma or empty flow entry");
          continue;
        }
        if (c == close) {
          ++p_;
          break;
        }
        decline("unexpected character in a flow collection");
      }
    }
    return finish_collection(is_map, pos, child_base, key_base);
  }

  // ---- block structure --------------------------------------------------------------

  // Reads the key at p_ (the first thing on a line or after "- "), which must be
  // followed by ':' and a blank; leaves p_ after the ':'.
  bool try_key(std::string* name, Pos* pos) {
    size_t kstart = p_;
    *pos = here(p_);
    char c = s_[p_];
    if (c == '"' || c == '\'') {
      std::string t = quoted();
      size_t after = p_;
      skip_spaces();
      if (s_[p_] == ':' && blank_or_end(s_[p_ + 1])) {
        if (p_ - kstart > 1000) decline("key longer than 1000 bytes");
        *name = std::move(t);
        ++p_;
        return true;
      }
      p_ = after;
      *name = std::move(t);
      return false;
    }
    return false;
  }

  // A node that starts at p_ in block context. block_ok: at the start of a line or after
  // "- " (where a block sequence or a compact mapping may start); false after "key: ".
  void node_inline(bool block_ok) {
    const size_t start = p_;
    const Pos pos = here(p_);
    char c = s_[p_];
    if (c == '-' && blank_or_end(s_[p_ + 1])) {
      if (!block_ok) decline("block sequence after 'key: '");
      open_frame(false, col(start), pos);
      seq_entry();
      return;
    }
    if (c == '[' || c == '{') {
      DocNode n = flow_collection();
      end_line();
      emit(std::move(n));
      return;
    }
    if (c == '|') {
      std::string text = block_scalar();
      emit(string_node(std::move(text), pos));
      return;
    }
    if (c == '"' || c == '\'') {
      std::string text;
      Pos kpos;
      if (try_key(&text, &kpos)) {
        if (!block_ok) decline("mapping key after 'key: '");
        open_frame(true, col(start), pos);
        add_key(std::move(text), kpos);
        value_part();
        return;
      }
      end_line();
      emit(string_node(std::move(text), pos));
      return;
    }
    if (!plain_start(p_)) decline("unsupported start of a plain scalar");
    size_t b, e;
    PlainEnd why = scan_plain<false>(&b, &e);
    if (why == PlainEnd::Colon) {
      if (!block_ok) decline("mapping key after 'key: '");
      if (p_ - start > 1000) decline("key longer than 1000 bytes");
      open_frame(true, col(start), pos);
      std::string_view v(s_ + b, e - b);
      add_key(is_yaml_null_plain(v) ? std::string() : std::string(v), pos);
      ++p_;  // ':'
      value_part();
      return;
    }
    DocNode n = plain_node(b, e, pos);
    end_line();  // at " #" or the end of the line
    emit(std::move(n));
  }

  // After "key:" (p_ after the colon).
  void value_part() {
    size_t start = p_;
    skip_spaces();
    char c = s_[p_];
    if (c == '\n' || c == '\0' || (c == '#' && p_ > start)) {
      end_line();
      slot_ = Slot::MapValue;
      return;
    }
    node_inline(false);
  }

  // p_ at the '-' of an entry of the innermost (sequence) frame.
  void seq_entry() {
    ++p_;
    size_t start = p_;
    skip_spaces();
    char c = s_[p_];
    if (c == '\n' || c == '\0' || (c == '#' && p_ > start)) {
      end_line();
      slot_ = Slot::SeqItem;
      return;
    }
    node_inline(true);
  }

  // p_ at the first key of a line in the innermost (mapping) frame.
  void map_entry() {
    const size_t start = p_;
    const Pos pos = here(p_);
    char c = s_[p_];
    if (c == '"' || c == '\'') {
      std::string name;
      Pos kpos;
      if (!try_key(&name, &kpos)) decline("quoted scalar where a key was expected");
      add_key(std::move(name), kpos);
      value_part();
      return;
    }
    if (!plain_start(p_)) decline("unsupported start of a key");
    size_t b, e;
    if (scan_plain<false>(&b, &e) != PlainEnd::Colon) decline("plain scalar where a key was expected");
    if (p_ - start > 1000) decline("key longer than 1000 bytes");
    std::string_view v(s_ + b, e - b);
    add_key(is_yaml_null_plain(v) ? std::string() : std::string(v), pos);
    ++p_;
    value_part();
  }

  void close_all(Pos next) {
    if (slot_ != Slot::None) {
      emit(null_node(next));
      slot_ = Slot::None;
    }
    while (!frames_.empty()) close_frame();
  }

  // A line whose first non-space character is at p_ (column k) and is content.
  void content_line(int k) {
    switch (doc_) {
      case Doc::Tail:
        finish_doc();
        [[fallthrough]];
      case Doc::None:
      case Doc::Open:
        doc_ = Doc::Root;
        node_inline(true);
        return;
      case Doc::Done:
        decline("content after a complete root node");  // continuation lines, or errors
      case Doc::Root:
        break;
    }
    const bool entry = block_entry_at(p_);
    if (slot_ != Slot::None) {
      const Frame& f = frames_.back();
      if (k > f.indent) {
        slot_ = Slot::None;
        node_inline(true);
        return;
      }
      if (slot_ == Slot::MapValue && k == f.indent && entry) {  // kubectl: "key:\n- item"
        slot_ = Slot::None;
        open_frame(false, k, here(p_));
        seq_entry();
        return;
      }
      emit(null_node(here(p_)));
      slot_ = Slot::None;
    }
    while (!frames_.empty()) {
      const Frame& f = frames_.back();
      if (f.indent > k || (f.indent == k && !f.is_map && !entry)) {
        close_frame();
        continue;
      }
      break;
    }
    // The root ended at a shallower line: yaml-cpp would start a new document here.
    if (frames_.empty()) decline("content after the root collection ended");
    const Frame& f = frames_.back();
    // A plain-scalar continuation line, or an indentation error.
    if (f.indent < k) decline("line indented deeper than its collection");
    if (f.is_map) {
      if (entry) decline("sequence entry where a key was expected");
      map_entry();
    } else {
      seq_entry();
    }
  }

  // ---- documents (yaml-cpp: [---] node-or-empty ...*) -------------------------------

  void finish_doc() {
    if (doc_ == Doc::Done || doc_ == Doc::Tail) {
      if (!failed_ && !root_.is_null()) out_->push_back(std::move(root_));
      root_ = DocNode{};
    }
    doc_ = Doc::None;
  }

  void doc_start(Pos at) {
    switch (doc_) {
      case Doc::Root:
        close_all(at);
        break;
      case Doc::Open:
        root_ = null_node(at);
        doc_ = Doc::Done;
        break;
      default:
        break;
    }
    finish_doc();
    doc_ = Doc::Open;
  }

  void doc_end(Pos at) {
    switch (doc_) {
      case Doc::Root:
        close_all(at);
        break;
      case Doc::None:
      case Doc::Open:
        root_ = null_node(at);
        break;
      default:
        break;
    }
    doc_ = Doc::Tail;
  }

  void at_eof() {
    Pos at = eof_pos();
    if (doc_ == Doc::Root && slot_ != Slot::None) {
      // Input that does not end with a line break ends c bytes into its last line
      // (spaces, a comment). yaml-cpp then first ends the collections deeper than c
      // (and a sequence at c) at column c+1, and only then, at the end of the stream,
      // the others at column 1. An empty value is marked where the first one ends.
      const int c = static_cast<int>(p_ - line_start_);
      const Frame& f = frames_.back();
      if (f.indent > c || (f.indent == c && !f.is_map)) at.col = static_cast<uint32_t>(c + 1);
    }
    if (doc_ == Doc::Root) close_all(at);
    else if (doc_ == Doc::Open) {
      root_ = null_node(at);
      doc_ = Doc::Done;
    }
    finish_doc();
  }

  const char* s_;
  size_t n_;
  size_t p_ = 0;
  uint32_t file_;
  uint32_t line_ = 1;
  size_t line_start_ = 0;
  const ReadLimits& limits_;
  std::vector<DocNode>* out_;

  std::vector<Frame> frames_;
  std::vector<DocNode> children_;  // pending children of every open collection
  std::vector<DocNode::Key> keys_;  // pending keys of every open mapping
  size_t depth_ = 0;                // open collections, block and flow
  Slot slot_ = Slot::None;
  Doc doc_ = Doc::None;
  DocNode root_;

  size_t nodes_ = 0;
  bool failed_ = false;
  DiagCode err_code_ = DiagCode::YamlSyntax;
  Pos err_pos_;
  std::string err_msg_;
};

}  // namespace

bool read_yaml_fast(const SourceManager& sm, uint32_t file, const ReadLimits& limits, std::vector<DocNode>* out,
                    DiagSink& diags, bool* declined) {
  const size_t before = out->size();
  t_decline_reason.clear();
  FastReader reader(sm.text(file), file, limits, out);
  try {
    reader.run();
  } catch (const Decline&) {
    out->erase(out->begin() + static_cast<std::ptrdiff_t>(before), out->end());
    *declined = true;
    return false;
  }
  *declined = false;
  if (reader.failed()) {
    diags.report(reader.error_code(), reader.error_pos(), "", "", reader.error_message());
    return false;
  }
  return true;
}

}  // namespace kpc
