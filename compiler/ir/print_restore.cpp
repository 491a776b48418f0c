// Restore form: the text kube-proxy writes. Every byte here is specified by
// kube-proxy's proxier.go and its unit tests (docs/compatibility.md).
#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "compiler/ir/printer.h"

namespace kpc::ir {
namespace {

// One rule line being appended to a restore text. Printing a 10k-service program is
// ~8 million short pieces; std::string::append costs two out-of-line calls per piece
// (and strlen for literals), so the line is written through a raw cursor into space
// reserved at the end of the string (grown when needed), and trimmed when done.
class Line {
 public:
  Line(std::string& out, size_t expected) : out_(out) {
    size_t start = out.size();
    out.resize(start + expected);
    p_ = out.data() + start;
    end_ = out.data() + out.size();
  }
  ~Line() { out_.resize(static_cast<size_t>(p_ - out_.data())); }
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;

  // Inline, so a literal's length is a constant and its copy needs no call.
  Line& operator+=(std::string_view s) {
    if (s.empty()) return *this;  // (an empty view may have no data pointer at all)
    room(s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
    return *this;
  }
  Line& operator+=(char c) {
    room(1);
    *p_++ = c;
    return *this;
  }
  void number(uint32_t v) {
    room(10);
    p_ = std::to_chars(p_, end_, v).ptr;
  }
  void address(const IPAddr& a) {
    room(IPAddr::kMaxText);
    p_ += a.format(p_);
  }
  void cidr(const CIDR& c) {
    address(c.masked().addr);
    *this += '/';
    number(c.len);
  }

 private:
  void room(size_t n) {
    if (static_cast<size_t>(end_ - p_) >= n) return;
    size_t at = static_cast<size_t>(p_ - out_.data());
    out_.resize(out_.size() + std::max<size_t>(n, 256));
    p_ = out_.data() + at;
    end_ = out_.data() + out_.size();
  }

  std::string& out_;
  char* p_;
  char* end_;
};

void word(Line& out, std::string_view w) {
  out += ' ';
  out += w;
}

void neg(Line& out, bool n) {
  if (n) out += " !";
}

void hex08(Line& out, uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, " 0x%08x", v);
  out += buf;
}

// "%.10f" of p. kube-proxy's probabilities are 1/n for small n, so the same few values
// repeat over thousands of rules: a small direct-mapped cache (slot chosen by the value's
// bits) formats each once. Texts too long for a slot (huge values in parsed programs)
// are formatted every time.
std::string_view probability_text(double p) {
  struct Slot {
    double p = -1;
    char text[24];
    uint8_t size = 0;
  };
  thread_local std::array<Slot, 256> cache;
  thread_local std::string long_text;
  Slot& slot = cache[(std::bit_cast<uint64_t>(p) * 0x9E3779B97F4A7C15ull) >> 56];
  if (slot.p == p) return {slot.text, slot.size};
  int n = std::snprintf(nullptr, 0, "%.10f", p);
  if (n < 0 || static_cast<size_t>(n) >= sizeof slot.text) {
    long_text.resize(static_cast<size_t>(std::max(n, 0)) + 1);
    std::snprintf(long_text.data(), long_text.size(), "%.10f", p);
    long_text.pop_back();  // the NUL
    return long_text;
  }
  std::snprintf(slot.text, sizeof slot.text, "%.10f", p);
  slot.p = p;
  slot.size = static_cast<uint8_t>(n);
  return {slot.text, slot.size};
}

void address(Line& out, const Arg& a) {
  out += ' ';
  if (a.bare && a.cidr.is_host()) out.address(a.cidr.addr);
  else out.cidr(a.cidr);
}

void ports(Line& out, const Arg& a) {
  out += ' ';
  out.number(a.value);
  if (a.value2 != a.value) {
    out += ':';
    out.number(a.value2);
  }
}

void comment(Line& out, const std::string& text) {
  // A comment that is not safe would let an object inject rule text: refuse loudly.
  if (!is_safe_comment(text)) throw std::logic_error("unsafe comment text reached the printer");
  out += " --comment ";
  if (text.find(' ') != std::string::npos) {
    out += '"';
    out += text;
    out += '"';
  } else {
    out += text;
  }
}

void arg(Line& out, const Arg& a) {
  switch (a.kind) {
    case ArgKind::Proto: neg(out, a.neg); out += " -p"; word(out, a.text); break;
    case ArgKind::Src: neg(out, a.neg); out += " -s"; address(out, a); break;
    case ArgKind::Dst: neg(out, a.neg); out += " -d"; address(out, a); break;
    case ArgKind::InIface: neg(out, a.neg); out += " -i"; word(out, a.text); break;
    case ArgKind::OutIface: neg(out, a.neg); out += " -o"; word(out, a.text); break;
    case ArgKind::Fragment: neg(out, a.neg); out += " -f"; break;
    case ArgKind::Module: if (!a.implicit) { out += " -m"; word(out, a.text); } break;
    case ArgKind::Comment: comment(out, a.text); break;
    case ArgKind::SPort: neg(out, a.neg); out += " --sport"; ports(out, a); break;
    case ArgKind::DPort: neg(out, a.neg); out += " --dport"; ports(out, a); break;
    case ArgKind::MultiPorts: neg(out, a.neg); word(out, a.text2); word(out, a.text); break;
    case ArgKind::SrcType: neg(out, a.neg); out += " --src-type"; word(out, a.text); break;
    case ArgKind::DstType: neg(out, a.neg); out += " --dst-type"; word(out, a.text); break;
    case ArgKind::LimitIfaceIn: out += " --limit-iface-in"; break;
    case ArgKind::LimitIfaceOut: out += " --limit-iface-out"; break;
    case ArgKind::CtState: neg(out, a.neg); word(out, a.text2.empty() ? "--ctstate" : a.text2); word(out, ctstate_text(a.value)); break;
    case ArgKind::MarkMatch: {
      neg(out, a.neg);
      char buf[48];
      if (a.value2 != 0xFFFFFFFFu) std::snprintf(buf, sizeof buf, " --mark 0x%08x/0x%08x", a.value, a.value2);
      else std::snprintf(buf, sizeof buf, " --mark 0x%08x", a.value);
      out += buf;
      break;
    }
    case ArgKind::StatMode: out += " --mode"; word(out, a.text); break;
    case ArgKind::Probability:
      neg(out, a.neg);
      out += " --probability ";
      out += probability_text(a.real);
      break;
    case ArgKind::StatEvery: out += " --every "; out.number(a.value); break;
    case ArgKind::StatPacket: out += " --packet "; out.number(a.value); break;
    case ArgKind::RecentCmd: neg(out, a.neg); out += " --"; out += a.text; break;
    case ArgKind::RecentSeconds: out += " --seconds "; out.number(a.value); break;
    case ArgKind::RecentReap: out += " --reap"; break;
    case ArgKind::RecentHitcount: out += " --hitcount "; out.number(a.value); break;
    case ArgKind::RecentRttl: out += " --rttl"; break;
    case ArgKind::RecentName: out += " --name"; word(out, a.text); break;
    case ArgKind::RecentMask: out += " --mask "; out.address(a.cidr.addr); break;
    case ArgKind::RecentSide: out += " --"; out += a.text; break;
    case ArgKind::NfacctName: out += " --nfacct-name"; word(out, a.text); break;
    case ArgKind::MatchSet: neg(out, a.neg); out += " --match-set"; word(out, a.text); word(out, a.text2); break;
    case ArgKind::Physdev: neg(out, a.neg); word(out, a.text2); if (!a.text.empty()) word(out, a.text); break;
    case ArgKind::Unknown: neg(out, a.neg); word(out, a.text2); if (!a.text.empty()) word(out, a.text); break;
  }
}

void nat_to(Line& out, const Target& t) {
  out += ' ';
  bool v6 = t.to_addr && t.to_addr->family == IPFamily::V6;
  if (t.to_addr) {
    if (v6 && (t.to_port_lo || t.to_port_zero)) out += '[';
    out.address(*t.to_addr);
    if (v6 && (t.to_port_lo || t.to_port_zero)) out += ']';
  }
  if (t.to_port_lo || t.to_port_zero) {
    out += ':';
    out.number(t.to_port_lo);
    if (t.to_port_hi != t.to_port_lo) {
      out += '-';
      out.number(t.to_port_hi);
    }
  }
}

void nat_flags(Line& out, const Target& t) {
  if (t.random) out += " --random";
  if (t.random_fully) out += " --random-fully";
  if (t.persistent) out += " --persistent";
}

void target(Line& out, const Target& t) {
  switch (t.kind) {
    case TargetKind::None: return;
    case TargetKind::Jump: out += " -j "; out += t.chain; return;
    case TargetKind::Goto: out += " -g "; out += t.chain; return;
    case TargetKind::Accept: out += " -j ACCEPT"; return;
    case TargetKind::Drop: out += " -j DROP"; return;
    case TargetKind::Return: out += " -j RETURN"; return;
    case TargetKind::Reject:
      out += " -j REJECT";
      if (!t.reject_with.empty()) { out += " --reject-with "; out += t.reject_with; }
      return;
    case TargetKind::DNAT: out += " -j DNAT --to-destination"; nat_to(out, t); nat_flags(out, t); return;
    case TargetKind::SNAT: out += " -j SNAT --to-source"; nat_to(out, t); nat_flags(out, t); return;
    case TargetKind::Masquerade:
      out += " -j MASQUERADE";
      if (!t.to_ports.empty()) { out += " --to-ports "; out += t.to_ports; }
      nat_flags(out, t);
      return;
    case TargetKind::Mark:
      out += " -j MARK";
      switch (t.mark_op) {
        case MarkOp::OrMark: out += " --or-mark"; hex08(out, t.mark_value); return;
        case MarkOp::XorMark: out += " --xor-mark"; hex08(out, t.mark_value); return;
        case MarkOp::AndMark: out += " --and-mark"; hex08(out, ~t.mark_mask); return;
        case MarkOp::SetMark: out += " --set-mark"; hex08(out, t.mark_value); return;
        case MarkOp::SetXMark: {
          char buf[48];
          std::snprintf(buf, sizeof buf, " --set-xmark 0x%08x/0x%08x", t.mark_value, t.mark_mask);
          out += buf;
          return;
        }
      }
      return;
    case TargetKind::Other:
      out += " -j ";
      out += t.chain;
      for (const auto& a : t.other_args) word(out, a);
      return;
  }
}

}  // namespace

bool is_safe_comment(std::string_view s) {
  if (s.empty() || s.size() > 256) return false;
  // A single quote is literal inside the double quotes a comment with a space is printed in
  // (iptables-restore quotes with " only); kube-proxy's IPVS SCTP set comments have one
  // ("... with type 'hash ip:port'"). Unquoted, it is refused like the other quoting characters.
  bool quoted = s.find(' ') != std::string_view::npos;
  for (char c : s)
    if (c < 0x20 || c > 0x7E || c == '"' || c == '\\' || (c == '\'' && !quoted)) return false;
  return true;
}

void print_rule_restore(std::string& out, std::string_view chain, const Rule& rule) {
  // A generous guess of the line's length (Line grows if it is short).
  size_t expected = 48 + chain.size() + rule.target.chain.size();
  for (const auto& a : rule.args) expected += 20 + a.text.size() + a.text2.size();
  Line line(out, expected);
  line += "-A ";
  line += chain;
  for (const auto& a : rule.args) arg(line, a);
  target(line, rule.target);
}

void print_program(std::string& out, const Program& program) {
  for (const auto& block : program.tables) {
    out += '*';
    out += table_name(block.table);
    out += '\n';
    for (const auto& op : block.ops) {
      switch (op.kind) {
        case OpKind::DeclareChain:
          out += ':';
          out += op.chain;
          out += ' ';
          out += op.arg.empty() ? "-" : op.arg;
          out += " [0:0]\n";
          break;
        case OpKind::Append: print_rule_restore(out, op.chain, op.rule); out += '\n'; break;
        case OpKind::Insert:
          out += "-I ";
          out += op.chain;
          if (op.num) { out += ' '; out += std::to_string(op.num); }
          { std::string tmp; print_rule_restore(tmp, op.chain, op.rule); out += tmp.substr(3 + op.chain.size()); }
          out += '\n';
          break;
        case OpKind::Delete:
          { std::string tmp; print_rule_restore(tmp, op.chain, op.rule); out += "-D" + tmp.substr(2); }
          out += '\n';
          break;
        case OpKind::DeleteNum: out += "-D " + op.chain + " " + std::to_string(op.num) + "\n"; break;
        case OpKind::Replace:
          out += "-R " + op.chain + " " + std::to_string(op.num);
          { std::string tmp; print_rule_restore(tmp, op.chain, op.rule); out += tmp.substr(3 + op.chain.size()); }
          out += '\n';
          break;
        case OpKind::NewChain: out += "-N " + op.chain + "\n"; break;
        case OpKind::DeleteChain: out += op.chain.empty() ? "-X\n" : "-X " + op.chain + "\n"; break;
        case OpKind::Flush: out += op.chain.empty() ? "-F\n" : "-F " + op.chain + "\n"; break;
        case OpKind::Zero: out += op.chain.empty() ? "-Z\n" : "-Z " + op.chain + "\n"; break;
        case OpKind::Policy: out += "-P " + op.chain + " " + op.arg + "\n"; break;
        case OpKind::Rename: out += "-E " + op.chain + " " + op.arg + "\n"; break;
      }
    }
    out += "COMMIT\n";
  }
}

std::string print_program(const Program& program) {
  std::string out;
  print_program(out, program);
  return out;
}

}  // namespace kpc::ir
