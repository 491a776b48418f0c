// kpc-applier's failure paths against the real kernel, in throw-away network namespaces (issue 15
// §4 "Faults"): the xtables lock held by another process, `kill -9` in the middle of a sync, the
// --state-dir on a full filesystem, the `--watch -` stream cut in the middle of an event. Each
// must converge with nothing lost and foreign rules untouched: after the fault (and a restart
// where the fault killed the applier) the kernel equals a fresh namespace holding the same
// foreign rules plus the full program.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "applier/core/repair.h"
#include "applier/node/kernel_dataplane.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "applier/node/nft_equiv.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/compile_nftables.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/netns.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

#define NEED_NETNS()                                          \
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces"

// The foreign rules of a node: a user's chain and rules in INPUT and nat PREROUTING.
void add_foreign(const Netns& ns) {
  std::string error;
  ASSERT_TRUE(add_foreign_rules(ns, /*nft_table=*/false, &error)) << error;
}

// iptables-save without comments and counters.
std::string normalized_save(const Netns& ns, bool v6 = false) { return legacy_save_without_counters(ns, v6); }

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

Cluster make_cluster(uint64_t seed) {
  Cluster c;
  testgen::GenOptions go;
  go.max_services = 6;
  c.gen = make_compilable(testgen::sample_cluster(seed, 30, go));
  c.dir = temp_dir("applier-faults-cluster");
  c.write();
  return c;
}

// A change of each kind kube-proxy sees: an endpoint comes, a Service goes.
void change(testgen::GeneratedCluster& g, int step) {
  if (step % 2 == 0) {
    for (auto& s : g.slices)
      if (!s.endpoints.empty()) {
        auto e = s.endpoints.front();
        e.addresses = {fresh_ip(s.address_type == "IPv6", 100 + step)};
        s.endpoints.push_back(e);
        return;
      }
  } else if (g.services.size() > 1) {
    std::string name = g.services.back().name, ns = g.services.back().ns;
    g.services.pop_back();
    std::erase_if(g.slices, [&](const testgen::GenSlice& s) { return s.ns == ns && s.service_name == name; });
  }
}

// The reference: a fresh namespace with the same foreign rules, the full program restored and
// kube-proxy's jumps inserted.
std::string expected_iptables(const Snapshot& snap, bool v6 = false) {
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

std::vector<std::string> once_args(const Cluster& c, const std::string& state, std::vector<std::string> more = {}) {
  std::vector<std::string> a{bin_path("kpc-applier"), "--watch", c.dir, "--once", "--iptables", "legacy",
                             "--family", "ipv4", "--state-dir", state};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

bool wait_for_file(const std::string& path, int ms) {
  for (int i = 0; i < ms / 20; ++i) {
    if (access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

pid_t read_pid(const std::string& path) {
  std::string s = read_file(path);
  return s.empty() ? -1 : static_cast<pid_t>(std::stol(s));
}

// (a) Another process (kube-proxy, kubelet, a firewall manager) holds the xtables lock. The
// restore is run with `-w`, which waits for the lock (iptables finds it at $XTABLES_LOCKFILE,
// default /run/xtables.lock; the test uses a lock file of its own so that it never blocks the
// host's iptables users): nothing is written while it is held, the sync completes once it is
// released, and the kernel is the full program.
TEST(ApplierFaults, XtablesLockHeldByAnotherProcessWaitsThenConverges) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  Cluster c = make_cluster(51);
  std::string dir = temp_dir("applier-xtlock");
  std::string lock = dir + "/xtables.lock", held = dir + "/held";
  pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    setpgid(0, 0);  // flock's child (sleep) holds the lock too: the test kills the group
    execlp("flock", "flock", lock.c_str(), "-c", ("touch " + held + "; exec sleep 60").c_str(), (char*)nullptr);
    _exit(127);
  }
  ASSERT_TRUE(wait_for_file(held, 5000)) << "flock did not take the lock";
  std::atomic<bool> done{false};
  CommandResult r;
  std::vector<std::string> argv{"env", "XTABLES_LOCKFILE=" + lock};
  for (auto& x : once_args(c, temp_dir("applier-xtlock-state"))) argv.push_back(x);
  std::thread runner([&] {
    r = a.exec(argv);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(done.load()) << "the applier did not wait for the lock: " << r.err;
  EXPECT_EQ(normalized_save(a).find(":KUBE-SERVICES"), std::string::npos) << "written while the lock was held";
  kill(-holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  runner.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(normalized_save(a), expected_iptables(c.load()));
}

// (b) `kill -9` in the middle of a sync, at the worst moment: the restore has committed its
// first table and not the second (a wrapper that restores the first table with the real tool,
// then sleeps; applier and wrapper are killed there). The kernel is half old, half new; the
// restarted applier reads it (its first sync is full) and converges to the full program, the
// foreign rules untouched.
TEST(ApplierFaults, Kill9InTheMiddleOfASyncThenRestartConverges) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  // A cluster with endpoints (some seeds have none).
  Cluster c = make_cluster(61);
  for (uint64_t seed = 62; seed < 100; ++seed) {
    DiagSink d;
    auto p = compile_iptables(c.load(), Backend::IPTables, {}, d);
    if (p && p->text.find(":KUBE-SVC-") != std::string::npos) break;
    c = make_cluster(seed);
  }
  std::string state = temp_dir("applier-kill-state");
  auto first = a.exec(once_args(c, state));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(normalized_save(a), expected_iptables(c.load()));
  // Every Service loses its endpoints: both tables change (nat: the KUBE-SVC chains go;
  // filter: "has no endpoints" REJECT rules come), so a restore cut between them is half done.
  ASSERT_NE(normalized_save(a).find(":KUBE-SVC-"), std::string::npos) << "the cluster has no endpoints";
  for (auto& sl : c.gen.slices) sl.endpoints.clear();
  c.write();
  const std::string want = expected_iptables(c.load());

  std::string dir = temp_dir("applier-kill");
  std::string wrapper = dir + "/restore";
  write_file(wrapper, "#!/bin/sh\necho $$ > " + dir + "/wrapper.pid\ncat > " + dir + "/in\n" +
                          "awk '{print} /^COMMIT/{exit}' " + dir + "/in | iptables-legacy-restore \"$@\" || exit 1\n" +
                          "touch " + dir + "/started\nexec sleep 60\n");
  ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
  std::string cmd = "echo $$ > " + dir + "/applier.pid; exec";
  for (auto& x : once_args(c, state, {"--iptables-restore", wrapper})) cmd += " '" + x + "'";
  CommandResult killed;
  std::thread runner([&] { killed = a.exec({"sh", "-c", cmd}); });
  ASSERT_TRUE(wait_for_file(dir + "/started", 20000)) << "the wrapper never ran";
  pid_t applier = read_pid(dir + "/applier.pid"), restore = read_pid(dir + "/wrapper.pid");
  ASSERT_GT(applier, 0);
  ASSERT_GT(restore, 0);
  ASSERT_EQ(kill(applier, SIGKILL), 0);
  kill(restore, SIGKILL);
  runner.join();
  EXPECT_NE(killed.exit_code, 0);
  const std::string half = normalized_save(a);
  EXPECT_NE(half, want) << "the fault left nothing to repair";

  auto restarted = a.exec(once_args(c, state));
  ASSERT_EQ(restarted.exit_code, 0) << restarted.err;
  EXPECT_EQ(normalized_save(a), want);
  // And a second restart changes nothing (no clean-up at start, no duplicate jumps).
  ASSERT_EQ(a.exec(once_args(c, state)).exit_code, 0);
  EXPECT_EQ(normalized_save(a), want);
}

// (c) The --state-dir on a full filesystem (a 64 KiB tmpfs, filled): the syncs still apply
// (the kernel is the state of record), each failed write is logged and counted; once space
// returns the next sync writes its files again.
TEST(ApplierFaults, FullStateDirIsLoggedAndCountedAndSyncsGoOn) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  Cluster c = make_cluster(71);
  std::string state = temp_dir("applier-full-state");
  ASSERT_EQ(mount("tmpfs", state.c_str(), "tmpfs", 0, "size=64k"), 0) << strerror(errno);
  struct Unmount {
    std::string p;
    ~Unmount() { umount2(p.c_str(), MNT_DETACH); }
  } unmount{state};
  {
    std::ofstream fill(state + "/fill", std::ios::binary);
    std::string block(4096, 'x');
    for (int i = 0; i < 64 && fill.write(block.data(), block.size()); ++i) fill.flush();
  }
  in_netns(a, [&] {
    applier::KernelTools tools;
    tools.flavor = verifier::Flavor::Legacy;
    applier::KernelDataplane dp(tools);
    applier::FakeClock clock;
    applier::LoopOptions o;
    o.families = {IPFamily::V4};
    o.state_dir = state;
    std::vector<std::string> logs;
    applier::SyncLoop loop(o, clock, dp, [&](const std::string& l) { logs.push_back(l); });
    loop.replace_all(c.load());
    auto r = loop.tick();
    ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "");
    EXPECT_GE(loop.counters().state_dir_errors, 1u);
    bool logged = false;
    for (const auto& l : logs) logged |= l.find("state-dir write failed") != std::string::npos && l.find("No space left") != std::string::npos;
    EXPECT_TRUE(logged);
    EXPECT_EQ(normalized_save(a), expected_iptables(c.load()));
    // A partial sync on the full disk: applied too.
    change(c.gen, 0), c.write();
    loop.replace_all(c.load());
    clock.advance_ms(1000);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "");
    EXPECT_EQ(r->families[0].kind, "partial");
    EXPECT_EQ(normalized_save(a), expected_iptables(c.load()));
    // Space returns: the next sync's files are written, no new error.
    ASSERT_EQ(unlink((state + "/fill").c_str()), 0);
    const uint64_t errors = loop.counters().state_dir_errors;
    change(c.gen, 1), c.write();
    loop.replace_all(c.load());
    clock.advance_ms(1000);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok);
    EXPECT_EQ(loop.counters().state_dir_errors, errors);
    EXPECT_FALSE(read_file(state + "/last-applied-iptables-ipv4.restore").empty());
    EXPECT_NE(read_file(state + "/status.json").find("\"state_dir_errors\""), std::string::npos);
    EXPECT_EQ(normalized_save(a), expected_iptables(c.load()));
  });
}

// (d) The `--watch -` stream cut in the middle of an event (kubectl killed, a pipe closed):
// the complete events are applied, the half-read one is reported and never applied; the
// stream resumed (a new kubectl, i.e. a restarted applier reading a fresh list) converges.
const char* kConfig = R"(apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: node-0
---
)";
std::string service_event(const std::string& name, const std::string& ip) {
  return R"({"type":"ADDED","object":{"apiVersion":"v1","kind":"Service","metadata":{"name":")" + name +
         R"(","namespace":"shop"},"spec":{"clusterIP":")" + ip + R"(","clusterIPs":[")" + ip +
         R"("],"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}],"type":"ClusterIP"}}})" + "\n";
}
std::string slice_event(const std::string& name, const std::string& ep) {
  return R"({"type":"ADDED","object":{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":")" +
         name + R"(-x","namespace":"shop","labels":{"kubernetes.io/service-name":")" + name +
         R"("}},"addressType":"IPv4","endpoints":[{"addresses":[")" + ep +
         R"("],"conditions":{"ready":true}}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}})" + "\n";
}

TEST(ApplierFaults, WatchStreamCutMidEventAppliesOnlyWholeEventsAndResumes) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  std::string dir = temp_dir("applier-stream");
  write_file(dir + "/config.yaml", std::string(kConfig) + kDualStackEnvironment);
  std::vector<std::string> argv{bin_path("kpc-applier"), "--watch", "-", "--once", "--config", dir + "/config.yaml",
                                "--iptables", "legacy", "--family", "ipv4"};
  const std::string web = service_event("web", "10.96.10.10") + slice_event("web", "10.244.1.5");
  const std::string api = service_event("api", "10.96.20.20") + slice_event("api", "10.244.2.7");
  // Cut inside the second Service's event.
  auto cut = a.exec(argv, web + api.substr(0, api.find("clusterIPs")));
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_NE(cut.err.find("malformed watch event skipped"), std::string::npos) << cut.err;
  EXPECT_NE(cut.err.find("watch stream ended"), std::string::npos) << cut.err;
  std::string s = normalized_save(a);
  EXPECT_NE(s.find("10.96.10.10/32"), std::string::npos) << s;
  EXPECT_NE(s.find("10.244.1.5"), std::string::npos) << s;
  EXPECT_EQ(s.find("10.96.20.20"), std::string::npos) << "a half-read event was applied:\n" << s;
  // Resumed: the new stream's initial list holds both.
  auto resumed = a.exec(argv, web + api);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  s = normalized_save(a);
  EXPECT_NE(s.find("10.96.10.10/32"), std::string::npos) << s;
  EXPECT_NE(s.find("10.96.20.20/32"), std::string::npos) << s;
  EXPECT_NE(s.find("10.244.2.7"), std::string::npos) << s;
  EXPECT_NE(s.find("-A INPUT -s 198.51.100.9/32 -j DROP"), std::string::npos) << s;
  EXPECT_NE(s.find("-A PREROUTING -p tcp -m tcp --dport 9999 -j USER-NAT"), std::string::npos) << s;

  // Without --once the end of the stream ends the applier: what arrived whole is applied, the
  // rules are kept, and it exits 1 (a supervisor restarts the kubectl | kpc-applier pipe) rather
  // than run on without a source behind green health checks.
  Netns b;
  write_file(dir + "/cut.json", web + api.substr(0, api.find("clusterIPs")));
  std::string cmd = "cat " + dir + "/cut.json | timeout 60 '" + bin_path("kpc-applier") + "' --watch - --config " + dir +
                    "/config.yaml --iptables legacy --family ipv4 --metrics-bind-address '' --healthz-bind-address '' 2>" +
                    dir + "/log; echo rc=$?; iptables-legacy-save | grep -c 10.96.20.20";
  auto r = b.exec({"sh", "-c", cmd});
  EXPECT_NE(r.out.find("rc=1\n0\n"), std::string::npos) << r.out << read_file(dir + "/log");
  EXPECT_NE(normalized_save(b).find("10.96.10.10/32"), std::string::npos) << "the rules are kept";
  EXPECT_NE(read_file(dir + "/log").find("\"msg\":\"exiting: the watch stream ended\""), std::string::npos);
  EXPECT_NE(read_file(dir + "/log").find("watch stream ended"), std::string::npos);
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// The periodic drift check (issue 15 §2): behind the applier's back a kube-proxy rule is
// deleted (in a per-endpoint chain, which a partial sync without changes does not rewrite) and
// kube-proxy's PREROUTING jump removed, while a foreign rule is added. Within one syncPeriod the
// kernel is the full program again, the repair is counted once, and the foreign rule is still
// there; a second period finds no drift.
TEST(ApplierDrift, IptablesDriftRepairedWithinOneSyncPeriodForeignRulesUntouched) {
  NEED_NETNS();
  Netns a;
  add_foreign(a);
  Cluster c = make_cluster(81);
  for (uint64_t seed = 82; seed < 120; ++seed) {
    DiagSink d;
    auto p = compile_iptables(c.load(), Backend::IPTables, {}, d);
    if (p && p->text.find(":KUBE-SEP-") != std::string::npos) break;
    c = make_cluster(seed);
  }
  const std::string want = expected_iptables(c.load());
  in_netns(a, [&] {
    applier::KernelTools tools;
    tools.flavor = verifier::Flavor::Legacy;
    applier::KernelDataplane dp(tools);
    applier::FakeClock clock;
    applier::LoopOptions o;
    o.families = {IPFamily::V4};
    o.sync_period_ms = 2000;
    std::vector<std::string> logs;
    applier::SyncLoop loop(o, clock, dp, [&](const std::string& l) { logs.push_back(l); });
    loop.replace_all(c.load());
    auto r = loop.tick();
    ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "");
    ASSERT_EQ(normalized_save(a), want);
    // No drift yet: a period passes, the check runs and repairs nothing.
    clock.advance_ms(2000);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok);
    EXPECT_TRUE(r->families[0].drift_checked);
    EXPECT_FALSE(r->families[0].drift_repaired);
    EXPECT_EQ(loop.counters().drift_repairs, 0u);

    // Drift: a KUBE-SEP chain's DNAT rule and the PREROUTING jump go; a foreign rule comes.
    std::string sep;
    {
      size_t at = want.find("\n:KUBE-SEP-");
      ASSERT_NE(at, std::string::npos);
      sep = want.substr(at + 2, want.find(' ', at + 2) - at - 2);
    }
    auto run = [&](std::vector<std::string> argv) {
      std::string cmd;
      for (auto& x : argv) cmd += "'" + x + "' ";
      ASSERT_EQ(system(cmd.c_str()), 0) << cmd;
    };
    run({"iptables-legacy", "-t", "nat", "-F", sep});
    run({"iptables-legacy", "-t", "nat", "-D", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j",
         "KUBE-SERVICES"});
    run({"iptables-legacy", "-t", "nat", "-A", "PREROUTING", "-p", "udp", "--dport", "5353", "-j", "ACCEPT"});
    ASSERT_NE(normalized_save(a), want);

    clock.advance_ms(1999);
    EXPECT_FALSE(loop.tick().has_value());  // not yet due
    clock.advance_ms(1);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok) << r->families[0].error;
    EXPECT_TRUE(r->families[0].drift_repaired);
    EXPECT_EQ(loop.counters().drift_repairs, 1u);
    std::string now = normalized_save(a);
    const std::string foreign = "-A PREROUTING -p udp -m udp --dport 5353 -j ACCEPT\n";
    ASSERT_NE(now.find(foreign), std::string::npos) << "the foreign rule was touched:\n" << now;
    now.erase(now.find(foreign), foreign.size());
    EXPECT_EQ(now, want);
    bool logged = false;
    for (const auto& l : logs) logged |= l.find("\"msg\":\"drift repaired\"") != std::string::npos;
    EXPECT_TRUE(logged);

    // The next period: no drift, nothing counted.
    clock.advance_ms(2000);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok);
    EXPECT_TRUE(r->families[0].drift_checked);
    EXPECT_FALSE(r->families[0].drift_repaired);
    EXPECT_EQ(loop.counters().drift_repairs, 1u);
  });
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

std::string nft_table(const Netns& ns, const char* family) {
  auto r = ns.exec({"nft", "list", "table", family, "kube-proxy"});
  return r.exit_code == 0 ? r.out : "";
}

// The kube-proxy table of `a` equals, object by object, a fresh namespace's after the full
// transaction.
bool nft_equals_full(const Netns& a, const Snapshot& snap, IPFamily f, std::string* diffs) {
  namespace vn = verifier::nft;
  const char* fam = f == IPFamily::V4 ? "ip" : "ip6";
  Netns b;
  DiagSink d;
  auto full = compile_nftables(snap, f, {}, d);
  if (!full || b.exec({"nft", "-f", "-"}, full->text).exit_code != 0) return *diffs = "the full transaction", false;
  vn::NftState got, want;
  vn::NftError err;
  if (!vn::parse_listing(nft_table(a, fam), "a", &got, &err) || !vn::parse_listing(nft_table(b, fam), "b", &want, &err))
    return *diffs = err.to_string(), false;
  auto cmp = applier::compare_nft_tables(got, want, f == IPFamily::V4 ? vn::Family::Ip : vn::Family::Ip6, "kube-proxy");
  for (const auto& x : cmp.differences) *diffs += x + "\n";
  return cmp.verdict != applier::NftVerdict::NotEquivalent;
}

// The same in nftables mode: an endpoint chain flushed and a service-ips element deleted behind
// the applier's back, a foreign table's rule added; one syncPeriod later the kube-proxy table
// equals the full transaction's, one repair counted, the foreign table intact.
TEST(ApplierDrift, NftablesDriftRepairedWithinOneSyncPeriodForeignTableUntouched) {
  NEED_NETNS();
  Netns a;
  ASSERT_EQ(a.exec({"nft", "add", "table", "inet", "mine"}).exit_code, 0);
  ASSERT_EQ(a.exec({"nft", "add", "chain", "inet", "mine", "input", "{ type filter hook input priority 0 ; }"}).exit_code, 0);
  Cluster c = make_cluster(91);
  c.gen.config->mode = "nftables";
  c.write();
  for (uint64_t seed = 92; seed < 130; ++seed) {
    DiagSink d;
    auto p = compile_nftables(c.load(), IPFamily::V4, {}, d);
    if (p && p->text.find("add chain ip kube-proxy endpoint-") != std::string::npos) break;
    c = make_cluster(seed);
    c.gen.config->mode = "nftables";
    c.write();
  }
  in_netns(a, [&] {
    applier::KernelDataplane dp(applier::KernelTools{});
    applier::FakeClock clock;
    applier::LoopOptions o;
    o.mode = BackendKind::NFTables;
    o.families = {IPFamily::V4};
    o.sync_period_ms = 2000;
    applier::SyncLoop loop(o, clock, dp);
    loop.replace_all(c.load());
    auto r = loop.tick();
    ASSERT_TRUE(r && r->ok) << (r ? r->families[0].error : "");
    std::string diffs;
    ASSERT_TRUE(nft_equals_full(a, c.load(), IPFamily::V4, &diffs)) << diffs;
    // A Service goes: the partial sync leaves its chains, empty, for the deferred clean-up;
    // that is not drift.
    change(c.gen, 1), c.write();
    loop.replace_all(c.load());
    clock.advance_ms(2000);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok) << r->families[0].error;
    EXPECT_EQ(r->families[0].kind, "partial");
    EXPECT_TRUE(r->families[0].drift_checked);
    EXPECT_FALSE(r->families[0].drift_repaired) << r->families[0].drift;

    std::string table = nft_table(a, "ip");
    size_t at = table.find("chain endpoint-");
    ASSERT_NE(at, std::string::npos) << table;
    std::string chain = table.substr(at + 6, table.find(' ', at + 6) - at - 6);
    auto run = [&](const std::string& cmd) { ASSERT_EQ(system(cmd.c_str()), 0) << cmd; };
    run("nft flush chain ip kube-proxy '" + chain + "'");
    run("nft add rule inet mine input tcp dport 2222 drop");
    ASSERT_FALSE(nft_equals_full(a, c.load(), IPFamily::V4, &diffs));

    clock.advance_ms(2000);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok) << r->families[0].error;
    EXPECT_TRUE(r->families[0].drift_repaired);
    EXPECT_EQ(loop.counters().drift_repairs, 1u);
    diffs.clear();
    EXPECT_TRUE(nft_equals_full(a, c.load(), IPFamily::V4, &diffs)) << diffs;
    EXPECT_NE(a.exec({"nft", "list", "table", "inet", "mine"}).out.find("tcp dport 2222 drop"), std::string::npos);

    clock.advance_ms(2000);
    r = loop.tick();
    ASSERT_TRUE(r && r->ok);
    EXPECT_TRUE(r->families[0].drift_checked);
    EXPECT_FALSE(r->families[0].drift_repaired);
    EXPECT_EQ(loop.counters().drift_repairs, 1u);
  });
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// (b) in nftables mode: `kill -9` between two transactions of one sync (the wrapper lets the
// first `nft -f` through, then sleeps on the second: one family new, the other old), then a
// restart converges both families; the foreign table is untouched.
TEST(ApplierFaults, NftablesKill9BetweenTransactionsThenRestartConverges) {
  NEED_NETNS();
  Netns a;
  ASSERT_EQ(a.exec({"nft", "add", "table", "inet", "mine"}).exit_code, 0);
  ASSERT_EQ(a.exec({"nft", "add", "chain", "inet", "mine", "input", "{ type filter hook input priority 0 ; }"}).exit_code, 0);
  ASSERT_EQ(a.exec({"nft", "add", "rule", "inet", "mine", "input", "tcp", "dport", "2222", "drop"}).exit_code, 0);
  // A cluster with IPv6 endpoints: the second family's transaction then has work to do.
  Cluster c = make_cluster(101);
  for (uint64_t seed = 102; seed < 160; ++seed) {
    DiagSink d;
    auto p = compile_nftables(c.load(), IPFamily::V6, {}, d);
    if (p && p->text.find("add chain ip6 kube-proxy endpoint-") != std::string::npos) break;
    c = make_cluster(seed);
  }
  c.gen.config->mode = "nftables";
  c.write();
  std::string state = temp_dir("applier-nft-kill-state");
  std::vector<std::string> once{bin_path("kpc-applier"), "--watch", c.dir, "--once", "--state-dir", state};
  auto first = a.exec(once);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  for (auto& sl : c.gen.slices) sl.endpoints.clear();
  change(c.gen, 1);
  c.write();
  const Snapshot want = c.load();

  std::string dir = temp_dir("applier-nft-kill");
  std::string wrapper = dir + "/nft";
  write_file(wrapper, "#!/bin/sh\nif [ \"$1\" = -f ]; then\n  if [ -e " + dir + "/one ]; then echo $$ > " + dir +
                          "/wrapper.pid; cat >/dev/null; touch " + dir + "/started; exec sleep 60; fi\n  touch " + dir +
                          "/one\nfi\nexec nft \"$@\"\n");
  ASSERT_EQ(chmod(wrapper.c_str(), 0755), 0);
  std::string cmd = "echo $$ > " + dir + "/applier.pid; exec";
  for (auto& x : once) cmd += " '" + x + "'";
  cmd += " --nft '" + wrapper + "'";
  CommandResult killed;
  std::thread runner([&] { killed = a.exec({"sh", "-c", cmd}); });
  ASSERT_TRUE(wait_for_file(dir + "/started", 20000)) << "the wrapper never blocked";
  pid_t applier = read_pid(dir + "/applier.pid"), tool = read_pid(dir + "/wrapper.pid");
  ASSERT_GT(applier, 0);
  ASSERT_EQ(kill(applier, SIGKILL), 0);
  if (tool > 0) kill(tool, SIGKILL);
  runner.join();
  EXPECT_NE(killed.exit_code, 0);
  std::string d4, d6;
  EXPECT_FALSE(nft_equals_full(a, want, IPFamily::V4, &d4) && nft_equals_full(a, want, IPFamily::V6, &d6))
      << "the fault left nothing to repair";

  auto restarted = a.exec(once);
  ASSERT_EQ(restarted.exit_code, 0) << restarted.err;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    std::string diffs;
    EXPECT_TRUE(nft_equals_full(a, want, f, &diffs)) << diffs;
  }
  EXPECT_NE(a.exec({"nft", "list", "table", "inet", "mine"}).out.find("tcp dport 2222 drop"), std::string::npos);
}

}  // namespace
}  // namespace kpc::test
