// prior ⊕ partial ≡ full for nftables, on kpc's nft model (verifier/nft): the state the
// applier holds with the partial transaction applied, against the full transaction's state,
// compared object by object in kube-proxy's table (chains with their rules, sets and maps
// with their elements; creation order, element order and handles are not behaviour).
// A difference only in chains nothing references and that hold no rule (stale chains a
// partial flushed; kube-proxy deletes them a second later) is "equivalent"; any other is
// "not equivalent" with the objects listed.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "compiler/nftables/sync_state.h"
#include "verifier/nft/nft.h"

namespace kpc::applier {

enum class NftVerdict { Identical, Equivalent, NotEquivalent };
const char* nft_verdict_name(NftVerdict v);

struct NftComparison {
  NftVerdict verdict = NftVerdict::Identical;
  std::vector<std::string> differences;  ///< "chain service-X: rules differ", ...
  std::vector<std::string> stale_chains;  ///< the chains that made it "equivalent"
};

/// Names of chains and sets (maps included) to compare.
struct NftScope {
  std::unordered_set<std::string> chains, sets;
};

/// Compares table `name` of `family` in both states (a missing table is an empty one).
/// With a scope, only the objects it names are compared: for a caller that knows every other
/// object to be equal on both sides (the sync loop after a proven partial, sync_loop.cpp).
NftComparison compare_nft_tables(const verifier::nft::NftState& got, const verifier::nft::NftState& want,
                                 verifier::nft::Family family, const std::string& name,
                                 const NftScope* scope = nullptr);

/// What kube-proxy reads from the kernel at a full sync (its chains, sets, and the elements
/// of its six maps/sets), from a listing of its table; nullopt when the table is not there.
std::optional<nftables::KernelListing> kernel_listing(const verifier::nft::NftState& state,
                                                      verifier::nft::Family family);

}  // namespace kpc::applier
