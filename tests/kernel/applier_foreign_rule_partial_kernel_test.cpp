// kube-proxy's step-9 fault (TestSyncProxyRulesRepeated, fixtures/kp-sync-proxy-rules-repeated)
// against the real kernel: a rule someone else appends to one of kube-proxy's chains jumps to a
// chain the next partial sync deletes, so the kernel refuses that partial (`-X` of a referenced
// chain). The proof cannot see this — it runs on the state the applier holds, which does not
// have the foreign rule — so the partial is proven, applied, refused; the applier counts
// kube-proxy's sync_proxy_rules_iptables_partial_restore_failures_total, keeps the change
// pending, syncs full and converges.
//
// The foreign rule's fate is kube-proxy's: it lives in KUBE-SVC-X27LE4BHSL4DOUIK, a chain of
// kube-proxy's full program, and a full restore declares every chain it writes
// (`:KUBE-SVC-… - [0:0]` flushes it), so the full sync removes it — as kube-proxy's own step 10
// does. Nothing outside kube-proxy's chains is touched: the node's foreign rules in the built-in
// chains and a user chain survive every step.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

#include "applier/core/repair.h"
#include "applier/node/kernel_dataplane.h"
#include "applier/node/metrics.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "compiler/driver/compile.h"
#include "tests/support/netns.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

constexpr const char* kInjected = "KUBE-SVC-X27LE4BHSL4DOUIK -j KUBE-SEP-AYCN5HPXMIRJNJXU";

Snapshot step_snapshot(int step) {
  char dir[16];
  std::snprintf(dir, sizeof dir, "%02d", step);
  Snapshot s;
  std::string diags;
  EXPECT_TRUE(applier::load_snapshot_paths(
      {source_path("fixtures/kp-sync-proxy-rules-repeated/steps/") + dir + "/snapshot.yaml"}, "", &s, &diags))
      << diags;
  return s;
}

// A fresh namespace with the same foreign rules, the full program restored and kube-proxy's
// jumps inserted: what kube-proxy's full sync leaves.
std::string fresh_full(const Snapshot& snap) {
  Netns b;
  std::string error;
  EXPECT_TRUE(add_foreign_rules(b, false, &error)) << error;
  EXPECT_TRUE(b.add_kube_proxy_nfacct());
  DiagSink d;
  auto full = compile_iptables(snap, Backend::IPTables, {}, d);
  EXPECT_TRUE(full.has_value());
  if (!full) return "";
  EXPECT_EQ(b.exec({"iptables-legacy-restore", "--noflush", "-w"}, full->text).exit_code, 0);
  for (const auto& [t, chains] : applier::program_chains(full->text).declared)
    for (const auto& j : verifier::trace::kube_proxy_jumps()) {
      if (j.table != t || std::find(chains.begin(), chains.end(), j.to) == chains.end()) continue;
      std::vector<std::string> argv{"iptables-legacy", "-w", "-t", ir::table_name(t), "-I", std::string(j.from)};
      for (auto& a : applier::split_rule_args(j.rule_text())) argv.push_back(a);
      EXPECT_EQ(b.exec(argv).exit_code, 0);
    }
  return legacy_save_without_counters(b);
}

TEST(ApplierFaults, ForeignRuleMakesThePartialFailThenAFullSyncConvergesAsKubeProxys) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  Netns a;
  std::string error;
  ASSERT_TRUE(add_foreign_rules(a, false, &error)) << error;
  const std::string want_after = fresh_full(step_snapshot(10));
  in_netns(a, [&] {
    applier::KernelTools tools;
    tools.flavor = verifier::Flavor::Legacy;
    applier::KernelDataplane dp(tools);
    applier::FakeClock clock;
    applier::LoopOptions o;
    o.families = {IPFamily::V4};
    o.min_sync_period_ms = 0;
    o.sync_period_ms = 2000;
    std::vector<std::string> logs;
    applier::SyncLoop loop(o, clock, dp, [&](const std::string& l) { logs.push_back(l); });
    applier::ApplierMetrics metrics(BackendKind::IPTables, 4000, o.families);

    // Steps 1-8 as kube-proxy syncs them: the first full, then partial (proven) ones.
    for (int step = 1; step <= 8; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      loop.replace_all(step_snapshot(step));
      clock.advance_ms(1);
      auto r = loop.tick();
      ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "no sync");
      metrics.synced(*r, 0);
      EXPECT_EQ(r->families[0].kind, step == 1 ? "full" : "partial");
    }
    ASSERT_EQ(legacy_save_without_counters(a), fresh_full(step_snapshot(8)));

    // Step 9: the foreign rule, then svc4 deleted; the partial deletes svc4's endpoint chain.
    ASSERT_EQ(system((std::string("iptables-legacy -w -t nat -A ") + kInjected).c_str()), 0);
    const std::string before = legacy_save_without_counters(a);
    loop.replace_all(step_snapshot(9));
    clock.advance_ms(1);
    auto r = loop.tick();
    ASSERT_TRUE(r.has_value());
    metrics.synced(*r, 0);
    const auto& f9 = r->families[0];
    EXPECT_FALSE(r->ok);
    EXPECT_EQ(f9.kind, "partial");
    // The proof ran on the held state, which cannot know the foreign rule: it passed.
    EXPECT_TRUE(f9.verdict == "identical" || f9.verdict == "equivalent") << f9.verdict;
    EXPECT_FALSE(f9.fallback);
    EXPECT_FALSE(f9.error.empty());
    // The kernel refused the whole transaction: nothing changed, svc4's chain is still there.
    EXPECT_EQ(legacy_save_without_counters(a), before);
    EXPECT_NE(before.find(":KUBE-SEP-AYCN5HPXMIRJNJXU"), std::string::npos);
    EXPECT_EQ(loop.counters().failed_syncs, 1u);
    const std::string m = metrics.render();
    EXPECT_NE(m.find("kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total{ip_family=\"IPv4\"} 1\n"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family=\"IPv4\"} 1\n"),
              std::string::npos);
    EXPECT_TRUE(loop.pending() || loop.next_sync_ms() <= clock.now_ms() + o.sync_period_ms);

    // Step 10 (no object change): the retry is the periodic one, and full.
    loop.replace_all(step_snapshot(10));
    clock.advance_ms(o.sync_period_ms);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "no sync");
    metrics.synced(*r, 0);
    EXPECT_EQ(r->families[0].kind, "full");
    EXPECT_EQ(r->families[0].reason, "the last sync failed");
    const std::string after = legacy_save_without_counters(a);
    // The foreign rule went with the flush of kube-proxy's chain, svc4's chains with -X; the
    // node's own foreign rules are all there: the kernel is a fresh node's with the full program.
    EXPECT_EQ(after.find(kInjected), std::string::npos) << after;
    EXPECT_EQ(after.find("KUBE-SEP-AYCN5HPXMIRJNJXU"), std::string::npos);
    EXPECT_EQ(after, want_after);
    // Partial syncs resume.
    loop.replace_all(step_snapshot(10));
    clock.advance_ms(o.sync_period_ms);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok);
    EXPECT_EQ(r->families[0].kind, "partial");
    EXPECT_EQ(legacy_save_without_counters(a), want_after);
  });
}

}  // namespace
}  // namespace kpc::test
