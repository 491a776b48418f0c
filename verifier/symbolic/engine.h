// The symbolic engine (issue 5, part 3): every packet of a class through a
// RulesetState at once — the iptables front end of the mode-neutral core
// (verifier/sem: packet classes, outcomes, the comparison).
//
// It walks the hooks exactly as the concrete tracer does (verifier/trace/tracer.h
// is the reference: same stages, routing, call/goto/return, policies, the nat
// table for NEW packets only), but the packet is a sem::PacketClass. At each rule
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

#include "verifier/sem/outcome.h"
#include "verifier/sem/packet_class.h"
#include "verifier/state/state.h"

namespace kpc::verifier::symbolic {

/// Builds the shared universe of a comparison: destination atoms and interface
/// atoms from every rule of the given states, the local addresses (plus
/// loopback), and the affinity keys of their `recent` lists.
/// With ipsets, `-m set` matches on them are modelled and their entries' addresses cut atoms too.
sem::Universe build_universe(const std::vector<const RulesetState*>& states,
                             const std::vector<IPAddr>& local_addresses, const ipset::Table* ipsets = nullptr);

class Engine {
 public:
  /// The universe must have been built over (at least) this state; the engine
  /// adds the canonical keys of this state's recent lists to it.
  Engine(const RulesetState& state, sem::Universe& universe);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Every leaf of the start class. The start class's destination must lie in one atom.
  std::vector<sem::Leaf> explore(const sem::PacketClass& start, sem::Origin origin);

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

namespace detail {
/// A rule that no packet of the class can match is passed over without splitting the class
/// through its tests (engine.cpp, Impl::misses_whole). On by default; tests turn it off to hold
/// the leaves to those of the plain splitting.
extern bool skip_missing_rules;
}  // namespace detail

}  // namespace kpc::verifier::symbolic
