// kpc-applier's nftables proof reference (applier/node/nft_want.h) against the whole apply:
// over random clusters and random sequences of changes (1-3 everyday changes, a host change,
// or none per step; IPv4 and IPv6), the full transaction of every step (compile_nftables on a
// fresh node, as the proof's reference) is given to one NftWant, whose state -- redone object
// by object where it can -- must list exactly as the text applied to an empty state
// (`nft list ruleset`, verifier/nft print_ruleset), and compare identical to it. The counts of
// object-path and whole updates are printed at exit. A deliberately broken object path (the
// creation order not restored) must be caught by the same comparison (the last test).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdio>

#include "applier/node/nft_equiv.h"
#include "applier/node/nft_want.h"
#include "applier/node/sources.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/cluster_events.h"
#include "tests/support/snapshot_gen.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

namespace vn = verifier::nft;

struct WantCounter {
  int updates = 0, incremental = 0, whole = 0, redone = 0, scoped = 0;
  ~WantCounter() {
    if (updates)
      std::fprintf(stderr,
                   "NftWantProps: %d reference states compared with the whole apply (%d by the object path, %d objects "
                   "redone in all; %d whole; %d with every changed object named as redone)\n",
                   updates, incremental, redone, whole, scoped);
  }
};
WantCounter counter;

std::optional<std::string> full_text(const Snapshot& s, IPFamily f) {
  DiagSink d;
  NftOptions no;
  no.keep_state = false;
  auto r = compile_nftables(s, f, no, d);
  if (!r) return std::nullopt;
  return r->text;
}

// The NftWant's state after `text` against the text applied to an empty state.
void check_update(applier::NftWant& want, const std::string& text, IPFamily f, const std::string& what) {
  const vn::NftState before = want.state_any_order();
  auto u = want.update(text);
  vn::NftState whole;
  auto w = vn::apply_script(whole, text, "full.nft");
  RC_ASSERT(u.ok == w.ok);
  if (!u.ok) return;
  ++counter.updates;
  if (u.incremental) ++counter.incremental, counter.redone += static_cast<int>(u.objects_redone);
  else ++counter.whole;
  std::string a = vn::print_ruleset(want.state()), b = vn::print_ruleset(whole);
  if (a != b)
    RC_FAIL(what + (u.incremental ? " (object path)" : " (whole)") + ": listings " +
            first_difference(a, b, "kept state", "whole apply"));
  auto cmp = applier::compare_nft_tables(want.state(), whole, f == IPFamily::V4 ? vn::Family::Ip : vn::Family::Ip6,
                                         "kube-proxy");
  RC_ASSERT(cmp.verdict == applier::NftVerdict::Identical);
  // Every object the update changed is named as redone: the sync loop's scoped comparison
  // (applier/node/nft_equiv.h NftScope) compares only those after a proven partial.
  if (u.incremental) {
    const vn::Family vf = f == IPFamily::V4 ? vn::Family::Ip : vn::Family::Ip6;
    applier::NftScope scope;
    scope.chains.insert(u.redone_chains.begin(), u.redone_chains.end());
    scope.sets.insert(u.redone_sets.begin(), u.redone_sets.end());
    auto all = applier::compare_nft_tables(before, want.state_any_order(), vf, "kube-proxy");
    auto scoped = applier::compare_nft_tables(before, want.state_any_order(), vf, "kube-proxy", &scope);
    RC_ASSERT(all.differences == scoped.differences);
    ++counter.scoped;
  }
}

// The example's IPv4 full transaction before and after its first endpoint moves to a new
// address (a new endpoint chain), and the second applied whole: the fixed case of the tests below.
struct EndpointChange {
  std::string first, second, error;
  vn::NftState whole;
  bool make() {
    auto fail = [this](const char* why) {
      error = why;
      return false;
    };
    Snapshot snap;
    if (!applier::load_snapshot_paths({source_path("fixtures/example")}, "", &snap, &error)) return false;
    auto a = full_text(snap, IPFamily::V4);
    if (!a || snap.slices.empty() || snap.slices[0].endpoints.empty()) return fail("no example program");
    snap.slices[0].endpoints[0].addresses = {*IPAddr::parse("10.244.9.99")};
    auto b = full_text(snap, IPFamily::V4);
    if (!b) return fail("the changed example does not compile");
    first = std::move(*a), second = std::move(*b);
    if (!vn::apply_script(whole, second, "full.nft").ok) return fail("the changed example does not apply");
    return true;
  }
};

}  // namespace

RC_GTEST_PROP(NftWantProps, KeptReferenceStateListsAsTheWholeApply, ()) {
  testgen::GenOptions go;
  go.max_services = 8;
  testgen::GeneratedCluster c = make_compilable(*testgen::gen_cluster(go));
  auto snap = load_compilable(c);
  RC_PRE(snap.has_value());
  applier::NftWant want[2];
  // A third of the cases with every digest 0: the line-by-line comparison alone decides.
  const bool constant_digests = *rc::gen::inRange(0, 3) == 0;
  want[0].test_constant_digests = want[1].test_constant_digests = constant_digests;
  const IPFamily fams[2] = {IPFamily::V4, IPFamily::V6};
  for (int i = 0; i < 2; ++i)
    if (auto t = full_text(*snap, fams[i])) check_update(want[i], *t, fams[i], "first text");
  int serial = 0;
  const int steps = *rc::gen::inRange(1, 10);
  for (int step = 0; step < steps; ++step) {
    testgen::GeneratedCluster next_c = c;
    const int kind = *rc::gen::inRange(0, 10);
    if (kind == 1) change_host(next_c, ++serial);
    else if (kind != 0)
      for (int m = *rc::gen::inRange(1, 4); m > 0; --m) mutate_cluster(next_c, ++serial);
    auto next = load_compilable(next_c);
    if (!next) continue;
    for (int i = 0; i < 2; ++i)
      if (auto t = full_text(*next, fams[i]))
        check_update(want[i], *t, fams[i], "step " + std::to_string(step) + ", " + family_name(fams[i]));
    c = std::move(next_c);
  }
}

// The comparison above can fail: with the object path's last step (chains and sets put back in
// the order a whole apply creates them) skipped, a new endpoint chain is listed last instead of
// among its Service's, and the listings differ although every object is right.
TEST(NftWantProps, ABrokenObjectPathIsCaught) {
  EndpointChange c;
  ASSERT_TRUE(c.make()) << c.error;
  for (bool broken : {false, true}) {
    applier::NftWant want;
    want.test_skip_reorder = broken;
    ASSERT_TRUE(want.update(c.first).ok);
    auto u = want.update(c.second);
    ASSERT_TRUE(u.ok);
    EXPECT_TRUE(u.incremental) << u.why_whole;
    if (!broken) EXPECT_EQ(vn::print_ruleset(want.state()), vn::print_ruleset(c.whole));
    else EXPECT_NE(vn::print_ruleset(want.state()), vn::print_ruleset(c.whole));
  }
}

// Digests only reject changed blocks early: with every digest 0 a changed endpoint is still
// found by the line-by-line comparison and redone (a digest-only comparison would redo nothing
// and keep the old endpoint).
TEST(NftWantProps, EqualDigestsStillCompareTheLines) {
  EndpointChange c;
  ASSERT_TRUE(c.make()) << c.error;
  applier::NftWant want;
  want.test_constant_digests = true;
  ASSERT_TRUE(want.update(c.first).ok);
  auto u = want.update(c.second);
  ASSERT_TRUE(u.ok);
  EXPECT_TRUE(u.incremental) << u.why_whole;
  EXPECT_GT(u.objects_redone, 0u);
  EXPECT_EQ(vn::print_ruleset(want.state()), vn::print_ruleset(c.whole));
}

}  // namespace kpc::test
