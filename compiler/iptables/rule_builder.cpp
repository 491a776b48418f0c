#include "compiler/iptables/rule_builder.h"

#include <cmath>

namespace kpc::iptables {

using ir::Arg;
using ir::ArgKind;

RuleBuilder& RuleBuilder::module(const char* name) {
  rule_.args.push_back(Arg{ArgKind::Module, false, false, false, name});
  return *this;
}

RuleBuilder& RuleBuilder::comment(std::string text) {
  if (text.empty()) return *this;
  module("comment");
  rule_.args.push_back(Arg{ArgKind::Comment, false, false, false, std::move(text)});
  return *this;
}

RuleBuilder& RuleBuilder::proto(Protocol p) {
  module(protocol_lower(p));
  rule_.args.push_back(Arg{ArgKind::Proto, false, false, false, protocol_lower(p)});
  return *this;
}

RuleBuilder& RuleBuilder::addr(ArgKind kind, const CIDR& c, bool bare, bool negate) {
  Arg a{kind, negate};
  a.cidr = c;
  a.bare = bare;
  rule_.args.push_back(std::move(a));
  return *this;
}

RuleBuilder& RuleBuilder::dport(int32_t port) {
  Arg a{ArgKind::DPort};
  a.value = a.value2 = static_cast<uint32_t>(port);
  rule_.args.push_back(std::move(a));
  return *this;
}

RuleBuilder& RuleBuilder::src_type(const char* type) {
  module("addrtype");
  rule_.args.push_back(Arg{ArgKind::SrcType, false, false, false, type});
  return *this;
}

RuleBuilder& RuleBuilder::dst_type(const char* type) {
  module("addrtype");
  rule_.args.push_back(Arg{ArgKind::DstType, false, false, false, type});
  return *this;
}

RuleBuilder& RuleBuilder::ctstate(uint32_t mask, bool negate) {
  module("conntrack");
  Arg a{ArgKind::CtState, negate};
  a.value = mask;
  rule_.args.push_back(std::move(a));
  return *this;
}

RuleBuilder& RuleBuilder::mark(uint32_t value, uint32_t mask, bool negate) {
  module("mark");
  Arg a{ArgKind::MarkMatch, negate};
  a.value = value;
  a.value2 = mask;
  rule_.args.push_back(std::move(a));
  return *this;
}

RuleBuilder& RuleBuilder::nfacct(const char* name) {
  module("nfacct");
  rule_.args.push_back(Arg{ArgKind::NfacctName, false, false, false, name});
  return *this;
}

RuleBuilder& RuleBuilder::probability(double p) {
  module("statistic");
  rule_.args.push_back(Arg{ArgKind::StatMode, false, false, false, "random"});
  Arg a{ArgKind::Probability};
  a.real = p;
  // The kernel threshold iptables computes from the printed value (libxt_statistic).
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10f", p);
  a.value = static_cast<uint32_t>(std::lround(2147483648.0 * std::strtod(buf, nullptr)));
  rule_.args.push_back(std::move(a));
  return *this;
}

RuleBuilder& RuleBuilder::recent_check(const std::string& name, int32_t seconds) {
  module("recent");
  rule_.args.push_back(Arg{ArgKind::RecentName, false, false, false, name});
  rule_.args.push_back(Arg{ArgKind::RecentCmd, false, false, false, "rcheck"});
  Arg s{ArgKind::RecentSeconds};
  s.value = static_cast<uint32_t>(seconds);
  rule_.args.push_back(std::move(s));
  rule_.args.push_back(Arg{ArgKind::RecentReap});
  return *this;
}

RuleBuilder& RuleBuilder::recent_set(const std::string& name) {
  module("recent");
  rule_.args.push_back(Arg{ArgKind::RecentName, false, false, false, name});
  rule_.args.push_back(Arg{ArgKind::RecentCmd, false, false, false, "set"});
  return *this;
}

RuleBuilder& RuleBuilder::local(const proxy::LocalDetector& d, bool is_local) {
  using K = proxy::LocalDetector::Kind;
  switch (d.kind) {
    case K::None: break;
    case K::CIDR: src(d.cidr, !is_local); break;
    case K::Bridge:
    case K::InterfacePrefix:
      rule_.args.push_back(Arg{ArgKind::InIface, !is_local, false, false, d.kind == K::Bridge ? d.iface : d.iface + "+"});
      break;
  }
  return *this;
}

ir::Rule RuleBuilder::finish(ir::TargetKind kind, const std::string& chain) {
  rule_.target.kind = kind;
  rule_.target.chain = chain;
  return std::move(rule_);
}

ir::Rule RuleBuilder::dnat(const IPAddr& ip, int32_t port) {
  rule_.target.kind = ir::TargetKind::DNAT;
  rule_.target.to_addr = ip;
  rule_.target.to_port_lo = rule_.target.to_port_hi = static_cast<uint16_t>(port);
  return std::move(rule_);
}

ir::Rule RuleBuilder::masquerade(bool random_fully) {
  rule_.target.kind = ir::TargetKind::Masquerade;
  rule_.target.random_fully = random_fully;
  return std::move(rule_);
}

ir::Rule RuleBuilder::mark_or(uint32_t mark) {
  rule_.target.kind = ir::TargetKind::Mark;
  rule_.target.mark_op = ir::MarkOp::OrMark;
  rule_.target.mark_value = mark;
  rule_.target.mark_mask = mark;  // --or-mark V == --set-xmark V/V
  return std::move(rule_);
}

ir::Rule RuleBuilder::mark_xor(uint32_t mark) {
  rule_.target.kind = ir::TargetKind::Mark;
  rule_.target.mark_op = ir::MarkOp::XorMark;
  rule_.target.mark_value = mark;
  rule_.target.mark_mask = 0;  // --xor-mark V == --set-xmark V/0
  return std::move(rule_);
}

}  // namespace kpc::iptables
