// `kpc drift` through the CLI (issue 12, part 4): exit codes (0 no drift, 1 drift,
// 2 error), the report in text, JSON and Markdown, -o with the repair, foreign rules
// ignored, and `kpc compile --prior-state` putting a missing jump back too. The node
// states are built with `kpc simulate` (the restore model); tests/kernel/
// drift_kernel_test.cpp does the same against the real kernel.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

const char* kJumps =
    "*filter\n"
    "-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES\n"
    "-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES\n"
    "-I INPUT 1 -m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS\n"
    "-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
    "-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
    "-I FORWARD 1 -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n"
    "-I INPUT 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL\n"
    "-I OUTPUT 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL\n"
    "-I FORWARD 1 -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL\n"
    "-I INPUT 1 -j KUBE-FIREWALL\n-I OUTPUT 1 -j KUBE-FIREWALL\nCOMMIT\n"
    "*nat\n"
    "-I OUTPUT 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
    "-I PREROUTING 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
    "-I POSTROUTING 1 -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\nCOMMIT\n";

const char* kForeign =
    "*nat\n:DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n"
    "-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\nCOMMIT\n"
    "*filter\n:MINE - [0:0]\n-A FORWARD -o docker0 -j ACCEPT\n-A MINE -j RETURN\nCOMMIT\n";

// The example node as kube-proxy leaves it, plus foreign rules, then `extra` applied.
std::string node_save(const std::string& dir, const std::string& extra = "") {
  auto c = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "-o", dir + "/full.restore"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  write_file(dir + "/jumps.restore", kJumps);
  write_file(dir + "/foreign.restore", kForeign);
  write_file(dir + "/extra.restore", extra.empty() ? "*filter\nCOMMIT\n" : extra);
  auto s = run({bin_path("kpc"), "simulate", "--noflush", dir + "/full.restore", dir + "/jumps.restore",
                dir + "/foreign.restore", dir + "/extra.restore"});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  write_file(dir + "/node.save", s.out);
  return dir + "/node.save";
}

TEST(DriftCli, ACleanNodeWithForeignRulesHasNoDrift) {
  std::string dir = temp_dir("drift");
  std::string save = node_save(dir);
  auto r = run({bin_path("kpc"), "drift", source_path("fixtures/example"), "--state", save, "-o", dir + "/repair"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("no drift"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(dir + "/repair"), "");
}

TEST(DriftCli, AMissingJumpIsDriftWithServicesAndARepair) {
  std::string dir = temp_dir("drift");
  std::string save = node_save(dir, "*nat\n-D PREROUTING -m comment --comment \"kubernetes service portals\" -j "
                                    "KUBE-SERVICES\nCOMMIT\n");
  auto r = run({bin_path("kpc"), "drift", source_path("fixtures/example"), "--state", save, "-o", dir + "/repair"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("1 jump rules missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shop/web:http"), std::string::npos) << r.out;  // a Service that is broken, in words
  EXPECT_EQ(read_file(dir + "/repair"),
            "*nat\n-I PREROUTING 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n");
  auto j = run({bin_path("kpc"), "drift", source_path("fixtures/example"), "--state", save, "--format", "json"});
  ASSERT_EQ(j.exit_code, 1) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["schema"], "kpc.dev/drift/v1");
  EXPECT_TRUE(doc["drift"].get<bool>());
  ASSERT_EQ(doc["missing_jumps"].size(), 1u);
  EXPECT_EQ(doc["missing_jumps"][0]["chain"], "PREROUTING");
  EXPECT_EQ(doc["chains"].size(), 0u);  // the foreign DOCKER and MINE chains are not kube-proxy's
  EXPECT_GT(doc["packets"]["differing_classes"].get<int>(), 0);
  auto m = run({bin_path("kpc"), "drift", source_path("fixtures/example"), "--state", save, "--format", "markdown"});
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_NE(m.out.find("| Service | classes |"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("<details>"), std::string::npos) << m.out;
  // --prior-state on the same dump puts the jump back as well (it used to report nothing).
  auto c = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--prior-state", save, "--stats"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("-I PREROUTING 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"),
            std::string::npos)
      << c.out;
  EXPECT_NE(c.err.find("jumps restored: 1"), std::string::npos) << c.err;
}

TEST(DriftCli, EditedRulesAndStaleChainsAreListedByChain) {
  std::string dir = temp_dir("drift");
  std::string full = run({bin_path("kpc"), "compile", source_path("fixtures/example")}).out;
  size_t p = full.find("\n-A KUBE-SVC-");
  std::string line = full.substr(p + 1, full.find('\n', p + 1) - p - 1);
  std::string chain = line.substr(3, line.find(' ', 3) - 3);
  std::string save = node_save(dir, "*nat\n-D " + line.substr(3) + "\n-A " + chain +
                                        " -j RETURN\n:KUBE-SEP-STALESTALESTALE - [0:0]\nCOMMIT\n");
  auto j = run({bin_path("kpc"), "drift", source_path("fixtures/example"), "--state", save, "--format", "json"});
  ASSERT_EQ(j.exit_code, 1) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["chains"].size(), 2u) << j.out;
  EXPECT_EQ(doc["chains"][0]["kind"], "stale");
  EXPECT_EQ(doc["chains"][0]["chain"], "KUBE-SEP-STALESTALESTALE");
  EXPECT_EQ(doc["chains"][1]["kind"], "changed");
  EXPECT_EQ(doc["chains"][1]["chain"], chain);
  EXPECT_EQ(doc["chains"][1]["extra_rules"][0], "-A " + chain + " -j RETURN");
  EXPECT_EQ(doc["repair"]["chains_deleted"], 1);
}

TEST(DriftCli, BadInputExitsTwo) {
  std::string dir = temp_dir("drift");
  write_file(dir + "/bad.save", "*nat\n-A NOPE -j ACCEPT\nCOMMIT\n");
  auto r = run({bin_path("kpc"), "drift", source_path("fixtures/example"), "--state", dir + "/bad.save"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  auto m = run({bin_path("kpc"), "drift", source_path("fixtures/example"), "--state", dir + "/missing.save"});
  EXPECT_EQ(m.exit_code, 2);
  auto f = run({bin_path("kpc"), "drift", source_path("fixtures/example")});  // --state is required
  EXPECT_EQ(f.exit_code, 2);
}

}  // namespace
}  // namespace kpc::test
