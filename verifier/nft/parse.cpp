// nft's input: tokens with locations, commands (one a line, as knftables writes them) and
// `table ... { ... }` blocks (as `nft list ruleset` prints them).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <memory>

#include "compiler/support/side_by_side.h"
#include "verifier/nft/internal.h"

namespace kpc::verifier::nft {

const char* family_name(Family f) {
  switch (f) {
    case Family::Ip: return "ip";
    case Family::Ip6: return "ip6";
    case Family::Inet: return "inet";
    case Family::Arp: return "arp";
    case Family::Bridge: return "bridge";
    case Family::Netdev: return "netdev";
  }
  return "ip";
}

std::optional<Family> family_from_name(std::string_view s) {
  if (s == "ip") return Family::Ip;
  if (s == "ip6") return Family::Ip6;
  if (s == "inet") return Family::Inet;
  if (s == "arp") return Family::Arp;
  if (s == "bridge") return Family::Bridge;
  if (s == "netdev") return Family::Netdev;
  return std::nullopt;
}

namespace detail {

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool parse_uint(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    for (size_t i = 2; i < s.size(); ++i) {
      char c = s[i];
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return false;
      if (v >> 60) return false;
      v = v * 16 + d;
    }
    *out = v;
    return true;
  }
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

bool parse_time(std::string_view s, uint64_t* ms) {
  if (s.empty()) return false;
  uint64_t total = 0;
  size_t i = 0;
  bool any = false;
  while (i < s.size()) {
    uint64_t n = 0;
    size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (n > 1000000000000ULL) return false;
      n = n * 10 + (s[i] - '0');
      ++i;
    }
    if (i == start) return false;
    std::string_view unit;
    size_t us = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    unit = s.substr(us, i - us);
    uint64_t mult;
    if (unit.empty()) {
      if (any || i != s.size()) return false;
      mult = 1000;  // a bare number is seconds
    } else if (unit == "d") mult = 86400000;
    else if (unit == "h") mult = 3600000;
    else if (unit == "m") mult = 60000;
    else if (unit == "s") mult = 1000;
    else if (unit == "ms") mult = 1;
    else return false;
    total += n * mult;
    any = true;
  }
  *ms = total;
  return true;
}

Token Lexer::next() {
  const std::string_view text = text_;
  size_t& i = i_;
  auto col = [&](size_t pos) { return static_cast<int>(pos - line_start_) + 1; };
  auto make = [&](Tok k, std::string_view t, size_t b, size_t e) {
    Token tok;
    tok.kind = k;
    tok.text = t;
    tok.loc = Loc{line_, col(b), col(e - 1)};
    tok.off = b;
    tok.end = e;
    return tok;
  };
  auto is_special = [](char c) {
    return c == '{' || c == '}' || c == ',' || c == ';' || c == '"' || c == ' ' || c == '\t' || c == '\n' ||
           c == '\r';
  };
  while (i < text.size()) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '\n') {
      Token t = make(Tok::Newline, {}, i, i + 1);
      ++i;
      ++line_;
      line_start_ = i;
      return t;
    }
    if (c == '#') {
      size_t e = text.find('\n', i);
      if (e == std::string_view::npos) e = text.size();
      std::string_view com = text.substr(i, e - i);
      size_t b = i;
      i = e;
      // "# handle 12" (nft -a); listings may print "# handle 12" after a rule or a '{'.
      if (com.rfind("# handle ", 0) == 0) {
        size_t p = 9, q = p;
        while (q < com.size() && std::isdigit(static_cast<unsigned char>(com[q]))) ++q;
        if (q > p) return make(Tok::Handle, com.substr(p, q - p), b, b + q);
      }
      continue;
    }
    if (c == '"') {
      size_t e = text.find('"', i + 1);
      size_t nl = text.find('\n', i + 1);
      if (e == std::string_view::npos || (nl != std::string_view::npos && nl < e)) {
        ParseFailure f;
        f.loc = Loc{line_, col(i), col(i)};
        f.message = "unterminated string";
        throw f;
      }
      Token t = make(Tok::String, text.substr(i + 1, e - i - 1), i, e + 1);
      i = e + 1;
      return t;
    }
    if (c == '{') { ++i; return make(Tok::LBrace, "{", i - 1, i); }
    if (c == '}') { ++i; return make(Tok::RBrace, "}", i - 1, i); }
    if (c == ',') { ++i; return make(Tok::Comma, ",", i - 1, i); }
    if (c == ';') { ++i; return make(Tok::Semi, ";", i - 1, i); }
    if (c == ':' && (i + 1 >= text.size() || is_special(text[i + 1]))) {
      ++i;
      return make(Tok::Colon, ":", i - 1, i);
    }
    size_t b = i;
    while (i < text.size() && !is_special(text[i])) ++i;
    std::string_view w = text.substr(b, i - b);
    if (w.size() > 1 && w[0] == '@') return make(Tok::SetRef, w.substr(1), b, i);
    return make(Tok::Word, w, b, i);
  }
  Token end;
  end.kind = Tok::End;
  end.loc = Loc{line_, col(i), col(i)};
  return end;
}

std::vector<Token> lex(std::string_view text) {
  std::vector<Token> out;
  Lexer l(text);
  do out.push_back(l.next());
  while (out.back().kind != Tok::End);
  return out;
}

namespace {

[[noreturn]] void fail(const Loc& l, std::string msg, bool not_modelled = true) {
  ParseFailure f;
  f.loc = l;
  f.message = std::move(msg);
  f.not_modelled = not_modelled;
  throw f;
}

Loc span(const Loc& a, const Loc& b) { return Loc{a.line, a.col_begin, b.line == a.line ? b.col_end : a.col_end}; }

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Word: return "'" + std::string(t.text) + "'";
    case Tok::String: return "string \"" + std::string(t.text) + "\"";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Semi: return "';'";
    case Tok::Colon: return "':'";
    case Tok::SetRef: return "'@" + std::string(t.text) + "'";
    case Tok::Newline: return "end of line";
    case Tok::Handle: return "'# handle'";
    case Tok::End: return "end of file";
  }
  return "?";
}

bool valid_priority_name(std::string_view name, Family f, std::string_view hook, int* val) {
  struct P { const char* n; int v; };
  static const P prios[] = {{"raw", -300}, {"mangle", -150}, {"dstnat", -100}, {"filter", 0}, {"security", 50}, {"srcnat", 100}};
  for (const auto& p : prios) {
    if (name != p.n) continue;
    bool fam_ip = f == Family::Ip || f == Family::Ip6 || f == Family::Inet;
    bool ok = false;
    if (p.v == 0) ok = fam_ip || f == Family::Arp || f == Family::Netdev;
    else if (p.v == -300 || p.v == -150 || p.v == 50) ok = fam_ip;
    else if (p.v == -100) ok = fam_ip && hook == "prerouting";
    else if (p.v == 100) ok = fam_ip && hook == "postrouting";
    if (!ok) return false;
    *val = p.v;
    return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::string_view src, int first_line = 1) : src_(src), lexer_(src, first_line) {}

  /// reserve_text: the text whose lines to reserve room for (src when empty): the first half
  /// of a split parse reserves for the whole text, so that the second half's commands are
  /// appended without moving the first half's.
  std::vector<Command> script(std::string_view reserve_text = {}) {
    std::vector<Command> out;
    // One command a line is the common shape: reserving for every line saves the vector's
    // regrowth (moving 360-byte commands, touching twice the memory). Reserved room that is
    // never written is never touched (no page of it is faulted in).
    if (reserve_text.empty()) reserve_text = src_;
    out.reserve(count_line_breaks(reserve_text) + 1);
    while (true) {
      skip_separators();
      release();
      if (peek().kind == Tok::End) break;
      // (built in place, not moved in: a command is 360 bytes)
      command(out.emplace_back());
      const Token& n = peek();
      if (n.kind == Tok::RBrace)  // (an unbalanced block, or a rule's: nft's words)
        fail(n.loc, "syntax error, unexpected '}', expecting end of file or newline or semicolon", false);
      if (n.kind != Tok::Newline && n.kind != Tok::Semi && n.kind != Tok::End)
        fail(n.loc, "syntax error, unexpected " + describe(n));
    }
    return out;
  }

 private:
  std::string_view src_;
  // The tokens read so far and not released, in chunks of kChunk that never move (references
  // to tokens stay valid while more are read): token `abs` is chunks_[abs / kChunk -
  // first_chunk_][abs % kChunk]. (A std::deque did this with a division per access: ~4 % of
  // reading a 75 MB transaction.)
  static constexpr size_t kChunkBits = 10, kChunk = size_t{1} << kChunkBits;
  Lexer lexer_;
  std::vector<std::unique_ptr<Token[]>> chunks_;
  size_t first_chunk_ = 0;  // the absolute chunk number of chunks_[0]
  size_t lexed_ = 0;        // tokens lexed so far (absolute)
  std::vector<Token> rule_toks_;
  bool lexed_end_ = false;
  size_t p_ = 0;  // absolute index of the next token

  const Token& tok(size_t abs) {
    if (abs < lexed_) [[likely]]  // (a token already read: most calls)
      return chunks_[(abs >> kChunkBits) - first_chunk_][abs & (kChunk - 1)];
    while (abs >= lexed_ && !lexed_end_) {
      if ((lexed_ & (kChunk - 1)) == 0) chunks_.push_back(std::make_unique<Token[]>(kChunk));
      Token& t = chunks_.back()[lexed_ & (kChunk - 1)];
      t = lexer_.next();
      ++lexed_;
      if (t.kind == Tok::End) lexed_end_ = true;
    }
    const size_t i = std::min(abs, lexed_ - 1);
    return chunks_[(i >> kChunkBits) - first_chunk_][i & (kChunk - 1)];
  }
  // Drops the chunks before the previous token's (nothing refers to their tokens any more).
  void release() {
    if (p_ == 0) return;
    const size_t keep = (p_ - 1) >> kChunkBits;
    if (keep - first_chunk_ < 4) return;
    chunks_.erase(chunks_.begin(), chunks_.begin() + static_cast<long>(keep - first_chunk_));
    first_chunk_ = keep;
  }
  const Token& peek(size_t k = 0) { return tok(p_ + k); }
  // The rule of tokens [b, e) (absolute indexes) of a command on `line`; the token after it (a
  // listing's "# handle N" aside) is what nft's parser meets after the rule.
  ParsedRule rule_at(size_t b, size_t e, Family f, int line) {
    rule_toks_.clear();
    // (a line break inside the rule's braces is a space to nft)
    for (size_t i = b; i < e; ++i)
      if (tok(i).kind != Tok::Newline) rule_toks_.push_back(tok(i));
    size_t t = e;
    while (tok(t).kind == Tok::Handle) ++t;
    const Token term = tok(t);
    ParsedRule r = parse_rule(src_, rule_toks_.data(), rule_toks_.size(), term, f);
    r.line = line;
    return r;
  }
  const Token& next() {
    const Token& t = tok(p_);
    if (t.kind != Tok::End) ++p_;
    return t;
  }
  bool is_word(std::string_view w, size_t k = 0) { return peek(k).kind == Tok::Word && peek(k).text == w; }
  void skip_separators() {
    while (peek().kind == Tok::Newline || peek().kind == Tok::Semi) next();
  }
  void skip_newlines() {
    while (peek().kind == Tok::Newline) next();
  }
  const Token& expect(Tok k, const char* what) {
    if (peek().kind != k) fail(peek().loc, std::string("syntax error, unexpected ") + describe(peek()) + ", expecting " + what);
    return next();
  }
  // The '}' that closes a block. The file ending where a line or an item could start instead
  // is nft's "syntax error, unexpected end of file" (a listing cut short).
  void close_block() {
    if (peek().kind == Tok::End && p_ > 0) {
      const Tok before = tok(p_ - 1).kind;
      if (before == Tok::Newline || before == Tok::Semi || before == Tok::LBrace)
        fail(peek().loc, "syntax error, unexpected end of file", false);
    }
    expect(Tok::RBrace, "'}'");
  }
  // After a rule or a block inside a block, nft's parser wants the line to end.
  void end_of_item() {
    const Token& n = peek();
    if (n.kind == Tok::End) fail(n.loc, "syntax error, unexpected end of file, expecting newline or semicolon", false);
    if (n.kind == Tok::RBrace) fail(n.loc, "syntax error, unexpected '}', expecting newline or semicolon", false);
    if (n.kind != Tok::Newline && n.kind != Tok::Semi) fail(n.loc, "syntax error, unexpected " + describe(n) + ", expecting newline or semicolon");
  }
  std::string word(const char* what, Loc* loc = nullptr) {
    const Token& t = peek();
    if (t.kind != Tok::Word && t.kind != Tok::String)
      fail(t.loc, std::string("syntax error, unexpected ") + describe(t) + ", expecting " + what);
    if (loc) *loc = t.loc;
    next();
    return std::string(t.text);
  }
  // A table, chain, set, map or flowtable name: word(); an unquoted name that is not a plain name
  // (is_plain_name: a keyword, or not nft's string token) is refused: nft says "syntax error" for
  // some of them in some places.
  std::string name(const char* what, Loc* loc = nullptr) {
    refuse_unplain_name(peek());
    return word(what, loc);
  }
  uint64_t number(const char* what, Loc* loc = nullptr) {
    const Token& t = peek();
    uint64_t v;
    if (t.kind != Tok::Word || !parse_uint(t.text, &v))
      fail(t.loc, std::string("syntax error, unexpected ") + describe(t) + ", expecting " + what);
    if (loc) *loc = t.loc;
    next();
    return v;
  }
  std::optional<uint64_t> handle_comment() {
    if (peek().kind == Tok::Handle) {
      uint64_t v = 0;
      parse_uint(next().text, &v);
      return v;
    }
    return std::nullopt;
  }

  void table_spec(Command& c) {
    if (peek().kind == Tok::Word && peek(1).kind == Tok::Word) {
      if (auto f = family_from_name(peek().text)) {
        c.family = *f;
        next();
      }
    }
    c.table = name("table name", &c.table_loc);
    if (c.family != Family::Ip && c.family != Family::Ip6 && c.family != Family::Inet)
      fail(c.table_loc, std::string("family ") + family_name(c.family) + " is not modelled by kpc");
  }

  void command(Command& c) {
    const Token& first = peek();
    Loc start = first.loc;
    if (first.kind == Tok::RBrace) fail(start, "syntax error, unexpected '}'", false);  // an unbalanced block
    std::string verb = word("command");
    if (verb == "table" || verb == "chain" || verb == "set" || verb == "map" || verb == "flowtable") {
      // nft reads a bare object as "add" (the form `nft list` prints).
      --p_;
      verb = "add";
    }
    if (verb == "add") c.verb = Verb::Add;
    else if (verb == "create") c.verb = Verb::Create;
    else if (verb == "insert") c.verb = Verb::Insert;
    else if (verb == "replace") c.verb = Verb::Replace;
    else if (verb == "delete") c.verb = Verb::Delete;
    else if (verb == "flush") c.verb = Verb::Flush;
    else if (verb == "destroy") fail(start, "'destroy' is not supported by nft 1.0.6", false);
    else if (verb == "list" || verb == "reset" || verb == "rename" || verb == "get" || verb == "monitor" ||
             verb == "describe" || verb == "import" || verb == "export")
      fail(start, "command '" + verb + "' is not modelled by kpc");
    else fail(start, "syntax error, unexpected '" + verb + "'", true);
    Loc oloc = peek().loc;
    std::string obj = word("object");
    if (obj == "table") c.obj = Obj::Table;
    else if (obj == "chain") c.obj = Obj::Chain;
    else if (obj == "rule") c.obj = Obj::Rule;
    else if (obj == "set") c.obj = Obj::Set;
    else if (obj == "map") c.obj = Obj::Map;
    else if (obj == "element") c.obj = Obj::Element;
    else if (obj == "flowtable") c.obj = Obj::Flowtable;
    else if (obj == "ruleset") c.obj = Obj::Ruleset;
    else fail(oloc, "object '" + obj + "' is not modelled by kpc");
    if (c.obj == Obj::Ruleset) {
      if (c.verb != Verb::Flush) fail(oloc, "syntax error, unexpected ruleset", true);
      if (peek().kind == Tok::Word && family_from_name(peek().text)) next();
      c.loc = span(start, tok(p_ - 1).loc);
      return;
    }
    if ((c.verb == Verb::Insert || c.verb == Verb::Replace) && c.obj != Obj::Rule)
      fail(oloc, "syntax error, unexpected " + obj, true);
    table_spec(c);
    switch (c.obj) {
      case Obj::Table:
        if (peek().kind == Tok::LBrace) {
          if (c.verb != Verb::Add && c.verb != Verb::Create) fail(peek().loc, "syntax error, unexpected '{'", true);
          table_block(c);
        }
        break;
      case Obj::Chain:
        if (is_word("handle")) {
          next();
          c.handle = number("handle", &c.handle_loc);
          if (c.verb != Verb::Delete) fail(c.handle_loc, "syntax error, unexpected handle", true);
          break;
        }
        c.name = name("chain name", &c.name_loc);
        if (peek().kind == Tok::LBrace) {
          if (c.verb != Verb::Add && c.verb != Verb::Create) fail(peek().loc, "syntax error, unexpected '{'", true);
          next();
          chain_body(c, /*rules_allowed=*/false);
          close_block();
          c.chain_props = true;
        }
        break;
      case Obj::Set:
      case Obj::Map:
        if (is_word("handle")) {
          next();
          c.handle = number("handle", &c.handle_loc);
          if (c.verb != Verb::Delete) fail(c.handle_loc, "syntax error, unexpected handle", true);
          break;
        }
        c.name = name("set name", &c.name_loc);
        if (c.verb == Verb::Add || c.verb == Verb::Create) {
          c.set.mut().name = c.name;
          c.set.mut().is_map = c.obj == Obj::Map;
          expect(Tok::LBrace, "'{'");
          set_body(c.set.mut());
          close_block();
          check_set();
        }
        break;
      case Obj::Element:
        c.name = name("set name", &c.name_loc);
        if (c.verb == Verb::Flush) fail(c.name_loc, "syntax error", true);
        expect(Tok::LBrace, "'{'");
        c.elements = element_list();
        break;
      case Obj::Flowtable:
        if (is_word("handle")) {
          next();
          c.handle = number("handle", &c.handle_loc);
          break;
        }
        c.name = name("flowtable name", &c.name_loc);
        if (peek().kind == Tok::LBrace) {
          next();
          flowtable_body(c.flowtable.mut());
          close_block();
        }
        break;
      case Obj::Rule: {
        c.name = name("chain name", &c.name_loc);
        if (c.verb == Verb::Delete) {
          if (!is_word("handle")) fail(peek().loc, "syntax error, unexpected " + describe(peek()) + ", expecting handle", true);
          next();
          c.handle = number("handle", &c.handle_loc);
          break;
        }
        if (c.verb == Verb::Flush) fail(oloc, "syntax error, unexpected rule", true);
        if (is_word("index")) {
          Loc il = peek().loc;
          next();
          Loc nl;
          c.index = number("index", &nl);
          c.index_loc = span(il, nl);
        } else if (is_word("handle") || is_word("position")) {
          next();
          c.handle = number("handle", &c.handle_loc);
        }
        if (c.verb == Verb::Replace && !c.handle) fail(peek().loc, "syntax error: replace needs a handle", true);
        size_t b = p_;
        int depth = 0;
        while (true) {
          const Token& t = peek();
          if (t.kind == Tok::End) break;
          if (depth == 0 && (t.kind == Tok::Newline || t.kind == Tok::Semi)) break;
          if (t.kind == Tok::LBrace) ++depth;
          if (t.kind == Tok::RBrace) {
            if (depth == 0) break;
            --depth;
          }
          if (t.kind == Tok::Handle) fail(t.loc, "syntax error", true);
          next();
        }
        // A '{' still open at the end of the file: nft refuses the file ("syntax error,
        // unexpected end of file", with an "expecting ..." that depends on where the rule
        // stopped), so kpc refuses it too rather than keep a rule nft never takes.
        if (depth > 0) fail(peek().loc, "syntax error, unexpected end of file (a rule's '{' is not closed)", true);
        if (b == p_) fail(peek().loc, "syntax error, unexpected " + describe(peek()), true);
        c.rule = rule_at(b, p_, c.family, start.line);
        break;
      }
      case Obj::Ruleset: break;
    }
    c.loc = span(start, tok(p_ - 1).loc);
    // nft's command location takes the newline (or ';') that ends it
    if ((peek().kind == Tok::Newline || peek().kind == Tok::Semi) && peek().loc.line == c.loc.line)
      c.loc.col_end = peek().loc.col_end;
  }

  // `{ comment "x" ; flags a,b ; chain ... set ... }` of a table: fills c (comment, flags)
  // and c.block (the expanded commands, nft_cmd_expand's order).
  void table_block(Command& c) {
    expect(Tok::LBrace, "'{'");
    if (auto h = handle_comment()) c.listed_handle = *h;
    std::vector<Command> chains, sets, fts, rules;
    while (true) {
      skip_separators();
      release();
      if (peek().kind == Tok::RBrace) break;
      if (peek().kind == Tok::End) close_block();  // (throws: the file ends in the block)
      Loc il = peek().loc;
      std::string item = word("table item");
      if (item == "comment") {
        if (peek().kind != Tok::String) fail(peek().loc, "syntax error, expecting string");
        c.table_comment = std::string(next().text);
      } else if (item == "flags") {
        c.table_flags.push_back(word("flag"));
        while (peek().kind == Tok::Comma) {
          next();
          c.table_flags.push_back(word("flag"));
        }
        for (const auto& f : c.table_flags)
          if (f != "dormant") fail(il, "table flag '" + f + "' is not modelled by kpc");
      } else if (item == "chain") {
        Command ch;
        ch.verb = Verb::Add;
        ch.obj = Obj::Chain;
        ch.family = c.family;
        ch.table = c.table;
        ch.table_loc = c.table_loc;
        ch.name = name("chain name", &ch.name_loc);
        ch.chain.mut().name = ch.name;
        expect(Tok::LBrace, "'{'");
        if (auto h = handle_comment()) ch.listed_handle = *h;
        std::vector<Command> crules = chain_body(ch, /*rules_allowed=*/true);
        close_block();
        end_of_item();
        ch.chain_props = true;
        ch.loc = span(il, tok(p_ - 1).loc);
        chains.push_back(std::move(ch));
        for (auto& r : crules) rules.push_back(std::move(r));
      } else if (item == "set" || item == "map") {
        Command st;
        st.verb = Verb::Add;
        st.obj = item == "set" ? Obj::Set : Obj::Map;
        st.family = c.family;
        st.table = c.table;
        st.table_loc = c.table_loc;
        st.name = name("set name", &st.name_loc);
        st.set.mut().name = st.name;
        st.set.mut().is_map = st.obj == Obj::Map;
        expect(Tok::LBrace, "'{'");
        if (auto h = handle_comment()) st.set.mut().handle = *h;
        set_body(st.set.mut());
        close_block();
        check_set();
        end_of_item();
        st.loc = span(il, tok(p_ - 1).loc);
        sets.push_back(std::move(st));
      } else if (item == "flowtable") {
        Command ft;
        ft.verb = Verb::Add;
        ft.obj = Obj::Flowtable;
        ft.family = c.family;
        ft.table = c.table;
        ft.table_loc = c.table_loc;
        ft.name = name("flowtable name", &ft.name_loc);
        ft.flowtable.mut().name = ft.name;
        expect(Tok::LBrace, "'{'");
        if (auto h = handle_comment()) ft.flowtable.mut().handle = *h;
        flowtable_body(ft.flowtable.mut());
        close_block();
        end_of_item();
        ft.loc = span(il, tok(p_ - 1).loc);
        fts.push_back(std::move(ft));
      } else {
        fail(il, "table item '" + item + "' is not modelled by kpc");
      }
    }
    close_block();
    c.table_block = true;
    for (auto& x : chains) c.block.push_back(std::move(x));
    for (auto& x : sets) c.block.push_back(std::move(x));
    for (auto& x : fts) c.block.push_back(std::move(x));
    for (auto& x : rules) c.block.push_back(std::move(x));
  }

  int priority_expr(Family f, const std::string& hook) {
    Loc l = peek().loc;
    std::string w = word("priority");
    int base = 0;
    uint64_t v;
    if (!w.empty() && w[0] == '-' && parse_uint(w.substr(1), &v) && v <= 0x7fffffff) return -static_cast<int>(v);
    if (parse_uint(w, &v) && v <= 0x7fffffff) return static_cast<int>(v);
    if (!valid_priority_name(w, f, hook, &base)) fail(l, "priority '" + w + "' is not modelled by kpc for this hook");
    if (is_word("+") || is_word("-")) {
      bool neg = next().text == "-";
      uint64_t off = number("priority offset");
      if (off > 100000) fail(l, "priority offset out of range");
      return neg ? base - static_cast<int>(off) : base + static_cast<int>(off);
    }
    return base;
  }

  // Chain properties and (in a table block) rules, up to the closing '}'.
  std::vector<Command> chain_body(Command& ch, bool rules_allowed) {
    std::vector<Command> rules;
    while (true) {
      skip_separators();
      release();
      if (peek().kind == Tok::RBrace || peek().kind == Tok::End) break;
      Loc il = peek().loc;
      if (is_word("type") && peek(1).kind == Tok::Word && is_word("hook", 2)) {
        next();
        ch.chain.mut().has_hook = true;
        ch.chain.mut().type = word("chain type", &ch.chain.mut().type_loc);
        next();  // hook
        ch.chain.mut().hook = word("hook");
        if (is_word("device")) {
          next();
          ch.chain.mut().device = word("device");
        }
        if (!is_word("priority")) fail(peek().loc, "syntax error, unexpected " + describe(peek()) + ", expecting priority", true);
        next();
        ch.chain.mut().priority = priority_expr(ch.family, ch.chain.mut().hook);
        continue;
      }
      if (is_word("policy")) {
        next();
        std::string pol = word("policy");
        if (pol != "accept" && pol != "drop") fail(il, "chain policy '" + pol + "' is not modelled by kpc");
        ch.chain.mut().policy = pol;
        continue;
      }
      if (is_word("comment") && peek(1).kind == Tok::String &&
          (peek(2).kind == Tok::Newline || peek(2).kind == Tok::Semi || peek(2).kind == Tok::RBrace)) {
        next();
        ch.chain.mut().comment = std::string(next().text);
        continue;
      }
      if (is_word("flags") || is_word("devices")) fail(il, "chain '" + std::string(peek().text) + "' is not modelled by kpc");
      if (!rules_allowed) fail(il, "syntax error, unexpected " + describe(peek()), true);
      // A rule: up to the end of the line (or ';').
      size_t b = p_;
      int depth = 0;
      std::optional<uint64_t> handle;
      size_t e = p_;
      while (true) {
        const Token& t = peek();
        if (t.kind == Tok::End) break;
        if (depth == 0 && (t.kind == Tok::Newline || t.kind == Tok::Semi || t.kind == Tok::RBrace)) break;
        if (t.kind == Tok::Handle) {
          handle = handle_comment();
          continue;
        }
        if (t.kind == Tok::LBrace) ++depth;
        if (t.kind == Tok::RBrace) --depth;
        next();
        e = p_;
      }
      Command r;
      r.verb = Verb::Add;
      r.obj = Obj::Rule;
      r.family = ch.family;
      r.table = ch.table;
      r.table_loc = ch.table_loc;
      r.name = ch.name;
      r.name_loc = ch.name_loc;
      r.rule = rule_at(b, e, ch.family, tok(b).loc.line);
      r.loc = span(tok(b).loc, tok(e - 1).loc);
      if (handle) r.listed_handle = *handle;
      rules.push_back(std::move(r));
      end_of_item();
    }
    return rules;
  }

  // What nft's evaluation says of a set's definition, said once the set's block is read (a
  // block cut short is the parser's error first).
  std::optional<ParseFailure> set_error_;
  void check_set() {
    if (set_error_) throw *set_error_;
  }
  void set_body(SetSpec& s) {
    set_error_.reset();
    while (true) {
      skip_separators();
      if (peek().kind == Tok::RBrace || peek().kind == Tok::End) break;
      Loc il = peek().loc;
      std::string item = word("set property");
      if (item == "type") {
        s.key_names.push_back(word("type"));
        while (is_word(".")) {
          next();
          s.key_names.push_back(word("type"));
        }
        if (peek().kind == Tok::Colon) {
          next();
          s.data_name = word("type");
          if (is_word(".")) fail(peek().loc, "concatenated map data is not modelled by kpc");
        }
        if (s.is_map && s.data_name.empty() && !set_error_)
          set_error_ = ParseFailure{il, "map definition does not specify mapping data type", false};
        if (!s.is_map && !s.data_name.empty()) fail(il, "a set with a data type is not modelled by kpc");
      } else if (item == "typeof") {
        fail(il, "typeof sets are not modelled by kpc");
      } else if (item == "flags") {
        s.flags.push_back(word("flag"));
        while (peek().kind == Tok::Comma) {
          next();
          s.flags.push_back(word("flag"));
        }
        for (const auto& f : s.flags)
          if (f != "dynamic" && f != "timeout" && f != "interval" && f != "constant")
            fail(il, "set flag '" + f + "' is not modelled by kpc");
      } else if (item == "timeout") {
        uint64_t ms;
        Loc l;
        std::string w = word("time", &l);
        if (!parse_time(w, &ms)) fail(l, "syntax error: bad time '" + w + "'", true);
        s.timeout_ms = ms;
      } else if (item == "gc-interval") {
        uint64_t ms;
        Loc l;
        std::string w = word("time", &l);
        if (!parse_time(w, &ms)) fail(l, "syntax error: bad time '" + w + "'", true);
        s.gc_interval_ms = ms;
      } else if (item == "size") {
        uint64_t v = number("size");
        if (v == 0 || v > 0xffffffffULL) fail(il, "set size out of range");
        s.size = static_cast<uint32_t>(v);
      } else if (item == "policy") {
        std::string pol = word("policy");
        if (pol != "memory" && pol != "performance") fail(il, "set policy '" + pol + "' is not modelled by kpc");
        s.policy = pol;
      } else if (item == "auto-merge") {
        s.auto_merge = true;
      } else if (item == "comment") {
        if (peek().kind != Tok::String) fail(peek().loc, "syntax error, expecting string", true);
        s.comment = std::string(next().text);
      } else if (item == "elements") {
        if (!is_word("=")) fail(peek().loc, "syntax error, expecting '='", true);
        next();
        s.elements_loc = peek().loc;
        expect(Tok::LBrace, "'{'");
        s.elements = element_list();
        s.has_elements = true;
      } else {
        fail(il, "set property '" + item + "' is not modelled by kpc");
      }
    }
    if (s.key_names.empty() && !set_error_)
      set_error_ = ParseFailure{peek().loc, std::string(s.is_map ? "map" : "set") + " definition does not specify key", false};
  }

  // After '{': elements up to and including '}'.
  std::vector<ElemSpec> element_list() {
    std::vector<ElemSpec> out;
    while (true) {
      skip_newlines();
      if (peek().kind == Tok::RBrace) {
        next();
        break;
      }
      // (nft's words for a list cut short at a line break, after a first element or not; in a
      // line, a word cut short may be another token to nft)
      if (peek().kind == Tok::End)
        fail(peek().loc, out.empty() ? "syntax error, unexpected end of file" : "syntax error, unexpected end of file, expecting comma or '}'",
             tok(p_ - 1).kind != Tok::Newline);
      ElemSpec e;
      Loc kb = peek().loc, ke = kb;
      e.key.push_back(word("element key", &ke));
      while (is_word(".")) {
        next();
        e.key.push_back(word("element key", &ke));
      }
      while (true) {
        if (is_word("timeout")) {
          next();
          e.timeout = word("time", &ke);
        } else if (is_word("expires")) {
          next();
          e.expires = word("time", &ke);
        } else if (is_word("comment")) {
          next();
          if (peek().kind != Tok::String) fail(peek().loc, "syntax error, expecting string", true);
          ke = peek().loc;
          e.comment = std::string(next().text);
        } else if (is_word("counter")) {
          fail(peek().loc, "element counters are not modelled by kpc");
        } else {
          break;
        }
      }
      // nft locates an element at its key and its options (comment, timeout), not its value
      e.key_loc = span(kb, ke);
      if (peek().kind == Tok::Colon) {
        next();
        std::string v = word("element value");
        if (v == "goto" || v == "jump") v += " " + name("chain name");
        else if (is_word(".")) fail(peek().loc, "concatenated map data is not modelled by kpc");
        e.value = v;
      }
      out.push_back(std::move(e));
      skip_newlines();
      if (peek().kind == Tok::Comma) {
        next();
        continue;
      }
      skip_newlines();
      if (peek().kind == Tok::RBrace) {
        next();
        break;
      }
      fail(peek().loc, "syntax error, unexpected " + describe(peek()) + ", expecting comma or '}'",
           peek().kind != Tok::End || tok(p_ - 1).kind != Tok::Newline);
    }
    return out;
  }

  void flowtable_body(FlowtableSpec& f) {
    while (true) {
      skip_separators();
      if (peek().kind == Tok::RBrace || peek().kind == Tok::End) break;
      Loc il = peek().loc;
      std::string item = word("flowtable property");
      if (item == "hook") {
        std::string h = word("hook");
        if (h != "ingress") fail(il, "flowtable hook must be ingress", false);
        if (!is_word("priority")) fail(peek().loc, "syntax error, expecting priority", true);
        next();
        Loc pl = peek().loc;
        std::string w = word("priority");
        uint64_t v;
        if (w == "filter") f.priority = 0;
        else if (!w.empty() && w[0] == '-' && parse_uint(w.substr(1), &v)) f.priority = -static_cast<int>(v);
        else if (parse_uint(w, &v)) f.priority = static_cast<int>(v);
        else fail(pl, "flowtable priority '" + w + "' is not modelled by kpc");
        if (is_word("+") || is_word("-")) {
          bool neg = next().text == "-";
          uint64_t off = number("offset");
          *f.priority += neg ? -static_cast<int>(off) : static_cast<int>(off);
        }
      } else if (item == "devices") {
        if (!is_word("=")) fail(peek().loc, "syntax error, expecting '='", true);
        next();
        expect(Tok::LBrace, "'{'");
        while (true) {
          skip_newlines();
          if (peek().kind == Tok::RBrace) {
            next();
            break;
          }
          f.devices.push_back(word("device"));
          skip_newlines();
          if (peek().kind == Tok::Comma) next();
        }
      } else {
        fail(il, "flowtable property '" + item + "' is not modelled by kpc");
      }
    }
  }
};

}  // namespace

std::vector<Command> parse_script(std::string_view text) {
  Parser p(text);
  try {
    return p.script();
  } catch (const ParseFailure&) {
    // nft reads (and kpc used to read) the whole input before parsing it: a lexical error
    // anywhere in it wins over a syntax error before it.
    Lexer l(text);
    while (l.next().kind != Tok::End) {
    }
    throw;
  }
}

std::vector<Command> parse_script_part(std::string_view part, int first_line) {
  return Parser(part, first_line).script();
}

std::vector<Command> parse_script_split(std::string_view text, size_t split_min) {
  if (text.size() < split_min || text.empty()) return parse_script(text);
  const size_t nl = text.find('\n', text.size() / 2);
  if (nl == std::string_view::npos || nl + 1 >= text.size()) return parse_script(text);
  const std::string_view first = text.substr(0, nl + 1), second = text.substr(nl + 1);
  const int second_line = 1 + static_cast<int>(count_line_breaks(first));
  std::vector<Command> a, b;
  bool a_ok = false, b_ok = false;  // a parse failure is noted; anything else (bad_alloc) propagates
  side_by_side(
      [&] {
        try {
          b = Parser(second, second_line).script();
          b_ok = true;
        } catch (const ParseFailure&) {
        }
      },
      [&] {
        try {
          a = Parser(first).script(text);
          a_ok = true;
        } catch (const ParseFailure&) {
        }
      });
  if (!a_ok || !b_ok) return parse_script(text);
  a.reserve(a.size() + b.size());
  std::move(b.begin(), b.end(), std::back_inserter(a));
  return a;
}

}  // namespace detail
}  // namespace kpc::verifier::nft
