// `kpc ipvs drain-plan SNAPSHOT --prior-state DIR` (issue 17 §2) as a user runs it, on the
// example cluster and a node that still has a removed DNS endpoint (10.244.9.9) under both the
// TCP and the UDP virtual server: each seed case's warning for its kernel and conn_reuse_mode,
// exit 1 while something drains, 0 when nothing does, 2 with a located error and nothing on
// stdout for a bad prior file or option (with --format json: the kpc.dev/error/v1 document).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

struct Node {
  fs::path dir = temp_dir("ipvs-drain-cli");
  Node(const std::string& save, const std::string& stats) {
    fs::create_directories(dir);
    write(dir / "ipvs.save", save);
    if (!stats.empty()) write(dir / "ipvs.stats", stats);
  }
  ~Node() { fs::remove_all(dir); }
};

const std::string kSave =
    "-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
    "-a -t 10.96.0.10:53 -r 10.244.2.2:53 -m -w 1\n-a -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n"
    "-A -u 10.96.0.10:53 -s rr\n-a -u 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
    "-a -u 10.96.0.10:53 -r 10.244.2.2:53 -m -w 1\n-a -u 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n";
const std::string kStats = "TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 4 1\n"
                           "UDP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 0 3\n";

CommandResult plan(const Node& n, std::vector<std::string> extra) {
  std::vector<std::string> argv = {bin_path("kpc"), "ipvs", "drain-plan", source_path("fixtures/example"),
                                   "--prior-state", n.dir.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run(argv);
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(IpvsDrainPlanCli, KernelsAndConnReuseModes) {
  Node n(kSave, kStats);
  struct Case {
    std::vector<std::string> args;
    const char* warning;  ///< the TCP warning expected, "" none
  } cases[] = {
      {{"--kernel-version", "4.19.0-25-amd64"}, "reused_port_to_draining_server"},  // kube-proxy sets mode 0
      {{"--kernel-version", "4.19.0-25-amd64", "--sysctl", "net.ipv4.vs.conn_reuse_mode=1"}, "syn_dropped_1s"},
      {{"--kernel-version", "5.10.0"}, ""},
      {{"--kernel-version", "5.10.0", "--sysctl", "net.ipv4.vs.conn_reuse_mode=0"}, "reused_port_to_draining_server"},
      {{}, ""},  // the example's kernel 6.1
      {{"--sysctl", "net.ipv4.vs.conn_reuse_mode=0"}, "reused_port_to_draining_server"},
  };
  for (const auto& c : cases) {
    auto r = plan(n, c.args);
    std::string what = ::testing::PrintToString(c.args) + "\n" + r.out + r.err;
    EXPECT_EQ(r.exit_code, 1) << what;  // 10.244.9.9 drains
    EXPECT_TRUE(has(r.out, "kube-system/kube-dns:dns-tcp (ClusterIP), virtual server TCP 10.96.0.10:53")) << what;
    EXPECT_TRUE(has(r.out, "10.244.9.9:53  weight 1  draining  active 4 inactive 1")) << what;
    EXPECT_TRUE(has(r.out, "10.244.9.9:53  weight 1  deleted_at_once  active 0 inactive 3")) << what;
    for (const char* k : {"reused_port_to_draining_server", "syn_dropped_1s"})
      EXPECT_EQ(has(r.out, std::string("warning[") + k + "]"), std::string(c.warning) == k) << what;
    // The UDP server is deleted with 3 flows: they expire at their next packet (expire_nodest_conn = 1).
    EXPECT_TRUE(has(r.out, "warning[connections_expire_on_deleted_server]")) << what;
    EXPECT_TRUE(has(r.out, "why: seed 004_098315146610bdd0.txt")) << what;
  }
}

TEST(IpvsDrainPlanCli, JsonAndMarkdown) {
  Node n(kSave, kStats);
  auto r = plan(n, {"--kernel-version", "4.19", "--format", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto doc = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(doc.begin().key(), "schema");
  EXPECT_EQ(doc["schema"], "kpc.dev/ipvs-drain-plan/v1");
  EXPECT_EQ(doc["sysctls"]["conn_reuse_mode"], 0);
  EXPECT_EQ(doc["draining"], true);
  ASSERT_EQ(doc["services"].size(), 2u);
  EXPECT_EQ(doc["services"][0]["servers"][0]["fate"], "draining");
  EXPECT_EQ(doc["services"][0]["servers"][0]["connections"], 5);
  EXPECT_EQ(doc["services"][0]["warnings"][0]["kind"], "reused_port_to_draining_server");
  r = plan(n, {"--format", "markdown"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(has(r.out, "| `10.244.9.9:53` | 1 | draining | 4 | 1 |")) << r.out;
}

TEST(IpvsDrainPlanCli, NothingDrainingIsExit0) {
  std::string save = kSave;
  for (const char* l : {"-a -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n", "-a -u 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n"})
    save.erase(save.find(l), std::string(l).size());
  Node n(save, "");
  auto r = plan(n, {"--kernel-version", "4.19"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "nothing draining")) << r.out;
  // TCP idle and UDP without flows: deleted, listed, no warning, still exit 0.
  Node idle(kSave, "TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 0 0\nUDP  10.96.0.10:53 rr\n"
                   "  -> 10.244.9.9:53 Masq 1 0 0\n");
  r = plan(idle, {});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "deleted_idle")) << r.out;
  EXPECT_FALSE(has(r.out, "warning[")) << r.out;
}

TEST(IpvsDrainPlanCli, BadInputIsExit2Located) {
  Node n("-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w x\n", "");
  for (const char* format : {"text", "json", "markdown"}) {
    auto r = plan(n, {"--format", format});
    EXPECT_EQ(r.exit_code, 2) << format;
    // No report; with --format json the error document every kpc command prints instead (schemas/output).
    if (std::string(format) == "json") {
      EXPECT_TRUE(has(r.out, "\"schema\": \"kpc.dev/error/v1\"")) << r.out;
      EXPECT_TRUE(has(r.out, "\"command\": \"ipvs drain-plan\"")) << r.out;
      EXPECT_TRUE(has(r.out, "\"code\": \"E0900\"")) << r.out;
    } else {
      EXPECT_EQ(r.out, "") << format;
    }
    EXPECT_TRUE(has(r.err, n.dir.string() + "/ipvs.save:2: error[E0900]")) << r.err;
  }
  Node stats(kSave, "TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 four 1\n");
  auto r = plan(stats, {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "/ipvs.stats:2: error[E0900]")) << r.err;
  Node good(kSave, kStats);
  for (std::vector<std::string> bad : {std::vector<std::string>{"--sysctl", "net.ipv4.vs.conn_reuse_mode"},
                                       {"--sysctl", "net.ipv4.ip_forward=1"},
                                       {"--kernel-version", "latest"}}) {
    r = plan(good, bad);
    EXPECT_EQ(r.exit_code, 2) << bad[1];
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(has(r.err, "error[E0001]: " + bad[0])) << r.err;
  }
  fs::path missing = good.dir / "nosuch";
  r = run({bin_path("kpc"), "ipvs", "drain-plan", source_path("fixtures/example"), "--prior-state", missing.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
}

TEST(IpvsDrainPlanCli, HelpHasExamplesAndExitCodes) {
  for (std::vector<std::string> argv : {std::vector<std::string>{bin_path("kpc"), "ipvs", "--help"},
                                        {bin_path("kpc"), "ipvs", "drain-plan", "--help"}}) {
    auto h = run(argv);
    EXPECT_EQ(h.exit_code, 0) << argv[1];
    EXPECT_TRUE(has(h.out, "Examples:")) << h.out;
    EXPECT_TRUE(has(h.out, "Exit codes:")) << h.out;
  }
  auto none = run({bin_path("kpc"), "ipvs"});  // the group needs its subcommand
  EXPECT_EQ(none.exit_code, 2);
}

}  // namespace
}  // namespace kpc::test
