// Scripts made from a random prior's lines, one way or another (the prior itself, full-sync
// rewrites and transactions of its state, its lines deleted, repeated, swapped, moved into a
// table block, followed by a comment, a syntax error, an unterminated string, without the
// last newline, a chain created twice): for the properties that a parse or an application
// done another way (from another script's parse, while the text is parsed) is the usual one's.
#pragma once

#include <string>

#include "tests/support/nft_gen.h"
#include "verifier/nft/nft.h"

namespace kpc::test {

inline constexpr int kNftDerivedKinds = 12;
/// Script kind `how` (0 .. kNftDerivedKinds - 1) made from prior, whose state is `state`.
std::string nft_derived_script(NftGen& gen, const std::string& prior, const verifier::nft::NftState& state, int how);

/// An application's outcome as one comparable text: the result (rules kept through flushes,
/// operations, errors, warnings), the state (`nft -a list ruleset`), and the state after a probe
/// that shows the handle generators (a failed batch leaves them advanced): a table added, a
/// rule added to the first chain.
std::string nft_outcome_with_probe(const verifier::nft::ApplyResult& r, verifier::nft::NftState s);

}  // namespace kpc::test
