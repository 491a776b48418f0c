// A copy of an nft state carries a copy of its look-up indexes (nft.h, LazyIndex): a copied
// state must then behave exactly as the same state with its indexes rebuilt from the vectors
// (what a copy used to start with) — the same result, errors and listing for any transaction,
// several transactions in a row, on either side of the copy.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "tests/support/nft_gen.h"
#include "verifier/nft/nft.h"

namespace kpc::verifier::nft {
namespace {

std::string outcome(const ApplyResult& r) { return test::apply_outcome(r); }

RC_GTEST_PROP(NftStateCopyProps, ACopiedIndexActsAsARebuiltOne, ()) {
  test::NftGen gen(*rc::gen::arbitrary<uint64_t>());
  NftState original;
  RC_ASSERT(apply_script(original, gen.state_script(), "state.nft").ok);
  // A first transaction on the original, so that its indexes are built and updated in place.
  apply_script(original, gen.transaction(original), "first.nft");
  NftState copied = original;   // indexes copied
  NftState rebuilt = original;
  rebuilt.reindex();            // indexes rebuilt on first use
  for (int i = 0, n = *rc::gen::inRange(1, 4); i < n; ++i) {
    const std::string tx = gen.transaction(copied);
    auto rc_ = apply_script(copied, tx, "tx.nft"), rr = apply_script(rebuilt, tx, "tx.nft");
    RC_ASSERT(outcome(rc_) == outcome(rr));
    RC_ASSERT(print_ruleset(copied, {true}) == print_ruleset(rebuilt, {true}));
  }
  // The original is untouched by what its copy did (each owns its index).
  NftState again = original;
  again.reindex();
  const std::string tx = gen.transaction(original);
  RC_ASSERT(outcome(apply_script(original, tx, "tx.nft")) == outcome(apply_script(again, tx, "tx.nft")));
  RC_ASSERT(print_ruleset(original, {true}) == print_ruleset(again, {true}));
}

}  // namespace
}  // namespace kpc::verifier::nft
