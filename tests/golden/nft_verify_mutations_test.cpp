// Mutation tests of `kpc verify` on nft (issue 16 §5): kube-proxy's own syncs of the
// multi-step kp-nft fixtures (kpc's nftables back end, sync by sync as the proxier decides:
// full, then partial) give correct partial transactions; each must verify as identical or
// equivalent (0 false alarms). Every mutant (one line of the partial deleted) is then
// verified and checked against independent evidence: a mutant that fails to apply must be
// "fails to apply"; one whose resulting ruleset (`nft list ruleset`) differs from the full
// sync's must not be "identical"; one that changes a sampled packet's fate (the concrete nft
// tracer on both states) must be "not equivalent" (or "cannot prove"), never "equivalent".
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tests/support/nft_fate.h"
#include "tests/support/nft_sync_steps.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/explorer.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::verifier::nft_sym {
namespace {
namespace vn = kpc::verifier::nft;

using Step = test::NftSyncStep;

TEST(NftVerifyMutations, CorrectPartialsVerifyAndMutantsAreCaught) {
  std::vector<IPAddr> local = {*IPAddr::parse("10.0.0.2"), *IPAddr::parse("192.168.0.2")};
  NftVerifyOptions vo;
  vo.local_addresses = local;
  size_t partials = 0, mutants = 0, failing = 0, changed = 0, fate_changing = 0, reported = 0, narrowing_checked = 0;
  for (const char* fx : {"kp-nft-sync-proxy-rules-repeated", "kp-nft-build-service-map-add-remove",
                         "kp-nft-build-service-map-service-update",
                         "kp-nft-terminating-endpoints-traffic-policy-local-ready-endpoints-exist"}) {
    for (const Step& s : test::nft_sync_steps(fx)) {
      ++partials;
      auto ok = verify_nft(s.prior, s.partial, s.full, vo);
      EXPECT_TRUE(ok.verdict == Verdict::Identical || ok.verdict == Verdict::Equivalent)
          << s.label << ": a correct partial is " << verdict_name(ok.verdict) << "\n" << format_text(ok);
      vn::NftState want = s.prior;
      ASSERT_TRUE(vn::apply_script(want, s.full, "full.nft").ok) << s.label;
      const std::string want_listing = vn::print_ruleset(want);
      for (const auto& [mutant, where] : test::one_line_deleted(s.partial, s.label)) {
        ++mutants;
        auto r = verify_nft(s.prior, mutant, s.full, vo);
        vn::NftState got = s.prior;
        if (!vn::apply_script(got, mutant, "mutant.nft").ok) {
          ++failing;
          EXPECT_EQ(r.verdict, Verdict::FailsToApply) << where;
          ++reported;
          continue;
        }
        if (vn::print_ruleset(got) == want_listing) {
          EXPECT_EQ(r.verdict, Verdict::Identical) << where;
          continue;
        }
        ++changed;
        EXPECT_NE(r.verdict, Verdict::Identical) << where;
        if (r.verdict != Verdict::Identical) ++reported;
        if (test::nft_fate_differs(want, got, local)) {
          ++fate_changing;
          EXPECT_TRUE(r.verdict == Verdict::NotEquivalent || r.verdict == Verdict::CannotProve)
              << where << ": a packet's fate changes, verdict " << verdict_name(r.verdict);
        }
        if (r.behaviour) {
          EXPECT_TRUE(r.behaviour->self_check_failures.empty()) << where;
          // The atom narrowing (affected.cpp) loses nothing: every atom explored finds the same.
          sem::CompareOptions co;
          co.local_addresses = local;
          co.explore_all = true;
          auto every = compare_nft(want, got, co);
          EXPECT_EQ(every.differing_classes, r.behaviour->differing_classes) << where;
          EXPECT_EQ(every.undecided_classes, r.behaviour->undecided_classes) << where;
          ++narrowing_checked;
        }
      }
    }
  }
  EXPECT_GE(partials, 4u);
  EXPECT_GE(mutants, 50u);
  std::printf("[ nft mutations ] %zu correct partials verified; %zu mutants: %zu fail to apply, %zu change the "
              "ruleset (%zu of them a sampled packet's fate); %zu reported; narrowing = every atom on %zu\n",
              partials, mutants, failing, changed, fate_changing, reported, narrowing_checked);
  EXPECT_GT(narrowing_checked, 20u);
}

}  // namespace
}  // namespace kpc::verifier::nft_sym
