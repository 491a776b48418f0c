// prepare_script_like (verifier/nft/apply.cpp) builds a script's parse from another script's:
// lines holding whole commands outside braces in both texts are copied with their locations
// moved, the rest is parsed in parts, and anything that does not parse alone is parsed whole.
// `kpc verify` parses the full transaction so, from the prior's parse. It must be invisible:
// random kube-proxy-shaped priors and scripts made from them (the prior itself, full-sync
// rewrites, transactions, and the prior's lines deleted, repeated, swapped, moved into a table
// block, followed by a comment, a syntax error, an unterminated string, without the last
// newline, a chain created twice) are applied to the prior's state and to an empty node both
// ways, and must give the same result, errors (each one's line and columns), warnings and
// `nft -a list ruleset`, also after a probe that shows the handle generators. (A script made
// from another's parse points into it, and is applied again from copies when it fails.)
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/support/nft_derived.h"
#include "tests/support/nft_gen.h"
#include "tests/support/text_lines.h"
#include "verifier/nft/nft.h"

namespace kpc::verifier::nft {
namespace {

std::string outcome(const ApplyResult& r, const NftState& s) { return test::nft_outcome_with_probe(r, s); }

TEST(NftPrepareLikeProps, AParseFromAnotherScriptsIsTheScriptsOwn) {
  const uint64_t seed = 20261205;
  const int kinds = test::kNftDerivedKinds;
  std::vector<size_t> per_kind(kinds, 0), failed(kinds, 0);
  size_t mismatches = 0;
  const NftState empty;
  for (uint64_t i = 0; i < 600 && mismatches < 3; ++i) {
    test::NftGen gen(seed + i);
    const std::string prior = gen.state_script();
    NftState state;
    ASSERT_TRUE(apply_script(state, prior, "prior.nft").ok);
    const PreparedScript prior_parse = prepare_script(prior);
    const int how = static_cast<int>(i % kinds);
    const std::string text = test::nft_derived_script(gen, prior, state, how);
    // on the prior's state, and on an empty node (where a copied line whose chain a deleted
    // line added fails: its error must be on its own line)
    for (const NftState* base : {static_cast<const NftState*>(&state), &empty}) {
      NftState a = *base, b = *base;
      const ApplyResult ra = apply_prepared(a, prepare_script(text), text, "full.nft");
      const ApplyResult rb = apply_prepared(b, prepare_script_like(text, prior_parse, prior), text, "full.nft");
      ++per_kind[how];
      if (!ra.ok) ++failed[how];
      if (outcome(ra, a) != outcome(rb, b)) {
        ++mismatches;
        ADD_FAILURE() << "seed " << seed + i << " kind " << how << "\n--- text:\n" << text << "--- parsed:\n"
                      << outcome(ra, a) << "\n--- from the prior's parse:\n" << outcome(rb, b);
      }
    }
  }
  std::string counts;
  for (int k = 0; k < kinds; ++k)
    counts += " " + std::to_string(k) + ":" + std::to_string(per_kind[k]) + "/" + std::to_string(failed[k]) + "f";
  std::printf("prepare_script_like: 600 scripts, each on the prior's state and on an empty node (kind:count/failed)%s, %zu mismatches\n", counts.c_str(), mismatches);
  EXPECT_EQ(mismatches, 0u);
}

// The prior's parse may be applied while another thread copies from it (kpc verify does): it
// is left as it was, and a share() of it applies the same commands.
TEST(NftPrepareLikeProps, ApplyingAScriptLeavesItsParseAsItWas) {
  test::NftGen gen(7);
  const std::string prior = gen.state_script();
  PreparedScript p = prepare_script(prior);
  const PreparedScript kept = p.share();
  NftState s1, s2;
  ASSERT_TRUE(apply_prepared(s1, std::move(p), prior, "prior.nft").ok);
  PreparedScript again = kept.share();
  ASSERT_TRUE(apply_prepared(s2, std::move(again), prior, "prior.nft").ok);
  EXPECT_EQ(print_ruleset(s1, {true}), print_ruleset(s2, {true}));
  // and a script copied from the applied parse is the prior's own
  NftState s3, s4;
  const ApplyResult r3 = apply_prepared(s3, prepare_script_like(prior, kept, prior), prior, "prior.nft");
  const ApplyResult r4 = apply_script(s4, prior, "prior.nft");
  EXPECT_EQ(outcome(r3, s3), outcome(r4, s4));
}

}  // namespace
}  // namespace kpc::verifier::nft
