// Rule statements and values: kube-proxy's vocabulary parsed and printed as nft 1.0.6's
// `nft list` prints it. Anything else is refused, never kept unread: with nft's own words where
// nft refuses it too and kpc can tell (its parser's and its evaluation's messages, each taken
// from nft 1.0.6), else as not modelled by kpc.
#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "verifier/nft/internal.h"

namespace kpc::verifier::nft {

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::Ipv4Addr: return "ipv4_addr";
    case Dtype::Ipv6Addr: return "ipv6_addr";
    case Dtype::InetProto: return "inet_proto";
    case Dtype::InetService: return "inet_service";
    case Dtype::Mark: return "mark";
    case Dtype::Ifname: return "ifname";
    case Dtype::Integer: return "integer";
    case Dtype::Verdict: return "verdict";
    case Dtype::CtState: return "ct_state";
    case Dtype::Unknown: return "?";
  }
  return "?";
}

namespace detail {

Dtype dtype_from_name(std::string_view n) {
  if (n == "ipv4_addr") return Dtype::Ipv4Addr;
  if (n == "ipv6_addr") return Dtype::Ipv6Addr;
  if (n == "inet_proto") return Dtype::InetProto;
  if (n == "inet_service") return Dtype::InetService;
  if (n == "mark") return Dtype::Mark;
  if (n == "ifname") return Dtype::Ifname;
  if (n == "verdict") return Dtype::Verdict;
  return Dtype::Unknown;
}

uint32_t dtype_len(Dtype t) {
  switch (t) {
    case Dtype::Ipv4Addr: return 4;
    case Dtype::Ipv6Addr: return 16;
    case Dtype::InetProto: return 1;
    case Dtype::InetService: return 2;
    case Dtype::Mark: return 4;
    case Dtype::Integer: return 4;
    case Dtype::Ifname: return 16;
    default: return 0;
  }
}

std::string hex8(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

namespace {

bool ipv4(std::string_view s, unsigned char out[4]) {
  std::string z(s);
  if (inet_pton(AF_INET, z.c_str(), out) != 1) return false;
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, out, buf, sizeof buf);
  return z == buf;  // only canonical dotted quads (nft reads others through getaddrinfo)
}
bool ipv6(std::string_view s, unsigned char out[16], std::string* canon) {
  std::string z(s);
  if (z.find('%') != std::string::npos || z.find('.') != std::string::npos) return false;
  if (inet_pton(AF_INET6, z.c_str(), out) != 1) return false;
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, out, buf, sizeof buf);
  *canon = buf;
  return true;
}

struct ProtoName {
  const char* name;
  int num;
};
const ProtoName kProtos[] = {{"tcp", 6}, {"udp", 17}, {"sctp", 132}, {"icmp", 1}, {"udplite", 136}};

}  // namespace

bool canonical_value(Dtype t, std::string_view text, std::string* out, std::string* bytes) {
  uint64_t v;
  switch (t) {
    case Dtype::Ipv4Addr: {
      unsigned char a[4];
      if (!ipv4(text, a)) return false;
      *out = std::string(text);
      bytes->append(reinterpret_cast<char*>(a), 4);
      return true;
    }
    case Dtype::Ipv6Addr: {
      unsigned char a[16];
      if (!ipv6(text, a, out)) return false;
      bytes->append(reinterpret_cast<char*>(a), 16);
      return true;
    }
    case Dtype::InetProto:
      for (const auto& p : kProtos) {
        if (text == p.name || (parse_uint(text, &v) && v == static_cast<uint64_t>(p.num) && text[0] != '0')) {
          *out = p.name;
          bytes->push_back(static_cast<char>(p.num));
          return true;
        }
      }
      return false;
    case Dtype::InetService:
      if (text.empty() || text.size() > 5 || !std::all_of(text.begin(), text.end(), ::isdigit)) return false;
      if (!parse_uint(text, &v) || v > 65535 || (text.size() > 1 && text[0] == '0')) return false;
      *out = std::to_string(v);
      bytes->push_back(static_cast<char>(v >> 8));
      bytes->push_back(static_cast<char>(v & 0xff));
      return true;
    case Dtype::Mark:
      if (!parse_uint(text, &v) || v > 0xffffffffULL) return false;
      *out = hex8(static_cast<uint32_t>(v));
      for (int i = 0; i < 4; ++i) bytes->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
      return true;
    case Dtype::Integer:
      if (!parse_uint(text, &v) || v > 0xffffffffULL || text.rfind("0x", 0) == 0 ||
          (text.size() > 1 && text[0] == '0'))
        return false;
      *out = std::to_string(v);
      for (int i = 0; i < 4; ++i) bytes->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
      return true;
    case Dtype::Ifname:
      if (text.empty() || text.size() > 15) return false;
      *out = quote(text);
      bytes->append(std::string(text));
      bytes->append(16 - text.size(), '\0');
      return true;
    default:
      return false;
  }
}

namespace {

struct Bad {
  std::string why;
};
[[noreturn]] void bad(std::string why) { throw Bad{std::move(why)}; }

// An lhs expression: its canonical text and the datatype of what it yields.
struct Lhs {
  std::string text;
  std::vector<Dtype> types;  ///< one per concatenated field
  bool binop = false;
  bool fib = false;
  bool ctstate = false;
  bool numgen = false;
};

const char* kCtStates[] = {"invalid", "established", "related", "new", "untracked"};
const uint32_t kCtBits[] = {1, 2, 4, 8, 64};

const char* kFibTypes[] = {"unspec", "unicast", "local", "broadcast", "anycast", "multicast", "blackhole",
                           "unreachable", "prohibit"};

class RuleParser {
 public:
  RuleParser(std::string_view src, const Token* t, size_t b, size_t e, const Token& term, Family f)
      : src_(src), t_(t), p_(b), end_(e), full_end_(e), term_(term), fam_(f) {}

  ParsedRule parse() {
    ParsedRule r;
    RuleBody said;  // (r.body, once complete)
    // The comment: a trailing `comment "..."`.
    size_t stmt_end = end_;
    if (end_ - p_ >= 2 && t_[end_ - 2].kind == Tok::Word && t_[end_ - 2].text == "comment" &&
        t_[end_ - 1].kind == Tok::String) {
      said.comment = std::string(t_[end_ - 1].text);
      stmt_end = end_ - 2;
    }
    if (stmt_end > p_) said.text = std::string(src_.substr(t_[p_].off, t_[stmt_end - 1].end - t_[p_].off));
    end_ = stmt_end;
    try {
      std::string out;  // the statements' texts, one space apart
      out.reserve(said.text.size() + 16);
      size_t statements = 0;
      while (p_ < end_) {
        if (statements++) out += ' ';
        out += next_statement();
      }
      if (!statements) bad("a rule of a comment only");
      // (moved: the parser is not read again)
      said.canonical = std::move(out);
    } catch (const Bad& b) {
      // A statement kpc does not read is never kept: nft may refuse it or do with it what kpc
      // cannot tell (knftables' fake took any text; so did kpc before).
      const size_t from = std::min(stmt_start_, full_end_ - 1);
      const size_t to = std::max(from + 1, std::min(end_, full_end_));
      const Token &a = t_[from], &z = t_[to - 1];
      throw ParseFailure{span(a.loc, z.loc), std::string(src_.substr(a.off, z.end - a.off)) + " (" + b.why + ")", true};
    }
    said.refs = std::move(refs_);
    r.ref_locs = std::move(ref_locs_);
    r.anon_sets = std::move(anon_);
    r.stmt_errors = std::move(errors_);
    if (said.comment) said.canonical += " comment " + quote(*said.comment);
    r.body = std::make_shared<const RuleBody>(std::move(said));
    return r;
  }

 private:
  // One statement; a statement after one nft takes as terminal is nft's evaluation error, the
  // terminal marked (checked before the statement is evaluated: it comes before the
  // statement's own errors).
  std::string next_statement() {
    stmt_start_ = p_;
    const size_t refs_at = ref_locs_.size(), errors_at = errors_.size();
    if (ended_) bad("a statement after a verdict map or continue");
    const std::optional<Loc> terminal = terminal_;
    std::string s = statement();
    if (terminal) {
      ParsedRule::StmtError e;
      e.loc = stmt_loc(stmt_start_);
      e.mark = *terminal;
      e.message = "Statement after terminal statement has no effect";
      e.refs_before = refs_at;
      errors_.insert(errors_.begin() + static_cast<long>(errors_at), std::move(e));
    }
    return s;
  }
  // Where nft locates the statement of tokens [b, p_): the keyword of counter, nat and reject
  // statements, the whole statement otherwise.
  Loc stmt_loc(size_t b) const {
    const Token& k = t_[b];
    if (k.kind == Tok::Word && (k.text == "counter" || k.text == "dnat" || k.text == "snat" ||
                                k.text == "masquerade" || k.text == "reject"))
      return k.loc;
    return span(k.loc, t_[p_ - 1].loc);
  }
  static Loc span(const Loc& a, const Loc& b) {
    return Loc{a.line, a.col_begin, b.line == a.line ? b.col_end : a.col_end};
  }
  [[noreturn]] static void syntax_error(const Loc& at, std::string what) {
    throw ParseFailure{at, "syntax error, unexpected " + what, false};
  }

  // A statement that starts with a word kpc does not read there: what nft says of it, where
  // kpc can tell, else the model's refusal.
  std::string unread_statement() {
    const Token& t = peek();
    if (t.kind == Tok::Word && is_string_token(t.text) && !is_keyword_name(t.text)) return symbol_statement();
    if (t.kind == Tok::Word) field_error();
    bad("a statement kpc does not read");
  }

  // A word outside nft's keywords where a statement starts is nft's `string` token: a symbol
  // nft's parser takes as the left side of a comparison (`foo bar`). Its evaluation then has
  // no type for it: "No symbol type information" at the word. Without a right side it is the
  // parser's error at what comes instead (a newline, ';', the end of the file, '}', or a
  // keyword that cannot be one).
  std::string symbol_statement() {
    const Token& w = next();
    if (at_end()) {
      if (end_ < full_end_) syntax_error(t_[end_].loc, "comment");  // (the comment parse() took off)
      switch (term_.kind) {
        case Tok::Newline: syntax_error(term_.loc, "newline");
        case Tok::Semi: syntax_error(term_.loc, "semicolon");
        case Tok::End: syntax_error(term_.loc, "end of file");
        case Tok::RBrace: syntax_error(term_.loc, "'}'");
        default: bad("a word nft does not know");
      }
    }
    const Token& n = peek();
    if (n.kind == Tok::Word && is_keyword_name(n.text) && !keyword_value(n.text)) syntax_error(n.loc, std::string(n.text));
    if (is("==") || is("!=")) ++p_;
    if (at_end() || !symbol_value(peek())) bad("a word nft does not know, compared with what kpc does not read");
    ++p_;
    errors_.push_back({w.loc, {}, "No symbol type information", ref_locs_.size(), false});
    return std::string(src_.substr(w.off, t_[p_ - 1].end - w.off));
  }
  // The keywords nft's parser takes after a symbol (a value, an operator, a map): others are
  // its syntax error "unexpected KEYWORD" (each checked with nft 1.0.6).
  static bool keyword_value(std::string_view k) {
    static constexpr std::string_view kTaken[] = {
        "ah", "and", "arp", "comp", "dccp", "dnat", "ecn", "eq", "esp", "ether", "exists", "ge", "gt",
        "icmp", "icmpv6", "igmp", "ip", "ip6", "le", "ll", "lshift", "lt", "map", "missing", "ne", "nh",
        "not", "or", "redirect", "reset", "rshift", "sctp", "snat", "tcp", "udp", "udplite", "vlan", "vmap", "xor"};
    return std::find(std::begin(kTaken), std::end(kTaken), k) != std::end(kTaken);
  }
  // A right side nft reads as one value: a string, a number, an IPv4 address, another word
  // outside its keywords.
  static bool symbol_value(const Token& v) {
    if (v.kind == Tok::String) return true;
    if (v.kind != Tok::Word) return false;
    if (std::all_of(v.text.begin(), v.text.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
    unsigned char a[4];
    if (ipv4(v.text, a)) return true;
    return is_string_token(v.text) && !is_keyword_name(v.text);
  }
  // A protocol (or meta, numgen) keyword followed by a word that is nft's `string` token where
  // a field is expected: nft's parser error at the word (nft 1.0.6's words, per keyword).
  // Returns when kpc cannot tell.
  void field_error() {
    const Token& k = peek();
    const Token& f = peek(1);
    if (f.kind != Tok::Word || !is_string_token(f.text) || is_keyword_name(f.text) || is_parser_word(f.text)) return;
    struct Expecting {
      std::string_view keyword, expecting;
    };
    static constexpr Expecting kFields[] = {
        {"ip", ""}, {"ip6", ""}, {"tcp", ""}, {"sctp", ""}, {"ct", ""}, {"fib", ""}, {"vlan", ""}, {"arp", ""},
        {"icmp", ""}, {"icmpv6", ""}, {"ah", ""}, {"rt", ""}, {"exthdr", ""},
        {"udp", ", expecting length or checksum or sport or dport"},
        {"udplite", ", expecting checksum or sport or dport or csumcov"},
        {"th", ", expecting sport or dport"},
        {"dccp", ", expecting type or sport or dport"},
        {"ether", ", expecting saddr or daddr or type"},
        {"esp", ", expecting seq or spi"},
        {"comp", ", expecting nexthdr or flags or cpi"},
        {"numgen", ", expecting random or inc"},
    };
    for (const auto& e : kFields)
      if (k.text == e.keyword) syntax_error(f.loc, "string" + std::string(e.expecting));
    if (k.text == "meta") {
      // (nft looks a meta key up by name, and names the keys it knows)
      static constexpr std::string_view kMetaKeys =
          "length, protocol, priority, mark, iif, oif, iifname, oifname, iiftype, oiftype, skuid, skgid, "
          "nftrace, rtclassid, secmark, nfproto, l4proto, ibrname, obrname, pkttype, cpu, iifgroup, "
          "oifgroup, cgroup, random, ipsec, iifkind, oifkind, ibrpvid, ibrvproto, time, day, hour, sdif, "
          "sdifname";
      const std::string key = std::string(f.text);
      if (f.text == "secpath" || (", " + std::string(kMetaKeys) + ",").find(", " + key + ",") != std::string::npos) return;
      syntax_error(span(k.loc, f.loc), key + ", known keys are " + std::string(kMetaKeys));
    }
  }

 private:
  std::string_view src_;
  const Token* t_;
  size_t p_, end_, full_end_;  // (full_end_: with the comment)
  const Token& term_;  // the token after the rule
  Family fam_;
  size_t stmt_start_ = 0;
  std::optional<Loc> terminal_;  // the first statement nft takes as terminal (a verdict, nat, reject)
  bool ended_ = false;           // a statement kpc reads nothing after (continue, a verdict map): nft does
  std::vector<ParsedRule::StmtError> errors_;
  RuleRefs refs_;
  std::vector<ParsedRule::Ref> ref_locs_;
  std::vector<ParsedRule::AnonSet> anon_;

  bool at_end() const { return p_ >= end_; }
  const Token& peek(size_t k = 0) const {
    static const Token none;
    return p_ + k < end_ ? t_[p_ + k] : none;
  }
  bool is(std::string_view w, size_t k = 0) const { return peek(k).kind == Tok::Word && peek(k).text == w; }
  const Token& next() {
    if (at_end()) bad("an incomplete statement");
    return t_[p_++];
  }
  std::string word() {
    const Token& t = next();
    if (t.kind != Tok::Word) bad("an unexpected token");
    return std::string(t.text);
  }

  // (a name nft reads as a keyword or another token -- `jump jump`, `goto .`, `@set` -- is
  // refused as not modelled: nft refuses some of them)
  void add_chain_ref(const Token& t) {
    refuse_unplain_name(t);
    refs_.chains.push_back(std::string(t.text));
    ref_locs_.push_back({std::string(t.text), t.loc, ParsedRule::Ref::Chain});
  }
  void add_set_ref(const Token& t, ParsedRule::Ref::Kind k) {
    refuse_unplain_name(t);
    refs_.sets.push_back(std::string(t.text));
    if (k == ParsedRule::Ref::Dynset) refs_.dynset.push_back(std::string(t.text));
    ref_locs_.push_back({std::string(t.text), t.loc, k});
  }

  // A primary expression, or nothing (false) if the next words are not one.
  bool primary(Lhs* out) {
    const Token& t = peek();
    if (t.kind != Tok::Word) return false;
    const std::string_view w = t.text;
    auto take = [&](int n, std::string text, Dtype d) {
      p_ += n;
      out->text = std::move(text);
      out->types = {d};
      return true;
    };
    if (w == "ip" && (is("saddr", 1) || is("daddr", 1))) {
      if (fam_ == Family::Ip6) bad("ip in an ip6 table");
      return take(2, "ip " + std::string(peek(1).text), Dtype::Ipv4Addr);
    }
    if (w == "ip" && is("protocol", 1)) return take(2, "ip protocol", Dtype::InetProto);
    if (w == "ip6" && (is("saddr", 1) || is("daddr", 1))) {
      if (fam_ == Family::Ip) bad("ip6 in an ip table");
      return take(2, "ip6 " + std::string(peek(1).text), Dtype::Ipv6Addr);
    }
    if (w == "meta" && is("l4proto", 1)) return take(2, "meta l4proto", Dtype::InetProto);
    if (w == "meta" && is("mark", 1)) return take(2, "meta mark", Dtype::Mark);
    if (w == "mark") return take(1, "meta mark", Dtype::Mark);
    if (w == "meta" && (is("iifname", 1) || is("oifname", 1))) return take(2, std::string(peek(1).text), Dtype::Ifname);
    if (w == "iifname" || w == "oifname") return take(1, std::string(w), Dtype::Ifname);
    if (w == "th" && (is("dport", 1) || is("sport", 1))) {
      if (one_transport_) bad("a th field after a match of one transport protocol (nft lists the two merged)");
      return take(2, "th " + std::string(peek(1).text), Dtype::InetService);
    }
    if ((w == "tcp" || w == "udp" || w == "sctp") && (is("dport", 1) || is("sport", 1)))
      return take(2, std::string(w) + " " + std::string(peek(1).text), Dtype::InetService);
    if (w == "ct" && is("state", 1)) {
      out->ctstate = true;
      return take(2, "ct state", Dtype::CtState);
    }
    if (w == "ct" && is("mark", 1)) return take(2, "ct mark", Dtype::Mark);
    if (w == "fib" && (is("saddr", 1) || is("daddr", 1)) && is("type", 2)) {
      out->fib = true;
      return take(3, "fib " + std::string(peek(1).text) + " type", Dtype::Unknown);
    }
    if (w == "numgen" && is("random", 1) && is("mod", 2)) {
      uint64_t n;
      if (!parse_uint(peek(3).text, &n) || n == 0 || n > 0xffffffffULL || peek(3).text.rfind("0x", 0) == 0)
        bad("a numgen modulus");
      std::string text = "numgen random mod " + std::to_string(n);
      int used = 4;
      if (is("offset", 4)) {
        uint64_t o;
        if (!parse_uint(peek(5).text, &o) || o > 0xffffffffULL) bad("a numgen offset");
        if (o) text += " offset " + std::to_string(o);
        used = 6;
      }
      out->numgen = true;
      return take(used, text, Dtype::Integer);
    }
    return false;
  }

  bool lhs(Lhs* out) {
    if (!primary(out)) return false;
    while (is(".")) {
      ++p_;
      Lhs more;
      if (!primary(&more) || more.fib || more.ctstate || more.numgen || out->fib || out->ctstate)
        bad("a concatenation kpc does not model");
      out->text += " . " + more.text;
      out->types.push_back(more.types[0]);
    }
    if (out->types.size() == 1 && out->types[0] == Dtype::Mark && (is("and", 0) || is("&", 0))) {
      ++p_;
      std::string v, b;
      const std::string m = word();
      if (!canonical_value(Dtype::Mark, m, &v, &b)) bad("a mark mask");
      // A mask of leading ones (0, 0xffff0000, 0xffffffff) nft lists as a prefix
      // (`meta mark 0x00000005/16`, or without `/32`): not this form.
      uint64_t mv = 0;
      const uint32_t inv = parse_uint(m, &mv) ? ~static_cast<uint32_t>(mv) : 0;
      if ((inv & (inv + 1)) == 0) bad("a mark mask nft lists as a prefix");
      out->text += " & " + v;
      out->binop = true;
    }
    return true;
  }

  // A single value of type d (or a prefix of an address); its canonical text and
  // (for prefixes) the numeric range for overlap checks.
  std::string value(Dtype d, std::string* sortkey) {
    const Token& t = next();
    if (d == Dtype::Ifname) {
      if (t.kind != Tok::String && t.kind != Tok::Word) bad("an interface name");
      // unquoted: nft's string token (a keyword or a symbol is another token), `*` at the end
      if (t.kind == Tok::Word) {
        std::string_view n = t.text;
        if (!n.empty() && n.back() == '*') n.remove_suffix(1);
        if (!is_plain_name(n)) bad("an unquoted interface name nft may not read as one");
      }
      std::string out, b;
      if (!canonical_value(d, t.text, &out, &b)) bad("an interface name");
      *sortkey = b;
      return out;
    }
    if (t.kind != Tok::Word) bad("a value");
    std::string w = std::string(t.text);
    if (d == Dtype::Ipv4Addr || d == Dtype::Ipv6Addr) {
      size_t slash = w.find('/');
      std::string addr = w.substr(0, slash);
      std::string canon, bytes;
      if (!canonical_value(d, addr, &canon, &bytes)) bad("an address");
      if (slash == std::string::npos) {
        *sortkey = bytes;
        return canon;
      }
      uint64_t len;
      unsigned bits = d == Dtype::Ipv4Addr ? 32 : 128;
      if (!parse_uint(w.substr(slash + 1), &len) || len > bits || w.substr(slash + 1).rfind("0x", 0) == 0)
        bad("a prefix length");
      // nft masks the host bits.
      for (unsigned i = 0; i < bytes.size(); ++i) {
        int keep = static_cast<int>(len) - static_cast<int>(i * 8);
        unsigned char m = keep >= 8 ? 0xff : keep <= 0 ? 0 : static_cast<unsigned char>(0xff << (8 - keep));
        bytes[i] = static_cast<char>(static_cast<unsigned char>(bytes[i]) & m);
      }
      char buf[INET6_ADDRSTRLEN];
      inet_ntop(d == Dtype::Ipv4Addr ? AF_INET : AF_INET6, bytes.data(), buf, sizeof buf);
      *sortkey = bytes + std::string(1, static_cast<char>(len));
      if (len == bits) return buf;
      return std::string(buf) + "/" + std::to_string(len);
    }
    std::string out, b;
    if (!canonical_value(d, w, &out, &b)) bad("a value of type " + std::string(dtype_name(d)));
    // numeric order for host-endian integers
    if (d == Dtype::Mark || d == Dtype::Integer) std::reverse(b.begin(), b.end());
    *sortkey = b;
    return out;
  }

  static bool prefix_overlaps(Dtype d, const std::string& a, const std::string& b) {
    // sort keys of addresses/prefixes: bytes + (prefix length if any)
    size_t n = dtype_len(d);
    unsigned bits = n * 8;
    unsigned la = a.size() > n ? static_cast<unsigned char>(a[n]) : bits;
    unsigned lb = b.size() > n ? static_cast<unsigned char>(b[n]) : bits;
    unsigned l = std::min(la, lb);
    // overlap or adjacency both make nft merge: treat "touching" as not modelled too
    for (unsigned i = 0; i < n; ++i) {
      int keep = static_cast<int>(l) - static_cast<int>(i * 8);
      unsigned char m = keep >= 8 ? 0xff : keep <= 0 ? 0 : static_cast<unsigned char>(0xff << (8 - keep));
      if ((a[i] & m) != (b[i] & m)) return false;
    }
    return true;
  }

  // `{ v, v, ... }` after '{' was consumed; the set's elements sorted as nft lists them.
  std::string anon_set(Dtype d, bool* single, const Loc& open) {
    std::vector<std::pair<std::string, std::string>> elems;  // sortkey, text
    Loc close = open;
    bool interval = false;
    while (true) {
      if (peek().kind == Tok::RBrace) {
        close = peek().loc;
        ++p_;
        break;
      }
      if (peek().kind == Tok::Word && peek().text.find('/') != std::string::npos) interval = true;
      std::string sk;
      std::string v = value(d, &sk);
      elems.push_back({sk, v});
      if (peek().kind == Tok::Comma) {
        ++p_;
        continue;
      }
      if (peek().kind == Tok::RBrace) {
        close = peek().loc;
        ++p_;
        break;
      }
      bad("an anonymous set kpc does not model");
    }
    if (elems.empty()) bad("an empty set");
    *single = elems.size() == 1;
    if (*single) return elems[0].second;
    std::sort(elems.begin(), elems.end());
    for (size_t i = 0; i + 1 < elems.size(); ++i) {
      if (elems[i].first == elems[i + 1].first) bad("duplicate elements (nft merges them)");
      if ((d == Dtype::Ipv4Addr || d == Dtype::Ipv6Addr) && prefix_overlaps(d, elems[i].first, elems[i + 1].first))
        bad("overlapping intervals (nft merges them)");
    }
    if (d == Dtype::Ipv4Addr || d == Dtype::Ipv6Addr) {
      // adjacent intervals are merged by nft's auto-merge: refuse them
      for (size_t i = 0; i + 1 < elems.size(); ++i) {
        if (adjacent(d, elems[i].first, elems[i + 1].first)) bad("adjacent intervals (nft merges them)");
      }
    }
    std::string out = "{ ";
    for (size_t i = 0; i < elems.size(); ++i) {
      if (i) out += ", ";
      out += elems[i].second;
    }
    out += " }";
    ParsedRule::AnonSet as;
    as.loc = Loc{open.line, open.col_begin, close.col_end};
    as.interval = interval;
    anon_.push_back(as);
    return out;
  }

  static bool adjacent(Dtype d, const std::string& a, const std::string& b) {
    // end of a + 1 == start of b ?
    size_t n = dtype_len(d);
    unsigned bits = n * 8;
    unsigned la = a.size() > n ? static_cast<unsigned char>(a[n]) : bits;
    std::string end(a.begin(), a.begin() + n);
    for (unsigned i = 0; i < n; ++i) {
      int keep = static_cast<int>(la) - static_cast<int>(i * 8);
      unsigned char m = keep >= 8 ? 0xff : keep <= 0 ? 0 : static_cast<unsigned char>(0xff << (8 - keep));
      end[i] = static_cast<char>(static_cast<unsigned char>(end[i]) | static_cast<unsigned char>(~m));
    }
    // end + 1
    for (int i = static_cast<int>(n) - 1; i >= 0; --i) {
      unsigned char c = static_cast<unsigned char>(end[i]);
      end[i] = static_cast<char>(c + 1);
      if (c != 0xff) break;
      if (i == 0) return false;  // wrapped
    }
    return std::equal(end.begin(), end.end(), b.begin());
  }

  std::string verdict_word() {
    const Token& t = next();
    if (t.kind != Tok::Word) bad("a verdict");
    if (t.text == "accept" || t.text == "drop" || t.text == "return" || t.text == "continue") {
      // (continue is not terminal to nft: what follows it is evaluated; kpc reads nothing there)
      if (t.text == "continue") ended_ = true;
      else if (!terminal_) terminal_ = t.loc;
      return std::string(t.text);
    }
    if (t.text == "jump" || t.text == "goto") {
      const Token& c = next();
      if (c.kind != Tok::Word) bad("a chain name");
      add_chain_ref(c);
      if (!terminal_) terminal_ = span(t.loc, c.loc);
      std::string out;
      out.reserve(t.text.size() + 1 + c.text.size());
      out += t.text;
      out += ' ';
      out += c.text;
      return out;
    }
    bad("a verdict");
  }

  // The statement's text: the lhs's, then the map.
  std::string inline_vmap(const Lhs& l, const Loc& open) {
    if (l.types.size() != 1) bad("an anonymous concatenated map");
    Loc close = open;
    Dtype d = l.types[0];
    // (the verdict and the chain are views of the tokens: the source outlives the parse)
    struct E {
      std::string sk, key;
      std::string_view verdict, chain;
      Loc loc;
    };
    std::vector<E> elems;
    while (true) {
      if (peek().kind == Tok::RBrace) {
        close = peek().loc;
        ++p_;
        break;
      }
      E& e = elems.emplace_back();
      e.loc = peek().loc;
      e.key = value(d, &e.sk);
      if (peek().kind != Tok::Colon) bad("a map element without ':'");
      ++p_;
      const Token& v = next();
      if (v.kind != Tok::Word) bad("a verdict");
      if (v.text == "jump" || v.text == "goto") {
        const Token& c = next();
        if (c.kind != Tok::Word) bad("a chain name");
        refuse_unplain_name(c);
        e.verdict = v.text;
        e.chain = c.text;
        refs_.chains.push_back(std::string(c.text));
      } else if (v.text == "accept" || v.text == "drop" || v.text == "return" || v.text == "continue") {
        e.verdict = v.text;
      } else {
        bad("a verdict");
      }
      if (peek().kind == Tok::Comma) {
        ++p_;
        continue;
      }
      if (peek().kind == Tok::RBrace) {
        close = peek().loc;
        ++p_;
        break;
      }
      bad("an anonymous map kpc does not model");
    }
    if (elems.empty()) bad("an empty map");
    ParsedRule::AnonSet& as = anon_.emplace_back();
    as.loc = Loc{open.line, open.col_begin, close.col_end};
    as.chain_values.reserve(elems.size());
    for (const auto& e : elems)
      if (!e.chain.empty()) as.chain_values.push_back({std::string(e.chain), e.loc});
    // nft lists the elements by their keys' bytes (numgen's 0..N-1 come in order already)
    auto by_key = [](const E& a, const E& b) { return a.sk < b.sk; };
    if (!std::is_sorted(elems.begin(), elems.end(), by_key)) std::sort(elems.begin(), elems.end(), by_key);
    for (size_t i = 0; i + 1 < elems.size(); ++i)
      if (elems[i].sk == elems[i + 1].sk) bad("duplicate map keys");
    std::string out;
    size_t n = l.text.size() + 10;
    for (const auto& e : elems) n += e.key.size() + e.verdict.size() + e.chain.size() + 6;
    out.reserve(n);
    out += l.text;
    out += " vmap { ";
    for (size_t i = 0; i < elems.size(); ++i) {
      if (i) out += ", ";
      out += elems[i].key;
      out += " : ";
      out += elems[i].verdict;
      if (!elems[i].chain.empty()) {
        out += ' ';
        out += elems[i].chain;
      }
    }
    out += " }";
    return out;
  }

  // What nft's protocol context knows of the transport protocol when a nat statement comes
  // (nat_evaluate_transport). Known after `meta l4proto P`, `ip protocol P` (a value or an
  // anonymous set, not `!=`) and any `tcp|udp|sctp dport|sport` match (its implied dependency);
  // still absent after `th dport`, `!=`, a named-set lookup of the protocol; unsure after a
  // tcp/udp/sctp field in a named-set lookup or a concatenation (not checked against nft).
  enum class Transport { Absent, Known, Unsure };
  Transport transport_ = Transport::Absent;
  // A match that fixes one transport protocol (`meta l4proto udp`, `ip protocol { udp }`, `udp
  // sport 1`): nft lists a `th` field after it merged with it (`meta l4proto udp th dport 53` is
  // `udp dport 53`), which this model does not print.
  bool one_transport_ = false;
  static bool transport_field(const std::string& f) {  // "tcp dport", "udp sport . ...", ...
    return f.rfind("tcp ", 0) == 0 || f.rfind("udp ", 0) == 0 || f.rfind("sctp ", 0) == 0;
  }
  void note_transport(const Lhs& l, const std::string& op, bool named_set, bool single = true) {
    const bool protocol = l.text == "meta l4proto" || l.text == "ip protocol";
    if (l.types.size() == 1 && op != "!=" && !named_set && single && (protocol || transport_field(l.text)))
      one_transport_ = true;
    if (transport_ == Transport::Known) return;
    if (l.types.size() != 1) {
      if (transport_field(l.text) || l.text.find(" . tcp ") != std::string::npos ||
          l.text.find(" . udp ") != std::string::npos || l.text.find(" . sctp ") != std::string::npos)
        transport_ = Transport::Unsure;
      return;
    }
    if (protocol) {
      if (!named_set && op != "!=") transport_ = Transport::Known;
      return;
    }
    if (transport_field(l.text)) transport_ = named_set ? Transport::Unsure : Transport::Known;
  }

  std::string nat_target(std::string_view kind) {
    const Loc keyword = t_[p_ - 1].loc;
    if (fam_ == Family::Inet) bad("nat in an inet table");
    if (is("ip") || is("ip6")) ++p_;
    if (!is("to")) bad("a nat statement without 'to'");
    ++p_;
    const Token& t = next();
    if (t.kind != Tok::Word) bad("a nat address");
    std::string w = std::string(t.text);
    std::string out;
    std::string addr, port;
    size_t port_at = 0;  // the port's offset in the token
    if (!w.empty() && w[0] == '[') {
      size_t rb = w.find(']');
      if (rb == std::string::npos) bad("a nat address");
      addr = w.substr(1, rb - 1);
      if (rb + 1 < w.size()) {
        if (w[rb + 1] != ':') bad("a nat address");
        port = w.substr(rb + 2);
        port_at = rb + 2;
      }
      if (fam_ != Family::Ip6) bad("an IPv6 nat address in an ip table");
    } else if (fam_ == Family::Ip6) {
      addr = w;  // a bare IPv6 address (no port)
    } else {
      size_t colon = w.find(':');
      addr = w.substr(0, colon);
      if (colon != std::string::npos) {
        port = w.substr(colon + 1);
        port_at = colon + 1;
      }
    }
    if (port_at && port.empty()) bad("a nat address with ':' and no port");
    std::string canon, bytes;
    if (!canonical_value(fam_ == Family::Ip6 ? Dtype::Ipv6Addr : Dtype::Ipv4Addr, addr, &canon, &bytes))
      bad("a nat address");
    if (fam_ == Family::Ip6 && !port.empty()) out = "[" + canon + "]";
    else out = canon;
    if (!port.empty()) {
      std::string pc, pb;
      if (!canonical_value(Dtype::InetService, port, &pc, &pb)) bad("a nat port");
      out += ":" + pc;
      if (transport_ == Transport::Unsure) bad("a nat port after a transport match kpc does not model");
      if (transport_ == Transport::Absent) {
        const int b = t.loc.col_begin + static_cast<int>(port_at);
        // (a listing is the kernel's state, whatever nft would say of the rule as a command)
        errors_.push_back({Loc{t.loc.line, b, b + static_cast<int>(port.size()) - 1}, keyword,
                           "transport protocol mapping is only valid after transport protocol match",
                           ref_locs_.size(), true});
      }
    }
    return std::string(kind) + " to " + out;
  }

  std::string statement() {
    const Token& t = peek();
    if (t.kind != Tok::Word) bad("an unexpected token");
    const std::string w = std::string(t.text);
    if (w == "accept" || w == "drop" || w == "return" || w == "continue" || w == "jump" || w == "goto")
      return verdict_word();
    // nat statements and reject end the rule in nft ("Statement after terminal statement has no
    // effect" for anything after them, their keyword marked), as verdicts do.
    if (w == "reject") {
      ++p_;
      if (is("with")) bad("reject with");
      refs_.reject = true;
      if (!terminal_) terminal_ = t.loc;
      return "reject";
    }
    if (w == "masquerade") {
      ++p_;
      refs_.masquerade = true;
      if (!terminal_) terminal_ = t.loc;
      if (is("fully-random") || is("random") || is("persistent")) {
        std::string f = word();
        if (peek().kind == Tok::Comma) bad("several masquerade flags");
        return "masquerade " + f;
      }
      if (is("to")) bad("masquerade to");
      return "masquerade";
    }
    if (w == "dnat" || w == "snat") {
      const Loc keyword = t.loc;
      ++p_;
      (w == "dnat" ? refs_.dnat : refs_.snat) = true;
      std::string out = nat_target(w);
      if (!terminal_) terminal_ = keyword;
      return out;
    }
    if (w == "counter") {
      ++p_;
      uint64_t pk = 0, by = 0;
      if (is("packets")) {
        ++p_;
        if (!parse_uint(word(), &pk)) bad("a counter");
        if (!is("bytes")) bad("a counter");
        ++p_;
        if (!parse_uint(word(), &by)) bad("a counter");
      }
      return "counter packets " + std::to_string(pk) + " bytes " + std::to_string(by);
    }
    if ((w == "update" || w == "add") && peek(1).kind == Tok::SetRef) {
      ++p_;
      const Token& s = next();
      add_set_ref(s, ParsedRule::Ref::Dynset);
      if (peek().kind != Tok::LBrace) bad("a set update");
      ++p_;
      Lhs l;
      if (!lhs(&l) || l.binop || l.fib || l.ctstate || l.numgen) bad("a set update key");
      if (peek().kind != Tok::RBrace) bad("a set update with options");
      ++p_;
      dyn_types_.push_back({std::string(s.text), l.types});
      return w + " @" + std::string(s.text) + " { " + l.text + " }";
    }
    if (w == "flow" && (is("add", 1) || is("offload", 1)) && peek(2).kind == Tok::SetRef) {
      p_ += 2;
      const Token& s = next();
      refs_.flowtables.push_back(std::string(s.text));
      ref_locs_.push_back({std::string(s.text), s.loc, ParsedRule::Ref::Flowtable});
      return "flow add @" + std::string(s.text);
    }
    // meta mark set ...
    if ((w == "mark" && is("set", 1)) || (w == "meta" && is("mark", 1) && is("set", 2))) {
      p_ += w == "mark" ? 2 : 3;
      std::string v, b;
      if (is("mark") || (is("meta") && is("mark", 1))) {
        p_ += is("mark") ? 1 : 2;
        std::string op = word();
        const char* sym = op == "or" || op == "|" ? "|" : op == "xor" || op == "^" ? "^" : op == "and" || op == "&" ? "&" : nullptr;
        if (!sym) bad("a mark expression");
        if (!canonical_value(Dtype::Mark, word(), &v, &b)) bad("a mark value");
        return std::string("meta mark set meta mark ") + sym + " " + v;
      }
      if (!canonical_value(Dtype::Mark, word(), &v, &b)) bad("a mark value");
      return "meta mark set " + v;
    }
    // a match (or a vmap)
    Lhs l;
    if (!lhs(&l)) return unread_statement();
    if (is("vmap")) {
      ++p_;
      if (l.binop || l.fib || l.ctstate) bad("a vmap kpc does not model");
      if (peek().kind == Tok::SetRef) {
        const Token& s = next();
        add_set_ref(s, ParsedRule::Ref::Map);
        vmap_types_.push_back({std::string(s.text), l.types});
        ended_ = true;
        return l.text + " vmap @" + std::string(s.text);
      }
      if (peek().kind == Tok::LBrace) {
        Loc open = peek().loc;
        ++p_;
        ended_ = true;
        return inline_vmap(l, open);
      }
      bad("a vmap");
    }
    if (is("map")) bad("a map lookup kpc does not model");
    if (l.numgen) bad("numgen outside a vmap");
    std::string op;
    if (is("==") || is("!=")) op = word();
    else if (is("<") || is(">") || is("<=") || is(">=")) bad("a comparison kpc does not model");
    if (peek().kind == Tok::SetRef) {
      if (l.binop || l.fib || l.ctstate) bad("a lookup kpc does not model");
      const Token& s = next();
      add_set_ref(s, ParsedRule::Ref::Set);
      lookup_types_.push_back({std::string(s.text), l.types});
      note_transport(l, op, true);
      return l.text + (op == "!=" ? " != " : " ") + "@" + std::string(s.text);
    }
    if (l.types.size() != 1) bad("a concatenation match");
    std::string rhs;
    bool one_element = true;  // (an anonymous set of several elements: false)
    if (l.fib) {
      std::string v = word();
      bool ok = false;
      for (const char* f : kFibTypes) ok = ok || v == f;
      if (!ok) bad("a fib type");
      rhs = v;
    } else if (l.ctstate) {
      uint32_t bits = 0;
      while (true) {
        std::string v = word();
        bool ok = false;
        for (int i = 0; i < 5; ++i)
          if (v == kCtStates[i]) {
            ok = true;
            bits |= kCtBits[i];
          }
        if (!ok) bad("a ct state");
        if (peek().kind == Tok::Comma) {
          ++p_;
          continue;
        }
        break;
      }
      std::string s;
      for (int i = 0; i < 5; ++i)
        if (bits & kCtBits[i]) s += (s.empty() ? "" : ",") + std::string(kCtStates[i]);
      rhs = s;
      if (op == "==") bad("ct state ==");
    } else if (peek().kind == Tok::LBrace) {
      Loc open = peek().loc;
      ++p_;
      if (l.binop) bad("a set of masks");
      bool single = false;
      rhs = anon_set(l.types[0], &single, open);
      one_element = single;
    } else {
      std::string sk;
      rhs = value(l.types[0], &sk);
      if (l.binop && peek().kind == Tok::Comma) bad("a list");
    }
    note_transport(l, op, false, one_element);
    std::string out;
    out.reserve(l.text.size() + rhs.size() + 4);
    out += l.text;
    if (op == "!=") out += " !=";
    else if (l.binop) out += " ==";
    out += ' ';
    out += rhs;
    return out;
  }

 public:
  std::vector<std::pair<std::string, std::vector<Dtype>>> vmap_types_, lookup_types_, dyn_types_;
};

}  // namespace

ParsedRule parse_rule(std::string_view src, const Token* toks, size_t n, const Token& term, Family family) {
  RuleParser p(src, toks, 0, n, term, family);
  ParsedRule r = p.parse();
  for (auto& [name, types] : p.vmap_types_) r.typed_refs.push_back({std::move(name), std::move(types), ParsedRule::Ref::Map});
  for (auto& [name, types] : p.lookup_types_) r.typed_refs.push_back({std::move(name), std::move(types), ParsedRule::Ref::Set});
  for (auto& [name, types] : p.dyn_types_) r.typed_refs.push_back({std::move(name), std::move(types), ParsedRule::Ref::Dynset});
  return r;
}

}  // namespace detail
}  // namespace kpc::verifier::nft
