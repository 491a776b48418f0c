// The documented behaviour differences between kube-proxy's modes (issue 16 §4): named
// predicates over (packet, outcome in mode A, outcome in mode B), each with a one-line
// explanation and where kube-proxy documents or implements it. A cross-mode difference that
// one of them explains is reported under its name and counted, never hidden; any other is a
// surprise (a back-end bug, or a real behaviour change the user must read).
//
// The predicates are oriented by back end ("iptables" vs "nftables", either order; "ipvs" vs
// either of them, either order, for ipvs_known_differences); for another pair none holds.
#pragma once

#include <string>
#include <vector>

#include "verifier/cross/frontend.h"
#include "verifier/cross/outcome.h"

namespace kpc::verifier::cross {

/// One cell of the comparison, as the predicates see it.
struct DiffContext {
  const Packet& packet;
  const Distribution& a;
  const Distribution& b;
  const Facts& facts_a;
  const Facts& facts_b;
  std::string backend_a, backend_b;
};

struct KnownDifference {
  std::string id;           ///< "nodeport-addresses"
  std::string explanation;  ///< one line
  std::string source;       ///< kube-proxy doc / code where it is documented
  /// True when the cell's difference is exactly this documented one. Only asked for cells
  /// whose distributions differ.
  bool (*holds)(const DiffContext&) = nullptr;
  /// A difference in one field only (e.g. an option) is removed instead: returns true when it
  /// changed either side (the iptables side first, the nftables side second). The cell is then
  /// compared again, and other known differences may explain the rest.
  bool (*normalise)(Distribution* ipt, Distribution* nft, const Facts& ipt_facts, const Facts& nft_facts) = nullptr;
};

/// Every known difference between iptables and nftables mode, in the order they are tried (the
/// first that holds names the cell).
const std::vector<KnownDifference>& known_differences();
/// The known differences of IPVS mode against iptables or nftables mode (issue 17 §3): the
/// hairpin masquerade without fully-random (a normalisation, applied by classify), then the
/// predicates in order. Anything else IPVS does differently stays not known (docs/verifier.md).
const std::vector<KnownDifference>& ipvs_known_differences();
/// A known difference of either list by id (nullptr if none).
const KnownDifference* find_known_difference(const std::string& id);

/// The known differences that together explain the cell (normalising ones first, then at most
/// one predicate), or empty: a surprise.
std::vector<const KnownDifference*> classify(const DiffContext& c);

}  // namespace kpc::verifier::cross
