// One answer per question: every command decides the mode of its inputs in one place
// (compiler/driver/input_kind.h) and gives the same verdict whether a program is a file, stdin,
// a FIFO or a process substitution. Each case here was once answered differently by input form
// or mode (a pipe picked the cross-mode engine and said "0 differ", exit 0; an empty nft partial
// was read as iptables and failed).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "compiler/driver/input_kind.h"
#include "tests/support/test_util.h"

namespace kpc {
namespace {

using test::run;

std::string kpc() { return test::bin_path("kpc"); }

// The example with its LoadBalancer's one source range replaced by another: a behaviour change
// (203.0.113.0/24 no longer allowed) in every mode.
std::string example_copy(const std::string& tag, const std::string& mode, bool drop_range) {
  std::string dir = test::temp_dir(tag);
  for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml", "kube-proxy.yaml"}) {
    std::string text = test::read_file(test::source_path(std::string("fixtures/example/") + f));
    if (std::string(f) == "kube-proxy.yaml") text = std::regex_replace(text, std::regex("mode: iptables"), "mode: " + mode);
    if (drop_range && std::string(f) == "services.yaml")
      text = std::regex_replace(text, std::regex("203\\.0\\.113\\.0/24"), "198.51.100.0/24");
    test::write_file(dir + "/" + f, text);
  }
  return dir;
}

std::string compile(const std::string& snap, const std::string& backend, const std::string& out) {
  auto r = run({kpc(), "compile", snap, "--backend", backend, "-o", out});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// The report without its first line, which names the inputs (they differ by form; the line
// wraps, so its indented continuation goes too).
std::string verdict_of(const std::string& out) {
  std::string v;
  bool header = false;
  for (size_t i = 0; i < out.size();) {
    size_t e = out.find('\n', i);
    std::string line = out.substr(i, e == std::string::npos ? std::string::npos : e - i);
    i = e == std::string::npos ? out.size() : e + 1;
    if (line.rfind("kpc diff", 0) == 0) {
      header = true;
      continue;
    }
    if (header && line.rfind("    ", 0) == 0) continue;
    header = false;
    v += line + "\n";
  }
  return v;
}

struct Forms {
  test::CommandResult file, stdin_, fifo, subst;
};

// `kpc diff OLD NEW` with NEW passed four ways.
Forms diff_four_ways(const std::string& old_path, const std::string& new_path, const std::string& dir) {
  Forms f;
  f.file = run({kpc(), "diff", old_path, new_path});
  f.stdin_ = run({kpc(), "diff", old_path, "-"}, test::read_file(new_path));
  std::string fifo = dir + "/new.fifo";
  ::mkfifo(fifo.c_str(), 0600);
  f.fifo = run({"bash", "-c", "cat '" + new_path + "' > '" + fifo + "' & exec '" + kpc() + "' diff '" + old_path +
                                  "' '" + fifo + "'"});
  f.subst = run({"bash", "-c", "exec '" + kpc() + "' diff '" + old_path + "' <(cat '" + new_path + "')"});
  return f;
}

void expect_same_answer(const Forms& f, int want_exit) {
  EXPECT_EQ(f.file.exit_code, want_exit) << f.file.out << f.file.err;
  for (const auto* r : {&f.stdin_, &f.fifo, &f.subst}) {
    EXPECT_EQ(r->exit_code, f.file.exit_code) << r->out << r->err;
    EXPECT_EQ(verdict_of(r->out), verdict_of(f.file.out)) << r->err;
    EXPECT_EQ(r->out.find("across modes"), std::string::npos) << r->out;
  }
}

TEST(InputForms, NftDiffGivesOneVerdictForFilePipeFifoAndSubstitution) {
  std::string dir = test::temp_dir("forms-nft");
  std::string old_snap = example_copy("forms-nft-old", "nftables", false);
  std::string new_snap = example_copy("forms-nft-new", "nftables", true);
  std::string a = compile(old_snap, "nftables", dir + "/old.nft");
  std::string b = compile(new_snap, "nftables", dir + "/new.nft");
  Forms f = diff_four_ways(a, b, dir);
  expect_same_answer(f, 1);
  EXPECT_NE(f.stdin_.out.find("(nftables"), std::string::npos) << f.stdin_.out;
  // The same programs unchanged: 0 every way.
  expect_same_answer(diff_four_ways(a, a, dir), 0);
}

TEST(InputForms, IptablesDiffGivesOneVerdictForFilePipeFifoAndSubstitution) {
  std::string dir = test::temp_dir("forms-ipt");
  std::string a = compile(example_copy("forms-ipt-old", "iptables", false), "iptables", dir + "/old.restore");
  std::string b = compile(example_copy("forms-ipt-new", "iptables", true), "iptables", dir + "/new.restore");
  expect_same_answer(diff_four_ways(a, b, dir), 1);
  expect_same_answer(diff_four_ways(a, a, dir), 0);
}

TEST(InputForms, BackendFlagThatContradictsTheContentIsALocatedError) {
  std::string dir = test::temp_dir("forms-contradict");
  std::string a = compile(test::source_path("fixtures/example"), "nftables", dir + "/a.nft");
  auto r = run({kpc(), "diff", a, a, "--backend", "iptables"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backend iptables was given, but " + a + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("an nft transaction or listing"), std::string::npos) << r.err;
  r = run({kpc(), "trace", a, "--backend", "iptables", "--src", "10.244.1.5", "--dst", "10.96.0.10", "--dport", "53"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("--backend iptables was given"), std::string::npos) << r.err;
}

TEST(InputForms, VerifyWithAnEmptyNftPartialTakesTheOthersMode) {
  std::string dir = test::temp_dir("forms-empty-partial");
  std::string full = compile(test::source_path("fixtures/example"), "nftables", dir + "/full.nft");
  // A listing of the state the full transaction leaves is the prior; a sync with nothing to do
  // writes an empty transaction.
  auto sim = run({kpc(), "simulate", "--backend", "nftables", full, "-o", dir + "/state.nft"});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  test::write_file(dir + "/empty.nft", "");
  // The listing of a state and that state after the full transaction list their objects apart
  // (no packet is treated differently): equivalent, never an iptables error.
  for (const std::string& partial : {dir + "/empty.nft", std::string("/dev/null")}) {
    auto r = run({kpc(), "verify", "--state", dir + "/state.nft", "--partial", partial, "--full", full,
                  "--allow-equivalent"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("verdict: equivalent"), std::string::npos) << r.out;
  }
  // And from stdin.
  auto r = run({kpc(), "verify", "--state", dir + "/state.nft", "--partial", "-", "--full", full, "--allow-equivalent"},
               "");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(InputForms, VerifyRefusesProgramsOfDifferentModes) {
  std::string dir = test::temp_dir("forms-mixed");
  std::string nft = compile(test::source_path("fixtures/example"), "nftables", dir + "/f.nft");
  std::string ipt = compile(test::source_path("fixtures/example"), "iptables", dir + "/f.restore");
  auto r = run({kpc(), "verify", "--state", ipt, "--partial", nft, "--full", nft});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("programs of different modes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(ipt + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(nft + ":"), std::string::npos) << r.err;
}

TEST(InputForms, DiffOfTwoNftablesSnapshots) {
  std::string old_snap = example_copy("forms-nsnap-old", "nftables", false);
  std::string new_snap = example_copy("forms-nsnap-new", "nftables", true);
  auto r = run({kpc(), "diff", old_snap, new_snap});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("(nftables"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("across modes"), std::string::npos) << r.out;
  r = run({kpc(), "diff", old_snap, old_snap, "--backend", "nftables"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // An iptables-mode snapshot diffed as nftables when asked.
  r = run({kpc(), "diff", test::source_path("fixtures/example"), test::source_path("fixtures/example"), "--backend",
           "nftables"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(nftables"), std::string::npos) << r.out;
}

TEST(InputForms, SnapshotsOfDifferentModesAreACrossModeDiffThatSaysSo) {
  std::string ipt = example_copy("forms-x-ipt", "iptables", false);
  std::string nft = example_copy("forms-x-nft", "nftables", false);
  auto r = run({kpc(), "diff", ipt, nft});
  EXPECT_EQ(r.out.rfind("kpc diff across modes: ", 0), 0u) << r.out << r.err;
  // iptables against nftables: every packet class, each difference classified.
  EXPECT_NE(r.out.find("coverage: every packet class (a per-class proof), each difference classified"),
            std::string::npos) << r.out;
}

TEST(InputForms, CrossModeDiffOfADualStackNodeReportsBothFamilies) {
  auto r = run({kpc(), "diff", test::source_path("fixtures/example"), "--from-backend", "iptables", "--to-backend",
                "nftables"});
  EXPECT_LE(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("), IPv4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("), IPv6\n"), std::string::npos) << r.out;
  r = run({kpc(), "diff", test::source_path("fixtures/example"), "--from-backend", "iptables", "--to-backend",
           "nftables", "--format", "json"});
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["family"], "IPv4");
  ASSERT_EQ(j["other_families"].size(), 1u);
  EXPECT_EQ(j["other_families"][0]["family"], "IPv6");
}

TEST(InputForms, CrossModeDiffOfAnIPv6OnlyNode) {
  std::string dir = example_copy("forms-v6only", "iptables", false);
  // node-a keeps only its IPv6 address (and interface address).
  std::string nodes = test::read_file(dir + "/nodes.yaml");
  nodes = std::regex_replace(nodes, std::regex("    - \\{type: InternalIP, address: 192.168.0.10\\}\n"), "");
  test::write_file(dir + "/nodes.yaml", nodes);
  std::string kp = test::read_file(dir + "/kube-proxy.yaml");
  kp = std::regex_replace(kp, std::regex("\"192.168.0.10/24\", "), "");
  test::write_file(dir + "/kube-proxy.yaml", kp);
  auto r = run({kpc(), "diff", dir, "--from-backend", "iptables", "--to-backend", "nftables"});
  EXPECT_LE(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("), IPv6\n"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("), IPv4\n"), std::string::npos) << r.out;
}

TEST(InputKind, ClassifiesByContent) {
  EXPECT_EQ(classify_text("", "x").kind, InputKind::Empty);
  EXPECT_EQ(classify_text("# only a comment\n\n", "x").kind, InputKind::Empty);
  EXPECT_EQ(classify_text("# Generated by iptables-save\n*nat\n", "x").kind, InputKind::IptablesRules);
  EXPECT_EQ(classify_text("add table ip kube-proxy\n", "x").kind, InputKind::NftRules);
  EXPECT_EQ(classify_text("table ip kube-proxy {\n}\n", "x").kind, InputKind::NftRules);
  EXPECT_EQ(classify_text("create table ip kube-proxy\n", "x").kind, InputKind::NftRules);
  EXPECT_EQ(classify_text("create KUBE-CLUSTER-IP hash:ip,port family inet\n", "x").kind, InputKind::Snapshot);
  EXPECT_EQ(classify_text("apiVersion: v1\nkind: List\n", "x").kind, InputKind::Snapshot);
  auto e = classify_text("\n\nadd table ip kube-proxy\n", "f.nft");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.where(), "f.nft:3 (`add table ip kube-proxy`)");
  EXPECT_EQ(classify_text("# Generated by iptables-save v1.8.9 (nf_tables) on x\n*filter\n", "x").iptables_nft_flavor,
            std::optional<bool>(true));
  EXPECT_EQ(classify_text("# Generated by iptables-save v1.8.9 (legacy) on x\n*filter\n", "x").iptables_nft_flavor,
            std::optional<bool>(false));
}

TEST(InputKind, ResolutionOrder) {
  ModeRequest r;
  r.command = "kpc x";
  r.inputs = {classify_text("", "empty"), classify_text("add table ip t\n", "a.nft")};
  ModeDecision d;
  std::string err;
  ASSERT_TRUE(resolve_mode(r, &d, &err)) << err;
  EXPECT_EQ(d.mode, BackendKind::NFTables);  // the empty input takes the other's mode
  r.inputs.push_back(classify_text("*nat\nCOMMIT\n", "b.restore"));
  EXPECT_FALSE(resolve_mode(r, &d, &err));
  EXPECT_NE(err.find("b.restore:1 (`*nat`)"), std::string::npos) << err;
  r.mixed_allowed = true;
  ASSERT_TRUE(resolve_mode(r, &d, &err));
  EXPECT_TRUE(d.mixed);
  r.flag = BackendKind::NFTables;
  r.flag_text = "--backend nftables";
  EXPECT_FALSE(resolve_mode(r, &d, &err));  // a flag never overrides what a file is
  r.inputs = {classify_text("apiVersion: v1\n", "snap.yaml")};
  ASSERT_TRUE(resolve_mode(r, &d, &err));
  EXPECT_EQ(d.mode, BackendKind::NFTables);
  r.flag.reset();
  ASSERT_TRUE(resolve_mode(r, &d, &err));
  EXPECT_FALSE(d.mode.has_value());  // only a snapshot: its configuration decides
}

}  // namespace
}  // namespace kpc

namespace kpc {
namespace {

// The cross-mode engine is chosen in the open: --cross-engine sample says so on the coverage line;
// per-class (the default for programs this small) says it is a per-class proof.
TEST(InputForms, CrossEngineIsSaid) {
  std::string dir = test::temp_dir("forms-engine");
  std::string ipt = compile(test::source_path("fixtures/example"), "iptables", dir + "/a.restore");
  std::string nft = compile(test::source_path("fixtures/example"), "nftables", dir + "/b.nft");
  auto sampled = run({kpc(), "diff", ipt, nft, "--cross-engine", "sample"});
  EXPECT_EQ(sampled.exit_code, 0) << sampled.err;
  EXPECT_NE(sampled.out.find("not a per-class proof"), std::string::npos) << sampled.out;
  EXPECT_NE(sampled.out.find("by sample, as --cross-engine sample asks"), std::string::npos) << sampled.out;
  auto by_class = run({kpc(), "diff", ipt, nft});
  EXPECT_EQ(by_class.exit_code, 0) << by_class.err;
  EXPECT_NE(by_class.out.find("a per-class proof"), std::string::npos) << by_class.out;
  auto json = run({kpc(), "diff", ipt, nft, "--cross-engine", "sample", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(json.out)["engine_note"], "by sample, as --cross-engine sample asks");
  auto same_mode = run({kpc(), "diff", ipt, ipt, "--cross-engine", "sample"});
  EXPECT_EQ(same_mode.exit_code, 2);  // a flag for a diff across modes only
}

}  // namespace
}  // namespace kpc
