// `kpc diff A.nft B.nft` of two full nft transactions (issue 16 §5): the benchmark's
// synthetic cluster (bench/synthetic_cluster.cpp, compiled in here) at 60 Services, before
// and after bench/one_change.h's change (an endpoint added to a Service with ClientIP
// affinity: a new endpoint chain, a new affinity set, a changed service chain). The
// narrowing must explore only that Service's atoms — it once fell back to every atom because
// the new affinity set differs — and still say exactly what exploring every atom says.
#include <gtest/gtest.h>

#include <cstdint>

#include "bench/one_change.h"
#include "bench/synthetic_cluster.cpp"
#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "tests/support/nft_narrowing.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/explorer.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/sem/report.h"

namespace kpc::verifier::nft_sym {
namespace {
namespace vn = kpc::verifier::nft;

vn::NftState full_state(const Snapshot& snap) {
  DiagSink d;
  auto r = compile_nftables(snap, IPFamily::V4, {}, d);
  EXPECT_TRUE(r.has_value());
  vn::NftState st;
  vn::NftError e;
  EXPECT_TRUE(read_nft_state(r ? r->cleanup_text + r->text : "", "full.nft", &st, &e)) << e.render();
  return st;
}

// The two full transactions of the 60-Service benchmark cluster before and after
// bench/one_change.h's change.
bool one_change_states(vn::NftState* a, vn::NftState* b) {
  SourceManager sm;
  DiagSink diags;
  Snapshot before;
  if (!load_snapshot_text({{"cluster.json", bench::synthetic_cluster_json({60, 10, 5})}}, LoadOptions{}, sm, &before,
                          diags))
    return false;
  Snapshot after = before;
  bench::add_one_endpoint(after);
  *a = full_state(before), *b = full_state(after);
  return true;
}

TEST(NftDiffNarrowing, TwoFullTransactionsExploreOnlyTheChangedService) {
  vn::NftState a, b;
  ASSERT_TRUE(one_change_states(&a, &b));
  sem::CompareOptions co;
  co.local_addresses = test::nft_diff_locals(a, b);

  // Step 1 alone: not every atom, and only a few.
  sem::Universe u = build_universe({&a, &b}, IPFamily::V4, co.local_addresses);
  auto aff = affected_atoms_nft(a, b, u);
  EXPECT_FALSE(aff.all) << aff.why_all;
  size_t marked = 0;
  for (char x : aff.atom) marked += x != 0;
  EXPECT_GE(marked, 1u);
  EXPECT_LE(marked, 4u);

  auto narrowed = compare_nft(a, b, co);
  EXPECT_EQ(narrowed.narrowing.find("all atoms"), std::string::npos) << narrowed.narrowing;
  EXPECT_LE(narrowed.atoms_explored, 4u);
  EXPECT_GT(narrowed.differing_classes, 0u);
  EXPECT_TRUE(narrowed.self_check_failures.empty());
  co.explore_all = true;
  auto every = compare_nft(a, b, co);
  EXPECT_EQ(every.atoms_explored, every.atoms);
  EXPECT_EQ(test::nft_comparison_facts(narrowed), test::nft_comparison_facts(every));
}

// A dnat the rule model cannot read (here after a `ct mark` match, which the nft model accepts
// and the tracer stops at) has an unknown target: it may be a node address and may lie in the
// changed element, so the narrowing must not trust the element ranges any more -- and the
// comparison must still say what exploring every atom says.
TEST(NftDiffNarrowing, AnUnreadDnatTargetWidensTheNarrowing) {
  vn::NftState a, b;
  ASSERT_TRUE(one_change_states(&a, &b));
  const std::string foreign =
      "add table ip mine\n"
      "add chain ip mine pre { type nat hook prerouting priority -90 ; }\n"
      "add rule ip mine pre ct mark 0x1 dnat to 10.96.0.42\n";
  for (vn::NftState* st : {&a, &b}) ASSERT_TRUE(vn::apply_script(*st, foreign, "foreign.nft").ok);
  sem::CompareOptions co;
  co.local_addresses = test::nft_diff_locals(a, b);
  sem::Universe u = build_universe({&a, &b}, IPFamily::V4, co.local_addresses);
  auto aff = affected_atoms_nft(a, b, u);
  size_t marked = 0;
  for (char x : aff.atom) marked += x != 0;
  EXPECT_TRUE(aff.all || marked > 4u) << marked << " atoms marked";
  auto narrowed = compare_nft(a, b, co);
  co.explore_all = true;
  auto every = compare_nft(a, b, co);
  EXPECT_EQ(test::nft_comparison_facts(narrowed), test::nft_comparison_facts(every));
}

// The full transaction of the changed cluster, written for a node holding the old one, read
// alone (on an empty node, as `kpc diff full.nft next.nft` reads it): it leaves out what it
// expects the node to hold, so nearly every Service differs — the case that once took the
// comparison 25 minutes at 10,000 Services. With the listing cut short, the classes are the
// same, the listed ones are the first of the whole listing, and the report still counts
// every Service with a differing class.
TEST(NftDiffNarrowing, AFullReadAloneIsListedInPartButCountedWhole) {
  SourceManager sm;
  DiagSink diags;
  Snapshot before;
  ASSERT_TRUE(load_snapshot_text({{"cluster.json", bench::synthetic_cluster_json({60, 10, 5})}}, LoadOptions{}, sm,
                                 &before, diags));
  Snapshot after = before;
  bench::add_one_endpoint(after);
  NftPriorOptions full;
  full.force_full = true;
  auto f = compile_nftables_from_prior(after, before, IPFamily::V4, full, diags);
  ASSERT_TRUE(f.has_value());
  vn::NftState a, b = full_state(after);
  vn::NftError e;
  ASSERT_TRUE(read_nft_state(f->cleanup_text + f->text, "full.nft", &a, &e)) << e.render();

  sem::CompareOptions co;
  co.local_addresses = test::nft_diff_locals(a, b);
  co.max_reported = SIZE_MAX;
  auto every = compare_nft(a, b, co);
  co.max_reported = 20;
  auto listed = compare_nft(a, b, co);

  const size_t services = sem::differences_by_service(every).size();
  EXPECT_GT(services, 10u);  // nearly every Service differs
  EXPECT_EQ(every.services_differing.size(), services);
  EXPECT_EQ(listed.services_differing, every.services_differing);
  EXPECT_EQ(listed.differing_classes, every.differing_classes);
  EXPECT_EQ(listed.undecided_classes, every.undecided_classes);
  ASSERT_EQ(listed.differences.size(), 20u);
  for (size_t i = 0; i < listed.differences.size(); ++i) {
    EXPECT_EQ(listed.differences[i].cls, every.differences[i].cls) << i;
    EXPECT_EQ(listed.differences[i].witness_text, every.differences[i].witness_text) << i;
    EXPECT_EQ(listed.differences[i].services, every.differences[i].services) << i;
  }
  EXPECT_LT(sem::differences_by_service(listed).size(), services);
  const std::string text = sem::diff_text(listed);
  EXPECT_NE(text.find("in " + std::to_string(services) + " services\n"), std::string::npos) << text.substr(0, 400);
  EXPECT_NE(text.find("(showing the first 20 classes, of "), std::string::npos) << text.substr(0, 400);
  EXPECT_TRUE(every.self_check_failures.empty());
}

}  // namespace
}  // namespace kpc::verifier::nft_sym
