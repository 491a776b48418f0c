// The drift check off the sync thread (LoopOptions::drift_thread; sync_loop.h): a sync only
// publishes the check; plan_drift (the kernel read, the full compile, the repair) runs without
// the loop's lock and commit_drift applies under it. These tests interleave syncs with the
// three steps on kpc's model kernel, on one thread, so that every interleaving is exact:
//  - no sync in between: the repair is applied, counted, the kernel converges;
//  - a sync in between: a repair planned against the older sync is never applied (here it
//    would re-create the chain of a Service the sync deleted), the check is redone against
//    the newer sync;
//  - a clean check stays valid across a sync;
//  - a check invalidated drift_max_stale times is redone under the lock (never starved).
#include <gtest/gtest.h>

#include <functional>

#include "applier/core/repair.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "compiler/driver/compile.h"
#include "tests/support/test_util.h"

namespace kpc::applier {
namespace {

Snapshot example() {
  Snapshot s;
  std::string diags;
  EXPECT_TRUE(load_snapshot_paths({test::source_path("fixtures/example")}, "", &s, &diags)) << diags;
  return s;
}

std::string expected_save(const Snapshot& snap) {
  ModelDataplane fresh;
  DiagSink d;
  auto full = compile_iptables(snap, Backend::IPTables, {}, d);
  EXPECT_TRUE(full.has_value());
  EXPECT_TRUE(fresh.apply(BackendKind::IPTables, IPFamily::V4, full->text).ok);
  ChainSet targets;
  for (const auto& [t, cs] : program_chains(full->text).declared)
    for (const auto& c : cs) targets.insert({t, c});
  size_t n = 0;
  EXPECT_TRUE(fresh.ensure_jumps(IPFamily::V4, targets, &n).ok);
  return fresh.save(IPFamily::V4);
}

// The model kernel, with a hook run at every read (a sync racing with the unlocked plan).
class HookedDataplane final : public Dataplane {
 public:
  ModelDataplane inner;
  std::function<void()> on_read;
  verifier::Flavor flavor() const override { return inner.flavor(); }
  DataplaneResult read(BackendKind k, IPFamily f, std::string* out) override {
    if (on_read) on_read();
    return inner.read(k, f, out);
  }
  DataplaneResult apply(BackendKind k, IPFamily f, const std::string& p) override { return inner.apply(k, f, p); }
  DataplaneResult ensure_jumps(IPFamily f, const ChainSet& t, size_t* n) override { return inner.ensure_jumps(f, t, n); }
};

// Flushes the first KUBE-SEP chain; returns "ns/name" of the Service it belongs to.
std::string flush_a_sep_chain(ModelDataplane& dp) {
  std::string save = dp.save(IPFamily::V4);
  size_t at = save.find("\n:KUBE-SEP-");
  EXPECT_NE(at, std::string::npos);
  std::string chain = save.substr(at + 2, save.find(' ', at + 2) - at - 2);
  size_t rule = save.find("-A " + chain + " ");
  EXPECT_NE(rule, std::string::npos);
  size_t c0 = save.find("--comment ", rule) + 10;
  if (save[c0] == '"') ++c0;
  std::string svc = save.substr(c0, save.find(':', c0) - c0);
  EXPECT_TRUE(dp.apply(BackendKind::IPTables, IPFamily::V4, "*nat\n:" + chain + " - [0:0]\nCOMMIT\n").ok);
  EXPECT_NE(dp.save(IPFamily::V4), save);
  return svc;
}

struct Fixture {
  FakeClock clock;
  HookedDataplane dp;
  LoopOptions o;
  std::unique_ptr<SyncLoop> loop;
  Snapshot snap = example();
  Fixture() {
    o.families = {IPFamily::V4};
    o.drift_thread = true;
    loop = std::make_unique<SyncLoop>(o, clock, dp);
    loop->replace_all(snap);
    auto r = loop->tick();
    EXPECT_TRUE(r && r->ok && r->families[0].kind == "full");
  }
  // The periodic sync: a partial one (no change needed), which makes a drift check due.
  void periodic_sync() {
    clock.advance_ms(o.sync_period_ms);
    auto r = loop->tick();
    ASSERT_TRUE(r && r->ok);
    EXPECT_EQ(r->families[0].kind, "partial");
    EXPECT_FALSE(r->families[0].drift_checked) << "the check is not the sync thread's";
  }
};

TEST(ApplierDriftThread, NoSyncInBetweenTheRepairIsAppliedAndCounted) {
  Fixture f;
  EXPECT_TRUE(f.loop->take_drift_jobs().empty());  // a full sync is a check
  flush_a_sep_chain(f.dp.inner);
  f.periodic_sync();
  auto jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_TRUE(f.loop->take_drift_jobs().empty()) << "handed out once per generation";
  DriftPlan plan = f.loop->plan_drift(jobs[0]);
  ASSERT_TRUE(plan.ok) << plan.error;
  EXPECT_FALSE(plan.clean);
  DriftOutcome o = f.loop->commit_drift(jobs[0], plan);
  EXPECT_EQ(o.result, "repaired");
  EXPECT_EQ(f.loop->counters().drift_repairs, 1u);
  EXPECT_EQ(f.loop->counters().drift_checks, 1u);
  EXPECT_EQ(f.dp.inner.save(IPFamily::V4), expected_save(f.snap));
  EXPECT_TRUE(f.loop->take_drift_jobs().empty());
  // The held state was re-read: the next partial is proven and applied.
  f.periodic_sync();
  EXPECT_EQ(f.loop->counters().verify_failures, 0u);
}

// Issue 15 §5: a kernel whose kube-proxy part is the held state's (proven the full program's)
// is found clean by the chain digests alone -- no model load, compile or repair computation --
// and foreign rules and chains are not drift; a drifted chain fails the digests and goes the
// full way (repaired as before).
TEST(ApplierDriftThread, CleanKernelByTheChainDigestsForeignRulesAreNotDrift) {
  Fixture f;
  ASSERT_TRUE(f.dp.inner
                  .apply(BackendKind::IPTables, IPFamily::V4,
                         "*filter\n:FOREIGN - [0:0]\n-A FOREIGN -s 192.0.2.1/32 -j DROP\n-A INPUT -j FOREIGN\nCOMMIT\n"
                         "*nat\n-A PREROUTING -s 198.51.100.0/24 -j RETURN\nCOMMIT\n")
                  .ok);
  f.periodic_sync();
  auto jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_TRUE(jobs[0].held_text) << "the held state is the full program's";
  DriftPlan plan = f.loop->plan_drift(jobs[0]);
  ASSERT_TRUE(plan.ok) << plan.error;
  EXPECT_TRUE(plan.clean);
  EXPECT_EQ(plan.path, "digest");
  EXPECT_EQ(f.loop->commit_drift(jobs[0], plan).result, "clean");

  // A flushed endpoint chain: the digests differ, the full check repairs it.
  flush_a_sep_chain(f.dp.inner);
  f.periodic_sync();
  jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  plan = f.loop->plan_drift(jobs[0]);
  ASSERT_TRUE(plan.ok && !plan.clean) << plan.error;
  EXPECT_EQ(plan.path, "full");
  EXPECT_EQ(f.loop->commit_drift(jobs[0], plan).result, "repaired");
  // A deleted kube-proxy jump in a built-in chain is drift too.
  f.periodic_sync();
  jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_TRUE(jobs[0].held_text) << "held again after the repair";
  EXPECT_EQ(f.loop->plan_drift(jobs[0]).path, "digest");
  f.loop->commit_drift(jobs[0], f.loop->plan_drift(jobs[0]));
  std::string save = f.dp.inner.save(IPFamily::V4);
  size_t at = save.find("-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES");
  ASSERT_NE(at, std::string::npos) << save;
  ASSERT_TRUE(f.dp.inner
                  .apply(BackendKind::IPTables, IPFamily::V4,
                         "*nat\n-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n")
                  .ok);
  f.periodic_sync();
  jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  plan = f.loop->plan_drift(jobs[0]);
  ASSERT_TRUE(plan.ok && !plan.clean);
  EXPECT_EQ(plan.path, "full");
  EXPECT_EQ(f.loop->commit_drift(jobs[0], plan).result, "repaired");
  EXPECT_NE(f.dp.inner.save(IPFamily::V4).find("-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"),
            std::string::npos);
}

TEST(ApplierDriftThread, SyncInBetweenInvalidatesTheRepairAndTheCheckIsRedone) {
  Fixture f;
  const std::string svc = flush_a_sep_chain(f.dp.inner);
  f.periodic_sync();
  auto jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  DriftPlan plan = f.loop->plan_drift(jobs[0]);
  ASSERT_TRUE(plan.ok && !plan.clean);

  // Meanwhile the sync thread deletes the Service whose chain drifted.
  Snapshot next = f.snap;
  std::erase_if(next.services, [&](const Service& s) { return s.meta.ns + "/" + s.meta.name == svc; });
  ASSERT_LT(next.services.size(), f.snap.services.size()) << svc;
  f.loop->replace_all(next);
  f.clock.advance_ms(f.o.min_sync_period_ms);
  auto r = f.loop->tick();
  ASSERT_TRUE(r && r->ok && r->families[0].kind == "partial");
  const std::string want = expected_save(next);
  ASSERT_EQ(f.dp.inner.save(IPFamily::V4), want) << "the partial deleted the drifted chain";

  // The stale repair would put the deleted Service's chain back: it must not be applied.
  {
    ModelDataplane copy = f.dp.inner;
    ASSERT_TRUE(copy.apply(BackendKind::IPTables, IPFamily::V4, plan.repair).ok);
    EXPECT_NE(copy.save(IPFamily::V4), want);
  }
  DriftOutcome o = f.loop->commit_drift(jobs[0], plan);
  EXPECT_EQ(o.result, "stale");
  EXPECT_EQ(f.dp.inner.save(IPFamily::V4), want);
  EXPECT_EQ(f.loop->counters().drift_repairs, 0u);
  EXPECT_EQ(f.loop->counters().drift_checks, 0u);

  // Redone against the newer sync: clean.
  jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].stale, 1u);
  EXPECT_EQ(jobs[0].objects->services.size(), next.services.size());
  o = f.loop->commit_drift(jobs[0], f.loop->plan_drift(jobs[0]));
  EXPECT_EQ(o.result, "clean");
  EXPECT_EQ(f.loop->counters().drift_checks, 1u);
  EXPECT_TRUE(f.loop->take_drift_jobs().empty());
}

TEST(ApplierDriftThread, ACleanCheckStaysValidAcrossASync) {
  Fixture f;
  f.periodic_sync();
  auto jobs = f.loop->take_drift_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  DriftPlan plan = f.loop->plan_drift(jobs[0]);
  ASSERT_TRUE(plan.ok && plan.clean);
  f.clock.advance_ms(f.o.min_sync_period_ms);
  f.loop->replace_all(f.snap);
  ASSERT_TRUE(f.loop->sync_now().ok);
  EXPECT_EQ(f.loop->commit_drift(jobs[0], plan).result, "clean");
  EXPECT_EQ(f.loop->counters().drift_checks, 1u);
  EXPECT_TRUE(f.loop->take_drift_jobs().empty());
}

TEST(ApplierDriftThread, ACheckInvalidatedByChurnIsRedoneUnderTheLock) {
  Fixture f;
  flush_a_sep_chain(f.dp.inner);
  f.periodic_sync();
  // Every unlocked plan races with a sync (the hook runs one while the kernel is read).
  int races = 0;
  f.dp.on_read = [&] {
    if (races >= static_cast<int>(f.o.drift_max_stale)) return;  // the locked plan: no sync can run
    ++races;
    f.clock.advance_ms(f.o.min_sync_period_ms);
    f.loop->replace_all(f.snap);
    ASSERT_TRUE(f.loop->sync_now().ok);
  };
  std::vector<std::string> results;
  for (int i = 0; i < 5 && f.loop->counters().drift_repairs == 0; ++i)
    for (const auto& o : f.loop->run_drift_checks()) results.push_back(o.result);
  EXPECT_EQ(results, (std::vector<std::string>{"stale", "stale", "repaired"}));
  EXPECT_EQ(f.dp.inner.save(IPFamily::V4), expected_save(f.snap));
}

}  // namespace
}  // namespace kpc::applier
