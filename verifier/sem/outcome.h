// Outcomes: where the packets of a class end up, as every mode's symbolic front end
// reports them (issue 16 §1). A leaf is (class, probability, outcome): for any packet,
// the leaves holding it give its exact outcome distribution, whichever program — iptables
// rules (verifier/symbolic) or an nft ruleset (verifier/nft_sym) — was explored. Each front
// end maps its own spelling onto these fields (nft's `reject` = iptables' default
// icmp-port-unreachable), so that two modes' leaves compare directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "verifier/sem/packet_class.h"
#include "verifier/trace/rational.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::sem {

/// Exact probabilities (dyadic rationals): the concrete tracers' type, shared until it
/// leaves verifier/trace.
using trace::Probability;

enum class Origin : uint8_t { Arriving, Node };  ///< from a pod or an external host / the node itself
const char* origin_name(Origin o);

/// Where a class ends up. The final mark is a function of the arriving mark:
/// bits in mark_const are mark_value, the others are the arriving bit xor mark_flip.
struct SymOutcome {
  trace::Verdict verdict = trace::Verdict::Accept;
  std::string route;  ///< local / forward / output (accepted packets)
  bool dnat = false;
  u128 dnat_addr = 0;
  uint16_t dnat_port = 0;
  bool masquerade = false;
  std::string snat;
  uint32_t mark_const = 0, mark_value = 0, mark_flip = 0;
  /// CONNMARK wrote the connection mark (trace/effects.h): bits in ct_const are ct_value,
  /// bits in ct_from_mark the arriving packet mark's xor ct_flip, the others the
  /// connection's earlier mark xor ct_flip.
  bool connmark = false;
  uint32_t ct_const = 0, ct_value = 0, ct_flip = 0, ct_from_mark = 0;
  std::string options;   ///< target options that are behaviour (trace/effects.h), "; "-joined
  std::string affinity;  ///< recent lists written, by canonical key (trace/effects.h)
  std::string unknown;   ///< Unknown: why

  friend bool operator==(const SymOutcome&, const SymOutcome&) = default;
};

struct Leaf {
  PacketClass cls;
  Probability prob;
  SymOutcome outcome;
  /// Services (Universe::services ids) named on this leaf's path (iptables: the rules'
  /// comments; nft: chain names and element comments), first seen first, as the concrete
  /// tracer names them: attribution only, never part of the behaviour compared.
  std::vector<uint32_t> services;
};

}  // namespace kpc::verifier::sem
