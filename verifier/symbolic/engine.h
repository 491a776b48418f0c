// The symbolic engine (issue 5, part 3): every packet of a class through a
// RulesetState at once.
//
// It walks the hooks exactly as the concrete tracer does (verifier/trace/tracer.h
// is the reference: same stages, routing, call/goto/return, policies, the nat
// table for NEW packets only), but the packet is a PacketClass. At each rule
// the class is split into the part the rule matches and the parts it does not;
// each part continues on its own. `-m statistic` splits the probability instead
// (exact rationals), so a leaf is (class, probability, outcome) and, for any
// packet, the leaves containing it give its exact outcome distribution.
//
// Sound by construction: a match the engine cannot decide for a class (an
// unmodelled module, an ipset, --sport on a protocol without ports ...) ends
// that part with an Unknown outcome naming the reason, never a guess.
//
// Speed: start classes have their destination fixed to one "atom" (an interval
// no -d test, local address or DNAT cuts), so big chains (nat KUBE-SERVICES:
// one rule per service port) are dispatched through a per-chain index from atom
// to the rules that can match it; rules are read (parsed) lazily, the first
// time a class reaches them.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "verifier/state/state.h"
#include "verifier/sem/packet_class.h"
#include "verifier/trace/rational.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::symbolic {

using trace::Probability;

enum class Origin : uint8_t { Arriving, Node };  ///< from a pod or an external host / the node itself
const char* origin_name(Origin o);

/// Where a class ends up. The final mark is a function of the arriving mark:
/// bits in mark_const are mark_value, the others are the arriving bit xor mark_flip.
struct SymOutcome {
  trace::Verdict verdict = trace::Verdict::Accept;
  std::string route;  ///< local / forward / output (accepted packets)
  bool dnat = false;
  sem::u128 dnat_addr = 0;
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
  sem::PacketClass cls;
  Probability prob;
  SymOutcome outcome;
  /// Services (Universe::services ids) named by the comments of the rules on this
  /// leaf's path, first seen first, as the concrete tracer names them: attribution
  /// only, never part of the behaviour compared.
  std::vector<uint32_t> services;
};

/// Builds the shared universe of a comparison: destination atoms and interface
/// atoms from every rule of the given states, the local addresses (plus
/// loopback), and the affinity keys of their `recent` lists.
/// With ipsets, `-m set` matches on them are modelled and their entries' addresses cut atoms too.
sem::Universe build_universe(const std::vector<const RulesetState*>& states, const std::vector<IPAddr>& local_addresses,
                        const ipset::Table* ipsets = nullptr);

class Engine {
 public:
  /// The universe must have been built over (at least) this state; the engine
  /// adds the canonical keys of this state's recent lists to it.
  Engine(const RulesetState& state, sem::Universe& universe);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Every leaf of the start class. The start class's destination must lie in one atom.
  std::vector<Leaf> explore(const sem::PacketClass& start, Origin origin);

  /// The concrete list names (recent --name) this state uses for an affinity key.
  std::vector<std::string> lists_for(uint32_t affinity_id) const;
  /// The affinity id of a concrete list name (0 if the state has no such list).
  uint32_t client_id(const std::string& list) const;
  const sem::Universe& universe() const { return u_; }
  size_t rules_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  sem::Universe& u_;
};

}  // namespace kpc::verifier::symbolic
