// kpc-applier with --kubeconfig end to end (issue 15 §1): the local HTTPS API test server
// (tests/support/kube_api_server.py) and the applier run in one network namespace with real
// iptables (legacy); after the initial lists (--once) and after each change served by watch
// events (the long-running loop), the kernel holds exactly what `kpc compile` of the
// server's objects gives on a fresh node — also after the watch is cut while the cluster
// changes and history is compacted (410, relist); then /metrics, /healthz, /livez are scraped.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "applier/core/repair.h"
#include "applier/node/kernel_dataplane.h"
#include "applier/node/sources.h"
#include "compiler/driver/compile.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/kube_api_server.h"
#include "tests/support/netns.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

// iptables-save without comments and counters.
std::string normalized_save(const Netns& ns) { return legacy_save_without_counters(ns); }

// `kpc compile` of the snapshot, restored in a fresh namespace with kube-proxy's jumps.
std::string expected_iptables(const Snapshot& snap) {
  Netns b;
  EXPECT_TRUE(b.add_kube_proxy_nfacct());
  DiagSink d;
  auto full = compile_iptables(snap, Backend::IPTables, {}, d);
  EXPECT_TRUE(full.has_value());
  if (!full) return "";
  auto r = b.exec({"iptables-legacy-restore", "--noflush", "-w"}, full->text);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [t, chains] : applier::program_chains(full->text).declared)
    for (const auto& j : verifier::trace::kube_proxy_jumps()) {
      if (j.table != t || std::find(chains.begin(), chains.end(), j.to) == chains.end()) continue;
      std::vector<std::string> argv{"iptables-legacy", "-w", "-t", ir::table_name(t), "-I", std::string(j.from)};
      for (auto& a : applier::split_rule_args(j.rule_text())) argv.push_back(a);
      EXPECT_EQ(b.exec(argv).exit_code, 0);
    }
  return normalized_save(b);
}

// The cluster as the server serves it (objects.yaml) and as the node is configured
// (config.yaml: the KubeProxyConfiguration and NodeEnvironment); the directory is what
// `kpc compile` reads.
struct ServedCluster {
  testgen::GeneratedCluster gen;
  std::string dir;
  void write() const {
    auto docs = gen.yaml_documents();
    std::string objects, config;
    for (size_t i = 0; i < docs.size(); ++i) {
      bool is_config = gen.config && i + 1 == docs.size();
      (is_config ? config : objects) += "---\n" + docs[i];
    }
    write_file(dir + "/objects.yaml", objects);
    write_file(dir + "/config.yaml", config + "---\n" + kDualStackEnvironment);
  }
  Snapshot load() const {
    Snapshot s;
    std::string diags;
    EXPECT_TRUE(applier::load_snapshot_paths({dir}, "", &s, &diags)) << diags;
    return s;
  }
};

// An endpoint goes, one comes, a Service goes (as in applier_kernel_test, IPv4 ones).
void change(testgen::GeneratedCluster& g, int step) {
  switch (step % 3) {
    case 0:
      for (auto& s : g.slices)
        if (s.endpoints.size() > 1 && s.address_type == "IPv4") return s.endpoints.pop_back();
      [[fallthrough]];
    case 1:
      for (auto& s : g.slices)
        if (!s.endpoints.empty() && s.address_type == "IPv4") {
          auto e = s.endpoints.front();
          e.addresses = {fresh_ip(false, 100 + step)};
          s.endpoints.push_back(e);
          return;
        }
      return;
    default:
      // A Service with IPv4 endpoints goes (the test programs IPv4 only).
      for (const auto& sl : g.slices)
        if (sl.address_type == "IPv4" && !sl.endpoints.empty()) {
          std::string name = sl.service_name, ns = sl.ns;
          std::erase_if(g.services, [&](const testgen::GenService& s) { return s.ns == ns && s.name == name; });
          std::erase_if(g.slices, [&](const testgen::GenSlice& s) { return s.ns == ns && s.service_name == name; });
          return;
        }
  }
}

TEST(ApplierKubeApiKernel, KubeconfigToTheTestServerConvergesToKpcCompileOfItsObjects) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  if (!can_run_kube_api_server()) GTEST_SKIP() << "needs python3 (yaml, ssl) and openssl";
  ASSERT_TRUE(test_pki().ok) << test_pki().error;
  Netns a;
  ASSERT_EQ(a.exec({"ip", "link", "set", "lo", "up"}).exit_code, 0);
  ASSERT_TRUE(a.add_kube_proxy_nfacct());
  ServedCluster c;
  testgen::GenOptions go;
  go.max_services = 8;
  // The first seed whose cluster has something to change: Services, slices with endpoints.
  for (uint64_t seed = 31;; ++seed) {
    c.gen = make_compilable(testgen::sample_cluster(seed, 60, go));
    std::set<std::string> v4_services;  // Services with IPv4 endpoints: the changes need three
    for (const auto& sl : c.gen.slices)
      if (sl.address_type == "IPv4" && !sl.endpoints.empty()) v4_services.insert(sl.ns + "/" + sl.service_name);
    if (v4_services.size() >= 3) break;
  }
  c.gen.config->mode = "iptables";
  c.gen.config->sync_period = c.gen.config->min_sync_period = "";  // kube-proxy's 30 s / 1 s
  c.dir = temp_dir("kube-api-e2e");
  c.write();

  KubeApiServer server;
  KubeApiServerOptions so;
  so.token = "e2e-token";
  so.objects = {c.dir + "/objects.yaml"};
  so.netns = a.name();
  ASSERT_TRUE(server.start(so)) << server.error();
  std::string kc = write_kubeconfig(temp_dir("kube-api-e2e-kc"), server.url(), KubeconfigAuth::Token, "e2e-token");
  std::vector<std::string> args{bin_path("kpc-applier"), "--kubeconfig", kc,       "--config", c.dir + "/config.yaml",
                                "--iptables",           "legacy",     "--family", "ipv4",     "--state-dir",
                                temp_dir("kube-api-e2e-state")};

  // --once: the initial lists, one full sync.
  auto once_args = args;
  once_args.push_back("--once");
  auto r = a.exec(once_args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kube-api source synced"), std::string::npos) << r.err;
  std::string want = expected_iptables(c.load());
  ASSERT_EQ(normalized_save(a), want) << first_difference(normalized_save(a), want, "kernel", "kpc compile");

  // The same through the in-cluster service account (the environment a pod gets, the token
  // and CA in --service-account-dir) after a flush of kube-proxy's rules.
  std::string sa = temp_dir("kube-api-e2e-sa");
  write_file(sa + "/token", "e2e-token\n");
  write_file(sa + "/ca.crt", read_file(test_pki().ca_crt));
  ASSERT_EQ(a.exec({bin_path("kpc-applier"), "--cleanup"}).exit_code, 0);
  ASSERT_NE(normalized_save(a), want);
  std::vector<std::string> in_cluster{"env", "KUBERNETES_SERVICE_HOST=127.0.0.1",
                                      "KUBERNETES_SERVICE_PORT=" + std::to_string(server.port()), bin_path("kpc-applier"),
                                      "--service-account-dir", sa, "--config", c.dir + "/config.yaml", "--iptables", "legacy",
                                      "--family", "ipv4", "--once"};
  r = a.exec(in_cluster);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("in-cluster service account"), std::string::npos) << r.err;
  ASSERT_EQ(normalized_save(a), want);

  // The loop: each change reaches the kernel through watch events.
  std::vector<std::string> loop_args{"ip", "netns", "exec", a.name()};
  loop_args.insert(loop_args.end(), args.begin(), args.end());
  for (auto x : {"--metrics-bind-address", "127.0.0.1:0", "--healthz-bind-address", "127.0.0.1:0"}) loop_args.push_back(x);
  std::string log = temp_dir("kube-api-e2e-log") + "/stderr";
  ChildProcess applier;
  ASSERT_TRUE(applier.start(loop_args, log));
  for (int step : {1, 3, 2}) {  // an endpoint comes, one goes, a Service goes
    change(c.gen, step);
    c.write();
    ASSERT_TRUE(server.command({{"op", "load"}, {"files", {c.dir + "/objects.yaml"}}})["ok"]);
    std::string before = want;
    want = expected_iptables(c.load());
    EXPECT_NE(want, before) << "step " << step << " changes nothing in the program";
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((got = normalized_save(a)) != want && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(got, want) << "step " << step << ": " << first_difference(got, want, "kernel", "kpc compile") << "\n"
                         << read_file(log);
  }
  // The watch cut while the cluster changes, history compacted (410 on the way back): the
  // applier relists, infers the deletion, and the kernel converges.
  {
    ASSERT_TRUE(server.command({{"op", "refuse"}, {"value", true}})["ok"]);
    ASSERT_TRUE(server.command({{"op", "drop"}})["ok"]);
    change(c.gen, 1);  // an endpoint comes
    change(c.gen, 2);  // a Service goes
    c.write();
    ASSERT_TRUE(server.command({{"op", "load"}, {"files", {c.dir + "/objects.yaml"}}})["ok"]);
    ASSERT_TRUE(server.command({{"op", "compact"}})["ok"]);
    ASSERT_TRUE(server.command({{"op", "refuse"}, {"value", false}})["ok"]);
    std::string before = want;
    want = expected_iptables(c.load());
    EXPECT_NE(want, before);
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((got = normalized_save(a)) != want && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_EQ(got, want) << "after the cut: " << first_difference(got, want, "kernel", "kpc compile") << "\n"
                         << read_file(log);
    EXPECT_NE(read_file(log).find("410 Gone"), std::string::npos);
  }

  // What operators see, scraped from inside the namespace.
  auto port_of = [&](const std::string& what) {
    std::string logs = read_file(log), key = "\"msg\":\"" + what + "\",\"port\":";
    size_t at = logs.find(key);
    return at == std::string::npos ? std::string() : std::to_string(std::atoi(logs.c_str() + at + key.size()));
  };
  auto get = [&](const std::string& url) {
    return a.exec({"python3", "-c",
                   "import sys, urllib.request, urllib.error\n"
                   "try: r = urllib.request.urlopen(sys.argv[1]); print(r.status); print(r.read().decode())\n"
                   "except urllib.error.HTTPError as e: print(e.code); print(e.read().decode())",
                   url});
  };
  std::string mport = port_of("metrics server"), hport = port_of("healthz server");
  ASSERT_FALSE(mport.empty() || hport.empty()) << read_file(log);
  auto m = get("http://127.0.0.1:" + mport + "/metrics");
  EXPECT_EQ(m.out.rfind("200\n", 0), 0u) << m.out << m.err;
  EXPECT_NE(m.out.find("kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} "), std::string::npos) << m.out;
  EXPECT_EQ(m.out.find("kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} 0\n"), std::string::npos) << m.out;
  EXPECT_EQ(m.out.find("kubeproxy_sync_proxy_rules_iptables_total{ip_family=\"IPv4\",table=\"nat\"} 0\n"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("kpc_partial_verify_failures_total{ip_family=\"IPv4\"} 0\n"), std::string::npos) << m.out;
  auto hz = get("http://127.0.0.1:" + hport + "/healthz");
  EXPECT_EQ(hz.out.rfind("200\n", 0), 0u) << hz.out << hz.err;
  EXPECT_NE(hz.out.find("\"nodeEligible\":true"), std::string::npos) << hz.out;
  EXPECT_EQ(get("http://127.0.0.1:" + hport + "/livez").out.rfind("200\n", 0), 0u);
  EXPECT_EQ(applier.stop(), 0) << read_file(log);
  std::string logs = read_file(log);
  EXPECT_NE(logs.find("\"kind\":\"partial\""), std::string::npos) << logs;
  EXPECT_EQ(logs.find("\"result\":\"failed\""), std::string::npos) << logs;
}

}  // namespace
}  // namespace kpc::test
