// apply_while_parsing (verifier/nft/apply.cpp) applies a script to a node with no tables while
// the script is still being parsed: its parts' commands are evaluated and sent to the kernel
// range by range instead of all evaluated first, and whatever it cannot take that way is
// applied again as usual. `kpc verify` reads its prior so. It must be invisible: random
// kube-proxy-shaped scripts (tests/support/nft_derived.h: clean priors, priors followed by a
// full-sync rewrite or a transaction — flushes of chains with rules, rules placed by handle or
// index, `replace`, failures of every kind — lines deleted, repeated, in a table block, syntax
// errors, ...), cut into 1 to 7 parts, must give the same result, errors, warnings and
// `nft -a list ruleset` (also after a probe that shows the handle generators) as apply_script
// on an empty node, and the parse handed over must be prepare_script's. Most clean priors must
// really be applied while parsed, or the comparison proves nothing.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/support/nft_derived.h"
#include "tests/support/nft_gen.h"
#include "verifier/nft/nft.h"

namespace kpc::verifier::nft {
namespace {

std::string outcome(const ApplyResult& r, const NftState& s) { return test::nft_outcome_with_probe(r, s); }

TEST(NftApplyWhileParsingProps, TheResultIsTheUsualApplicationsAndTheParseTheUsualParse) {
  const uint64_t seed = 20261205;
  const int kinds = test::kNftDerivedKinds;
  std::vector<size_t> per_kind(kinds, 0), streamed(kinds, 0), failed(kinds, 0);
  size_t mismatches = 0;
  for (uint64_t i = 0; i < 600 && mismatches < 3; ++i) {
    test::NftGen gen(seed + i);
    const std::string prior = gen.state_script();
    NftState state;
    ASSERT_TRUE(apply_script(state, prior, "prior.nft").ok);
    const int how = static_cast<int>(i % kinds);
    std::string text = test::nft_derived_script(gen, prior, state, how);
    if (how == 1 || how == 2) text = prior + text;  // (a rewrite or a transaction of the prior's state, in one file)
    const size_t parts = 1 + i % 7;

    NftState want_state;
    const ApplyResult want = apply_script(want_state, text, "prior.nft");
    NftState got_state;
    std::string parse_outcome;
    bool was_streamed = false;
    const ApplyResult got = apply_while_parsing(
        got_state, text, "prior.nft",
        [&](const PreparedScript& parse) {
          NftState s;
          const ApplyResult r = apply_prepared(s, parse.share(), text, "prior.nft");
          parse_outcome = outcome(r, s);
        },
        0, parts, &was_streamed);
    ++per_kind[how];
    streamed[how] += was_streamed;
    failed[how] += !want.ok;
    const std::string w = outcome(want, want_state), g = outcome(got, got_state);
    if (w != g || parse_outcome != w) {
      ++mismatches;
      ADD_FAILURE() << "seed " << seed + i << " kind " << how << " parts " << parts << "\n--- text:\n" << text
                    << "--- applied:\n" << w << "\n--- applied while parsed (" << (was_streamed ? "streamed" : "not streamed")
                    << "):\n" << g << "\n--- the parse handed over, applied:\n" << parse_outcome;
    }
  }
  std::string counts;
  for (int k = 0; k < kinds; ++k)
    counts += " " + std::to_string(k) + ":" + std::to_string(per_kind[k]) + "/" + std::to_string(streamed[k]) + "s/" +
              std::to_string(failed[k]) + "f";
  std::printf("apply_while_parsing: 600 scripts (kind:count/streamed/failed)%s, %zu mismatches\n", counts.c_str(),
              mismatches);
  EXPECT_EQ(mismatches, 0u);
  // Clean priors (kind 0) stream; a failing script never does (it is applied again as usual).
  EXPECT_GT(streamed[0], per_kind[0] * 9 / 10);
  for (int k = 0; k < kinds; ++k) EXPECT_LE(streamed[k], per_kind[k] - failed[k]);
}

// A node with tables is not streamed: parsed, then applied beside with_parse, as before.
TEST(NftApplyWhileParsingProps, ANodeWithTablesIsAppliedAsUsual) {
  test::NftGen gen(7);
  const std::string prior = gen.state_script();
  NftState state;
  ASSERT_TRUE(apply_script(state, prior, "prior.nft").ok);
  const std::string tx = gen.rewrite(state);
  NftState want = state, got = state;
  const ApplyResult rw = apply_script(want, tx, "tx.nft");
  bool streamed = true, handed = false;
  const ApplyResult rg = apply_while_parsing(got, tx, "tx.nft", [&](const PreparedScript&) { handed = true; }, 0, 4, &streamed);
  EXPECT_FALSE(streamed);
  EXPECT_TRUE(handed);
  EXPECT_EQ(outcome(rw, want), outcome(rg, got));
}

}  // namespace
}  // namespace kpc::verifier::nft
