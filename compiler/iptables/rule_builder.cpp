#include "compiler/iptables/rule_builder.h"

#include <array>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>

namespace kpc::iptables {

using ir::Arg;
using ir::ArgKind;

namespace {

// The kernel threshold iptables computes from the printed value (libxt_statistic:
// lround(2^31 * strtod(text))). kube-proxy uses the same few values (1/n) everywhere, so
// a small direct-mapped cache (slot chosen by the value's bits) answers nearly every call.
uint32_t kernel_threshold(double p) {
  struct Slot {
    double p = -1;
    uint32_t threshold = 0;
  };
  thread_local std::array<Slot, 256> cache;
  Slot& slot = cache[(std::bit_cast<uint64_t>(p) * 0x9E3779B97F4A7C15ull) >> 56];
  if (slot.p == p) return slot.threshold;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10f", p);
  slot.p = p;
  slot.threshold = static_cast<uint32_t>(std::lround(2147483648.0 * std::strtod(buf, nullptr)));
  return slot.threshold;
}

}  // namespace

namespace {

struct Scratch {
  ir::Rule rule;
  // Arguments a finished rule did not need, moved here (strings and all) so that a later,
  // longer rule reuses their buffers instead of allocating new ones.
  std::vector<Arg> spare;
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
  // rule_.args keeps the previous rule's arguments; add() overwrites them in place.
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
  std::vector<Arg>& args = rule_.args;
  if (used_ == args.size()) {
    std::vector<Arg>& spare = scratch().spare;
    if (spare.empty()) {
      args.emplace_back();
    } else {
      args.push_back(std::move(spare.back()));
      spare.pop_back();
    }
  }
  // Every field back to its default, keeping the strings' capacity.
  Arg& a = args[used_++];
  a.kind = kind;
  a.neg = negate;
  a.implicit = a.bare = false;
  a.text.clear();
  a.text2.clear();
  a.cidr = CIDR{};
  a.value = a.value2 = 0;
  a.real = 0;
  return a;
}

RuleBuilder& RuleBuilder::module(const char* name) {
  add(ArgKind::Module).text = name;
  return *this;
}

RuleBuilder& RuleBuilder::comment(std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view p : parts) size += p.size();
  if (size == 0) return *this;
  module("comment");
  std::string& text = add(ArgKind::Comment).text;
  text.reserve(size);
  for (std::string_view p : parts) text += p;
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

RuleBuilder& RuleBuilder::recent_check(std::string_view name, int32_t seconds) {
  module("recent");
  add(ArgKind::RecentName).text = name;
  add(ArgKind::RecentCmd).text = "rcheck";
  add(ArgKind::RecentSeconds).value = static_cast<uint32_t>(seconds);
  add(ArgKind::RecentReap);
  return *this;
}

RuleBuilder& RuleBuilder::recent_set(std::string_view name) {
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
    case K::InterfacePrefix: {
      std::string& text = add(ArgKind::InIface, !is_local).text;
      text = d.iface;
      if (d.kind == K::InterfacePrefix) text += '+';
      break;
    }
  }
  return *this;
}

ir::Rule&& RuleBuilder::finish(ir::TargetKind kind, std::string_view chain) {
  rule_.target.kind = kind;
  rule_.target.chain = chain;
  // Arguments left over from a longer previous rule go back to the spare pool.
  std::vector<Arg>& args = rule_.args;
  if (args.size() > used_) {
    std::vector<Arg>& spare = scratch().spare;
    for (size_t i = used_; i < args.size(); ++i) spare.push_back(std::move(args[i]));
    args.erase(args.begin() + static_cast<std::ptrdiff_t>(used_), args.end());
  }
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
