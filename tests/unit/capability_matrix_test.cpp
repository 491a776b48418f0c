// The capability matrix (compiler/driver/capabilities.h) walked cell by cell: every command ×
// mode × input form it lists runs its example on the bundled example cluster (fixtures/example,
// in each mode) and must exit as the cell says, printing what the cell expects — a cell that says
// "works" works, one that says "refused" refuses with E0704 and its reason. docs/capabilities.md
// must hold the matrix as `kpc __capabilities` prints it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace kpc {
namespace {

namespace fs = std::filesystem;
using test::run;

std::string kpc() { return test::bin_path("kpc"); }

// The example with mode set and, when `next`, shop/web scaled down by one ready endpoint per family.
std::string example_in(const std::string& root, const std::string& name, const std::string& mode, bool next) {
  std::string dir = root + "/" + name;
  fs::create_directories(dir);
  for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml", "kube-proxy.yaml"}) {
    std::string text = test::read_file(test::source_path(std::string("fixtures/example/") + f));
    if (std::string(f) == "kube-proxy.yaml") text = std::regex_replace(text, std::regex("mode: iptables"), "mode: " + mode);
    if (next && std::string(f) == "endpointslices.json") {
      auto j = nlohmann::json::parse(text);
      for (auto& item : j["items"]) {
        auto& eps = item["endpoints"];
        for (size_t i = 0; i < eps.size(); ++i)
          if (eps[i]["addresses"][0] == "10.244.2.6" || eps[i]["addresses"][0] == "fd00:10:244:2::6") {
            eps.erase(i);
            break;
          }
      }
      text = j.dump(1);
    }
    test::write_file(dir + "/" + f, text);
  }
  return dir;
}

class CapabilityMatrix : public ::testing::Test {
 protected:
  static std::map<std::string, std::string> inputs_;
  static nlohmann::json cells_;

  static std::string make(const std::vector<std::string>& argv, const std::string& out) {
    auto r = run(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    test::write_file(out, r.out);
    return out;
  }

  static void SetUpTestSuite() {
    std::string t = test::temp_dir("capabilities");
    auto& in = inputs_;
    in["out"] = t + "/out";
    fs::create_directories(in["out"]);
    in["ex"] = example_in(t, "ex", "iptables", false);
    in["ex-nft"] = example_in(t, "ex-nft", "nftables", false);
    in["ex-ipvs"] = example_in(t, "ex-ipvs", "ipvs", false);
    in["new"] = example_in(t, "new", "iptables", true);
    in["new-nft"] = example_in(t, "new-nft", "nftables", true);
    in["new-ipvs"] = example_in(t, "new-ipvs", "ipvs", true);
    std::string file;
    for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml", "kube-proxy.yaml"})
      file += "---\n" + test::read_file(in["ex"] + "/" + f) + "\n";
    in["ex-file"] = t + "/ex.yaml";
    test::write_file(in["ex-file"], file);
    const std::string k = kpc();
    in["ipt"] = make({k, "compile", in["ex"], "--backend", "iptables"}, t + "/ex.restore");
    in["ipt-new"] = make({k, "compile", in["new"], "--backend", "iptables"}, t + "/new.restore");
    in["ipt6"] = make({k, "compile", in["ex"], "--backend", "ip6tables"}, t + "/ex6.restore");
    in["nft"] = make({k, "compile", in["ex"], "--backend", "nftables"}, t + "/ex.nft");
    in["nft-new"] = make({k, "compile", in["new"], "--backend", "nftables"}, t + "/new.nft");
    in["nft6"] = make({k, "compile", in["ex"], "--backend", "nftables", "--family", "ipv6"}, t + "/ex6.nft");
    in["fastpath"] = make({k, "compile", in["ex"], "--backend", "fastpath"}, t + "/fastpath.nft");
    in["ipt-save"] = make({k, "simulate", "--noflush", in["ipt"]}, t + "/ex.save");
    in["ipt6-save"] = make({k, "simulate", "--backend", "ip6tables", "--noflush", in["ipt6"]}, t + "/ex6.save");
    // The node's nftables state: both families' transactions applied, as `nft list ruleset` prints it.
    test::write_file(t + "/both.nft", test::read_file(in["nft"]) + test::read_file(in["nft6"]));
    in["nft-list"] = make({k, "simulate", t + "/both.nft"}, t + "/ruleset.nft");
    in["ipvs-dir"] = t + "/ipvs";
    in["ipvs-dir-new"] = t + "/ipvs-new";
    EXPECT_EQ(run({k, "compile", in["ex-ipvs"], "-o", in["ipvs-dir"]}).exit_code, 0);
    EXPECT_EQ(run({k, "compile", in["new-ipvs"], "-o", in["ipvs-dir-new"]}).exit_code, 0);
    // An IPVS node that still has a removed DNS endpoint (ipvsadm -S -n, ipvsadm -Ln).
    in["ipvs-node"] = t + "/ipvs-node";
    fs::create_directories(in["ipvs-node"]);
    test::write_file(in["ipvs-node"] + "/ipvs.save",
                     "-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n");
    test::write_file(in["ipvs-node"] + "/ipvs.stats", "TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 4 1\n");
    in["empty"] = t + "/empty";
    test::write_file(in["empty"], "");
    auto r = run({k, "__capabilities", "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    cells_ = nlohmann::json::parse(r.out);
  }

  // The example's argv, placeholders replaced; a last word "<{x}" becomes stdin.
  static std::vector<std::string> argv_of(const std::string& example, std::string* stdin_path) {
    std::vector<std::string> argv{kpc()};
    size_t i = 0;
    while (i < example.size()) {
      size_t e = example.find(' ', i);
      std::string w = example.substr(i, e == std::string::npos ? std::string::npos : e - i);
      i = e == std::string::npos ? example.size() : e + 1;
      if (w.empty()) continue;
      bool feed = w[0] == '<';
      if (feed) w = w.substr(1);
      std::smatch m;
      std::string out;
      std::string rest = w;
      while (std::regex_search(rest, m, std::regex("\\{([a-z0-9-]+)\\}"))) {
        auto it = inputs_.find(m[1]);
        EXPECT_NE(it, inputs_.end()) << "unknown placeholder " << m[0] << " in: " << example;
        out += m.prefix().str() + (it == inputs_.end() ? "" : it->second);
        rest = m.suffix();
      }
      out += rest;
      if (feed) *stdin_path = out;
      else argv.push_back(out);
    }
    return argv;
  }

  static void run_command(const std::string& command) {
    size_t cells = 0;
    for (const auto& c : cells_) {
      if (c["command"] != command) continue;
      ++cells;
      std::string stdin_path;
      auto argv = argv_of(c["example"], &stdin_path);
      auto r = run(argv, stdin_path.empty() ? "" : test::read_file(stdin_path));
      std::string where = "cell: kpc " + command + " | " + c["mode"].get<std::string>() + " | " +
                          c["input"].get<std::string>() + "\n  example: kpc " + c["example"].get<std::string>();
      EXPECT_EQ(r.exit_code, c["exit_code"].get<int>()) << where << "\nstdout:\n"
                                                        << r.out.substr(0, 2000) << "\nstderr:\n"
                                                        << r.err.substr(0, 2000);
      std::string expect = c["expect"];
      const std::string& text = c["support"] == "refused" ? r.err : r.out;
      EXPECT_NE(text.find(expect), std::string::npos) << where << "\nexpected: " << expect << "\ngot:\n"
                                                      << text.substr(0, 2000);
      if (c["support"] == "refused")  // the refusal says why and what to use instead: the cell's note
        EXPECT_NE(r.err.find(c["note"].get<std::string>().substr(0, 40)), std::string::npos) << where << "\n" << r.err;
      if (c["support"] == "sampled" && r.exit_code != 2)  // a check by sample says so
        EXPECT_NE(r.out.find("not a per-class proof"), std::string::npos) << where << "\n" << r.out.substr(0, 2000);
    }
    EXPECT_GT(cells, 0u) << "no cell of kpc " << command;
  }
};

std::map<std::string, std::string> CapabilityMatrix::inputs_;
nlohmann::json CapabilityMatrix::cells_;

TEST_F(CapabilityMatrix, Validate) { run_command("validate"); }
TEST_F(CapabilityMatrix, Compile) { run_command("compile"); }
TEST_F(CapabilityMatrix, Simulate) { run_command("simulate"); }
TEST_F(CapabilityMatrix, Verify) { run_command("verify"); }
TEST_F(CapabilityMatrix, Diff) { run_command("diff"); }
TEST_F(CapabilityMatrix, Drift) { run_command("drift"); }
TEST_F(CapabilityMatrix, Trace) { run_command("trace"); }
TEST_F(CapabilityMatrix, Golden) { run_command("golden"); }
TEST_F(CapabilityMatrix, IpvsDrainPlan) { run_command("ipvs drain-plan"); }

TEST_F(CapabilityMatrix, EveryCommandHasCells) {
  std::set<std::string> commands;
  for (const auto& c : cells_) commands.insert(c["command"].get<std::string>());
  for (const char* c : {"validate", "compile", "simulate", "verify", "diff", "drift", "trace", "golden", "ipvs drain-plan"})
    EXPECT_TRUE(commands.count(c)) << c;
}

TEST_F(CapabilityMatrix, DocsHoldTheGeneratedTables) {
  auto r = run({kpc(), "__capabilities"});
  ASSERT_EQ(r.exit_code, 0);
  std::string doc = test::read_file(test::source_path("docs/capabilities.md"));
  const std::string begin = "<!-- generated: kpc __capabilities -->\n", end = "<!-- end of generated part -->";
  size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), r.out)
      << "docs/capabilities.md is stale: run scripts/gen-capabilities-doc.sh";
}

}  // namespace
}  // namespace kpc
