// The nft front end of the symbolic engine (issue 16 §1, §3): every packet of a class
// through an NftState at once, producing the leaves of the mode-neutral core (sem::Leaf:
// class, probability, SymOutcome, services; verifier/sem) over its packet classes and
// universe, as the iptables engine (verifier/symbolic/engine.h) does, so that one
// comparison and one report (verifier/sem/compare.h, report.h) serve both modes.
//
// The walk is the concrete nft tracer's (verifier/nft_trace/tracer.h is the reference: base
// chains by hook and priority, nat chains for NEW packets until a binding, conntrack at
// -200, jump / goto / return, policies), with the packet replaced by a PacketClass: every
// match splits the class into the parts it holds for and the parts it does not; a set or
// verdict-map lookup splits it by element (concatenations field by field); `numgen random
// mod N` splits the probability instead. Affinity sets (sets the rules `update`) hold a
// remembered client (PacketClass::client, id per set) for as long as the set's timeout
// (PacketClass::age, cut at every timeout).
//
// Probabilities: a leaf's probability is a trace::Probability (dyadic), so `numgen`'s
// shares are the kernel's (reciprocal_scale: (r * N) >> 32, within 2^-32 of 1/N; exactly
// 1/N for N a power of two), the nft tracer's `--numgen kernel`. The nominal 1/N of nft's
// documentation is not dyadic; docs/verifier.md says what this means for comparisons.
//
// Sound by construction: anything the model does not know (a statement, a chain type, a
// field after masquerade, a fib type other than local, an ingress chain ...) ends that part
// with an Unknown outcome naming the reason, never a guess.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "verifier/nft/nft.h"
#include "verifier/sem/outcome.h"
#include "verifier/sem/packet_class.h"

namespace kpc::verifier::nft_sym {

/// The shared universe of a comparison over nft states: destination atoms cut at every
/// address a rule, set or map element, or dnat names, and at the local addresses;
/// interface atoms from every interface name; age buckets at every affinity timeout.
sem::Universe build_universe(const std::vector<const nft::NftState*>& states, IPFamily family,
                             const std::vector<IPAddr>& local_addresses);

/// Adds the nft cut points of these states to a universe (for a universe shared with
/// iptables states: build it with symbolic::build_universe, then call this).
void add_to_universe(sem::Universe& u, const std::vector<const nft::NftState*>& states);

class Explorer {
 public:
  /// The universe must have been built over (at least) this state.
  Explorer(const nft::NftState& state, sem::Universe& universe);
  ~Explorer();
  Explorer(const Explorer&) = delete;
  Explorer& operator=(const Explorer&) = delete;

  /// Every leaf of the start class (its destination must lie in one atom).
  std::vector<sem::Leaf> explore(const sem::PacketClass& start, sem::Origin origin);

  /// The affinity sets (by name) that hold a remembered client of this id.
  std::vector<std::string> sets_for(uint32_t affinity_id) const;
  /// The affinity id of a set (0 if this state has no such affinity set).
  uint32_t client_id(const std::string& set) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The canonical affinity key of an nft affinity set: "nft set NAME" (kube-proxy names
/// the set after the service and endpoint, so equal names mean the same client record).
std::string affinity_key(const std::string& set);

}  // namespace kpc::verifier::nft_sym
