// Shared by the nft narrowing tests: a comparison with and without the atom narrowing
// (verifier/nft_sym/affected.cpp), and what must agree between the two.
#pragma once

#include <string>
#include <vector>

#include "verifier/nft/nft.h"
#include "verifier/sem/compare.h"

namespace kpc::test {

/// Everything a report says about the packet classes (counts, each difference's class,
/// witness, outcomes, services, undecided flag, self-check failures), not how the atoms
/// were chosen: equal for the narrowed and the every-atom comparison of the same states.
std::string nft_comparison_facts(const verifier::sem::CompareResult& r);

/// The local addresses `kpc diff` would use for these two states (inferred, else a default).
std::vector<IPAddr> nft_diff_locals(const verifier::nft::NftState& a, const verifier::nft::NftState& b);

}  // namespace kpc::test
