// Cross-back-end diff on random clusters (issue 16 §5): for any valid cluster, the iptables and
// nftables programs kpc writes for one node differ only by kube-proxy's documented mode
// differences (verifier/cross). Any other difference is a bug in one of the back ends.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "tests/support/cluster_env.h"
#include "tests/support/cross_support.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/cross/report.h"

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

// The two-thread comparison (each side traced on a thread of its own, in batches) reports
// exactly what the one-thread loop does, whatever the batch size: the same cells in the same
// order, the same counts. Batches of 1-7 packets make the follow-up packets (hairpin,
// affinity) land in later batches than the packets they come from.
RC_GTEST_PROP(CrossDiffProps, TwoThreadsAndAnyBatchSizeReportTheSame, ()) {
  testgen::GenOptions go;
  go.max_services = 5;
  auto snap = test::load_compilable(test::make_compilable(*testgen::gen_cluster(go)));
  RC_PRE(snap.has_value());
  const size_t batch = *rc::gen::inRange<size_t>(1, 8);
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    auto run = test::cross_diff_snapshot(*snap, f);
    if (!run->result) continue;
    auto fa = verifier::cross::make_iptables_frontend(run->ipt, run->local);
    auto fb = verifier::cross::make_nft_frontend(run->nft, f, run->local, false);
    auto space = verifier::cross::build_space(*fa, *fb, f, run->local);
    verifier::cross::CompareOptions one, two;
    one.threads = 1;
    two.threads = 2;
    two.batch = batch;
    auto r1 = verifier::cross::compare(*fa, *fb, space, one);
    auto r2 = verifier::cross::compare(*fa, *fb, space, two);
    verifier::cross::ReportOptions ro;
    ro.show_known = true;
    ro.verbose = true;  // every differing cell, in order
    RC_ASSERT(r1.packets == r2.packets);
    RC_ASSERT(r1.packets == run->result->packets);
    RC_ASSERT(verifier::cross::cross_json(r1, ro).dump() == verifier::cross::cross_json(r2, ro).dump());
  }
}

}  // namespace
}  // namespace kpc
