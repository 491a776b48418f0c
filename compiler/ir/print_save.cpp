// Save form: the text iptables-save (1.8.x, legacy and nft flavours) prints for
// a rule, so that a simulated state can be compared with the kernel's own dump
// byte for byte. Canonical order: -s -d -i -o -p -f, then each match module in
// load order with its options in the module's own print order, then the target.
#include <cstdio>

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
  std::snprintf(buf, sizeof buf, "0x%x", v);
  out += buf;
}

void base(std::string& out, const Rule& r) {
  static const ArgKind order[] = {ArgKind::Src, ArgKind::Dst, ArgKind::InIface, ArgKind::OutIface, ArgKind::Proto,
                                  ArgKind::Fragment};
  for (ArgKind k : order)
    for (const auto& a : r.args) {
      if (a.kind != k) continue;
      neg(out, a.neg);
      switch (k) {
        case ArgKind::Src: out += " -s " + a.cidr.str(); break;
        case ArgKind::Dst: out += " -d " + a.cidr.str(); break;
        case ArgKind::InIface: out += " -i " + a.text; break;
        case ArgKind::OutIface: out += " -o " + a.text; break;
        case ArgKind::Proto: out += " -p " + a.text; break;
        default: out += " -f"; break;
      }
    }
}

// Options belonging to the module loaded at args[m] (up to the next Module).
std::vector<const Arg*> options_of(const Rule& r, size_t m) {
  std::vector<const Arg*> opts;
  for (size_t i = m + 1; i < r.args.size() && r.args[i].kind != ArgKind::Module; ++i)
    if (r.args[i].kind > ArgKind::Module) opts.push_back(&r.args[i]);
  return opts;
}

const Arg* find(const std::vector<const Arg*>& opts, ArgKind k) {
  for (const Arg* a : opts)
    if (a->kind == k) return a;
  return nullptr;
}

void ports(std::string& out, const Arg& a, const char* name) {
  neg(out, a.neg);
  out += name;
  out += std::to_string(a.value);
  if (a.value2 != a.value) out += ":" + std::to_string(a.value2);
}

void recent(std::string& out, const std::vector<const Arg*>& o, IPFamily family) {
  if (const Arg* c = find(o, ArgKind::RecentCmd)) {
    neg(out, c->neg);
    out += " --" + c->text;
  }
  if (const Arg* a = find(o, ArgKind::RecentSeconds)) out += " --seconds " + std::to_string(a->value);
  if (find(o, ArgKind::RecentReap)) out += " --reap";
  if (const Arg* a = find(o, ArgKind::RecentHitcount)) out += " --hitcount " + std::to_string(a->value);
  if (find(o, ArgKind::RecentRttl)) out += " --rttl";
  const Arg* name = find(o, ArgKind::RecentName);
  out += " --name " + (name ? name->text : std::string("DEFAULT"));
  const Arg* mask = find(o, ArgKind::RecentMask);
  out += " --mask ";
  out += mask ? mask->cidr.addr.str() : family == IPFamily::V4 ? "255.255.255.255" : "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
  const Arg* side = find(o, ArgKind::RecentSide);
  out += " --" + (side ? side->text : std::string("rsource"));
}

void module(std::string& out, const std::string& name, const std::vector<const Arg*>& o, IPFamily family) {
  out += " -m " + name;
  if (name == "comment") {
    if (const Arg* a = find(o, ArgKind::Comment)) {
      out += " --comment";
      save_string(out, a->text);
    }
  } else if (name == "tcp" || name == "udp" || name == "sctp") {
    if (const Arg* a = find(o, ArgKind::SPort)) ports(out, *a, " --sport ");
    if (const Arg* a = find(o, ArgKind::DPort)) ports(out, *a, " --dport ");
    for (const Arg* a : o)
      if (a->kind == ArgKind::Unknown) { neg(out, a->neg); out += " " + a->text2 + (a->text.empty() ? "" : " " + a->text); }
  } else if (name == "addrtype") {
    if (const Arg* a = find(o, ArgKind::SrcType)) { neg(out, a->neg); out += " --src-type " + a->text; }
    if (const Arg* a = find(o, ArgKind::DstType)) { neg(out, a->neg); out += " --dst-type " + a->text; }
    if (find(o, ArgKind::LimitIfaceIn)) out += " --limit-iface-in";
    if (find(o, ArgKind::LimitIfaceOut)) out += " --limit-iface-out";
  } else if (name == "conntrack" || name == "state") {
    if (const Arg* a = find(o, ArgKind::CtState)) {
      neg(out, a->neg);
      out += name == "state" ? " --state " : " --ctstate ";
      out += ctstate_text(a->value);
    }
  } else if (name == "mark") {
    if (const Arg* a = find(o, ArgKind::MarkMatch)) {
      neg(out, a->neg);
      out += " --mark ";
      hex(out, a->value);
      if (a->value2 != 0xFFFFFFFFu) { out += '/'; hex(out, a->value2); }
    }
  } else if (name == "statistic") {
    const Arg* mode = find(o, ArgKind::StatMode);
    out += " --mode " + (mode ? mode->text : std::string("random"));
    if (const Arg* p = find(o, ArgKind::Probability)) {
      neg(out, p->neg);
      char buf[40];
      std::snprintf(buf, sizeof buf, " --probability %.11f", 1.0 * p->value / 2147483648.0);
      out += buf;
    }
    if (const Arg* a = find(o, ArgKind::StatEvery)) out += " --every " + std::to_string(a->value);
    if (const Arg* a = find(o, ArgKind::StatPacket)) out += " --packet " + std::to_string(a->value);
  } else if (name == "recent") {
    recent(out, o, family);
  } else if (name == "nfacct") {
    if (const Arg* a = find(o, ArgKind::NfacctName)) out += " --nfacct-name  " + a->text;  // sic: two spaces
  } else {
    // set, multiport, physdev and unmodelled modules: options as given.
    for (const Arg* a : o) {
      neg(out, a->neg);
      switch (a->kind) {
        case ArgKind::MatchSet: out += " --match-set " + a->text + " " + a->text2; break;
        case ArgKind::MultiPorts: out += " " + a->text2 + " " + a->text; break;
        default: out += " " + a->text2 + (a->text.empty() ? "" : " " + a->text); break;
      }
    }
  }
}

void nat_to(std::string& out, const Target& t) {
  out += ' ';
  bool v6 = t.to_addr && t.to_addr->family == IPFamily::V6;
  if (t.to_addr) out += v6 && t.to_port_lo ? "[" + t.to_addr->str() + "]" : t.to_addr->str();
  if (t.to_port_lo) {
    out += ":" + std::to_string(t.to_port_lo);
    if (t.to_port_hi != t.to_port_lo) out += "-" + std::to_string(t.to_port_hi);
  }
}

void target(std::string& out, const Target& t, IPFamily family) {
  switch (t.kind) {
    case TargetKind::None: return;
    case TargetKind::Jump: out += " -j " + t.chain; return;
    case TargetKind::Goto: out += " -g " + t.chain; return;
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
      if (!t.to_ports.empty()) out += " --to-ports " + t.to_ports;
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
      out += " -j " + t.chain;
      for (const auto& a : t.other_args) out += " " + a;
      return;
  }
}

}  // namespace

void print_rule_save(std::string& out, const std::string& chain, const Rule& rule, IPFamily family) {
  out += "-A " + chain;
  base(out, rule);
  for (size_t i = 0; i < rule.args.size(); ++i)
    if (rule.args[i].kind == ArgKind::Module) module(out, rule.args[i].text, options_of(rule, i), family);
  target(out, rule.target, family);
}

}  // namespace kpc::ir
