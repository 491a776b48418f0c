#include "verifier/trace/physdev.h"

namespace kpc::verifier::trace {

std::optional<PhysdevOp> physdev_op(std::string_view option) {
  if (option == "--physdev-in") return PhysdevOp::In;
  if (option == "--physdev-out") return PhysdevOp::Out;
  if (option == "--physdev-is-in") return PhysdevOp::IsIn;
  if (option == "--physdev-is-out") return PhysdevOp::IsOut;
  if (option == "--physdev-is-bridged") return PhysdevOp::IsBridged;
  return std::nullopt;
}

bool physdev_reads_out(PhysdevOp op) {
  return op == PhysdevOp::Out || op == PhysdevOp::IsOut || op == PhysdevOp::IsBridged;
}

bool bridge_port_matches(std::string_view pattern, std::string_view name) {
  if (!pattern.empty() && pattern.back() == '+') return name.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1);
  return pattern == name;
}

bool physdev_test(PhysdevOp op, std::string_view pattern, bool neg, bool has_info, std::string_view in,
                  std::string_view out) {
  if (!has_info) return neg;  // "return MATCH if the invert flags of the used options are on"
  switch (op) {
    case PhysdevOp::IsIn:
      return !in.empty() != neg;
    case PhysdevOp::IsOut:
    case PhysdevOp::IsBridged:
      return !out.empty() != neg;
    case PhysdevOp::In:
      if (in.empty()) return true;  // no in port: the option is not tested
      return bridge_port_matches(pattern, in) != neg;
    case PhysdevOp::Out:
      if (out.empty()) return false;  // no out port: fails, negated or not
      return bridge_port_matches(pattern, out) != neg;
  }
  return false;
}

}  // namespace kpc::verifier::trace
