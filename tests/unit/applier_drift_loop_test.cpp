// The sync loop's periodic drift check (applier/node/sync_loop.h) on kpc's models as the kernel:
// drift made behind the loop's back is repaired one syncPeriod later and counted (also in
// kpc_drift_repairs_total); a repair the kernel refuses makes the next sync full.
#include <gtest/gtest.h>

#include "applier/core/repair.h"
#include "applier/node/metrics.h"
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

// The model kernel after the full program alone plus kube-proxy's jumps.
std::string expected_save(const Snapshot& snap, IPFamily f) {
  ModelDataplane fresh;
  DiagSink d;
  auto full = compile_iptables(snap, f == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables, {}, d);
  EXPECT_TRUE(full.has_value());
  EXPECT_TRUE(fresh.apply(BackendKind::IPTables, f, full->text).ok);
  ChainSet targets;
  for (const auto& [t, cs] : program_chains(full->text).declared)
    for (const auto& c : cs) targets.insert({t, c});
  size_t n = 0;
  EXPECT_TRUE(fresh.ensure_jumps(f, targets, &n).ok);
  return fresh.save(f);
}

// Flushes the first KUBE-SEP chain of the IPv4 model kernel (a restore that declares it).
void flush_a_sep_chain(ModelDataplane& dp) {
  std::string save = dp.save(IPFamily::V4);
  size_t at = save.find("\n:KUBE-SEP-");
  ASSERT_NE(at, std::string::npos);
  std::string chain = save.substr(at + 2, save.find(' ', at + 2) - at - 2);
  ASSERT_TRUE(dp.apply(BackendKind::IPTables, IPFamily::V4, "*nat\n:" + chain + " - [0:0]\nCOMMIT\n").ok);
  ASSERT_NE(dp.save(IPFamily::V4), save);
}

// Refuses programs that do not write KUBE-SERVICES (every sync's does; a repair of one
// endpoint chain does not) while refuse_repairs is set.
class RepairRefusingDataplane final : public Dataplane {
 public:
  ModelDataplane inner;
  bool refuse_repairs = false;
  verifier::Flavor flavor() const override { return inner.flavor(); }
  DataplaneResult read(BackendKind k, IPFamily f, std::string* out) override { return inner.read(k, f, out); }
  DataplaneResult apply(BackendKind k, IPFamily f, const std::string& program) override {
    if (refuse_repairs && program.find(":KUBE-SERVICES") == std::string::npos)
      return DataplaneResult::failure("injected refusal");
    return inner.apply(k, f, program);
  }
  DataplaneResult ensure_jumps(IPFamily f, const ChainSet& t, size_t* n) override { return inner.ensure_jumps(f, t, n); }
};

TEST(ApplierDriftLoop, DriftRepairedAfterOneSyncPeriodAndCounted) {
  FakeClock clock;
  ModelDataplane dp;
  LoopOptions o;
  o.sync_period_ms = 30'000;
  std::vector<std::string> logs;
  SyncLoop loop(o, clock, dp, [&](const std::string& l) { logs.push_back(l); });
  Snapshot snap = example();
  loop.replace_all(snap);
  ASSERT_TRUE(loop.tick() && loop.counters().full_syncs == 2);
  EXPECT_EQ(loop.counters().drift_checks, 0u);  // a full sync reads the kernel anyway

  flush_a_sep_chain(dp);
  clock.advance_ms(29'999);
  EXPECT_FALSE(loop.tick().has_value());
  clock.advance_ms(1);
  auto r = loop.tick();
  ASSERT_TRUE(r && r->ok);
  EXPECT_TRUE(r->families[0].drift_checked && r->families[0].drift_repaired) << r->families[0].drift;
  EXPECT_TRUE(r->families[1].drift_checked);
  EXPECT_FALSE(r->families[1].drift_repaired);  // IPv6 was not touched
  EXPECT_EQ(loop.counters().drift_repairs, 1u);
  EXPECT_EQ(dp.save(IPFamily::V4), expected_save(snap, IPFamily::V4));
  bool logged = false;
  for (const auto& l : logs) logged |= l.find("\"msg\":\"drift repaired\"") != std::string::npos;
  EXPECT_TRUE(logged);

  ApplierMetrics m(BackendKind::IPTables, 60'000, {IPFamily::V4, IPFamily::V6});
  m.synced(*r, 0);
  EXPECT_NE(m.render().find("\nkpc_drift_repairs_total 1\n"), std::string::npos) << m.render();

  // No drift: checked, nothing repaired.
  clock.advance_ms(30'000);
  r = loop.tick();
  ASSERT_TRUE(r && r->ok);
  EXPECT_TRUE(r->families[0].drift_checked);
  EXPECT_FALSE(r->families[0].drift_repaired);
  EXPECT_EQ(loop.counters().drift_repairs, 1u);
}

TEST(ApplierDriftLoop, RefusedRepairMakesTheNextSyncFull) {
  FakeClock clock;
  RepairRefusingDataplane dp;
  LoopOptions o;
  o.families = {IPFamily::V4};
  SyncLoop loop(o, clock, dp);
  Snapshot snap = example();
  loop.replace_all(snap);
  ASSERT_TRUE(loop.tick());
  flush_a_sep_chain(dp.inner);
  dp.refuse_repairs = true;
  clock.advance_ms(o.sync_period_ms);
  auto r = loop.tick();
  ASSERT_TRUE(r && r->ok);
  EXPECT_TRUE(r->families[0].drift_checked);
  EXPECT_FALSE(r->families[0].drift_repaired);
  EXPECT_EQ(loop.counters().drift_repairs, 0u);
  dp.refuse_repairs = false;
  clock.advance_ms(o.sync_period_ms);
  r = loop.tick();
  ASSERT_TRUE(r && r->ok);
  EXPECT_EQ(r->families[0].kind, "full");
  EXPECT_EQ(r->families[0].reason, "the drift check failed");
  EXPECT_EQ(dp.inner.save(IPFamily::V4), expected_save(snap, IPFamily::V4));
}

}  // namespace
}  // namespace kpc::applier
