// The nft model defers a `flush chain` whose rules the transaction adds again unchanged
// (verifier/nft/apply.cpp, "rules kept through a flush"): the chain keeps its rules and only
// their handles change. That must be invisible. Random kube-proxy-shaped states and full-sync
// rewrites of their chains (mostly unchanged; sometimes a rule changed, dropped, added,
// swapped, recommented, the chain flushed twice, and other commands between the re-adds:
// deletions of what the rules reference, inserts, rules elsewhere, handle-based commands),
// several in a row, are applied both ways: deferred, and with every flush carried out where
// it is written (apply_script_eager). Both must give the same result, errors, warnings,
// `nft -a list ruleset` (handles included), handle generators and implied set sizes, after
// successes and after failures (rolled back) alike.
//
// The real nft holds the same rewrites to account in tests/kernel/nft_model_kernel_test.cpp.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/support/nft_gen.h"
#include "verifier/nft/internal.h"
#include "verifier/nft/nft.h"

namespace kpc::verifier::nft {
namespace {

// What a state holds beyond its listing: the handle generators.
std::string generators(const NftState& s) {
  std::string out = "tables " + std::to_string(s.next_table_handle);
  for (const auto& t : s.tables) out += "; " + t.name + " " + std::to_string(t.next_handle);
  return out;
}

std::string everything(const NftState& s) { return print_ruleset(s, {true}) + generators(s); }

std::string result(const ApplyResult& r) { return test::apply_outcome(r); }

TEST(NftDeferredFlushProps, DeferredFlushesActAsFlushesWhereWritten) {
  const uint64_t seed = 20261204;
  size_t txs = 0, kept_txs = 0, rules_kept = 0, failed = 0, failed_after_keeping = 0, mismatches = 0;
  for (uint64_t i = 0; i < 3000 && mismatches < 3; ++i) {
    test::NftGen gen(seed + i);
    NftState deferred;
    ASSERT_TRUE(apply_script(deferred, gen.state_script(), "state.nft").ok);
    NftState eager = deferred;
    for (int step = 0, n = 1 + static_cast<int>(gen.next(4)); step < n; ++step) {
      const std::string tx = gen.chance(80) ? gen.rewrite(deferred) : gen.transaction(deferred);
      ApplyResult rd = apply_script(deferred, tx, "tx.nft");
      ApplyResult re = apply_script_eager(eager, tx, "tx.nft");
      ++txs;
      if (rd.rules_kept) ++kept_txs, rules_kept += rd.rules_kept;
      if (!rd.ok) {
        ++failed;
        if (rd.rules_kept) ++failed_after_keeping;  // undone after rules were kept
      }
      if (result(rd) != result(re) || everything(deferred) != everything(eager)) {
        ++mismatches;
        ADD_FAILURE() << "seed " << seed + i << " step " << step << "\n--- transaction:\n" << tx << "--- deferred:\n"
                      << result(rd) << "\n" << everything(deferred) << "\n--- eager:\n" << result(re) << "\n"
                      << everything(eager);
        break;
      }
    }
  }
  std::printf("deferred vs eager flushes: %zu transactions, %zu kept rules (%zu rules), %zu failed (%zu after keeping rules), "
              "%zu mismatches\n",
              txs, kept_txs, rules_kept, failed, failed_after_keeping, mismatches);
  EXPECT_EQ(mismatches, 0u);
  // The comparison must mean something: rules are kept often, and failures occur with flushes.
  EXPECT_GT(kept_txs * 4, txs);
  EXPECT_GT(failed_after_keeping * 20, txs);
}

}  // namespace
}  // namespace kpc::verifier::nft
