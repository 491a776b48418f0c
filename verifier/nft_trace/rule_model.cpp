#include "verifier/nft_trace/rule_model.h"

#include <charconv>

#include "compiler/ir/rule.h"
#include "verifier/nft/internal.h"

namespace kpc::verifier::nft_trace {

namespace d = nft::detail;
using d::Tok;
using d::Token;

const char* field_name(Field f) {
  switch (f) {
    case Field::IpSaddr: return "saddr";
    case Field::IpDaddr: return "daddr";
    case Field::L4proto: return "meta l4proto";
    case Field::ThDport: return "th dport";
    case Field::ThSport: return "th sport";
    case Field::Mark: return "meta mark";
    case Field::Iifname: return "iifname";
    case Field::Oifname: return "oifname";
    case Field::Iif: return "iif";
    case Field::Oif: return "oif";
    case Field::CtState: return "ct state";
    case Field::CtStatus: return "ct status";
    case Field::FibSaddrType: return "fib saddr type";
    case Field::FibDaddrType: return "fib daddr type";
    case Field::Numgen: return "numgen";
  }
  return "?";
}

std::string VerdictSpec::text() const {
  switch (kind) {
    case VerdictKind::None: return "";
    case VerdictKind::Accept: return "accept";
    case VerdictKind::Drop: return "drop";
    case VerdictKind::Return: return "return";
    case VerdictKind::Continue: return "continue";
    case VerdictKind::Jump: return "jump " + chain;
    case VerdictKind::Goto: return "goto " + chain;
  }
  return "";
}

namespace {

bool parse_num(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

struct Proto {
  const char* name;
  uint8_t num;
};
const Proto kProtos[] = {{"tcp", 6}, {"udp", 17}, {"sctp", 132}, {"icmp", 1}, {"icmpv6", 58},
                         {"udplite", 136}, {"dccp", 33}, {"esp", 50}, {"ah", 51}, {"gre", 47}};

bool read_single(Field f, std::string_view t, bool ipv4, Value* v) {
  switch (f) {
    case Field::IpSaddr:
    case Field::IpDaddr: {
      auto a = IPAddr::parse(t);
      if (!a || (a->family == IPFamily::V4) != ipv4) return false;
      v->addr = *a;
      return true;
    }
    case Field::L4proto:
      for (const auto& p : kProtos)
        if (t == p.name) return v->num = p.num, true;
      return parse_num(t, &v->num) && v->num < 256;
    case Field::ThDport:
    case Field::ThSport:
      return parse_num(t, &v->num) && v->num < 65536;
    case Field::Mark:
      return parse_num(t, &v->num) && v->num <= 0xffffffffULL;
    case Field::Numgen:
      return parse_num(t, &v->num) && v->num <= 0xffffffffULL;
    case Field::Iifname:
    case Field::Oifname:
    case Field::Iif:
    case Field::Oif:
      if (t.empty() || t.size() > 15) return false;
      v->str = std::string(t);
      return true;
    case Field::FibSaddrType:
    case Field::FibDaddrType:
      v->str = std::string(t);
      return true;
    case Field::CtState:
    case Field::CtStatus:
      return false;
  }
  return false;
}

}  // namespace

bool read_range(Field f, std::string_view text, bool ipv4, Range* out) {
  *out = Range{};
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
  if (f == Field::Iifname || f == Field::Oifname) {
    if (!text.empty() && text.back() == '*' && (text.size() < 2 || text[text.size() - 2] != '\\')) {
      out->wildcard = true;
      out->lo.str = out->hi.str = std::string(text.substr(0, text.size() - 1));
      return true;
    }
  }
  if ((f == Field::IpSaddr || f == Field::IpDaddr) && text.find('/') != std::string_view::npos) {
    auto c = CIDR::parse(text);
    if (!c || (c->family() == IPFamily::V4) != ipv4) return false;
    CIDR m = c->masked();
    out->lo.addr = m.addr;
    out->hi.addr = m.addr;
    for (size_t i = m.len; i < m.addr.bit_length(); ++i) out->hi.addr.bytes[i / 8] |= static_cast<uint8_t>(0x80 >> (i % 8));
    return true;
  }
  size_t dash = text.find('-');
  bool numeric = f != Field::Iifname && f != Field::Oifname && f != Field::Iif && f != Field::Oif &&
                 f != Field::FibSaddrType && f != Field::FibDaddrType;
  if (numeric && dash != std::string_view::npos && dash > 0) {
    if (!read_single(f, text.substr(0, dash), ipv4, &out->lo)) return false;
    if (!read_single(f, text.substr(dash + 1), ipv4, &out->hi)) return false;
    return true;
  }
  if (!read_single(f, text, ipv4, &out->lo)) return false;
  out->hi = out->lo;
  return true;
}

bool read_verdict(std::string_view t, VerdictSpec* out) {
  *out = VerdictSpec{};
  auto sp = t.find(' ');
  std::string_view w = t.substr(0, sp);
  if (sp == std::string_view::npos) {
    if (w == "accept") return out->kind = VerdictKind::Accept, true;
    if (w == "drop") return out->kind = VerdictKind::Drop, true;
    if (w == "return") return out->kind = VerdictKind::Return, true;
    if (w == "continue") return out->kind = VerdictKind::Continue, true;
    return false;
  }
  std::string_view c = t.substr(sp + 1);
  if (c.empty() || c.find(' ') != std::string_view::npos) return false;
  if (w == "jump") out->kind = VerdictKind::Jump;
  else if (w == "goto") out->kind = VerdictKind::Goto;
  else return false;
  out->chain = std::string(c);
  return true;
}

bool in_range(Field f, const Value& v, const Range& r) {
  switch (f) {
    case Field::IpSaddr:
    case Field::IpDaddr:
      return v.addr.family == r.lo.addr.family && r.lo.addr <= v.addr && v.addr <= r.hi.addr;
    case Field::Iifname:
    case Field::Oifname:
    case Field::Iif:
    case Field::Oif:
    case Field::FibSaddrType:
    case Field::FibDaddrType:
      return r.wildcard ? v.str.compare(0, r.lo.str.size(), r.lo.str) == 0 : v.str == r.lo.str;
    default:
      return r.lo.num <= v.num && v.num <= r.hi.num;
  }
}

namespace {

struct Stop {};  // the rest of the rule is not modelled

class Reader {
 public:
  Reader(std::string_view src, std::vector<Token> toks, bool ipv4) : src_(src), t_(std::move(toks)), v4_(ipv4) {
    while (!t_.empty() && (t_.back().kind == Tok::End || t_.back().kind == Tok::Newline)) t_.pop_back();
  }

  RuleModel read() {
    RuleModel m;
    size_t end = t_.size();
    if (end >= 2 && t_[end - 2].kind == Tok::Word && t_[end - 2].text == "comment" && t_[end - 1].kind == Tok::String) {
      m.comment = std::string(t_[end - 1].text);
      end -= 2;
    }
    end_ = end;
    while (p_ < end_) {
      size_t start = p_;
      Stmt s;
      try {
        s = statement();
      } catch (const Stop&) {
        s = Stmt{};
        s.kind = Stmt::Unknown;
        p_ = start;
      }
      s.text = text_of(start, s.kind == Stmt::Unknown ? end_ : p_);
      m.stmts.push_back(std::move(s));
      if (m.stmts.back().kind == Stmt::Unknown) break;
    }
    return m;
  }

 private:
  std::string_view src_;
  std::vector<Token> t_;
  bool v4_;
  size_t p_ = 0, end_ = 0;

  std::string text_of(size_t b, size_t e) const {
    if (b >= e) return "";
    return std::string(src_.substr(t_[b].off, t_[e - 1].end - t_[b].off));
  }
  const Token& peek(size_t k = 0) const {
    static const Token none;
    return p_ + k < end_ ? t_[p_ + k] : none;
  }
  bool is(std::string_view w, size_t k = 0) const { return peek(k).kind == Tok::Word && peek(k).text == w; }
  const Token& next() {
    if (p_ >= end_) throw Stop{};
    return t_[p_++];
  }
  std::string word() {
    const Token& t = next();
    if (t.kind != Tok::Word && t.kind != Tok::String) throw Stop{};
    return std::string(t.text);
  }
  // Words that start a new statement (where an optional part of the previous one ends).
  bool statement_start() const {
    static const char* kw[] = {"accept", "drop", "return", "continue", "jump", "goto", "reject", "masquerade",
                               "dnat", "snat", "counter", "log", "update", "add", "meta", "mark", "ip", "ip6",
                               "th", "tcp", "udp", "sctp", "ct", "fib", "numgen", "iif", "oif", "iifname", "oifname"};
    if (peek().kind != Tok::Word) return true;
    for (const char* k : kw)
      if (peek().text == k) return true;
    return false;
  }

  bool primary(Key* k) {
    auto take = [&](int n, Field f, std::string text) {
      p_ += n;
      k->fields.push_back(f);
      k->text += (k->text.empty() ? "" : " . ") + text;
      return true;
    };
    if ((is("ip") && v4_) || (is("ip6") && !v4_)) {
      std::string fam(peek().text);
      if (is("saddr", 1)) return take(2, Field::IpSaddr, fam + " saddr");
      if (is("daddr", 1)) return take(2, Field::IpDaddr, fam + " daddr");
      if (v4_ && is("protocol", 1)) return take(2, Field::L4proto, "ip protocol");
      return false;
    }
    if (is("meta")) {
      if (is("l4proto", 1)) return take(2, Field::L4proto, "meta l4proto");
      if (is("mark", 1) && !is("set", 2)) return take(2, Field::Mark, "meta mark");
      if (is("iifname", 1)) return take(2, Field::Iifname, "iifname");
      if (is("oifname", 1)) return take(2, Field::Oifname, "oifname");
      if (is("iif", 1)) return take(2, Field::Iif, "iif");
      if (is("oif", 1)) return take(2, Field::Oif, "oif");
      return false;
    }
    if (is("mark") && !is("set", 1)) return take(1, Field::Mark, "meta mark");
    if (is("iifname")) return take(1, Field::Iifname, "iifname");
    if (is("oifname")) return take(1, Field::Oifname, "oifname");
    if (is("iif")) return take(1, Field::Iif, "iif");
    if (is("oif")) return take(1, Field::Oif, "oif");
    if (is("th") || is("tcp") || is("udp") || is("sctp")) {
      std::string proto(peek().text);
      Field f;
      if (is("dport", 1)) f = Field::ThDport;
      else if (is("sport", 1)) f = Field::ThSport;
      else return false;
      if (proto != "th") {
        uint8_t n = proto == "tcp" ? 6 : proto == "udp" ? 17 : 132;
        if (k->implied_proto && *k->implied_proto != n) throw Stop{};
        k->implied_proto = n;
      }
      return take(2, f, proto + " " + std::string(peek(1).text));
    }
    if (is("ct") && is("state", 1)) return take(2, Field::CtState, "ct state");
    if (is("ct") && is("status", 1)) return take(2, Field::CtStatus, "ct status");
    if (is("fib") && (is("saddr", 1) || is("daddr", 1)) && is("type", 2))
      return take(3, is("saddr", 1) ? Field::FibSaddrType : Field::FibDaddrType,
                  "fib " + std::string(peek(1).text) + " type");
    if (is("numgen") && is("random", 1) && is("mod", 2)) {
      uint64_t n = 0, o = 0;
      if (!parse_num(peek(3).text, &n) || n == 0 || n > 0xffffffffULL) throw Stop{};
      int used = 4;
      if (is("offset", 4)) {
        if (!parse_num(peek(5).text, &o) || o > 0xffffffffULL) throw Stop{};
        used = 6;
      }
      if (k->numgen_mod) throw Stop{};  // two random draws in one key: not modelled
      k->numgen_mod = static_cast<uint32_t>(n);
      k->numgen_offset = static_cast<uint32_t>(o);
      return take(used, Field::Numgen, "numgen random mod " + std::to_string(n));
    }
    return false;
  }

  bool key(Key* k) {
    if (!primary(k)) return false;
    while (is(".")) {
      ++p_;
      if (!primary(k)) throw Stop{};
    }
    for (Field f : k->fields)
      if ((f == Field::CtState || f == Field::CtStatus || f == Field::FibSaddrType || f == Field::FibDaddrType) &&
          k->fields.size() > 1)
        throw Stop{};
    if (k->fields.size() == 1 && k->fields[0] == Field::Mark && (is("&") || is("and"))) {
      ++p_;
      uint64_t m;
      if (!parse_num(word(), &m) || m > 0xffffffffULL) throw Stop{};
      k->mark_mask = static_cast<uint32_t>(m);
    }
    return true;
  }

  // One element key (fields separated by "."), as written.
  std::vector<Range> element_key(const Key& k) {
    std::vector<Range> out;
    for (size_t i = 0; i < k.fields.size(); ++i) {
      if (i) {
        if (!is(".")) throw Stop{};
        ++p_;
      }
      Range r;
      if (!read_range(k.fields[i], word(), v4_, &r)) throw Stop{};
      out.push_back(r);
    }
    return out;
  }

  VerdictSpec verdict_value() {
    std::string w = word();
    VerdictSpec v;
    if (w == "jump" || w == "goto") w += " " + word();
    if (!read_verdict(w, &v)) throw Stop{};
    return v;
  }

  // ct state / ct status: a list of bit names, ir::CtStateBits (status: only snat/dnat).
  uint32_t ct_bits(Field f) {
    uint32_t bits = 0;
    while (true) {
      std::string w = word();
      if (f == Field::CtState) {
        if (w == "new") bits |= ir::kCtNew;
        else if (w == "established") bits |= ir::kCtEstablished;
        else if (w == "related") bits |= ir::kCtRelated;
        else if (w == "invalid") bits |= ir::kCtInvalid;
        else if (w == "untracked") bits |= ir::kCtUntracked;
        else throw Stop{};
      } else {
        if (w == "dnat") bits |= ir::kCtDnat;
        else if (w == "snat") bits |= ir::kCtSnat;
        else throw Stop{};
      }
      if (peek().kind == Tok::Comma) {
        ++p_;
        continue;
      }
      return bits;
    }
  }

  Stmt statement() {
    Stmt s;
    const Token& t = peek();
    if (t.kind != Tok::Word) throw Stop{};
    std::string w(t.text);
    if (w == "accept" || w == "drop" || w == "return" || w == "continue" || w == "jump" || w == "goto") {
      s.kind = Stmt::Verdict;
      s.verdict = verdict_value();
      return s;
    }
    if (w == "counter") {
      ++p_;
      s.kind = Stmt::Noop;
      if (is("packets")) {
        p_ += 2;
        if (!is("bytes")) throw Stop{};
        p_ += 2;
        if (p_ > end_) throw Stop{};
      }
      return s;
    }
    if (w == "log") {
      ++p_;
      s.kind = Stmt::Noop;
      while (is("prefix") || is("level") || is("flags") || is("group") || is("snaplen") || is("queue-threshold")) {
        p_ += 2;
        if (p_ > end_) throw Stop{};
      }
      return s;
    }
    if (w == "reject") {
      ++p_;
      s.kind = Stmt::Reject;
      if (is("with")) {
        size_t b = p_;
        while (p_ < end_ && !(p_ > b + 1 && statement_start())) ++p_;
        s.options = "reject " + text_of(b, p_);
      }
      return s;
    }
    if (w == "masquerade") {
      ++p_;
      s.kind = Stmt::Masquerade;
      if (is("to")) throw Stop{};  // a port range: chosen at run time
      if (is("random") || is("fully-random") || is("persistent")) s.options = "masquerade " + word();
      while (peek().kind == Tok::Comma) {
        ++p_;
        s.options += "," + word();
      }
      return s;
    }
    if (w == "dnat" || w == "snat") {
      ++p_;
      s.kind = w == "dnat" ? Stmt::Dnat : Stmt::Snat;
      if (is("ip") || is("ip6")) ++p_;
      if (!is("to")) throw Stop{};
      ++p_;
      std::string a = word(), addr, port;
      if (!a.empty() && a[0] == '[') {
        size_t rb = a.find(']');
        if (rb == std::string::npos) throw Stop{};
        addr = a.substr(1, rb - 1);
        if (rb + 1 < a.size()) {
          if (a[rb + 1] != ':') throw Stop{};
          port = a.substr(rb + 2);
        }
      } else if (!v4_) {
        addr = a;
      } else {
        size_t c = a.find(':');
        addr = a.substr(0, c);
        if (c != std::string::npos) port = a.substr(c + 1);
      }
      auto ip = IPAddr::parse(addr);
      if (!ip || (ip->family == IPFamily::V4) != v4_) throw Stop{};  // ranges, maps: not modelled
      s.nat_addr = *ip;
      if (!port.empty()) {
        uint64_t n;
        if (!parse_num(port, &n) || n > 65535 || port.find('-') != std::string::npos) throw Stop{};
        s.nat_port = static_cast<uint16_t>(n);
      }
      if (is("random") || is("fully-random") || is("persistent")) s.options = w + " " + word();
      return s;
    }
    if ((w == "update" || w == "add") && peek(1).kind == Tok::SetRef) {
      ++p_;
      s.kind = Stmt::SetUpdate;
      s.update_verb = w;
      s.set = std::string(next().text);
      if (next().kind != Tok::LBrace) throw Stop{};
      if (!key(&s.key) || s.key.mark_mask || s.key.numgen_mod) throw Stop{};
      if (next().kind != Tok::RBrace) throw Stop{};  // `timeout T` in the update: not modelled
      return s;
    }
    if ((w == "mark" && is("set", 1)) || (w == "meta" && is("mark", 1) && is("set", 2))) {
      p_ += w == "mark" ? 2 : 3;
      s.kind = Stmt::MarkSet;
      if (is("mark") || (is("meta") && is("mark", 1))) {
        p_ += is("mark") ? 1 : 2;
        std::string op = word();
        s.mark_op = op == "or" || op == "|" ? '|' : op == "xor" || op == "^" ? '^' : op == "and" || op == "&" ? '&' : 0;
        if (!s.mark_op) throw Stop{};
      }
      uint64_t v;
      if (!parse_num(word(), &v) || v > 0xffffffffULL) throw Stop{};
      s.mark_value = static_cast<uint32_t>(v);
      return s;
    }
    // A match or a verdict map.
    if (!key(&s.key)) throw Stop{};
    if (is("vmap")) {
      ++p_;
      s.kind = Stmt::Vmap;
      if (s.key.mark_mask) throw Stop{};
      for (Field f : s.key.fields)
        if (f == Field::CtState || f == Field::CtStatus) throw Stop{};
      if (peek().kind == Tok::SetRef) {
        s.set = std::string(next().text);
        return s;
      }
      if (next().kind != Tok::LBrace) throw Stop{};
      s.anonymous = true;
      while (peek().kind != Tok::RBrace) {
        Element e;
        e.key = element_key(s.key);
        if (next().kind != Tok::Colon) throw Stop{};
        e.verdict = verdict_value();
        s.elements.push_back(std::move(e));
        if (peek().kind == Tok::Comma) ++p_;
        else if (peek().kind != Tok::RBrace) throw Stop{};
      }
      ++p_;
      return s;
    }
    s.kind = Stmt::Match;
    if (is("==") || is("eq")) ++p_;
    else if (is("!=") || is("ne")) ++p_, s.negate = true;
    else if (is("<") || is(">") || is("<=") || is(">=") || is("lt") || is("gt") || is("le") || is("ge")) throw Stop{};
    if (peek().kind == Tok::SetRef) {
      if (s.key.mark_mask) throw Stop{};
      s.set = std::string(next().text);
      return s;
    }
    s.anonymous = true;
    Field f0 = s.key.fields[0];
    if (f0 == Field::CtState || f0 == Field::CtStatus) {
      Element e;
      Range r;
      r.lo.num = r.hi.num = ct_bits(f0);
      e.key.push_back(r);
      s.elements.push_back(e);
      return s;
    }
    if (peek().kind == Tok::LBrace) {
      ++p_;
      if (s.key.mark_mask) throw Stop{};
      while (peek().kind != Tok::RBrace) {
        Element e;
        e.key = element_key(s.key);
        s.elements.push_back(std::move(e));
        if (peek().kind == Tok::Comma) ++p_;
        else if (peek().kind != Tok::RBrace) throw Stop{};
      }
      ++p_;
      return s;
    }
    Element e;
    e.key = element_key(s.key);
    s.elements.push_back(std::move(e));
    return s;
  }
};

}  // namespace

RuleModel read_rule(std::string_view text, bool ipv4) {
  std::vector<Token> toks;
  try {
    toks = d::lex(text);
  } catch (const d::ParseFailure&) {
    RuleModel m;
    Stmt s;
    s.kind = Stmt::Unknown;
    s.text = std::string(text);
    m.stmts.push_back(s);
    return m;
  }
  return Reader(text, std::move(toks), ipv4).read();
}

}  // namespace kpc::verifier::nft_trace
