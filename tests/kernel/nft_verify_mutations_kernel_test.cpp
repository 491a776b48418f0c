// The nft verifier's mutation tests confirmed against the real `nft` (issue 16 §5). The golden
// test (tests/golden/nft_verify_mutations_test.cpp) judges each mutant by kpc's own nft model;
// here the judge is the kernel. For every partial sync of kube-proxy's multi-step kp-nft
// fixtures (kpc's nftables back end), in a network namespace:
//   - the node before the sync is built by the real nft (the syncs before it, replayed), read back
//     (`nft list ruleset`) and reloaded before each run, so every run starts from the same kernel;
//   - the correct partial must verify as identical or equivalent (0 false alarms), and as
//     identical exactly when the kernel's ruleset after it equals the kernel's after the full sync;
//   - every mutant (one line of the partial deleted) is applied by the real nft: refused by nft →
//     kpc must say "fails to apply" with nft's own error text; accepted with the full sync's
//     ruleset → "identical"; accepted with another ruleset → never "identical", and when some
//     sampled packet meets another fate in the two kernel rulesets (read back with kpc's listing
//     parser, traced by the concrete nft tracer) → "not equivalent" or "cannot prove".
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "tests/support/netns.h"
#include "tests/support/nft_fate.h"
#include "tests/support/nft_sync_steps.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_sym/verify.h"

namespace kpc::test {
namespace {

namespace vn = verifier::nft;
using verifier::Verdict;
using verifier::verdict_name;

struct Kernel {
  Netns ns;
  std::string dir;
  Kernel() {
    char tmpl[] = "/tmp/kpc-nft-mut-XXXXXX";
    dir = mkdtemp(tmpl) ? tmpl : "/tmp";
  }
  ~Kernel() { run({"rm", "-rf", dir}); }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = dir + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  CommandResult nft_file(const std::string& path) const { return ns.exec({"nft", "-f", path}); }
  std::string listing() const { return ns.exec({"nft", "list", "ruleset"}).out; }
  /// The kernel as `saved` says (a file "flush ruleset" + a listing read back earlier), whatever
  /// it holds now: one transaction.
  bool reset(const std::string& saved_path) const { return nft_file(saved_path).exit_code == 0; }
};

vn::NftState state_of_listing(const std::string& text, const std::string& what) {
  vn::NftState st;
  vn::NftError err;
  EXPECT_TRUE(vn::parse_listing(text, what, &st, &err)) << what << ": " << err.to_string();
  return st;
}

TEST(NftVerifyMutationsKernel, TheRealNftJudgesEveryMutant) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  if (run({"nft", "--version"}).exit_code != 0) GTEST_SKIP() << "nft is not installed";
  Kernel k;
  ASSERT_TRUE(k.ns.ok());
  const std::vector<IPAddr> local = {*IPAddr::parse("10.0.0.2"), *IPAddr::parse("192.168.0.2")};
  verifier::nft_sym::NftVerifyOptions vo;
  vo.local_addresses = local;
  size_t partials = 0, mutants = 0, refused = 0, same_ruleset = 0, changed = 0, fate_changing = 0;
  for (const char* fx : {"kp-nft-sync-proxy-rules-repeated", "kp-nft-build-service-map-add-remove",
                         "kp-nft-build-service-map-service-update",
                         "kp-nft-terminating-endpoints-traffic-policy-local-ready-endpoints-exist"}) {
    for (const NftSyncStep& s : nft_sync_steps(fx)) {
      ++partials;
      // The node before this sync, as the kernel builds it.
      ASSERT_EQ(k.ns.exec({"nft", "flush", "ruleset"}).exit_code, 0);
      for (size_t i = 0; i < s.applied_before.size(); ++i) {
        auto r = k.nft_file(k.write("sync" + std::to_string(i) + ".nft", s.applied_before[i]));
        ASSERT_EQ(r.exit_code, 0) << s.label << ": sync " << i + 1 << " does not load:\n" << r.err;
      }
      const std::string prior_listing = k.listing();
      const std::string saved = k.write("prior.nft", "flush ruleset\n" + prior_listing);
      ASSERT_TRUE(k.reset(saved));
      ASSERT_EQ(k.listing(), prior_listing) << s.label << ": the kernel's listing does not reload as itself";

      auto full = k.nft_file(k.write("full.nft", s.full));
      ASSERT_EQ(full.exit_code, 0) << s.label << ": the full sync fails:\n" << full.err;
      const std::string want_listing = k.listing();
      const vn::NftState want = state_of_listing(want_listing, s.label + " (kernel after the full sync)");

      // The correct partial: 0 false alarms, and "identical" exactly when the kernel agrees.
      ASSERT_TRUE(k.reset(saved));
      auto good = k.nft_file(k.write("partial.nft", s.partial));
      ASSERT_EQ(good.exit_code, 0) << s.label << ": the partial sync fails:\n" << good.err;
      const bool good_same = k.listing() == want_listing;
      auto ok = verifier::nft_sym::verify_nft(s.prior, s.partial, s.full, vo);
      EXPECT_EQ(ok.verdict, good_same ? Verdict::Identical : Verdict::Equivalent)
          << s.label << ": the correct partial is " << verdict_name(ok.verdict) << " (the kernel's rulesets are "
          << (good_same ? "equal" : "not equal") << ")\n" << verifier::nft_sym::format_text(ok);

      bool dirty = true;
      for (const auto& [mutant, where] : one_line_deleted(s.partial, s.label)) {
        ++mutants;
        const std::string path = k.write("mutant.nft", mutant);
        // A refused transaction leaves the kernel as it was (nft is atomic): no reset needed then.
        if (dirty) {
          ASSERT_TRUE(k.reset(saved)) << where;
        }
        auto real = k.nft_file(path);
        dirty = real.exit_code == 0;
        auto r = verifier::nft_sym::verify_nft(s.prior, mutant, s.full, vo, path);
        if (real.exit_code != 0) {
          ++refused;
          EXPECT_EQ(r.verdict, Verdict::FailsToApply) << where << ": nft refuses it:\n" << real.err;
          if (r.failure) {
            EXPECT_EQ(r.failing_program, "partial") << where;
            EXPECT_EQ(real.err.substr(0, r.failure->render().size()), r.failure->render()) << where;
          }
          continue;
        }
        const std::string got_listing = k.listing();
        if (got_listing == want_listing) {
          ++same_ruleset;
          EXPECT_EQ(r.verdict, Verdict::Identical) << where;
          continue;
        }
        ++changed;
        EXPECT_TRUE(r.verdict != Verdict::Identical && r.verdict != Verdict::FailsToApply)
            << where << ": the kernel's ruleset differs from the full sync's, verdict " << verdict_name(r.verdict);
        const vn::NftState got = state_of_listing(got_listing, where + " (kernel)");
        if (nft_fate_differs(want, got, local)) {
          ++fate_changing;
          EXPECT_TRUE(r.verdict == Verdict::NotEquivalent || r.verdict == Verdict::CannotProve)
              << where << ": a packet's fate changes in the kernel's rulesets, verdict " << verdict_name(r.verdict);
        }
      }
    }
  }
  std::printf("[ nft mutations vs nft ] %zu correct partials; %zu mutants: %zu refused by nft, %zu with the full "
              "sync's ruleset, %zu with another (%zu of them a sampled packet's fate)\n",
              partials, mutants, refused, same_ruleset, changed, fate_changing);
  // The test must mean something: every kind of outcome occurs.
  EXPECT_GE(partials, 4u);
  EXPECT_GE(mutants, 50u);
  EXPECT_GT(refused, 0u);
  EXPECT_GT(changed, 20u);
  EXPECT_GT(fate_changing, 10u);
}

}  // namespace
}  // namespace kpc::test
