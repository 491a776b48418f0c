// Behavioural comparison of two nft states (issue 16 §4): the core's steps 2-3
// (sem::compare_sides: regions, witnesses, the concrete self-check) over two nft sides
// (the Explorer and the concrete nft tracer with the kernel's numgen shares, so that both
// speak dyadic probabilities).
//
// Step 1: equal listings (`nft list ruleset`, handles aside) are equivalent without exploring;
// otherwise only the atoms affected_atoms_nft names are explored.
#pragma once

#include <memory>
#include <vector>

#include "verifier/nft/nft.h"
#include "verifier/sem/compare.h"

namespace kpc::verifier::nft_sym {

/// Step 1: the destination atoms that can behave differently (affected.cpp): those of the
/// differing map elements and of the elements through which differing chains are reached.
sem::AffectedAtoms affected_atoms_nft(const nft::NftState& a, const nft::NftState& b, const sem::Universe& u);

/// The nft side of a comparison (the explorer and the concrete nft tracer with the kernel's
/// numgen shares) over a universe that add_to_universe has given this state's cut points; for
/// comparisons other than compare_nft_states' (a program of another mode on the other side).
std::unique_ptr<sem::CompareSide> make_side(const nft::NftState& state, sem::Universe& u,
                                            const sem::CompareOptions& options);

/// The address families an nft state has rules for (ip / ip6 tables; inet counts for both).
std::vector<IPFamily> families(const nft::NftState& a, const nft::NftState& b);

/// One family's comparison.
sem::CompareResult compare_nft_states(const nft::NftState& before, const nft::NftState& after, IPFamily family,
                                      const sem::CompareOptions& options);

/// Both families' comparisons merged (counts summed, differences of IPv4 first).
sem::CompareResult compare_nft(const nft::NftState& before, const nft::NftState& after,
                               const sem::CompareOptions& options);

}  // namespace kpc::verifier::nft_sym
