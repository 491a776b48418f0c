// `kpc trace`: text and JSON output, kube-proxy test mode, exit codes (0 traced, 2 bad input).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

const std::string kExample = "fixtures/example/expected/iptables.restore";

TEST(TraceCli, ThreeEndpointsTextShowsExactRealisedDistribution) {
  auto r = run({bin_path("kpc"), "trace", source_path(kExample), "--src", "10.244.1.5", "--dst", "10.96.30.30",
                "--dport", "9000", "--from", "pod", "--in-iface", "cbr0", "--local-address", "192.168.0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 outcomes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p = 715827883/2147483648 ~ 0.3333333335  ACCEPT (forward)  DNAT 10.244.1.30:9000"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("p = 1431655765/4294967296 ~ 0.3333333333  ACCEPT (forward)  DNAT 10.244.2.31:9000"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("DNAT 10.244.2.32:9000"), std::string::npos);
  EXPECT_NE(r.out.find("service shop/cart"), std::string::npos);
  EXPECT_NE(r.out.find("nat      KUBE-SERVICES"), std::string::npos);
  EXPECT_EQ(r.out.find("total probability"), std::string::npos);  // sums to 1
}

TEST(TraceCli, JsonOutputAndAffinity) {
  auto r =
      run({bin_path("kpc"), "trace", source_path(kExample), "--src", "10.244.1.5", "--dst", "10.96.30.30", "--dport",
           "9000", "--from", "pod", "--in-iface", "cbr0", "--format", "json", "--affinity", "10.244.2.32:9000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["outcomes"].size(), 1u);
  const auto& o = j["outcomes"][0];
  EXPECT_EQ(o["verdict"], "ACCEPT");
  EXPECT_EQ(o["dnat"], "10.244.2.32:9000");
  EXPECT_EQ(o["probability"]["fraction"], "1");
  EXPECT_EQ(o["probability"]["decimal"], "1.0000000000");
  EXPECT_EQ(o["masquerade"], false);
  ASSERT_FALSE(o["path"].empty());
  EXPECT_EQ(o["path"][0]["table"], "nat");
  EXPECT_EQ(o["path"][0]["chain"], "PREROUTING");
  EXPECT_EQ(o["services"][0], "shop/cart");
  EXPECT_EQ(j["packet"]["from"], "pod");
  EXPECT_EQ(j["total_probability"]["fraction"], "1");
}

TEST(TraceCli, KubeProxyTestMode) {
  auto r = run({bin_path("kpc"), "trace", source_path("fixtures/kp-load-balancer/expected/iptables.restore"),
                "--kube-proxy-test", "--src", "10.0.0.2", "--dst", "1.2.3.4", "--dport", "80", "--local-address",
                "192.168.0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("output: DROP\nmasq: false\n", 0), 0u) << r.out;
}

TEST(TraceCli, UnknownOutcomeIsReportedNotGuessed) {
  std::string dir = temp_dir("trace");
  write_file(dir + "/p.restore",
             "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m set --match-set BLOCK src -j DROP\nCOMMIT\n");
  auto r = run({bin_path("kpc"), "trace", dir + "/p.restore", "--src", "10.0.0.2", "--dst", "10.1.0.1", "--dport", "80",
                "--jumps", "no"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("UNKNOWN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown: ipset \"BLOCK\" contents not known"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#1 -A FORWARD -m set --match-set BLOCK src -j DROP"), std::string::npos) << r.out;
  // --verbose: one line per rule of the path, at full width.
  auto v = run({bin_path("kpc"), "trace", dir + "/p.restore", "--src", "10.0.0.2", "--dst", "10.1.0.1", "--dport", "80",
                "--jumps", "no", "--verbose"});
  EXPECT_NE(v.out.find("#1 -A FORWARD -m set --match-set BLOCK src -j DROP   [unknown]"), std::string::npos) << v.out;
}

TEST(TraceCli, BadInputExitsTwo) {
  std::string dir = temp_dir("trace");
  write_file(dir + "/bad.restore", "*filter\n-A NOPE -j ACCEPT\nCOMMIT\n");
  write_file(dir + "/syntax.restore", "*filter\n-A INPUT --bogus\nCOMMIT\n");
  std::string ex = source_path(kExample);
  std::vector<std::vector<std::string>> cases = {
      {"trace", dir + "/missing.restore", "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80"},
      {"trace", dir + "/bad.restore", "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80"},
      {"trace", dir + "/syntax.restore", "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80"},
      {"trace", ex, "--src", "10.0.0.x", "--dst", "10.0.0.2", "--dport", "80"},
      {"trace", ex, "--src", "fd00::1", "--dst", "fd00::2", "--dport", "80"},  // IPv6 on iptables
      {"trace", ex, "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "70000"},
      {"trace", ex, "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80", "--proto", "icmp"},
      {"trace", ex, "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80", "--mark", "zz"},
      {"trace", ex, "--src", "10.0.0.1", "--dst", "10.0.0.2", "--dport", "80", "--affinity", "10.9.9.9:1"},
      {"trace", ex, "--src", "10.0.0.1", "--dst", "10.0.0.2"},  // no --dport
  };
  for (auto args : cases) {
    args.insert(args.begin(), bin_path("kpc"));
    auto r = run(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.out << r.err;
  }
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Issue 12, part 3: the node's addresses come from where they can be known, and the
// output says which were taken as local and why.
TEST(TraceCli, LocalAddressesComeFromTheSnapshotOrTheRulesAndAreExplained) {
  // A snapshot is compiled first; its Node's address makes a NodePort local.
  auto snap = run({bin_path("kpc"), "trace", source_path("fixtures/example"), "--src", "203.0.113.7", "--dst",
                   "192.168.0.10", "--dport", "30080"});
  EXPECT_EQ(snap.exit_code, 0) << snap.err;
  EXPECT_NE(snap.out.find("note: local address 192.168.0.10: the snapshot's Node"), std::string::npos) << snap.out;
  EXPECT_NE(snap.out.find("DNAT 10.244.1.5:8080"), std::string::npos) << snap.out;
  // The same rules as a file, without --local-address: nothing names the node's address,
  // and the output says so instead of silently forwarding.
  auto bare = run({bin_path("kpc"), "trace", source_path("fixtures/example/expected/iptables.restore"), "--src",
                   "203.0.113.7", "--dst", "192.168.0.10", "--dport", "30080"});
  EXPECT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_NE(bare.out.find("no node address known"), std::string::npos) << bare.out;
  // kube-proxy's nodePortAddresses rules name the node's addresses: taken, with the reason.
  std::string fixture = "fixtures/kp-node-ports-ipv4-localhost-nodeports-enabled-multiple-nodeport-addresses";
  auto npa = run({bin_path("kpc"), "trace", source_path(fixture + "/expected/iptables.restore"), "--src",
                  "203.0.113.7", "--dst", "192.168.1.2", "--dport", "3001"});
  EXPECT_EQ(npa.exit_code, 0) << npa.err;
  EXPECT_NE(npa.out.find("note: local address 192.168.1.2: nat KUBE-SERVICES sends NodePorts to it"), std::string::npos)
      << npa.out;
  EXPECT_NE(npa.out.find("DNAT "), std::string::npos) << npa.out;
  // Given addresses win, and are not explained away.
  auto given = run({bin_path("kpc"), "trace", source_path(fixture + "/expected/iptables.restore"), "--src",
                    "203.0.113.7", "--dst", "192.168.1.2", "--dport", "3001", "--local-address", "192.168.0.2"});
  EXPECT_EQ(given.out.find("note: local address"), std::string::npos) << given.out;
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// Issue 13, section 5: kpc trace assertions for packet-flow tests in CI.
TEST(TraceCli, ExpectationsExitOneWhenNotMet) {
  std::vector<std::string> base = {bin_path("kpc"), "trace", source_path("fixtures/example"), "--src", "10.244.1.50",
                                   "--dst", "10.96.10.10", "--dport", "80", "--from", "pod", "--in-iface", "cbr0"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
  };
  EXPECT_EQ(with({"--expect-dnat", "10.244.1.5:8080", "--expect-dnat", "10.244.2.6:8080", "--expect-verdict", "ACCEPT",
                  "--expect-masquerade", "no"})
                .exit_code,
            0);
  auto one = with({"--expect-dnat", "10.244.1.5:8080"});  // the set must be exact
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_NE(one.err.find("expectation not met: DNAT destinations"), std::string::npos) << one.err;
  EXPECT_EQ(with({"--expect-verdict", "DROP"}).exit_code, 1);
  EXPECT_EQ(with({"--expect-masquerade", "yes"}).exit_code, 1);
  EXPECT_EQ(with({"--expect-verdict", "MAYBE"}).exit_code, 2);  // a bad value is a usage error
  // An outcome the model cannot decide never meets an expectation.
  std::string dir = temp_dir("expect");
  write_file(dir + "/set.restore", "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m set --match-set X src -j DROP\n"
                                   "COMMIT\n");
  auto unknown = run({bin_path("kpc"), "trace", dir + "/set.restore", "--src", "10.0.0.1", "--dst", "10.0.0.2",
                      "--dport", "80", "--expect-verdict", "ACCEPT"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.err;
  EXPECT_NE(unknown.err.find("an outcome is unknown"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace kpc::test
