// `kpc-applier --apply-with in-process` against the real kernel (issue 15 §2: "same kernel
// result either way (tested)"). Two namespaces with the same foreign rules; the same
// transaction applied with `nft -f -` in one and through libnftables (KernelDataplane with
// ApplyWith::InProcess, on a thread inside the other) must leave the same ruleset — foreign
// table included — for random programs (full, then partial after changes) and for every
// kube-proxy fixture program; a transaction nft or the kernel rejects must leave both
// namespaces untouched and report the tool's error text, byte for byte; and the applier
// itself, in-process, converges on a watched directory.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <regex>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "applier/node/kernel_dataplane.h"
#include "applier/node/sources.h"
#include "compiler/driver/compile_nftables.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/netns.h"
#include "tests/support/nft_compare.h"
#include "tests/support/snapshot_gen.h"

namespace kpc::test {
namespace {

#define NEED_NETNS()                                          \
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces"

applier::KernelTools in_process_tools() {
  applier::KernelTools t;
  t.apply_with = applier::ApplyWith::InProcess;
  t.nft = "/bin/false";  // never run: a test passing through the tool would fail
  return t;
}

// One namespace applied with the tool (a), one in-process (b), the same foreign rules in both.
struct TwoKernels {
  Netns a, b;
  TwoKernels() {
    std::string error;
    EXPECT_TRUE(add_foreign_rules(a, /*nft_table=*/true, &error)) << error;
    EXPECT_TRUE(add_foreign_rules(b, /*nft_table=*/true, &error)) << error;
  }
  // Applies text both ways; both succeed or both fail with the same message.
  void apply(IPFamily f, const std::string& text, const std::string& where) {
    auto tool = a.exec({"nft", "-f", "-"}, text);
    applier::DataplaneResult lib;
    in_netns(b, [&] {
      applier::KernelDataplane dp(in_process_tools());
      lib = dp.apply(BackendKind::NFTables, f, text);
    });
    ASSERT_EQ(tool.exit_code == 0, lib.ok) << where << "\ntool: " << tool.err << "\nin-process: " << lib.error;
    if (!lib.ok) {
      EXPECT_EQ(lib.error, tool.err) << where;
    }
  }
  std::string ruleset(const Netns& ns) const { return ns.exec({"nft", "list", "ruleset"}).out; }
  void expect_same(const std::string& where) {
    const std::string ra = ruleset(a), rb = ruleset(b);
    EXPECT_EQ(normalized_nft_listing(rb), normalized_nft_listing(ra)) << where;
    EXPECT_NE(rb.find("table inet mine"), std::string::npos) << where << ": the foreign table is gone";
    // The in-process read gives the tool's listing of the table.
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
      const char* fam = f == IPFamily::V4 ? "ip" : "ip6";
      auto tool = b.exec({"nft", "list", "table", fam, "kube-proxy"});
      std::string lib;
      applier::DataplaneResult r;
      in_netns(b, [&] {
        applier::KernelDataplane dp(in_process_tools());
        r = dp.read(BackendKind::NFTables, f, &lib);
      });
      ASSERT_TRUE(r.ok) << where << ": " << r.error;
      EXPECT_EQ(lib, tool.exit_code == 0 ? tool.out : "") << where << " " << fam;
    }
  }
};

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
        std::string name = g.services.back().name, ns = g.services.back().ns;
        g.services.pop_back();
        std::erase_if(g.slices, [&](const testgen::GenSlice& s) { return s.ns == ns && s.service_name == name; });
      }
  }
}

TEST(ApplierInProcess, RandomProgramsFullThenPartialGiveTheToolsRuleset) {
  NEED_NETNS();
  int applied = 0;
  for (uint64_t seed : {201u, 202u, 203u, 204u, 205u, 206u}) {
    testgen::GenOptions go;
    go.max_services = 6;
    testgen::GeneratedCluster c = make_compilable(testgen::sample_cluster(seed, 30, go));
    auto prior = load_compilable(c);
    if (!prior) continue;
    TwoKernels k;
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
      DiagSink d;
      auto full = compile_nftables(*prior, f, {}, d);
      ASSERT_TRUE(full.has_value());
      k.apply(f, full->text, "seed " + std::to_string(seed) + " full");
      ++applied;
    }
    k.expect_same("seed " + std::to_string(seed) + " full");
    for (int step = 1; step <= 3; ++step) {
      testgen::GeneratedCluster next_c = c;
      change(next_c, step);
      auto next = load_compilable(next_c);
      if (!next) continue;
      for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
        DiagSink d;
        auto partial = compile_nftables_from_prior(*next, *prior, f, {}, d);
        ASSERT_TRUE(partial.has_value());
        k.apply(f, partial->text, "seed " + std::to_string(seed) + " partial " + std::to_string(step));
        ++applied;
      }
      k.expect_same("seed " + std::to_string(seed) + " step " + std::to_string(step));
      c = std::move(next_c);
      prior = std::move(next);
    }
  }
  EXPECT_GE(applied, 30);
}

std::vector<std::string> fixture_dumps() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(source_path("fixtures"))) {
    auto p = e.path();
    if (p.extension() != ".dump" || p.parent_path().filename() != "kubeproxy") continue;
    if (fs::relative(p, source_path("fixtures")).begin()->string().rfind("kp-nft-", 0) != 0) continue;
    out.push_back(p.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ApplierInProcess, EveryKubeProxyFixtureProgramGivesTheToolsRuleset) {
  NEED_NETNS();
  auto dumps = fixture_dumps();
  ASSERT_GE(dumps.size(), 10u);
  for (const auto& path : dumps) {
    TwoKernels k;
    const std::string program = nftables_dump_order(read_file(path));
    k.apply(IPFamily::V4, program, path);
    k.expect_same(path);
    EXPECT_NE(k.ruleset(k.b).find("table ip kube-proxy"), std::string::npos) << path;
  }
}

// Transactions refused by nft's parser, its evaluation against the kernel's cache, and the
// kernel itself: nothing changes in either namespace, and the in-process error is the
// tool's (file name, line, columns, the line, the carets).
TEST(ApplierInProcess, RejectedTransactionsLeaveTheKernelAndReportTheToolsError) {
  NEED_NETNS();
  TwoKernels k;
  testgen::GenOptions go;
  go.max_services = 4;
  auto snap = load_compilable(make_compilable(testgen::sample_cluster(211, 30, go)));
  ASSERT_TRUE(snap.has_value());
  DiagSink d;
  auto full = compile_nftables(*snap, IPFamily::V4, {}, d);
  ASSERT_TRUE(full.has_value());
  k.apply(IPFamily::V4, full->text, "full");
  const std::string before_a = k.ruleset(k.a), before_b = k.ruleset(k.b);
  const std::string head = "add table ip kube-proxy\nadd chain ip kube-proxy kpc-probe\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"syntax", head + "add rule ip kube-proxy kpc-probe tcp dport 80 bogus\n"},
      {"missing chain", head + "add rule ip kube-proxy kpc-probe jump no-such-chain\n"},
      {"missing set", head + "add element ip kube-proxy no-such-set { 10.0.0.1 }\n"},
      // The kernel's refusal (EBUSY), after the parser and the cache accepted it.
      {"chain in use", head + "delete chain ip kube-proxy services\n"},
      {"foreign table", "add rule inet mine input tcp dport 1 bogus\n"},
  };
  for (const auto& [what, text] : bad) {
    auto tool = k.a.exec({"nft", "-f", "-"}, text);
    EXPECT_NE(tool.exit_code, 0) << what;
    EXPECT_NE(tool.err.find("/dev/stdin:"), std::string::npos) << what << ": " << tool.err;
    k.apply(IPFamily::V4, text, what);
    EXPECT_EQ(k.ruleset(k.a), before_a) << what;
    EXPECT_EQ(k.ruleset(k.b), before_b) << what;
  }
}

// kube-proxy's nftables proxier flushes the chains of a gone endpoint or Service at once but
// deletes them only at a later sync (a chain a vmap element still names cannot go in the same
// transaction as the element): until then the node holds them empty, nothing referring to them.
// A fresh full load has no such chain.
std::string without_stale_chains(const std::string& listing) {
  static const std::regex empty_chain(R"(\n\tchain [^\n{}]+ \{\n\t\}\n)");
  return std::regex_replace(listing, empty_chain, "\n");
}

bool wait_until(const std::function<bool()>& ok, int ms) {
  for (int i = 0; i < ms / 100; ++i) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok();
}

// The applier, in-process (the nft binary is /bin/false: any use of it fails the sync), on a
// watched directory: the first sync, then three changes, each converging on what the full
// program alone gives with the tool on a fresh namespace; the foreign table kept.
TEST(ApplierInProcess, ApplierConvergesOnAWatchedDirectory) {
  NEED_NETNS();
  Netns a;
  std::string error;
  ASSERT_TRUE(add_foreign_rules(a, /*nft_table=*/true, &error)) << error;
  testgen::GenOptions go;
  go.max_services = 6;
  // The first seed from 221 whose cluster has Services with endpoints (some draw none, and
  // then no change could reach the kernel: the test would pass without a partial sync).
  testgen::GeneratedCluster gen;
  size_t with_endpoints = 0;
  for (uint64_t seed = 221; seed < 421 && (gen.services.size() < 2 || with_endpoints < 1); ++seed) {
    gen = make_compilable(testgen::sample_cluster(seed, 50, go));
    with_endpoints = 0;
    for (const auto& sl : gen.slices) with_endpoints += sl.endpoints.size() > 1;
  }
  ASSERT_GE(gen.services.size(), 2u);
  ASSERT_GE(with_endpoints, 1u);
  gen.config->mode = "nftables";
  const std::string dir = temp_dir("applier-inproc-cluster");
  auto write = [&] {
    write_file(dir + "/cluster.yaml.tmp", gen.to_yaml());
    std::filesystem::rename(dir + "/cluster.yaml.tmp", dir + "/cluster.yaml");
    write_file(dir + "/environment.yaml", kDualStackEnvironment);
  };
  write();
  auto load = [&] {
    Snapshot s;
    std::string diags;
    EXPECT_TRUE(applier::load_snapshot_paths({dir}, "", &s, &diags)) << diags;
    return s;
  };
  auto converged = [&](const Snapshot& snap) {
    Netns fresh;
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
      DiagSink d;
      auto full = compile_nftables(snap, f, {}, d);
      if (!full || fresh.exec({"nft", "-f", "-"}, full->text).exit_code != 0) return false;
    }
    return wait_until([&] {
      std::string got = a.exec({"nft", "list", "ruleset"}).out;
      // The foreign table is the one difference the fresh namespace does not have.
      return got.find("table inet mine") != std::string::npos &&
             normalized_nft_listing(without_stale_chains(a.exec({"nft", "list", "table", "ip", "kube-proxy"}).out)) ==
                 normalized_nft_listing(fresh.exec({"nft", "list", "table", "ip", "kube-proxy"}).out) &&
             normalized_nft_listing(without_stale_chains(a.exec({"nft", "list", "table", "ip6", "kube-proxy"}).out)) ==
                 normalized_nft_listing(fresh.exec({"nft", "list", "table", "ip6", "kube-proxy"}).out);
    }, 20000) || (ADD_FAILURE() << "kernel:\n" << a.exec({"nft", "list", "ruleset"}).out << "expected:\n"
                                   << fresh.exec({"nft", "list", "ruleset"}).out,
                   false);
  };
  const std::string state = temp_dir("applier-inproc-state");
  std::string cmd = "echo $$ > " + state + "/applier.pid; exec " + bin_path("kpc-applier") + " --watch " + dir +
                    " --apply-with in-process --nft /bin/false --state-dir " + state +
                    " --metrics-bind-address '' --healthz-bind-address '' --debounce-ms 50";
  CommandResult ran;
  std::thread runner([&] { ran = a.exec({"sh", "-c", cmd}); });
  bool ok = converged(load());
  EXPECT_TRUE(ok) << "the first sync did not converge";
  for (int step = 1; ok && step <= 3; ++step) {
    change(gen, step);
    write();
    ok = converged(load());
    EXPECT_TRUE(ok) << "step " << step << " did not converge";
  }
  pid_t pid = static_cast<pid_t>(std::stol("0" + read_file(state + "/applier.pid")));
  if (pid > 0) kill(pid, SIGTERM);
  runner.join();
  EXPECT_EQ(ran.err.find("\"result\":\"failed\""), std::string::npos) << ran.err;
  EXPECT_NE(ran.err.find("\"kind\":\"partial\""), std::string::npos) << ran.err;
  EXPECT_NE(a.exec({"nft", "list", "table", "inet", "mine"}).out.find("tcp dport 2222 drop"), std::string::npos);
}

}  // namespace
}  // namespace kpc::test
