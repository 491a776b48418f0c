// The cross-mode comparison by packet class: two programs of kube-proxy's modes that both have
// a symbolic front end (iptables: verifier/symbolic; nftables: verifier/nft_sym) are compared as
// the same-mode diff compares them (sem::compare_sides over one universe both programs' cut
// points made, every destination atom, both origins), so every packet is covered, not only the
// representative ones of compare.h. Each class whose outcome distributions differ is then judged
// by its witness: the witness is traced by both concrete front ends (frontend.h) into the
// mode-neutral outcome (outcome.h), and a difference that remains is named by the documented mode
// difference that explains it (known_differences.h) or reported as not known.
//
// It lives above both front ends (it includes symbolic/ and nft_sym/, which include neither each
// other nor this); IPVS has no symbolic front end and keeps compare.h's representative packets.
//
// The result is a CrossResult (per_class set): one cell per differing class, its packet the
// class's witness, so the cross reports (report.h) serve both engines.
#pragma once

#include <vector>

#include "compiler/support/net.h"
#include "verifier/cross/compare.h"

namespace kpc::verifier {
struct RulesetState;
namespace nft {
class NftState;
}
}  // namespace kpc::verifier

namespace kpc::verifier::cross {

/// One program of the comparison: an iptables state (kube-proxy's jumps in place) or an nft
/// state (exactly one of the two), and the concrete front end over the same program.
struct ClassSide {
  const RulesetState* iptables = nullptr;
  const nft::NftState* nft = nullptr;
  const ConcreteFrontend* concrete = nullptr;
};

struct ByClassOptions {
  std::vector<IPAddr> local_addresses;  ///< the node's addresses (as the concrete front ends were given)
};

/// Every packet class of both programs compared; each differing class classified by its witness.
CrossResult compare_by_class(const ClassSide& a, const ClassSide& b, IPFamily family, const ByClassOptions& options);

}  // namespace kpc::verifier::cross
