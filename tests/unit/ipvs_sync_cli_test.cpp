// `kpc compile --backend ipvs --prior-state DIR -o OUT` (issue 17 §2) as a user runs it: the
// four files written (ipvs.rules and ipset.rules the change scripts, iptables.rules and
// node.plan whole), exit 0; a bad line in a prior file is exit 2 with its file and line, and
// nothing is written; a missing ipvs.save is exit 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

CommandResult compile(const fs::path& prior, const fs::path& out) {
  return run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "ipvs", "--prior-state",
              prior.string(), "-o", out.string(), "--stats"});
}

TEST(IpvsSyncCli, WritesTheChangeScripts) {
  fs::path dir = temp_dir("ipvs-sync-cli");
  fs::create_directories(dir / "node");
  // The example's first virtual server, with one endpoint gone (2 live connections) and a stale
  // virtual server; one ipset with a stale entry.
  write(dir / "node/ipvs.save",
        "-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
        "-a -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n-A -t 10.96.99.99:80 -s rr\n");
  write(dir / "node/ipvs.stats", "TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 2 0\n");
  write(dir / "node/ipset.save", "create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\n"
                                  "add KUBE-CLUSTER-IP 10.96.0.10,tcp:53\nadd KUBE-CLUSTER-IP 10.96.77.77,tcp:80\n");
  auto r = compile(dir / "node", dir / "out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string ipvs = slurp(dir / "out/ipvs.rules");
  EXPECT_NE(ipvs.find("-e -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w 0\n"), std::string::npos) << ipvs;
  EXPECT_NE(ipvs.find("-a -t 10.96.0.10:53 -r 10.244.2.2:53 -m -w 1\n"), std::string::npos) << ipvs;
  EXPECT_EQ(ipvs.find("-A -t 10.96.0.10:53"), std::string::npos) << ipvs;
  EXPECT_TRUE(ipvs.ends_with("-D -t 10.96.99.99:80\n")) << ipvs;
  std::string sets = slurp(dir / "out/ipset.rules");
  EXPECT_NE(sets.find("del KUBE-CLUSTER-IP 10.96.77.77,tcp:80\n"), std::string::npos) << sets;
  EXPECT_EQ(sets.find("add KUBE-CLUSTER-IP 10.96.0.10,tcp:53\n"), std::string::npos) << sets;
  EXPECT_NE(sets.find("create KUBE-LOOP-BACK"), std::string::npos) << sets;
  EXPECT_FALSE(slurp(dir / "out/iptables.rules").empty());
  EXPECT_FALSE(slurp(dir / "out/node.plan").empty());
  EXPECT_NE(r.err.find("ipvs sync: virtual servers added"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// With iptables.save, iptables.rules is the smallest repair of the companion chains: nothing
// for a node that has them, the one chain that lost a rule otherwise.
TEST(IpvsSyncCli, IptablesSaveGivesTheSmallestRepair) {
  fs::path dir = temp_dir("ipvs-sync-cli-ipt");
  fs::create_directories(dir / "node");
  auto full = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "ipvs", "-o",
                   (dir / "full").string()});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  std::string rules = slurp(dir / "full/iptables.rules");
  write(dir / "node/ipvs.save", "");
  write(dir / "node/iptables.save", rules);
  auto r = compile(dir / "node", dir / "out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(dir / "out/iptables.rules"), "");
  const std::string lost = "-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ\n";
  ASSERT_NE(rules.find(lost), std::string::npos);
  std::string drifted = rules;
  drifted.erase(drifted.find(lost), lost.size());
  write(dir / "node/iptables.save", drifted);
  r = compile(dir / "node", dir / "out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string repair = slurp(dir / "out/iptables.rules");
  EXPECT_NE(repair.find(":KUBE-LOAD-BALANCER - [0:0]\n"), std::string::npos) << repair;
  EXPECT_NE(repair.find(lost), std::string::npos) << repair;
  EXPECT_EQ(repair.find("KUBE-SERVICES"), std::string::npos) << repair;  // untouched chains left out
  write(dir / "node/iptables.save", "*nat\n-A NOPE -j ACCEPT\nCOMMIT\n");
  r = compile(dir / "node", dir / "out2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("iptables.save:2: error[E0900]"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(IpvsSyncCli, BadPriorFilesAreLocatedErrors) {
  fs::path dir = temp_dir("ipvs-sync-cli-bad");
  fs::create_directories(dir / "node");
  auto r = compile(dir / "node", dir / "out");  // no ipvs.save
  EXPECT_EQ(r.exit_code, 2);
  write(dir / "node/ipvs.save", "-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1 -z\n");
  r = compile(dir / "node", dir / "out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("node/ipvs.save:2: error[E0900]: option not modelled: -z"), std::string::npos) << r.err;
  write(dir / "node/ipvs.save", "-A -t 10.96.0.10:53 -s rr\n");
  write(dir / "node/ipset.save", "add KUBE-CLUSTER-IP 10.96.0.10,tcp:53\n");
  r = compile(dir / "node", dir / "out");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("node/ipset.save:1: error[E0900]"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kpc::test
