// The nft comparison's atom narrowing (verifier/nft_sym/affected.cpp) hides no behaviour:
// on random clusters, the full transaction before and after 1-3 everyday changes (the
// two-full-programs case of `kpc diff prior.nft next.nft`), and sometimes one side further
// changed by a random nft transaction (tests/support/nft_gen.h: objects kube-proxy never
// writes, deletions, other tables), the narrowed comparison says exactly what exploring
// every atom says: the same counts, classes, witnesses and outcomes. Two kube-proxy full
// transactions need every atom only for a NodePort-like lookup (not by destination) run
// from a base chain, never for an affinity set, a definition or a table (issue 16 §5).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdio>

#include "compiler/driver/compile_nftables.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/nft_gen.h"
#include "tests/support/nft_narrowing.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/verify.h"

namespace kpc::test {
namespace {
namespace vn = kpc::verifier::nft;
namespace ns = kpc::verifier::nft_sym;
using testgen::GeneratedCluster;

struct Counter {
  int cases = 0, differing = 0, narrowed = 0, nft_mutated = 0, every = 0;
  ~Counter() {
    if (cases)
      std::fprintf(stderr,
                   "NftNarrowingProps: %d comparisons narrowed = every atom (%d with differences, %d narrowed below "
                   "every atom, %d every atom, %d with a random nft transaction on one side)\n",
                   cases, differing, narrowed, every, nft_mutated);
  }
};
Counter counter;

std::optional<vn::NftState> full_state(const Snapshot& snap, IPFamily fam) {
  DiagSink d;
  auto r = compile_nftables(snap, fam, {}, d);
  if (!r) return std::nullopt;
  vn::NftState st;
  vn::NftError e;
  if (!ns::read_nft_state(r->cleanup_text + r->text, "full.nft", &st, &e)) return std::nullopt;
  return st;
}

}  // namespace

RC_GTEST_PROP(NftNarrowingProps, NarrowedEqualsEveryAtom, ()) {
  testgen::GenOptions go;
  go.max_services = 5;
  GeneratedCluster c = make_compilable(*testgen::gen_cluster(go));
  auto prior = load_compilable(c);
  RC_PRE(prior.has_value());
  GeneratedCluster next_c = c;
  for (int m = *rc::gen::inRange(1, 4), serial = 1; m > 0; --m) mutate_cluster(next_c, serial++);
  auto next = load_compilable(next_c);
  RC_PRE(next.has_value());
  const IPFamily fam = *rc::gen::element(IPFamily::V4, IPFamily::V6);
  auto a = full_state(*prior, fam), b = full_state(*next, fam);
  RC_PRE(a.has_value() && b.has_value());
  // Sometimes one side changed further by a random valid nft transaction.
  bool mutated = false;
  if (*rc::gen::inRange(0, 3) == 0) {
    NftGen gen(*rc::gen::arbitrary<uint64_t>());
    vn::NftState& side = *rc::gen::arbitrary<bool>() ? *a : *b;
    for (int tries = 0; tries < 8 && !mutated; ++tries) {
      vn::NftState copy = side;
      if (vn::apply_script(copy, gen.transaction(side), "mutation.nft").ok) {
        side = std::move(copy);
        mutated = true;
      }
    }
  }
  // The listing comparison the narrowing starts from (same_listing: printed piece by piece).
  RC_ASSERT(vn::same_listing(*a, *b) == (vn::print_ruleset(*a) == vn::print_ruleset(*b)));
  RC_ASSERT(vn::same_listing(*a, *a));
  verifier::sem::CompareOptions co;
  co.local_addresses = nft_diff_locals(*a, *b);
  auto narrowed = ns::compare_nft(*a, *b, co);
  co.explore_all = true;
  auto every = ns::compare_nft(*a, *b, co);
  RC_ASSERT(narrowed.self_check_failures.empty());
  RC_ASSERT(nft_comparison_facts(narrowed) == nft_comparison_facts(every));
  // Two kube-proxy full transactions differ in service chains, map elements and affinity
  // sets: every atom only through a chain a base chain runs whose lookup is not by the
  // destination (a NodePort's `meta l4proto . th dport` map), never because of an affinity
  // set, a definition or a table.
  if (!mutated && narrowed.narrowing.find("all atoms") != std::string::npos &&
      narrowed.narrowing.find("all atoms: a base chain differs") == std::string::npos)
    RC_FAIL("two full transactions explored every atom: " + narrowed.narrowing);
  ++counter.cases;
  counter.differing += narrowed.differing_classes > 0;
  counter.narrowed += !narrowed.equivalent_by_hash && narrowed.atoms_explored < narrowed.atoms;
  counter.nft_mutated += mutated;
  counter.every += narrowed.narrowing.find("all atoms") != std::string::npos;
}

}  // namespace kpc::test
