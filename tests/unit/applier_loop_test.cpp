// The applier's sync loop (applier/node/sync_loop.h) with a fake clock and kpc's models as the
// kernel (ModelDataplane): rate limits, full syncs at start / after a failure / hourly, the
// proof and its fallback, a failed apply that keeps the changes.
#include <gtest/gtest.h>

#include "applier/core/repair.h"
#include "applier/node/cleanup.h"
#include "applier/node/nft_equiv.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/compile_nftables.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::applier {
namespace {

Snapshot example() {
  Snapshot s;
  std::string diags;
  EXPECT_TRUE(load_snapshot_paths({test::source_path("fixtures/example")}, "", &s, &diags)) << diags;
  return s;
}

// The model kernel's state after the full program alone (plus kube-proxy's jumps), for comparing.
std::string expected_save(const Snapshot& snap, IPFamily f, const ModelDataplane& like) {
  ModelDataplane fresh(like.flavor());
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

struct Harness {
  FakeClock clock;
  ModelDataplane dp;
  std::vector<std::string> logs;
  std::unique_ptr<SyncLoop> loop;
  explicit Harness(LoopOptions o = {}) {
    loop = std::make_unique<SyncLoop>(o, clock, dp, [this](const std::string& l) { logs.push_back(l); });
  }
};

// One ready endpoint fewer in shop/web's IPv4 slice.
EndpointSlice shrink_web(const Snapshot& s) {
  for (const auto& sl : s.slices)
    if (sl.meta.name == "web-v4") {
      EndpointSlice c = sl;
      c.endpoints.erase(c.endpoints.begin());  // 10.244.1.5: ready, in the programs
      return c;
    }
  ADD_FAILURE() << "no web-v4";
  return {};
}

TEST(ApplierLoop, FirstSyncIsFullThenPartialProvenAndApplied) {
  Harness h;
  Snapshot snap = example();
  h.loop->replace_all(snap);
  auto r1 = h.loop->tick();
  ASSERT_TRUE(r1.has_value());
  ASSERT_TRUE(r1->ok);
  ASSERT_EQ(r1->families.size(), 2u);
  for (const auto& f : r1->families) EXPECT_EQ(f.kind, "full") << f.reason;
  EXPECT_EQ(h.dp.save(IPFamily::V4), expected_save(snap, IPFamily::V4, h.dp));
  EXPECT_EQ(h.dp.save(IPFamily::V6), expected_save(snap, IPFamily::V6, h.dp));

  EndpointSlice web = shrink_web(snap);
  h.loop->update_slice(web);
  for (auto& sl : snap.slices)
    if (sl.meta.name == web.meta.name) sl = web;
  h.clock.advance_ms(1000);
  auto r2 = h.loop->tick();
  ASSERT_TRUE(r2.has_value());
  ASSERT_TRUE(r2->ok);
  EXPECT_EQ(r2->families[0].kind, "partial");
  EXPECT_EQ(r2->families[0].services_changed, 1u);
  EXPECT_TRUE(r2->families[0].verdict == "identical" || r2->families[0].verdict == "equivalent")
      << r2->families[0].verdict;
  EXPECT_FALSE(r2->families[0].fallback);
  EXPECT_EQ(h.loop->counters().verify_runs, 2u);
  EXPECT_EQ(h.loop->counters().verify_failures, 0u);
  EXPECT_EQ(h.dp.save(IPFamily::V4), expected_save(snap, IPFamily::V4, h.dp));
  // One JSON line per family and sync.
  ASSERT_GE(h.logs.size(), 4u);
  EXPECT_NE(h.logs.back().find("\"kind\":\"partial\""), std::string::npos) << h.logs.back();
  EXPECT_NE(h.logs.back().find("\"verify_ms\""), std::string::npos);
}

// Issue 15 §5: after a full sync the held state is the program applied on the state read
// before it (its lines are then known to the proof's rule store), accepted because the
// kernel's dump is the same state; and a plain endpoint change (a stale endpoint chain deleted
// by the partial) is proven "identical" against the reference kube-proxy's full sync would
// write on that kernel (the stale chain deleted too), taken from the incremental compiler.
TEST(ApplierLoop, HeldStateIsTheProgramsAndAPlainEndpointChangeIsIdentical) {
  for (verifier::Flavor flavor : {verifier::Flavor::Legacy, verifier::Flavor::Nft}) {
    SCOPED_TRACE(verifier::flavor_name(flavor));
    FakeClock clock;
    ModelDataplane dp(flavor);
    std::vector<std::string> logs;
    LoopOptions o;
    o.full_sync_period_ms = 10'000;
    SyncLoop loop(o, clock, dp, [&](const std::string& l) { logs.push_back(l); });
    Snapshot snap = example();
    loop.replace_all(snap);
    auto r1 = loop.tick();
    ASSERT_TRUE(r1 && r1->ok);
    for (const auto& f : r1->families) {
      EXPECT_EQ(f.kind, "full");
      EXPECT_EQ(f.held, "program");  // the first sync inserted kube-proxy's jumps: modelled too
      EXPECT_GT(f.jumps_inserted, 0u);
    }
    EXPECT_EQ(loop.counters().held_from_dump, 0u);
    EXPECT_NE(logs[0].find("\"held\":\"program\""), std::string::npos) << logs[0];
    const Snapshot original = snap;
    for (int step = 0; step < 3; ++step) {
      // One endpoint fewer (its chain is stale: deleted), then back, then fewer again.
      EndpointSlice web = shrink_web(original);
      if (step % 2 == 1)
        for (const auto& sl : original.slices)
          if (sl.meta.name == web.meta.name) web = sl;
      loop.update_slice(web);
      for (auto& sl : snap.slices)
        if (sl.meta.name == web.meta.name) sl = web;
      clock.advance_ms(1000);
      auto r = loop.tick();
      ASSERT_TRUE(r && r->ok);
      EXPECT_EQ(r->families[0].kind, "partial");
      EXPECT_EQ(r->families[0].verdict, "identical") << "step " << step;
      EXPECT_EQ(dp.save(IPFamily::V4), expected_save(snap, IPFamily::V4, dp));
    }
    // The hourly (here: 10 s) full sync on a kernel holding kube-proxy's jumps already.
    clock.advance_ms(10'000);
    for (const auto& sl : original.slices)
      if (sl.meta.name == "web-v4") loop.update_slice(sl);
    auto r3 = loop.tick();
    ASSERT_TRUE(r3 && r3->ok);
    EXPECT_EQ(r3->families[0].kind, "full");
    EXPECT_EQ(r3->families[0].held, "program");
    EXPECT_EQ(loop.counters().held_from_dump, 0u);
    EXPECT_EQ(loop.counters().verify_failures, 0u);
  }
}

TEST(ApplierLoop, RateLimits) {
  LoopOptions o;
  o.min_sync_period_ms = 1000;
  o.sync_period_ms = 30'000;
  Harness h(o);
  Snapshot snap = example();
  h.loop->replace_all(snap);
  ASSERT_TRUE(h.loop->tick().has_value());  // at start
  const int64_t t0 = h.clock.now_ms();
  EXPECT_EQ(h.loop->next_sync_ms(), t0 + 30'000);  // nothing pending: the periodic sync
  EXPECT_FALSE(h.loop->tick().has_value());
  h.loop->update_slice(shrink_web(snap));
  EXPECT_EQ(h.loop->next_sync_ms(), t0 + 1000);  // minSyncPeriod after the last one
  h.clock.advance_ms(999);
  EXPECT_FALSE(h.loop->tick().has_value());
  h.clock.advance_ms(1);
  auto r = h.loop->tick();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->families[0].kind, "partial");
  // Nothing pending: the next is the periodic one, a partial with no change.
  h.clock.advance_ms(29'999);
  EXPECT_FALSE(h.loop->tick().has_value());
  h.clock.advance_ms(1);
  r = h.loop->tick();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->families[0].kind, "partial");
  EXPECT_EQ(r->families[0].services_changed, 0u);
}

TEST(ApplierLoop, HourlyFullSync) {
  Harness h;
  h.loop->replace_all(example());
  ASSERT_TRUE(h.loop->tick().has_value());
  for (int i = 0; i < 119; ++i) {
    h.clock.advance_ms(30'000);
    auto r = h.loop->tick();
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->families[0].kind, "partial") << i;
  }
  h.clock.advance_ms(30'000);  // an hour since the first sync
  auto r = h.loop->tick();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->families[0].kind, "full");
  EXPECT_EQ(r->families[0].reason, "hourly full sync");
}

TEST(ApplierLoop, FailedApplyKeepsChangesAndNextSyncIsFull) {
  Harness h;
  Snapshot snap = example();
  h.loop->replace_all(snap);
  ASSERT_TRUE(h.loop->tick()->ok);
  EndpointSlice web = shrink_web(snap);
  h.loop->update_slice(web);
  for (auto& sl : snap.slices)
    if (sl.meta.name == web.meta.name) sl = web;
  h.dp.fail_next_applies = 1;  // IPv4's restore fails
  h.clock.advance_ms(1000);
  auto r = h.loop->tick();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ok);
  EXPECT_FALSE(r->families[0].ok);
  EXPECT_EQ(h.loop->counters().failed_syncs, 1u);
  EXPECT_NE(h.dp.save(IPFamily::V4), expected_save(snap, IPFamily::V4, h.dp));  // the kernel did not change
  // No new event: the retry is the periodic sync, full, with the change still pending.
  EXPECT_FALSE(h.loop->pending());
  h.clock.advance_ms(30'000);
  r = h.loop->tick();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->ok);
  EXPECT_EQ(r->families[0].kind, "full");
  EXPECT_EQ(r->families[0].reason, "the last sync failed");
  EXPECT_EQ(r->families[1].kind, "partial");  // IPv6 did not fail
  EXPECT_EQ(h.dp.save(IPFamily::V4), expected_save(snap, IPFamily::V4, h.dp));
}

// A dataplane whose chosen read drops one KUBE-SEP chain's rules (not shop/web's): the held
// state then differs from what the compiler assumes, the partial cannot be proven, and the full
// program goes in instead.
class TamperingDataplane final : public Dataplane {
 public:
  ModelDataplane inner;
  int tamper_read = -1;  ///< index of the IPv4 iptables read to tamper with
  int reads = 0;
  verifier::Flavor flavor() const override { return inner.flavor(); }
  DataplaneResult read(BackendKind k, IPFamily f, std::string* out) override {
    auto r = inner.read(k, f, out);
    if (k == BackendKind::IPTables && f == IPFamily::V4 && reads++ == tamper_read) {
      std::string kept, victim;
      for (size_t pos = 0; pos < out->size();) {
        size_t nl = out->find('\n', pos);
        std::string l = out->substr(pos, nl - pos);
        pos = nl + 1;
        if (l.rfind("-A KUBE-SEP-", 0) == 0 && l.find("shop/web") == std::string::npos) {
          std::string chain = l.substr(3, l.find(' ', 3) - 3);
          if (victim.empty()) victim = chain;
          if (chain == victim) continue;
        }
        kept += l + "\n";
      }
      EXPECT_FALSE(victim.empty());
      *out = kept;
    }
    return r;
  }
  DataplaneResult apply(BackendKind k, IPFamily f, const std::string& p) override { return inner.apply(k, f, p); }
  DataplaneResult ensure_jumps(IPFamily f, const ChainSet& t, size_t* n) override { return inner.ensure_jumps(f, t, n); }
};

TEST(ApplierLoop, FailedProofAppliesTheFullProgramAndKeepsBoth) {
  FakeClock clock;
  TamperingDataplane dp;
  dp.tamper_read = 1;  // the first sync's read-back: the held state
  LoopOptions o;
  o.families = {IPFamily::V4};
  o.state_dir = test::temp_dir("applier-state");
  SyncLoop loop(o, clock, dp);
  Snapshot snap = example();
  loop.replace_all(snap);
  auto r1 = loop.tick();
  ASSERT_TRUE(r1->ok);
  // The kernel's dump is not the state the program gives: the dump is held (and counted).
  EXPECT_EQ(r1->families[0].held, "dump");
  EXPECT_EQ(loop.counters().held_from_dump, 1u);
  EndpointSlice web = shrink_web(snap);
  loop.update_slice(web);
  for (auto& sl : snap.slices)
    if (sl.meta.name == web.meta.name) sl = web;
  clock.advance_ms(1000);
  auto r = loop.tick();
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok) << r->families[0].error;
  EXPECT_TRUE(r->families[0].fallback);
  EXPECT_EQ(r->families[0].kind, "full");
  EXPECT_NE(r->families[0].verdict, "identical");
  EXPECT_EQ(loop.counters().verify_failures, 1u);
  EXPECT_EQ(dp.inner.save(IPFamily::V4), expected_save(snap, IPFamily::V4, dp.inner));
  // Both programs (and the prior state, and the report) are kept for a bug report.
  auto listing = test::run({"sh", "-c", "ls " + o.state_dir + "/verify-failures/*"});
  EXPECT_NE(listing.out.find("partial.restore"), std::string::npos) << listing.out;
  EXPECT_NE(listing.out.find("full.restore"), std::string::npos);
  EXPECT_NE(listing.out.find("prior.save"), std::string::npos);
  EXPECT_NE(test::read_file(o.state_dir + "/last-applied-iptables-ipv4.restore").find("*nat"), std::string::npos);
  // Verification off: the same situation applies the partial unproven.
}

TEST(ApplierLoop, IpvsModeIsRefused) {
  ProxyConfig c;
  c.mode = ProxyMode::IPVS;
  std::string err;
  EXPECT_FALSE(loop_options_for(c, &err).has_value());
  EXPECT_NE(err.find("ipvs"), std::string::npos);
  c.mode = ProxyMode::NFTables;
  c.nftables.min_sync_period = Duration::seconds(2);
  c.nftables.sync_period = Duration::seconds(60);
  auto o = loop_options_for(c, &err);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->mode, BackendKind::NFTables);
  EXPECT_EQ(o->min_sync_period_ms, 2000);
  EXPECT_EQ(o->sync_period_ms, 60'000);
}

TEST(ApplierLoop, NftablesFullThenPartialProven) {
  LoopOptions o;
  o.mode = BackendKind::NFTables;
  Harness h(o);
  Snapshot snap = example();
  snap.config.mode = ProxyMode::NFTables;
  h.loop->replace_all(snap);
  auto r1 = h.loop->tick();
  ASSERT_TRUE(r1.has_value());
  ASSERT_TRUE(r1->ok) << (r1->families.empty() ? "" : r1->families[0].error);
  EndpointSlice web = shrink_web(snap);
  h.loop->update_slice(web);
  for (auto& sl : snap.slices)
    if (sl.meta.name == web.meta.name) sl = web;
  h.clock.advance_ms(1000);
  auto r2 = h.loop->tick();
  ASSERT_TRUE(r2.has_value());
  ASSERT_TRUE(r2->ok) << r2->families[0].error;
  EXPECT_EQ(r2->families[0].kind, "partial");
  EXPECT_TRUE(r2->families[0].verdict == "identical" || r2->families[0].verdict == "equivalent")
      << r2->families[0].verdict;
  // The model kernel's table equals the full transaction's on a fresh node.
  DiagSink d;
  auto full = compile_nftables(snap, IPFamily::V4, {}, d);
  ASSERT_TRUE(full.has_value());
  verifier::nft::NftState want;
  ASSERT_TRUE(verifier::nft::apply_script(want, full->text, "full").ok);
  auto cmp = compare_nft_tables(h.dp.nft(IPFamily::V4), want, verifier::nft::Family::Ip, "kube-proxy");
  EXPECT_NE(cmp.verdict, NftVerdict::NotEquivalent);
}

// A ServiceCIDR event (the API source watches them in nftables mode) reaches the program:
// kube-proxy's "Drop traffic to unallocated ClusterIPs" rule follows the ranges, and the
// kernel (model) ends equal to the full transaction of the objects held.
TEST(ApplierLoop, ServiceCidrEventsReachTheNftablesProgram) {
  LoopOptions o;
  o.mode = BackendKind::NFTables;
  o.families = {IPFamily::V4};
  Harness h(o);
  Snapshot snap = example();
  snap.config.mode = ProxyMode::NFTables;
  snap.service_cidrs.clear();
  h.loop->replace_all(snap);
  ASSERT_TRUE(h.loop->tick()->ok);
  WatchEvent e;
  e.kind = WatchEvent::Kind::ServiceCIDR;
  e.name = "kubernetes";
  ServiceCIDR c;
  c.meta.name = "kubernetes";
  c.cidrs = {*CIDR::parse("10.96.0.0/16")};
  e.service_cidr = c;
  h.loop->apply_event(e);
  snap.service_cidrs = {c};
  h.clock.advance_ms(30'000);
  auto r = h.loop->tick();
  ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "");
  auto table = [&] { return verifier::nft::print_ruleset(h.dp.nft(IPFamily::V4)); };
  EXPECT_NE(table().find("daddr 10.96.0.0/16 drop"), std::string::npos) << table();
  DiagSink d;
  auto full = compile_nftables(snap, IPFamily::V4, {}, d);
  ASSERT_TRUE(full.has_value());
  verifier::nft::NftState want;
  ASSERT_TRUE(verifier::nft::apply_script(want, full->text, "full").ok);
  EXPECT_NE(compare_nft_tables(h.dp.nft(IPFamily::V4), want, verifier::nft::Family::Ip, "kube-proxy").verdict,
            NftVerdict::NotEquivalent);
  e.type = WatchEvent::Type::Deleted;
  e.service_cidr.reset();
  h.loop->apply_event(e);
  h.clock.advance_ms(30'000);
  ASSERT_TRUE(h.loop->tick()->ok);
  EXPECT_EQ(table().find("daddr 10.96.0.0/16 drop"), std::string::npos) << table();
}

TEST(ApplierCleanup, PlanRemovesOnlyKubeProxysChainsAndJumps) {
  const std::string save =
      "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-ABC - [0:0]\n"
      ":KUBE-MARK-DROP - [0:0]\n:USER-NAT - [0:0]\n"
      "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
      "-A PREROUTING -p tcp --dport 8080 -j USER-NAT\n"
      "-A KUBE-SERVICES -d 10.96.0.1/32 -j KUBE-SVC-ABC\nCOMMIT\n"
      "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-FIREWALL - [0:0]\n:KUBE-FORWARD - [0:0]\n:USER - [0:0]\n"
      "-A INPUT -j KUBE-FIREWALL\n-A INPUT -s 1.2.3.4/32 -j DROP\n-A USER -j KUBE-FORWARD\nCOMMIT\n";
  auto plan = plan_iptables_cleanup(save);
  EXPECT_EQ(plan.program,
            "*nat\n-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
            ":KUBE-SERVICES - [0:0]\n:KUBE-SVC-ABC - [0:0]\n:KUBE-MARK-DROP - [0:0]\n-X KUBE-SERVICES\n-X KUBE-SVC-ABC\n"
            "-X KUBE-MARK-DROP\nCOMMIT\n*filter\n-D INPUT -j KUBE-FIREWALL\n:KUBE-FIREWALL - [0:0]\n-X KUBE-FIREWALL\nCOMMIT\n");
  ASSERT_EQ(plan.kept.size(), 1u);
  EXPECT_NE(plan.kept[0].find("KUBE-FORWARD"), std::string::npos);
  EXPECT_TRUE(plan_iptables_cleanup("*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n").program.empty());
  auto tables = plan_nft_cleanup("table ip filter\ntable ip kube-proxy\ntable inet mine\ntable inet kube-proxy-fastpath\n");
  EXPECT_EQ(tables, (std::vector<std::string>{"ip kube-proxy", "inet kube-proxy-fastpath"}));
  EXPECT_FALSE(is_kube_proxy_chain("KUBE-KUBELET-CANARY"));
  EXPECT_TRUE(is_kube_proxy_chain("KUBE-PROXY-CANARY"));
}

}  // namespace
}  // namespace kpc::applier
