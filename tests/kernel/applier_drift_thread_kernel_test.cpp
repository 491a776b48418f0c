// The drift check on a thread of its own (LoopOptions::drift_thread, as kpc-applier runs it)
// against the real kernel: the sync thread keeps syncing while the checker thread reads the
// kernel and plans; the repair it commits converges the kernel to a fresh node's (foreign
// rules kept), and the checks a concurrent sync invalidates are redone, never applied stale.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "applier/core/repair.h"
#include "applier/node/kernel_dataplane.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "compiler/driver/compile.h"
#include "tests/support/netns.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

Snapshot example() {
  Snapshot s;
  std::string diags;
  EXPECT_TRUE(applier::load_snapshot_paths({source_path("fixtures/example")}, "", &s, &diags)) << diags;
  return s;
}

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

TEST(ApplierDrift, RepairOnTheCheckerThreadConvergesWhileSyncsGoOn) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  Netns a;
  std::string error;
  ASSERT_TRUE(add_foreign_rules(a, false, &error)) << error;
  const Snapshot snap = example();
  const std::string want = fresh_full(snap);
  std::thread t([&] {
    int fd = open(("/var/run/netns/" + a.name()).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(setns(fd, CLONE_NEWNET), 0);  // the checker thread below inherits it
    close(fd);
    applier::KernelTools tools;
    tools.flavor = verifier::Flavor::Legacy;
    applier::KernelDataplane dp(tools);
    applier::FakeClock clock;
    applier::LoopOptions o;
    o.families = {IPFamily::V4};
    o.sync_period_ms = 2000;
    o.min_sync_period_ms = 0;
    o.drift_thread = true;
    applier::SyncLoop loop(o, clock, dp);
    loop.replace_all(snap);
    auto r = loop.tick();
    ASSERT_TRUE(r && r->ok);
    ASSERT_EQ(legacy_save_without_counters(a), want);

    std::atomic<bool> stop{false};
    std::atomic<int> repaired{0}, stale{0};
    std::thread checker([&] {
      while (!stop) {
        loop.wait_drift_jobs(100);
        for (const auto& x : loop.run_drift_checks()) {
          if (x.result == "repaired") ++repaired;
          if (x.result == "stale") ++stale;
        }
      }
    });
    // Drift: a KUBE-SEP chain flushed and the PREROUTING jump deleted.
    size_t at = want.find("\n:KUBE-SEP-");
    ASSERT_NE(at, std::string::npos);
    const std::string sep = want.substr(at + 2, want.find(' ', at + 2) - at - 2);
    ASSERT_EQ(system(("iptables-legacy -w -t nat -F " + sep).c_str()), 0);
    ASSERT_EQ(system("iptables-legacy -w -t nat -D PREROUTING -m comment --comment 'kubernetes service portals' -j KUBE-SERVICES"), 0);
    ASSERT_NE(legacy_save_without_counters(a), want);
    // The periodic sync publishes the check; syncs go on meanwhile (every 50 ms of the test).
    clock.advance_ms(o.sync_period_ms);
    ASSERT_TRUE(loop.tick());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (repaired == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      clock.advance_ms(1);
      loop.replace_all(snap);
      auto s = loop.tick();
      ASSERT_TRUE(s && s->ok) << (s ? s->families[0].error : "");
    }
    stop = true;
    loop.stop_drift_waits();
    checker.join();
    EXPECT_EQ(repaired.load(), 1);
    EXPECT_EQ(loop.counters().drift_repairs, 1u);
    EXPECT_EQ(loop.counters().verify_failures, 0u);
    EXPECT_EQ(legacy_save_without_counters(a), want);
    std::printf("checks invalidated by a concurrent sync: %d\n", stale.load());
    // The next period: clean.
    clock.advance_ms(o.sync_period_ms);
    ASSERT_TRUE(loop.tick());
    auto jobs = loop.take_drift_jobs();
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(loop.commit_drift(jobs[0], loop.plan_drift(jobs[0])).result, "clean");
  });
  t.join();
}

}  // namespace
}  // namespace kpc::test
