// kpc-applier against the real kernel, in throw-away network namespaces (issue 15 §4, first
// increment): after every settled sync the kernel holds exactly what the full program alone
// gives on a fresh node (with the same foreign rules), for iptables (legacy) and nftables;
// foreign rules survive syncs and --cleanup; a failing iptables-restore leaves the changes
// pending and the next sync converges; --cleanup removes kube-proxy's objects and nothing else.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

#include "applier/core/repair.h"
#include "applier/node/cleanup.h"
#include "applier/node/kernel_dataplane.h"
#include "applier/node/nft_equiv.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/compile_nftables.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/netns.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

using applier::ChainSet;

#define NEED_NETNS()                                          \
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces"

// The foreign rules of a node: a user's chain and rules in INPUT and nat PREROUTING, a foreign
// nft table (tests/support/netns.h).
void add_foreign(const Netns& ns) {
  std::string error;
  ASSERT_TRUE(add_foreign_rules(ns, /*nft_table=*/true, &error)) << error;
}

// iptables-save without comments and counters.
std::string normalized_save(const Netns& ns, bool v6) { return legacy_save_without_counters(ns, v6); }

struct Cluster {
  testgen::GeneratedCluster gen;
  std::string dir;
  void write() const {
    write_file(dir + "/cluster.yaml", gen.to_yaml());
    write_file(dir + "/environment.yaml", kDualStackEnvironment);
  }
  Snapshot load() const {
    Snapshot s;
    std::string diags;
    EXPECT_TRUE(applier::load_snapshot_paths({dir}, "", &s, &diags)) << diags;
    return s;
  }
};

Cluster make_cluster(uint64_t seed, const std::string& mode) {
  Cluster c;
  testgen::GenOptions go;
  go.max_services = 6;
  c.gen = make_compilable(testgen::sample_cluster(seed, 30, go));
  c.gen.config->mode = mode;
  c.dir = temp_dir("applier-cluster");
  c.write();
  return c;
}

// Deterministic changes of the kinds kube-proxy sees: an endpoint goes, one comes, a Service goes.
void change(testgen::GeneratedCluster& g, int step) {
  switch (step % 3) {
    case 0:
      for (auto& s : g.slices)
        if (s.endpoints.size() > 1) {
          s.endpoints.pop_back();
          return;
        }
      [[fallthrough]];
    case 1:
      for (auto& s : g.slices)
        if (!s.endpoints.empty()) {
          auto e = s.endpoints.front();
          e.addresses = {fresh_ip(s.address_type == "IPv6", 100 + step)};
          s.endpoints.push_back(e);
          return;
        }
      return;
    default:
      if (g.services.size() > 1) {
        std::string key = g.services.back().name, ns = g.services.back().ns;
        g.services.pop_back();
        std::erase_if(g.slices, [&](const testgen::GenSlice& s) { return s.ns == ns && s.service_name == key; });
      }
  }
}

// The reference: a fresh namespace with the same foreign rules, the full program restored and
// kube-proxy's jumps ensured.
std::string expected_iptables(const Snapshot& snap, bool v6) {
  Netns b;
  add_foreign(b);
  EXPECT_TRUE(b.add_kube_proxy_nfacct());
  DiagSink d;
  auto full = compile_iptables(snap, v6 ? Backend::IP6Tables : Backend::IPTables, {}, d);
  EXPECT_TRUE(full.has_value());
  if (!full) return "";
  auto r = b.exec({v6 ? "ip6tables-legacy-restore" : "iptables-legacy-restore", "--noflush", "-w"}, full->text);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [t, chains] : applier::program_chains(full->text).declared)
    for (const auto& j : verifier::trace::kube_proxy_jumps()) {
      if (j.table != t || std::find(chains.begin(), chains.end(), j.to) == chains.end()) continue;
      std::vector<std::string> argv{v6 ? "ip6tables-legacy" : "iptables-legacy", "-w", "-t", ir::table_name(t), "-I", std::string(j.from)};
      for (auto& a : applier::split_rule_args(j.rule_text())) argv.push_back(a);
      EXPECT_EQ(b.exec(argv).exit_code, 0);
    }
  return normalized_save(b, v6);
}

std::vector<std::string> applier_args(const Cluster& c, const std::string& state, std::vector<std::string> more = {}) {
  std::vector<std::string> a{bin_path("kpc-applier"), "--watch", c.dir, "--once", "--iptables", "legacy",
                             "--state-dir", state};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(ApplierKernel, IptablesOnceRunsConvergeAndKeepForeignRules) {
  NEED_NETNS();
  for (uint64_t seed : {11u, 12u}) {
    Netns a;
    add_foreign(a);
    Cluster c = make_cluster(seed, "iptables");
    std::string state = temp_dir("applier-state");
    for (int step = 0; step < 4; ++step) {
      if (step) change(c.gen, step), c.write();
      auto r = a.exec(applier_args(c, state));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.err.find("\"msg\":\"sync\""), std::string::npos) << r.err;
      Snapshot snap = c.load();
      for (bool v6 : {false, true}) EXPECT_EQ(normalized_save(a, v6), expected_iptables(snap, v6)) << "seed " << seed << " step " << step << (v6 ? " v6" : " v4");
    }
    EXPECT_NE(read_file(state + "/last-applied-iptables-ipv4.restore").find("*nat"), std::string::npos);
  }
}

TEST(ApplierKernel, IptablesLoopPartialSyncsProvenAndAFailingRestoreConverges) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  Cluster c = make_cluster(21, "iptables");
  std::string dir = temp_dir("applier-wrapper");
  // A restore that fails once (when the flag file exists), then is the real one.
  std::string wrapper = dir + "/restore";
  write_file(wrapper, "#!/bin/sh\nif [ -e " + dir + "/fail ]; then rm -f " + dir +
                          "/fail; cat >/dev/null; echo 'injected failure' >&2; exit 1; fi\n"
                          "exec iptables-legacy-restore \"$@\"\n");
  ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
  in_netns(a, [&] {
    applier::KernelTools tools;
    tools.flavor = verifier::Flavor::Legacy;
    tools.iptables_restore = wrapper;
    applier::KernelDataplane dp(tools);
    applier::FakeClock clock;
    applier::LoopOptions o;
    o.families = {IPFamily::V4};
    o.state_dir = temp_dir("applier-state");
    std::vector<std::string> logs;
    applier::SyncLoop loop(o, clock, dp, [&](const std::string& l) { logs.push_back(l); });
    loop.replace_all(c.load());
    auto r = loop.tick();
    ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "");
    int partials = 0;
    for (int step = 1; step <= 6; ++step) {
      change(c.gen, step), c.write();
      loop.replace_all(c.load());
      const bool fail = step == 3;
      if (fail) write_file(dir + "/fail", "");
      clock.advance_ms(1000);
      r = loop.tick();
      ASSERT_TRUE(r.has_value());
      if (fail) {
        EXPECT_FALSE(r->ok);
        EXPECT_NE(read_file(o.state_dir + "/last-failed-iptables-ipv4.restore.err").find("injected"), std::string::npos);
        clock.advance_ms(30'000);  // the periodic retry: full, with the change still pending
        r = loop.tick();
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(r->families[0].kind, "full");
      }
      ASSERT_TRUE(r->ok) << r->families[0].error;
      if (r->families[0].kind == "partial") {
        ++partials;
        EXPECT_TRUE(r->families[0].verdict == "identical" || r->families[0].verdict == "equivalent")
            << r->families[0].verdict;
      }
      EXPECT_EQ(normalized_save(a, false), expected_iptables(c.load(), false)) << "step " << step;
    }
    EXPECT_GE(partials, 3);
    EXPECT_EQ(loop.counters().verify_failures, 0u);
  });
}

std::string nft_table(const Netns& ns, const char* family) {
  auto r = ns.exec({"nft", "list", "table", family, "kube-proxy"});
  return r.exit_code == 0 ? r.out : "";
}

void expect_nft_equal(const Netns& a, const Snapshot& snap, IPFamily f, const std::string& where) {
  namespace vn = verifier::nft;
  const char* fam = f == IPFamily::V4 ? "ip" : "ip6";
  Netns b;
  DiagSink d;
  auto full = compile_nftables(snap, f, {}, d);
  ASSERT_TRUE(full.has_value());
  ASSERT_EQ(b.exec({"nft", "-f", "-"}, full->text).exit_code, 0);
  vn::NftState got, want;
  vn::NftError err;
  ASSERT_TRUE(vn::parse_listing(nft_table(a, fam), "a", &got, &err)) << err.to_string();
  ASSERT_TRUE(vn::parse_listing(nft_table(b, fam), "b", &want, &err)) << err.to_string();
  auto cmp = applier::compare_nft_tables(got, want, f == IPFamily::V4 ? vn::Family::Ip : vn::Family::Ip6, "kube-proxy");
  std::string diffs;
  for (const auto& x : cmp.differences) diffs += x + "\n";
  EXPECT_NE(cmp.verdict, applier::NftVerdict::NotEquivalent) << where << "\n" << diffs;
}

TEST(ApplierKernel, NftablesOnceRunsAndLoopConverge) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  Cluster c = make_cluster(31, "nftables");
  std::string state = temp_dir("applier-state");
  for (int step = 0; step < 3; ++step) {
    if (step) change(c.gen, step), c.write();
    auto r = a.exec(applier_args(c, state));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) expect_nft_equal(a, c.load(), f, "once step " + std::to_string(step));
  }
  // In-process: partial transactions, proven on the model, applied with nft.
  in_netns(a, [&] {
    applier::KernelDataplane dp(applier::KernelTools{});
    applier::FakeClock clock;
    applier::LoopOptions o;
    o.mode = BackendKind::NFTables;
    applier::SyncLoop loop(o, clock, dp);
    loop.replace_all(c.load());
    auto r = loop.tick();
    ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "");
    int partials = 0;
    for (int step = 3; step < 8; ++step) {
      change(c.gen, step), c.write();
      loop.replace_all(c.load());
      clock.advance_ms(2000);
      r = loop.tick();
      ASSERT_TRUE(r && r->ok) << r->families[0].error;
      for (const auto& f : r->families) {
        if (f.kind != "partial") continue;
        ++partials;
        EXPECT_TRUE(f.verdict == "identical" || f.verdict == "equivalent") << f.verdict;
      }
      for (IPFamily f : {IPFamily::V4, IPFamily::V6}) expect_nft_equal(a, c.load(), f, "loop step " + std::to_string(step));
    }
    EXPECT_GE(partials, 4);
    EXPECT_EQ(loop.counters().verify_failures, 0u);
  });
  // The foreign table is still there.
  EXPECT_NE(a.exec({"nft", "list", "table", "inet", "mine"}).out.find("tcp dport 2222 drop"), std::string::npos);
}

TEST(ApplierKernel, CleanupRemovesKubeProxysObjectsAndNothingElse) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  // kubelet's chain is not kube-proxy's.
  ASSERT_EQ(a.exec({"iptables-legacy", "-N", "KUBE-KUBELET-CANARY"}).exit_code, 0);
  Cluster ci = make_cluster(41, "iptables");
  ASSERT_EQ(a.exec(applier_args(ci, temp_dir("s1"))).exit_code, 0);
  // The nft flavour too, and the nftables mode.
  ASSERT_EQ(a.exec({bin_path("kpc-applier"), "--watch", ci.dir, "--once", "--iptables", "nft", "--family", "ipv4"}).exit_code, 0);
  Cluster cn = make_cluster(41, "nftables");
  ASSERT_EQ(a.exec({bin_path("kpc-applier"), "--watch", cn.dir, "--once"}).exit_code, 0);
  ASSERT_EQ(a.exec({"nft", "add", "table", "inet", "kube-proxy-fastpath"}).exit_code, 0);
  const std::string before_v4 = normalized_save(a, false);
  ASSERT_NE(before_v4.find(":KUBE-SERVICES"), std::string::npos);

  auto dry = a.exec({bin_path("kpc-applier"), "--cleanup", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would remove nat: chain KUBE-SERVICES"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("iptables-nft: would remove"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("nft: would remove table ip kube-proxy"), std::string::npos) << dry.out;
  EXPECT_EQ(normalized_save(a, false), before_v4);  // nothing removed

  auto r = a.exec({bin_path("kpc-applier"), "--cleanup"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* save : {"iptables-legacy-save", "ip6tables-legacy-save", "iptables-nft-save", "ip6tables-nft-save"}) {
    std::string s = a.exec({save}).out;
    for (size_t pos = 0; (pos = s.find("KUBE-", pos)) != std::string::npos; ++pos)
      EXPECT_EQ(s.compare(pos, 19, "KUBE-KUBELET-CANARY"), 0) << save << ":\n" << s;
  }
  std::string legacy = normalized_save(a, false);
  EXPECT_NE(legacy.find(":USER-CHAIN"), std::string::npos);
  EXPECT_NE(legacy.find("-A USER-CHAIN -s 192.0.2.1/32 -j ACCEPT"), std::string::npos);
  EXPECT_NE(legacy.find("-A INPUT -s 198.51.100.9/32 -j DROP"), std::string::npos);
  EXPECT_NE(legacy.find("-A PREROUTING -p tcp -m tcp --dport 9999 -j USER-NAT"), std::string::npos);
  EXPECT_NE(legacy.find(":KUBE-KUBELET-CANARY"), std::string::npos);
  std::string tables = a.exec({"nft", "list", "tables"}).out;
  EXPECT_EQ(tables.find("kube-proxy"), std::string::npos) << tables;
  EXPECT_NE(tables.find("table inet mine"), std::string::npos);
  // A second clean-up finds nothing.
  auto again = a.exec({bin_path("kpc-applier"), "--cleanup"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.out.find("nothing of kube-proxy's"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace kpc::test
