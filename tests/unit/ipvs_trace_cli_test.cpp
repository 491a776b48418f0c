// `kpc trace` on an IPVS program set (issue 17 §3): a directory `kpc compile --backend ipvs -o`
// wrote (detected by its ipvs.rules), a snapshot with --backend ipvs; text and JSON ("backend":
// "ipvs"), the --expect-* assertions, persistence, exit codes 0/1/2 and located errors.
#include <gtest/gtest.h>

#include <set>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

const std::string kDir = "fixtures/example/expected/ipvs-ipv4";

std::vector<std::string> cart(const std::string& rules, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {bin_path("kpc"), "trace", rules,    "--src",  "10.244.1.50", "--dst", "10.96.30.30",
                                "--dport",       "9000",  "--from", "pod", "--in-iface",  "cbr0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(IpvsTraceCli, DirectoryDetectedThreeRealServersExactlyOneThird) {
  auto r = run(cart(source_path(kDir)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("backend: ipvs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 outcomes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("p = 1/3 ~ 0.3333333333  ACCEPT (ipvs-nat)  IPVS TCP 10.96.30.30:9000 -> 10.244.1.30:9000"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("-> 10.244.2.32:9000"), std::string::npos);
  EXPECT_NE(r.out.find("new client: a template for 10.244.1.50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ipvs     LOCAL_IN"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("total probability"), std::string::npos);
}

TEST(IpvsTraceCli, JsonDocument) {
  auto r = run(cart(source_path(kDir), {"--format", "json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "kpc.dev/trace/v1");
  EXPECT_EQ(j["backend"], "ipvs");
  ASSERT_EQ(j["outcomes"].size(), 3u);
  const auto& o = j["outcomes"][0];
  EXPECT_EQ(o["probability"]["fraction"], "1/3");
  EXPECT_EQ(o["probability"]["denominator"], "3");
  EXPECT_EQ(o["virtual_server"], "TCP 10.96.30.30:9000");
  EXPECT_EQ(o["route"], "ipvs-nat");
  bool ipvs_step = false;
  for (const auto& s : o["path"]) ipvs_step |= s["kind"] == "ipvs";
  EXPECT_TRUE(ipvs_step);
  EXPECT_EQ(j["total_probability"]["fraction"], "1");
  EXPECT_EQ(j["distribution"].size(), 3u);
}

TEST(IpvsTraceCli, ExpectationsAndRememberedClient) {
  auto r = run(cart(source_path(kDir), {"--expect-dnat", "10.244.1.30:9000", "--expect-dnat", "10.244.2.31:9000",
                                         "--expect-dnat", "10.244.2.32:9000",
                                         "--expect-verdict", "ACCEPT", "--expect-masquerade", "no"}));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run(cart(source_path(kDir), {"--expect-dnat", "10.244.1.30:9000"}));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("expectation not met"), std::string::npos) << r.err;
  r = run(cart(source_path(kDir), {"--affinity", "10.244.2.31:9000", "--expect-dnat", "10.244.2.31:9000"}));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 outcome"), std::string::npos) << r.out;
  // An external client of a node address: NodePort, masqueraded.
  r = run({bin_path("kpc"), "trace", source_path(kDir + "/ipvs.rules"), "--src", "203.0.113.9", "--dst",
           "192.168.0.10", "--dport", "30080", "--expect-masquerade", "yes", "--expect-dnat",
           "10.244.1.5:8080", "--expect-dnat", "10.244.2.6:8080"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(IpvsTraceCli, SnapshotCompiledWithTheIpvsBackEnd) {
  auto r = run(cart(source_path("fixtures/example"), {"--backend", "ipvs", "--format", "json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "ipvs");
  EXPECT_EQ(j["outcomes"].size(), 3u);
}

TEST(IpvsTraceCli, BadInputIsExit2Located) {
  std::string tmp = temp_dir("ipvs-trace-cli");
  for (const char* f : {"ipvs.rules", "ipset.rules", "iptables.rules", "node.plan"})
    write_file(tmp + "/" + f, read_file(source_path(kDir + "/" + f)));
  write_file(tmp + "/ipvs.rules", "-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r nope -m -w 1\n");
  auto r = run(cart(tmp));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(tmp + "/ipvs.rules:2: error:"), std::string::npos) << r.err;
  write_file(tmp + "/ipvs.rules", read_file(source_path(kDir + "/ipvs.rules")));
  write_file(tmp + "/node.plan", "ip addr add 10.96.0.10/32 dev eth0\n");
  r = run(cart(tmp));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(tmp + "/node.plan:1: error:"), std::string::npos) << r.err;
  std::filesystem::remove(tmp + "/ipset.rules");
  r = run(cart(tmp));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ipset.rules"), std::string::npos) << r.err;
  r = run(cart(source_path(kDir), {"--ipsets", "x"}));
  EXPECT_EQ(r.exit_code, 2);
  r = run(cart(source_path("fixtures/example/expected/iptables.restore"), {"--ipvs-shares", "weighted"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run({bin_path("kpc"), "trace", source_path(kDir), "--src", "fd00::1", "--dst", "fd00::2", "--dport", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

// kpc diff across back ends with the IPVS front end (verifier/ipvs_trace/cross_frontend.h): the
// example compiled with both; a new connection from a pod to a ClusterIP is the same in both modes,
// IPVS mode's documented differences are named (ipvs_known_differences), first packets only; the
// one that is not documented (loadBalancerSourceRanges from the node) keeps the exit code 1.
TEST(IpvsCrossDiffCli, FromIpvsToNftables) {
  auto r = run({bin_path("kpc"), "diff", source_path("fixtures/example"), "--from-backend", "ipvs", "--to-backend",
                "nftables", "--format", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::string all = r.out;
  EXPECT_NE(all.find("\"ipvs\""), std::string::npos);
  // The pod -> ClusterIP new connections agree (not among the differences).
  EXPECT_EQ(all.find("tcp 10.96.30.30:9000 from pod 10.244.255.250, new\""), std::string::npos) << all;
  EXPECT_EQ(all.find("tcp 10.96.10.10:80 from pod 10.244.255.250, new\""), std::string::npos) << all;
  // The hairpin masquerade: IPVS mode's KUBE-LOOP-BACK MASQUERADE has no --random-fully.
  EXPECT_NE(all.find("hairpin"), std::string::npos);
  std::set<std::string> ids;
  for (const auto& k : j["known_differences"]) ids.insert(k["id"].get<std::string>());
  for (const char* id : {"ipvs-loopback-masquerade", "ipvs-loopback-local-endpoints", "ipvs-no-short-circuit",
                         "ipvs-filter-other-port"})
    EXPECT_TRUE(ids.count(id)) << id << "\n" << all;
  EXPECT_EQ(j["undecided"], 0);
  EXPECT_NE(j["coverage"].get<std::string>().find("First packets only"), std::string::npos);
  EXPECT_EQ(j["surprises"], 1) << all;
  for (const auto& d : j["differences"])
    if (d["known"].empty()) EXPECT_EQ(d["packet"]["text"], "tcp 198.51.100.7:443 from node 192.168.0.10, new") << d.dump();
  // Against iptables mode: the same, plus iptables' own (localhost NodePorts, statistic shares).
  r = run({bin_path("kpc"), "diff", source_path("fixtures/example"), "--from-backend", "ipvs", "--to-backend",
           "iptables", "--format", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  j = nlohmann::json::parse(r.out);
  ids.clear();
  for (const auto& k : j["known_differences"]) ids.insert(k["id"].get<std::string>());
  EXPECT_TRUE(ids.count("ipvs-localhost-nodeports") && ids.count("ipvs-rr-shares")) << r.out;
  EXPECT_EQ(j["surprises"], 1) << r.out;
  // An IPVS program set directory as one side, a bad one is exit 2 located.
  r = run({bin_path("kpc"), "diff", source_path(kDir), source_path("fixtures/example/expected/nftables-ipv4.nft"),
           "--from-backend", "ipvs", "--to-backend", "nftables"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  std::string tmp = temp_dir("ipvs-cross-cli");
  for (const char* f : {"ipvs.rules", "ipset.rules", "iptables.rules", "node.plan"})
    write_file(tmp + "/" + f, read_file(source_path(kDir + "/" + f)));
  write_file(tmp + "/iptables.rules", "*nat\n-A NOPE -j ACCEPT\nCOMMIT\n");
  r = run({bin_path("kpc"), "diff", tmp, source_path("fixtures/example/expected/nftables-ipv4.nft"), "--from-backend",
           "ipvs", "--to-backend", "nftables"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(tmp + "/iptables.rules:2: error:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kpc::test
