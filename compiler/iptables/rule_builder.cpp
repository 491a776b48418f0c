#include "compiler/iptables/rule_builder.h"

#include <cmath>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

namespace kpc::iptables {

using ir::Arg;
using ir::ArgKind;

namespace {

// The kernel threshold iptables computes from the printed value (libxt_statistic:
// lround(2^31 * strtod(text))). Cached: kube-proxy uses the same few values everywhere.
uint32_t kernel_threshold(double p) {
  thread_local std::unordered_map<double, uint32_t> cache;
  auto it = cache.find(p);
  if (it != cache.end()) return it->second;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10f", p);
  auto v = static_cast<uint32_t>(std::lround(2147483648.0 * std::strtod(buf, nullptr)));
  if (cache.size() > 4096) cache.clear();
  return cache.emplace(p, v).first->second;
}

}  // namespace

namespace {

struct Scratch {
  ir::Rule rule;
  bool in_use = false;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

RuleBuilder::RuleBuilder() : rule_(scratch().rule) {
  if (scratch().in_use) throw std::logic_error("two RuleBuilders alive at once on one thread");
  scratch().in_use = true;
  rule_.args.clear();  // keeps capacity
  ir::Target& t = rule_.target;
  t.kind = ir::TargetKind::None;
  t.chain.clear();
  t.to_addr.reset();
  t.to_port_lo = t.to_port_hi = 0;
  t.random = t.random_fully = t.persistent = false;
  t.to_ports.clear();
  t.mark_op = ir::MarkOp::SetXMark;
  t.mark_value = t.mark_mask = 0;
  t.reject_with.clear();
  t.other_args.clear();
}

RuleBuilder::~RuleBuilder() { scratch().in_use = false; }

Arg& RuleBuilder::add(ArgKind kind, bool negate) {
  Arg& a = rule_.args.emplace_back();
  a.kind = kind;
  a.neg = negate;
  return a;
}

RuleBuilder& RuleBuilder::module(const char* name) {
  add(ArgKind::Module).text = name;
  return *this;
}

RuleBuilder& RuleBuilder::comment(std::string text) {
  if (text.empty()) return *this;
  module("comment");
  add(ArgKind::Comment).text = std::move(text);
  return *this;
}

RuleBuilder& RuleBuilder::proto(Protocol p) {
  module(protocol_lower(p));
  add(ArgKind::Proto).text = protocol_lower(p);
  return *this;
}

RuleBuilder& RuleBuilder::addr(ArgKind kind, const CIDR& c, bool bare, bool negate) {
  Arg& a = add(kind, negate);
  a.cidr = c;
  a.bare = bare;
  return *this;
}

RuleBuilder& RuleBuilder::dport(int32_t port) {
  Arg& a = add(ArgKind::DPort);
  a.value = a.value2 = static_cast<uint32_t>(port);
  return *this;
}

RuleBuilder& RuleBuilder::src_type(const char* type) {
  module("addrtype");
  add(ArgKind::SrcType).text = type;
  return *this;
}

RuleBuilder& RuleBuilder::dst_type(const char* type) {
  module("addrtype");
  add(ArgKind::DstType).text = type;
  return *this;
}

RuleBuilder& RuleBuilder::ctstate(uint32_t mask, bool negate) {
  module("conntrack");
  add(ArgKind::CtState, negate).value = mask;
  return *this;
}

RuleBuilder& RuleBuilder::mark(uint32_t value, uint32_t mask, bool negate) {
  module("mark");
  Arg& a = add(ArgKind::MarkMatch, negate);
  a.value = value;
  a.value2 = mask;
  return *this;
}

RuleBuilder& RuleBuilder::nfacct(const char* name) {
  module("nfacct");
  add(ArgKind::NfacctName).text = name;
  return *this;
}

RuleBuilder& RuleBuilder::probability(double p) {
  module("statistic");
  add(ArgKind::StatMode).text = "random";
  Arg& a = add(ArgKind::Probability);
  a.real = p;
  a.value = kernel_threshold(p);
  return *this;
}

RuleBuilder& RuleBuilder::recent_check(const std::string& name, int32_t seconds) {
  module("recent");
  add(ArgKind::RecentName).text = name;
  add(ArgKind::RecentCmd).text = "rcheck";
  add(ArgKind::RecentSeconds).value = static_cast<uint32_t>(seconds);
  add(ArgKind::RecentReap);
  return *this;
}

RuleBuilder& RuleBuilder::recent_set(const std::string& name) {
  module("recent");
  add(ArgKind::RecentName).text = name;
  add(ArgKind::RecentCmd).text = "set";
  return *this;
}

RuleBuilder& RuleBuilder::local(const proxy::LocalDetector& d, bool is_local) {
  using K = proxy::LocalDetector::Kind;
  switch (d.kind) {
    case K::None: break;
    case K::CIDR: src(d.cidr, !is_local); break;
    case K::Bridge:
    case K::InterfacePrefix:
      add(ArgKind::InIface, !is_local).text = d.kind == K::Bridge ? d.iface : d.iface + "+";
      break;
  }
  return *this;
}

ir::Rule&& RuleBuilder::finish(ir::TargetKind kind, const std::string* chain) {
  rule_.target.kind = kind;
  if (chain) rule_.target.chain = *chain;
  return std::move(rule_);
}

ir::Rule&& RuleBuilder::dnat(const IPAddr& ip, int32_t port) {
  rule_.target.to_addr = ip;
  rule_.target.to_port_lo = rule_.target.to_port_hi = static_cast<uint16_t>(port);
  return finish(ir::TargetKind::DNAT);
}

ir::Rule&& RuleBuilder::masquerade(bool random_fully) {
  rule_.target.random_fully = random_fully;
  return finish(ir::TargetKind::Masquerade);
}

ir::Rule&& RuleBuilder::mark_or(uint32_t mark) {
  rule_.target.mark_op = ir::MarkOp::OrMark;
  rule_.target.mark_value = mark;
  rule_.target.mark_mask = mark;  // --or-mark V == --set-xmark V/V
  return finish(ir::TargetKind::Mark);
}

ir::Rule&& RuleBuilder::mark_xor(uint32_t mark) {
  rule_.target.mark_op = ir::MarkOp::XorMark;
  rule_.target.mark_value = mark;
  rule_.target.mark_mask = 0;  // --xor-mark V == --set-xmark V/0
  return finish(ir::TargetKind::Mark);
}

}  // namespace kpc::iptables
