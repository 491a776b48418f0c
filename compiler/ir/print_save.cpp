// Save form: the text iptables-save (1.8.x, legacy and nft flavours) prints for
// a rule, so that a simulated state can be compared with the kernel's own dump
// byte for byte. Canonical order: -s -d -i -o -p -f, then each match module in
// load order with its options in the module's own print order, then the target.
// Every detail here was checked against iptables v1.8.9 (docs/verifier.md). The
// verifier interns every rule by this text, so it appends in place (no temporaries).
#include <cctype>
#include <cstdio>
#include <string>

#include "compiler/ir/printer.h"

namespace kpc::ir {
namespace {

// xtables_save_string: bare when only [A-Za-z0-9_-], else double-quoted with \" \\ \' escaped.
void save_string(std::string& out, std::string_view v) {
  out += ' ';
  bool plain = !v.empty();
  for (char c : v)
    plain &= (c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
  if (plain) {
    out += v;
    return;
  }
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  out += '"';
}

void neg(std::string& out, bool n) {
  if (n) out += " !";
}

void hex(std::string& out, uint32_t v) {
  char buf[16];
  int n = std::snprintf(buf, sizeof buf, "0x%x", v);
  out.append(buf, static_cast<size_t>(n));
}

void num(std::string& out, uint32_t v) {
  char buf[16];
  char* p = buf + sizeof buf;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  out.append(p, static_cast<size_t>(buf + sizeof buf - p));
}

void address(std::string& out, const IPAddr& a) {
  if (a.family == IPFamily::V4) {
    for (int i = 0; i < 4; ++i) {
      if (i) out += '.';
      num(out, a.bytes[i]);
    }
  } else {
    out += a.str();
  }
}

// "ADDR/LEN" with host bits cleared, as iptables stores and prints it.
void cidr(std::string& out, const CIDR& c) {
  address(out, c.masked().addr);
  out += '/';
  num(out, c.len);
}

// The protocol as save prints it: the xtables_chain_protos name, else the number.
std::string proto_save_name(std::string_view p) {
  static const struct { const char* name; unsigned num; } protos[] = {
      {"tcp", 6},  {"sctp", 132}, {"udp", 17}, {"udplite", 136}, {"icmp", 1}, {"ipv6-icmp", 58}, {"icmpv6", 58},
      {"esp", 50}, {"ah", 51},    {"ipv6-mh", 135}, {"mh", 135}, {"all", 0}};
  if (p == "tcp" || p == "udp" || p == "sctp") return std::string(p);
  std::string l(p);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  unsigned n = 0;
  bool numeric = !l.empty() && l.size() <= 3 && l.find_first_not_of("0123456789") == std::string::npos;
  if (numeric) n = static_cast<unsigned>(std::stoul(l));
  for (const auto& e : protos)
    if ((numeric && e.num == n) || (!numeric && l == e.name)) {
      if (!numeric && e.num == 0) return "all";
      for (const auto& f : protos)
        if (f.num == e.num) return f.name;  // first name for the number
    }
  if (numeric) return n == 0 ? "all" : std::to_string(n);
  if (l == "dccp") return "33";
  if (l == "gre") return "47";
  return l;
}

void base(std::string& out, const Rule& r) {
  static const ArgKind order[] = {ArgKind::Src, ArgKind::Dst, ArgKind::InIface, ArgKind::OutIface, ArgKind::Proto,
                                  ArgKind::Fragment};
  for (ArgKind k : order)
    for (const auto& a : r.args) {
      if (a.kind != k) continue;
      // iptables-save leaves out what matches everything: "-s 0.0.0.0/0", "-i +", "-p all".
      if ((k == ArgKind::Src || k == ArgKind::Dst) && a.cidr.len == 0 && !a.neg) continue;
      if ((k == ArgKind::InIface || k == ArgKind::OutIface) && a.text == "+" && !a.neg) continue;
      std::string proto;
      if (k == ArgKind::Proto) {
        proto = proto_save_name(a.text);
        if (proto == "all") continue;
      }
      neg(out, a.neg);
      switch (k) {
        case ArgKind::Src: out += " -s "; cidr(out, a.cidr); break;
        case ArgKind::Dst: out += " -d "; cidr(out, a.cidr); break;
        case ArgKind::InIface: out += " -i "; out += a.text; break;
        case ArgKind::OutIface: out += " -o "; out += a.text; break;
        case ArgKind::Proto: out += " -p "; out += proto; break;
        default: out += " -f"; break;
      }
    }
}

// The options belonging to one loaded module: the args after it up to the next Module.
struct Opts {
  const Arg* b;
  const Arg* e;
  const Arg* begin() const { return b; }
  const Arg* end() const { return e; }
};

Opts options_of(const Rule& r, size_t m) {
  size_t i = m + 1;
  while (i < r.args.size() && r.args[i].kind != ArgKind::Module) ++i;
  return Opts{r.args.data() + m + 1, r.args.data() + i};
}

const Arg* find(const Opts& opts, ArgKind k) {
  for (const Arg& a : opts)
    if (a.kind == k) return &a;
  return nullptr;
}

void ports(std::string& out, const Arg& a, const char* name) {
  if (a.value == 0 && a.value2 == 0xFFFF) return;  // libxt_tcp/udp/sctp: the full range is not printed
  neg(out, a.neg);
  out += name;
  num(out, a.value);
  if (a.value2 != a.value) {
    out += ':';
    num(out, a.value2);
  }
}

void recent(std::string& out, const Opts& o, IPFamily family) {
  if (const Arg* c = find(o, ArgKind::RecentCmd)) {
    neg(out, c->neg);
    out += " --";
    out += c->text;
  }
  if (const Arg* a = find(o, ArgKind::RecentSeconds)) out += " --seconds ", num(out, a->value);
  if (find(o, ArgKind::RecentReap)) out += " --reap";
  if (const Arg* a = find(o, ArgKind::RecentHitcount)) out += " --hitcount ", num(out, a->value);
  if (find(o, ArgKind::RecentRttl)) out += " --rttl";
  const Arg* name = find(o, ArgKind::RecentName);
  out += " --name ";
  out += name ? name->text : std::string("DEFAULT");
  const Arg* mask = find(o, ArgKind::RecentMask);
  out += " --mask ";
  if (mask) address(out, mask->cidr.addr);
  else out += family == IPFamily::V4 ? "255.255.255.255" : "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
  const Arg* side = find(o, ArgKind::RecentSide);
  out += " --";
  out += side ? side->text : std::string("rsource");
}

// addrtype types in kernel bit order; Arg::value holds the mask when parsed, else text is used.
void addrtypes(std::string& out, const Arg& a) {
  static const char* names[] = {"UNSPEC",    "UNICAST",     "LOCAL",    "BROADCAST", "ANYCAST", "MULTICAST",
                                "BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW",     "NAT",     "XRESOLVE"};
  if (a.value == 0) {
    out += a.text;
    return;
  }
  bool first = true;
  for (unsigned b = 0; b < 12; ++b)
    if (a.value & (1u << b)) {
      if (!first) out += ',';
      out += names[b];
      first = false;
    }
}

void option_as_given(std::string& out, const Arg& a) {
  neg(out, a.neg);
  out += ' ';
  out += a.text2;
  if (!a.text.empty()) {
    out += ' ';
    out += a.text;
  }
}

void unknown_opts(std::string& out, const Opts& o) {
  for (const Arg& a : o)
    if (a.kind == ArgKind::Unknown) option_as_given(out, a);
}

void module(std::string& out, const std::string& name, const Opts& o, IPFamily family) {
  out += " -m ";
  out += name;
  if (name == "comment") {
    if (const Arg* a = find(o, ArgKind::Comment)) {
      out += " --comment";
      save_string(out, a->text);
    }
  } else if (name == "tcp" || name == "udp" || name == "sctp") {
    if (const Arg* a = find(o, ArgKind::SPort)) ports(out, *a, " --sport ");
    if (const Arg* a = find(o, ArgKind::DPort)) ports(out, *a, " --dport ");
    unknown_opts(out, o);
  } else if (name == "addrtype") {
    if (const Arg* a = find(o, ArgKind::SrcType)) { neg(out, a->neg); out += " --src-type "; addrtypes(out, *a); }
    if (const Arg* a = find(o, ArgKind::DstType)) { neg(out, a->neg); out += " --dst-type "; addrtypes(out, *a); }
    if (find(o, ArgKind::LimitIfaceIn)) out += " --limit-iface-in";
    if (find(o, ArgKind::LimitIfaceOut)) out += " --limit-iface-out";
  } else if (name == "conntrack" || name == "state") {
    if (const Arg* a = find(o, ArgKind::CtState)) {
      neg(out, a->neg);
      out += name == "state" ? " --state " : " --ctstate ";
      out += ctstate_text(a->value);
    }
    unknown_opts(out, o);
  } else if (name == "mark") {
    if (const Arg* a = find(o, ArgKind::MarkMatch)) {
      neg(out, a->neg);
      out += " --mark ";
      hex(out, a->value);
      if (a->value2 != 0xFFFFFFFFu) { out += '/'; hex(out, a->value2); }
    }
  } else if (name == "statistic") {
    const Arg* mode = find(o, ArgKind::StatMode);
    out += " --mode ";
    out += mode ? mode->text : std::string("random");
    if (const Arg* p = find(o, ArgKind::Probability)) {
      neg(out, p->neg);
      char buf[40];
      int n = std::snprintf(buf, sizeof buf, " --probability %.11f", 1.0 * p->value / 2147483648.0);
      out.append(buf, static_cast<size_t>(n));
    }
    if (const Arg* a = find(o, ArgKind::StatEvery)) {
      // libxt_statistic: " --mode nth[ !] --every N --packet P" (packet always printed by save)
      neg(out, a->neg);
      out += " --every ";
      num(out, a->value);
      const Arg* p = find(o, ArgKind::StatPacket);
      out += " --packet ";
      num(out, p ? p->value : 0);
    }
  } else if (name == "recent") {
    recent(out, o, family);
  } else if (name == "nfacct") {
    if (const Arg* a = find(o, ArgKind::NfacctName)) out += " --nfacct-name  ", out += a->text;  // sic: two spaces
  } else if (name == "physdev") {
    // libxt_physdev save order: is-in, in, is-out, out, is-bridged
    for (const char* opt : {"--physdev-is-in", "--physdev-in", "--physdev-is-out", "--physdev-out", "--physdev-is-bridged"})
      for (const Arg& a : o)
        if (a.kind == ArgKind::Physdev && a.text2 == opt) {
          neg(out, a.neg);
          out += ' ';
          out += opt;
          // libxt_physdev prints the name bare (not xtables_save_string: "veth+", not "\"veth+\"";
          // checked against iptables-save 1.8.9, both flavours, by the kernel differential test).
          if (!a.text.empty()) out += ' ', out += a.text;
        }
    unknown_opts(out, o);
  } else {
    // set, multiport and unmodelled modules: options as given.
    for (const Arg& a : o) {
      if (a.kind <= ArgKind::Module) continue;
      if (a.kind == ArgKind::MatchSet) {
        neg(out, a.neg);
        out += " --match-set ";
        out += a.text;
        out += ' ';
        out += a.text2;
      } else {
        option_as_given(out, a);
      }
    }
  }
}

void nat_to(std::string& out, const Target& t) {
  out += ' ';
  bool v6 = t.to_addr && t.to_addr->family == IPFamily::V6;
  if (t.to_addr) {
    if (v6 && (t.to_port_lo || t.to_port_zero)) out += '[';
    address(out, *t.to_addr);
    if (v6 && (t.to_port_lo || t.to_port_zero)) out += ']';
  }
  if (t.to_port_lo || t.to_port_zero) {
    out += ':';
    num(out, t.to_port_lo);
    if (t.to_port_hi != t.to_port_lo) {
      out += '-';
      num(out, t.to_port_hi);
    }
  }
}

void target(std::string& out, const Target& t, IPFamily family) {
  switch (t.kind) {
    case TargetKind::None: return;
    case TargetKind::Jump: out += " -j "; out += t.chain; return;
    case TargetKind::Goto: out += " -g "; out += t.chain; return;
    case TargetKind::Accept: out += " -j ACCEPT"; return;
    case TargetKind::Drop: out += " -j DROP"; return;
    case TargetKind::Return: out += " -j RETURN"; return;
    case TargetKind::Reject:
      out += " -j REJECT --reject-with ";
      out += !t.reject_with.empty() ? t.reject_with
             : family == IPFamily::V4 ? "icmp-port-unreachable" : "icmp6-port-unreachable";
      return;
    case TargetKind::DNAT:
    case TargetKind::SNAT:
      out += t.kind == TargetKind::DNAT ? " -j DNAT --to-destination" : " -j SNAT --to-source";
      nat_to(out, t);
      if (t.random) out += " --random";
      if (t.random_fully) out += " --random-fully";
      if (t.persistent) out += " --persistent";
      return;
    case TargetKind::Masquerade:
      out += " -j MASQUERADE";
      if (!t.to_ports.empty()) out += " --to-ports ", out += t.to_ports;
      if (t.random) out += " --random";
      if (t.random_fully) out += " --random-fully";
      return;
    case TargetKind::Mark:
      out += " -j MARK --set-xmark ";
      hex(out, t.mark_value);
      out += '/';
      hex(out, t.mark_mask);
      return;
    case TargetKind::Other:
      out += " -j ";
      out += t.chain;
      for (const auto& a : t.other_args) out += ' ', out += a;
      return;
  }
}

}  // namespace

void print_rule_save(std::string& out, const std::string& chain, const Rule& rule, IPFamily family) {
  out += "-A ";
  out += chain;
  base(out, rule);
  for (size_t i = 0; i < rule.args.size(); ++i)
    if (rule.args[i].kind == ArgKind::Module) module(out, rule.args[i].text, options_of(rule, i), family);
  target(out, rule.target, family);
}

}  // namespace kpc::ir
