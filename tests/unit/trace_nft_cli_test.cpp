// `kpc trace` on nftables input (issue 16 §4): a knftables transaction, an `nft list ruleset`
// dump, a snapshot with --backend nftables; text and JSON, assertions, exit codes (0 traced,
// 1 an assertion not met, 2 bad input with a located error).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

const std::string kNft = "fixtures/example/expected/nftables-ipv4.nft";

std::vector<std::string> cart(std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {bin_path("kpc"), "trace", source_path(kNft), "--src", "10.244.1.5", "--dst",
                                "10.96.30.30", "--dport", "9000", "--from", "pod", "--in-iface", "cbr0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(TraceNftCli, TransactionDetectedThreeEndpointsExactlyOneThird) {
  auto r = run(cart());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 outcomes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p = 1/3 ~ 0.3333333333  ACCEPT (forward)  DNAT 10.244.1.30:9000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DNAT 10.244.2.31:9000"), std::string::npos);
  EXPECT_NE(r.out.find("DNAT 10.244.2.32:9000"), std::string::npos);
  EXPECT_NE(r.out.find("affinity: update @affinity-4CU2M367-shop/cart/tcp/__10.244.1.30/9000"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("service shop/cart"), std::string::npos);
  EXPECT_NE(r.out.find("ip kube-proxy prerouting nat-prerouting #1 jump services"), std::string::npos);
  EXPECT_EQ(r.out.find("total probability"), std::string::npos);
}

TEST(TraceNftCli, JsonAndRememberedClient) {
  auto r = run(cart({"--format", "json", "--affinity", "10.244.2.32:9000"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "kpc.dev/trace/v1");
  EXPECT_EQ(j["backend"], "nftables");
  ASSERT_EQ(j["outcomes"].size(), 1u);
  const auto& o = j["outcomes"][0];
  EXPECT_EQ(o["verdict"], "ACCEPT");
  EXPECT_EQ(o["dnat"], "10.244.2.32:9000");
  EXPECT_EQ(o["probability"]["fraction"], "1");
  EXPECT_EQ(o["path"][0]["table"], "ip kube-proxy");
  EXPECT_EQ(o["path"][0]["chain"], "filter-prerouting-pre-dnat");
  EXPECT_EQ(j["total_probability"]["fraction"], "1");
  // A new client: three branches of exactly 1/3 (denominator 3, not a power of two).
  r = run(cart({"--format", "json"}));
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["outcomes"].size(), 3u);
  EXPECT_EQ(j["outcomes"][0]["probability"]["fraction"], "1/3");
  EXPECT_EQ(j["outcomes"][0]["probability"]["denominator"], "3");
  EXPECT_TRUE(j["outcomes"][0]["probability"]["denominator_log2"].is_null());
}

TEST(TraceNftCli, KernelNumgenShares) {
  auto r = run(cart({"--numgen", "kernel"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("p = 715827883/2147483648 ~ 0.3333333335  ACCEPT (forward)  DNAT 10.244.1.30:9000"),
            std::string::npos)
      << r.out;
  // Not an iptables option.
  r = run({bin_path("kpc"), "trace", source_path("fixtures/example/expected/iptables.restore"), "--src", "10.244.1.5",
           "--dst", "10.96.30.30", "--dport", "9000", "--numgen", "kernel"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(TraceNftCli, AssertionsExitOneWhenNotMet) {
  auto ok = run(cart({"--expect-verdict", "ACCEPT", "--expect-masquerade", "no", "--expect-dnat", "10.244.1.30:9000",
                      "--expect-dnat", "10.244.2.31:9000", "--expect-dnat", "10.244.2.32:9000"}));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  auto bad = run(cart({"--expect-dnat", "10.244.1.30:9000"}));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("expectation not met: DNAT destinations"), std::string::npos) << bad.err;
  auto v = run(cart({"--expect-verdict", "DROP"}));
  EXPECT_EQ(v.exit_code, 1);
}

TEST(TraceNftCli, ListingAndSnapshotWithBackend) {
  // An `nft list ruleset` dump of the same node (the model's printer): the same answer.
  std::string dir = temp_dir("trace-nft");
  auto sim = run({bin_path("kpc"), "simulate", "--backend", "nftables", source_path(kNft)});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  ASSERT_NE(sim.out.find("table ip kube-proxy {"), std::string::npos) << sim.out;
  write_file(dir + "/ruleset.nft", sim.out);
  auto r = run({bin_path("kpc"), "trace", dir + "/ruleset.nft", "--src", "10.244.1.5", "--dst", "10.96.30.30",
                "--dport", "9000", "--from", "pod", "--in-iface", "cbr0", "--expect-dnat", "10.244.1.30:9000",
                "--expect-dnat", "10.244.2.31:9000", "--expect-dnat", "10.244.2.32:9000"});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("p = 1/3"), std::string::npos) << r.out;
  // A snapshot compiled with the nftables back end first.
  r = run({bin_path("kpc"), "trace", source_path("fixtures/example"), "--backend", "nftables", "--src", "10.244.1.5",
           "--dst", "10.96.30.30", "--dport", "9000", "--from", "pod", "--in-iface", "cbr0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("compiled the snapshot with the nftables back end"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p = 1/3 ~ 0.3333333333  ACCEPT (forward)  DNAT 10.244.1.30:9000"), std::string::npos) << r.out;
  // The same snapshot traced as iptables (the default) keeps the statistic's dyadic shares.
  r = run({bin_path("kpc"), "trace", source_path("fixtures/example"), "--src", "10.244.1.5", "--dst", "10.96.30.30",
           "--dport", "9000", "--from", "pod", "--in-iface", "cbr0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("p = 715827883/2147483648"), std::string::npos) << r.out;
}

TEST(TraceNftCli, SnapshotInNftablesModeIsTracedAsNftables) {
  // Without --backend, the snapshot's KubeProxyConfiguration.mode decides, as on a node.
  std::string dir = temp_dir("trace-nft-mode");
  for (const char* f : {"endpointslices.json", "nodes.yaml", "services.yaml"})
    write_file(dir + "/" + f, read_file(source_path(std::string("fixtures/example/") + f)));
  std::string conf = read_file(source_path("fixtures/example/kube-proxy.yaml"));
  size_t p = conf.find("mode: iptables");
  ASSERT_NE(p, std::string::npos);
  conf.replace(p, 14, "mode: nftables");
  write_file(dir + "/kube-proxy.yaml", conf);
  auto r = run({bin_path("kpc"), "trace", dir, "--src", "10.244.1.5", "--dst", "10.96.30.30", "--dport", "9000",
                "--from", "pod", "--in-iface", "cbr0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("compiled the snapshot with the nftables back end"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p = 1/3"), std::string::npos) << r.out;
}

TEST(TraceNftCli, BadFileIsALocatedErrorExitTwo) {
  std::string dir = temp_dir("trace-nft-bad");
  write_file(dir + "/bad.nft", "add table ip t\nadd rule ip t missing accept\n");
  auto r = run({bin_path("kpc"), "trace", dir + "/bad.nft", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--dport", "80"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("bad.nft:2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Error:"), std::string::npos) << r.err;
  // Options for iptables rules are errors with nft input, not ignored.
  r = run({bin_path("kpc"), "trace", source_path(kNft), "--src", "1.2.3.4", "--dst", "5.6.7.8", "--dport", "80",
           "--kube-proxy-test"});
  EXPECT_EQ(r.exit_code, 2);
  r = run({bin_path("kpc"), "trace", source_path(kNft), "--src", "1.2.3.4", "--dst", "5.6.7.8", "--dport", "80",
           "--ctmark", "1"});
  EXPECT_EQ(r.exit_code, 2);
  r = run({bin_path("kpc"), "trace", source_path(kNft), "--src", "1.2.3.4", "--dst", "5.6.7.8", "--dport", "80",
           "--in-bridge-port", "veth1"});
  EXPECT_EQ(r.exit_code, 2);
  r = run({bin_path("kpc"), "trace", source_path(kNft), "--src", "fd00::1", "--dst", "5.6.7.8", "--dport", "80"});
  EXPECT_EQ(r.exit_code, 2);
  // --backend iptables forces the iptables reader: nft text is then not a rule file.
  r = run({bin_path("kpc"), "trace", source_path(kNft), "--backend", "iptables", "--src", "1.2.3.4", "--dst",
           "5.6.7.8", "--dport", "80"});
  EXPECT_EQ(r.exit_code, 2);
}

// A statement the model reads and the tracer does not evaluate (`ct mark`): Unknown. (One the
// model does not read, `ct helper set "ftp"`, is never applied: exit 2, tests/unit/nft_refuse_cli_test.cpp.)
TEST(TraceNftCli, UnknownStatementReportedExitZeroButFailsAssertions) {
  std::string dir = temp_dir("trace-nft-unknown");
  write_file(dir + "/u.nft",
             "add table ip t\nadd chain ip t f { type filter hook forward priority 0 ; }\n"
             "add rule ip t f ip daddr 5.6.7.8 ct mark 0x5 accept\n");
  auto r = run({bin_path("kpc"), "trace", dir + "/u.nft", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--dport", "21",
                "--out-iface", "eth1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("UNKNOWN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("statement not modelled: ct mark 0x00000005 accept"), std::string::npos) << r.out;
  r = run({bin_path("kpc"), "trace", dir + "/u.nft", "--src", "1.2.3.4", "--dst", "5.6.7.8", "--dport", "21",
           "--expect-verdict", "ACCEPT"});
  EXPECT_EQ(r.exit_code, 1);
}

}  // namespace
}  // namespace kpc::test
