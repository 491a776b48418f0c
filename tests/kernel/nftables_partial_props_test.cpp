// Issue 14's ground truth for the nftables back end, as a property: for a random cluster and
// a random sequence of changes, the real `nft` (nftables 1.0.6) in a network namespace
//  - loads every full transaction kpc writes (IPv4 and IPv6), and
//  - given full(OLD), then partial(OLD -> NEW), then the stale-chain deletion kube-proxy runs
//    at its next sync (more than a second later), lists exactly what full(NEW) alone lists.
// Size: 50 cases in CI (the release preset's KPC_RC_PARAMS_kernel: ~175 steps, each for both
// families), 300 in the release-long preset; RC_PARAMS="max_success=3000" runs thousands.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "compiler/driver/compile_nftables.h"
#include "compiler/proxy/service_ports.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/netns.h"
#include "tests/support/nft_compare.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/nft/nft.h"

namespace kpc::test {
namespace {

using testgen::GeneratedCluster;

struct NftKernels {
  Netns a, b;  // a: full(OLD) + partial + cleanup; b: full(NEW) alone
  void reset() {
    a.exec({"nft", "flush", "ruleset"});
    b.exec({"nft", "flush", "ruleset"});
  }
};

NftKernels& kernels() {
  static NftKernels k;
  return k;
}

struct StepCounter {
  int steps = 0;
  ~StepCounter() {
    if (steps) std::fprintf(stderr, "NftKernelPartial: %d kernel checks (prior+partial+cleanup vs full)\n", steps);
  }
};
StepCounter step_counter;

void check_step(const Snapshot& prior, const Snapshot& next, IPFamily family) {
  DiagSink diags;
  auto full_old = compile_nftables(prior, family, {}, diags);
  auto full_new = compile_nftables(next, family, {}, diags);
  auto partial = compile_nftables_from_prior(next, prior, family, {}, diags);
  RC_ASSERT(full_old && full_new && partial);
  RC_ASSERT(partial->cleanup_text.empty());  // the prior's kernel has no stale chains yet

  // kube-proxy's next sync, two seconds later and with nothing changed: it deletes the chains
  // the partial flushed, and writes nothing else.
  auto node = nft_node_context(next, family, diags);
  RC_ASSERT(node.has_value());
  auto ports = proxy::build_service_ports(next, *node);
  nftables::SyncState state = partial->state;
  nftables::SyncOptions later;
  later.full = false;
  later.now_ms = 1000 + 2000;
  auto after = nftables::sync_nftables(ports, *node, later, state);
  RC_ASSERT(after.tx.empty());
  RC_ASSERT(after.cleanup.num_operations() == partial->sync.stale_chains_flushed.size());

  NftKernels& k = kernels();
  k.reset();
  auto r1 = k.a.exec({"nft", "-f", "-"}, full_old->text);
  if (r1.exit_code != 0) RC_FAIL("full transaction rejected: " + r1.err + "\n" + full_old->text);
  auto r2 = k.a.exec({"nft", "-f", "-"}, partial->text);
  if (r2.exit_code != 0) RC_FAIL("partial transaction rejected: " + r2.err + "\n" + partial->text);
  if (!after.cleanup.empty()) {
    auto r3 = k.a.exec({"nft", "-f", "-"}, nftables::print_transaction(after.cleanup));
    if (r3.exit_code != 0) RC_FAIL("stale-chain cleanup rejected: " + r3.err);
  }
  auto r4 = k.b.exec({"nft", "-f", "-"}, full_new->text);
  RC_ASSERT(r4.exit_code == 0);
  std::string listed_a = k.a.exec({"nft", "list", "ruleset"}).out;
  std::string listed_b = k.b.exec({"nft", "list", "ruleset"}).out;
  // kpc's nft model applies the same transactions and lists the kernel's text byte for byte.
  namespace vn = verifier::nft;
  vn::NftState model_a, model_b;
  for (const std::string* t : {&full_old->text, &partial->text}) {
    auto m = vn::apply_script(model_a, *t, "a.nft");
    RC_ASSERT(m.ok);
  }
  if (!after.cleanup.empty()) RC_ASSERT(vn::apply_script(model_a, nftables::print_transaction(after.cleanup), "c.nft").ok);
  RC_ASSERT(vn::apply_script(model_b, full_new->text, "b.nft").ok);
  if (vn::print_ruleset(model_a) != listed_a) RC_FAIL("model and kernel list prior+partial differently:\n" + listed_a);
  if (vn::print_ruleset(model_b) != listed_b) RC_FAIL("model and kernel list full(NEW) differently:\n" + listed_b);
  std::string got = normalized_nft_listing(listed_a);
  std::string want = normalized_nft_listing(listed_b);
  ++step_counter.steps;
  if (got != want)
    RC_FAIL("prior + partial differs from full:\n--- partial\n" + partial->text + "\n--- got\n" + got +
            "\n--- want\n" + want);
}

}  // namespace

RC_GTEST_PROP(NftKernelPartial, PriorPlusPartialEqualsFull, ()) {
  if (!can_use_netns()) {
    RC_SUCCEED("needs root and network namespaces");
  }
  testgen::GenOptions go;
  go.max_services = 6;
  GeneratedCluster c = make_compilable(*testgen::gen_cluster(go));
  auto prior = load_compilable(c);
  RC_PRE(prior.has_value());
  const int steps = *rc::gen::inRange(1, 8);
  for (int i = 0; i < steps; ++i) {
    GeneratedCluster next_c = c;
    mutate_cluster(next_c, i + 1);
    auto next = load_compilable(next_c);
    if (!next) continue;
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) check_step(*prior, *next, f);
    c = std::move(next_c);
    prior = std::move(next);
  }
}

}  // namespace kpc::test
