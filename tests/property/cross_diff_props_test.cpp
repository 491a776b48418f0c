// Cross-back-end diff on random clusters (issue 16 §5): for any valid cluster, the iptables and
// nftables programs kpc writes for one node differ only by kube-proxy's documented mode
// differences (verifier/cross). Any other difference is a bug in one of the back ends.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "tests/support/cluster_env.h"
#include "tests/support/cross_support.h"
#include "tests/support/snapshot_gen.h"

namespace kpc {
namespace {

RC_GTEST_PROP(CrossDiffProps, IptablesAndNftablesDifferOnlyByKnownDifferences, ()) {
  testgen::GenOptions go;
  go.max_services = 5;
  auto snap = test::load_compilable(test::make_compilable(*testgen::gen_cluster(go)));
  RC_PRE(snap.has_value());
  // A migration carries the mode-specific settings over (the generator sets them per mode at
  // random; a setting only one mode reads is a real change, which the fixture test shows).
  snap->config.nftables.masquerade_all = snap->config.iptables.masquerade_all;
  snap->config.nftables.masquerade_bit = snap->config.iptables.masquerade_bit;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    auto run = test::cross_diff_snapshot(*snap, f);
    if (!run->result) continue;
    RC_ASSERT(run->result->packets > size_t{0});
    if (run->result->surprises != 0) RC_FAIL(test::surprises_text(*run->result));
  }
}

}  // namespace
}  // namespace kpc
