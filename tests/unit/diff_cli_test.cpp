// `kpc diff` and `kpc verify`'s packet level through the CLI: exit codes (0
// equivalent, 1 differences, 2 error), snapshots vs rule files, reports by
// service with witnesses, JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

const char* kRules = R"(*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-1 - [0:0]
:KUBE-SEP-2 - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "ns/a:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.1.0.1:80" -m statistic --mode random --probability 0.5 -j KUBE-SEP-1
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.1.0.2:80" -j KUBE-SEP-2
-A KUBE-SEP-1 -p tcp -m comment --comment "ns/a:http" -m tcp -j DNAT --to-destination 10.1.0.1:80
-A KUBE-SEP-2 -p tcp -m comment --comment "ns/a:http" -m tcp -j DNAT --to-destination 10.1.0.2:80
COMMIT
)";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

TEST(DiffCli, RenamedChainsAreEquivalent) {
  std::string dir = temp_dir("diff");
  write_file(dir + "/a.restore", kRules);
  write_file(dir + "/b.restore", replace(replace(kRules, "KUBE-SEP-1", "KUBE-SEP-X"), "KUBE-SVC-A", "KUBE-SVC-Z"));
  auto r = run({bin_path("kpc"), "diff", dir + "/a.restore", dir + "/b.restore"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("equivalent"), std::string::npos) << r.out;
}

TEST(DiffCli, RetargetedEndpointIsReportedWithWitnessAndService) {
  std::string dir = temp_dir("diff");
  write_file(dir + "/a.restore", kRules);
  write_file(dir + "/b.restore", replace(kRules, "--to-destination 10.1.0.2:80", "--to-destination 10.1.0.3:80"));
  auto r = run({bin_path("kpc"), "diff", dir + "/a.restore", dir + "/b.restore"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("ns/a:http"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("witness: tcp "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> 10.96.0.1:80"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("old: p=50.0% (1/2) ACCEPT(forward) DNAT 10.1.0.2:80"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("new: p=50.0% (1/2) ACCEPT(forward) DNAT 10.1.0.3:80"), std::string::npos) << r.out;
  auto j = run({bin_path("kpc"), "diff", "--format", "json", dir + "/a.restore", dir + "/b.restore"});
  EXPECT_EQ(j.exit_code, 1);
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_FALSE(doc["equivalent"].get<bool>());
  ASSERT_EQ(doc["services"].size(), 1u);
  EXPECT_EQ(doc["services"][0]["service"], "ns/a:http");
  EXPECT_EQ(doc["services"][0]["differences"][0]["witness"]["dst"], "10.96.0.1");
  EXPECT_EQ(doc["services"][0]["differences"][0]["witness"]["dport"], 80);
}

TEST(DiffCli, ShuffledDisjointRulesAreEquivalentButSwappedLoadBalancingIsNot) {
  std::string dir = temp_dir("diff");
  std::string two = replace(kRules, "-A KUBE-SVC-A -m comment --comment \"ns/a:http -> 10.1.0.1:80\"",
                            "-A KUBE-SERVICES -d 10.96.0.2/32 -p udp -m udp --dport 53 -j KUBE-SEP-2\n"
                            "-A KUBE-SVC-A -m comment --comment \"ns/a:http -> 10.1.0.1:80\"");
  write_file(dir + "/a.restore", two);
  // The two KUBE-SERVICES rules match disjoint traffic: their order does not matter.
  std::string shuffled = replace(two, "-A KUBE-SERVICES -d 10.96.0.2/32 -p udp -m udp --dport 53 -j KUBE-SEP-2\n", "");
  shuffled = replace(shuffled, "-A PREROUTING -j KUBE-SERVICES\n",
                     "-A PREROUTING -j KUBE-SERVICES\n-A KUBE-SERVICES -d 10.96.0.2/32 -p udp -m udp --dport 53 -j KUBE-SEP-2\n");
  write_file(dir + "/b.restore", shuffled);
  auto r = run({bin_path("kpc"), "diff", dir + "/a.restore", dir + "/b.restore"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // Swapping the two load-balancing rules changes the split (the first gets 1/2, the second the rest).
  std::string lb1 = "-A KUBE-SVC-A -m comment --comment \"ns/a:http -> 10.1.0.1:80\" -m statistic --mode random --probability 0.5 -j KUBE-SEP-1\n";
  std::string lb2 = "-A KUBE-SVC-A -m comment --comment \"ns/a:http -> 10.1.0.2:80\" -j KUBE-SEP-2\n";
  write_file(dir + "/c.restore", replace(kRules, lb1 + lb2, lb2 + lb1));
  write_file(dir + "/a1.restore", kRules);
  r = run({bin_path("kpc"), "diff", dir + "/a1.restore", dir + "/c.restore"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("new: p=1 ACCEPT(forward) DNAT 10.1.0.2:80"), std::string::npos) << r.out;
}

TEST(DiffCli, SnapshotsAreCompiledFirst) {
  std::string ex = source_path("fixtures/example");
  auto r = run({bin_path("kpc"), "diff", ex, ex});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string dir = temp_dir("diff");
  auto c = run({bin_path("kpc"), "compile", ex, "-o", dir + "/full.restore"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  r = run({bin_path("kpc"), "diff", ex, dir + "/full.restore"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(DiffCli, BadInputExitsTwo) {
  std::string dir = temp_dir("diff");
  write_file(dir + "/a.restore", kRules);
  EXPECT_EQ(run({bin_path("kpc"), "diff", dir + "/a.restore", dir + "/missing.restore"}).exit_code, 2);
  write_file(dir + "/bad.restore", "*nat\n-A NOPE -j ACCEPT\nCOMMIT\n");
  EXPECT_EQ(run({bin_path("kpc"), "diff", dir + "/a.restore", dir + "/bad.restore"}).exit_code, 2);
  EXPECT_EQ(run({bin_path("kpc"), "diff", "--local-address", "nope", dir + "/a.restore", dir + "/a.restore"}).exit_code,
            2);
}

TEST(VerifyCli, NotEquivalentPartialGetsAWitness) {
  std::string dir = temp_dir("verify");
  write_file(dir + "/prior.restore", kRules);
  write_file(dir + "/full.restore", replace(kRules, "10.1.0.2:80", "10.1.0.3:80"));
  // The partial rewrites the endpoint chain with the wrong destination.
  write_file(dir + "/partial.restore",
             "*nat\n:KUBE-SEP-2 - [0:0]\n-A KUBE-SEP-2 -p tcp -m tcp -j DNAT --to-destination 10.1.0.4:80\nCOMMIT\n");
  auto r = run({bin_path("kpc"), "verify", "--state", dir + "/prior.restore", "--partial", dir + "/partial.restore",
                "--full", dir + "/full.restore"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: not equivalent"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("witness: tcp "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("partial: p=50.0% (1/2) ACCEPT(forward) DNAT 10.1.0.4:80"), std::string::npos) << r.out;
  // A partial that differs only in a comment: equivalent (exit 0 with --allow-equivalent).
  write_file(dir + "/partial2.restore", "*nat\n:KUBE-SEP-2 - [0:0]\n-A KUBE-SEP-2 -p tcp -m comment --comment x -m tcp "
                                        "-j DNAT --to-destination 10.1.0.3:80\nCOMMIT\n");
  r = run({bin_path("kpc"), "verify", "--state", dir + "/prior.restore", "--partial", dir + "/partial2.restore",
           "--full", dir + "/full.restore", "--allow-equivalent"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: equivalent"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kpc::test
