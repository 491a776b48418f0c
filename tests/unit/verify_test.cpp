// verifier::verify (state level): each verdict, and the partial programs of
// kube-proxy's repeated-sync sequence verified identical to full syncs.
#include <gtest/gtest.h>

#include "compiler/driver/compile.h"
#include "tests/support/golden.h"
#include "tests/support/test_util.h"
#include "verifier/equiv/verify.h"

namespace kpc::verifier {
namespace {

const char* kPrior = R"(*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SVC-OLD - [0:0]
-A KUBE-SERVICES -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -p tcp -j DNAT --to-destination 10.1.0.1:80
-A KUBE-SVC-OLD -p tcp -j DNAT --to-destination 10.1.0.9:80
COMMIT
)";

const char* kFull = R"(*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SVC-OLD - [0:0]
-A KUBE-SERVICES -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -p tcp -j DNAT --to-destination 10.1.0.2:80
-X KUBE-SVC-OLD
COMMIT
)";

RulesetState prior_state() {
  RulesetState s = RulesetState::empty(IPFamily::V4);
  ApplyOptions o;
  o.noflush = true;
  EXPECT_TRUE(apply_text(s, kPrior, o).ok());
  return s;
}

TEST(Verify, IdenticalWhenThePartialDoesWhatTheFullDoes) {
  auto r = verify(prior_state(), kFull, kFull, Flavor::Legacy);
  EXPECT_EQ(r.verdict, Verdict::Identical);
  EXPECT_TRUE(r.differences.empty());
}

TEST(Verify, EquivalentWhenOnlyAnUnreachableChainIsLeftBehind) {
  const char* partial = "*nat\n:KUBE-SVC-A - [0:0]\n-A KUBE-SVC-A -p tcp -j DNAT --to-destination 10.1.0.2:80\nCOMMIT\n";
  auto r = verify(prior_state(), partial, kFull, Flavor::Legacy);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << format_text(r);
  ASSERT_EQ(r.differences.size(), 1u);
  EXPECT_EQ(r.differences[0].chain, "KUBE-SVC-OLD");
  EXPECT_FALSE(r.differences[0].reachable);
}

TEST(Verify, DiffersWhenAReachableChainDiffers) {
  const char* partial =
      "*nat\n:KUBE-SVC-A - [0:0]\n:KUBE-SVC-OLD - [0:0]\n-A KUBE-SVC-A -p tcp -j DNAT --to-destination 10.1.0.3:80\n-X KUBE-SVC-OLD\nCOMMIT\n";
  auto r = verify(prior_state(), partial, kFull, Flavor::Legacy);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << format_text(r);
  ASSERT_EQ(r.differences.size(), 1u);
  EXPECT_EQ(r.differences[0].chain, "KUBE-SVC-A");
  EXPECT_TRUE(r.differences[0].reachable);
}

TEST(Verify, FailsToApplyNamesTheLine) {
  const char* partial = "*nat\n:KUBE-SVC-A - [0:0]\n-A KUBE-SVC-A -j KUBE-SEP-MISSING\nCOMMIT\n";
  auto r = verify(prior_state(), partial, kFull, Flavor::Legacy);
  EXPECT_EQ(r.verdict, Verdict::FailsToApply);
  ASSERT_TRUE(r.failure.has_value());
  EXPECT_EQ(r.failing_program, "partial");
  EXPECT_EQ(r.failure->line, 3u);
}

TEST(Verify, DroppedDeleteOfAReferencedChainIsCaught) {
  // The partial forgets to rewrite KUBE-SERVICES but deletes the chain it jumps to: fails like the kernel.
  const char* partial = "*nat\n:KUBE-SVC-A - [0:0]\n-X KUBE-SVC-A\nCOMMIT\n";
  auto r = verify(prior_state(), partial, kFull, Flavor::Legacy);
  EXPECT_EQ(r.verdict, Verdict::FailsToApply) << format_text(r);
}

// kube-proxy's repeated-sync sequence: every partial kpc writes, applied to the state the
// previous step left, is identical to the full sync kube-proxy would write instead.
TEST(Verify, RepeatedSyncPartialsAreIdenticalToFullSyncs) {
  std::string dir = test::source_path("fixtures/kp-sync-proxy-rules-repeated/steps/");
  for (int step = 2; step <= 8; ++step) {
    char prev[8], cur[8];
    std::snprintf(prev, sizeof prev, "%02d", step - 1);
    std::snprintf(cur, sizeof cur, "%02d", step);
    std::vector<std::string> old_in = {dir + prev + "/snapshot.yaml"}, new_in = {dir + cur + "/snapshot.yaml"};
    auto prior_full = test::compile_paths(old_in, Backend::IPTables);
    auto partial = test::compile_from_prior_paths(new_in, old_in, Backend::IPTables, {});
    PriorOptions full_sync;
    full_sync.force_full = true;
    auto full = test::compile_from_prior_paths(new_in, old_in, Backend::IPTables, full_sync);
    ASSERT_TRUE(prior_full.ok && partial.ok && full.ok);
    RulesetState prior = RulesetState::empty(IPFamily::V4);
    ApplyOptions o;
    o.noflush = true;
    ASSERT_TRUE(apply_text(prior, prior_full.text, o).ok());
    for (Flavor f : {Flavor::Legacy, Flavor::Nft}) {
      auto r = verify(prior, partial.text, full.text, f);
      EXPECT_EQ(r.verdict, Verdict::Identical) << "step " << step << " " << flavor_name(f) << "\n" << format_text(r);
    }
  }
}

}  // namespace
}  // namespace kpc::verifier
