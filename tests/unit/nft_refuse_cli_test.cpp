// The commands on nft input with a statement nft does not know (`frobnicate 7` in kube-proxy's
// services chain): simulate, trace, diff and verify exit 2 with nft's own message (before, the
// model kept the rule verbatim: simulate printed it back and exited 0, trace traced through it).
// A valid statement kpc does not read (`log prefix "x"`) is "not modelled by kpc", exit 2 too.
#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

const char* kBad = "add rule ip kube-proxy services frobnicate 7\n";
const char* kNftSays =
    ":80:33-42: Error: No symbol type information\n"
    "add rule ip kube-proxy services frobnicate 7\n"
    "                                ^^^^^^^^^^\n";

// The example's transaction (kpc compile --backend nftables), with `line` after its 79th line.
std::string with_line(const std::string& dir, const std::string& name, const std::string& line) {
  auto c = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "nftables"});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  std::string text = c.out;
  size_t at = 0;
  for (int i = 0; i < 79; ++i) at = text.find('\n', at) + 1;
  EXPECT_EQ(text.compare(at - 1, 1, "\n"), 0);
  text.insert(at, line);
  write_file(dir + "/" + name, text);
  return dir + "/" + name;
}

TEST(NftRefuseCli, SimulateTraceDiffVerifyExitTwoWithNftsMessage) {
  const std::string dir = temp_dir("nft-refuse-cli");
  const std::string bad = with_line(dir, "bad.nft", kBad);
  const std::string good = with_line(dir, "good.nft", "");
  // simulate: as the node's state, and as a transaction
  auto r = run({bin_path("kpc"), "simulate", "--backend", "nftables", "--state", bad});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(bad + kNftSays), std::string::npos) << r.err;
  r = run({bin_path("kpc"), "simulate", "--backend", "nftables", bad});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find(bad + kNftSays), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not modelled"), std::string::npos) << r.err;
  // trace
  r = run({bin_path("kpc"), "trace", bad, "--src", "10.0.0.5", "--dst", "10.96.0.10", "--proto", "udp", "--dport", "53"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(bad + kNftSays), std::string::npos) << r.err;
  // (the same transaction without the line traces)
  r = run({bin_path("kpc"), "trace", good, "--src", "10.0.0.5", "--dst", "10.96.0.10", "--proto", "udp", "--dport", "53"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // diff
  r = run({bin_path("kpc"), "diff", good, bad});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find(bad + kNftSays), std::string::npos) << r.err;
  // verify: the full fails (2)
  r = run({bin_path("kpc"), "verify", "--state", good, "--partial", good, "--full", bad});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: fails to apply"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("No symbol type information"), std::string::npos) << r.out;
}

TEST(NftRefuseCli, AValidStatementKpcDoesNotReadIsNotModelledExitTwo) {
  const std::string dir = temp_dir("nft-refuse-cli-log");
  const std::string log = with_line(dir, "log.nft", "add rule ip kube-proxy services log prefix \"x\"\n");
  auto r = run({bin_path("kpc"), "simulate", "--backend", "nftables", log});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("kpc cannot say what nft does"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(":80:33-46: Error: not modelled by kpc: log prefix \"x\" (a statement kpc does not read)"),
            std::string::npos)
      << r.err;
  r = run({bin_path("kpc"), "trace", log, "--src", "10.0.0.5", "--dst", "10.96.0.10", "--proto", "udp", "--dport", "53"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  // verify: a partial kpc cannot say nft takes has no verdict (2), not "fails to apply" (1)
  const std::string good = with_line(dir, "good.nft", "");
  r = run({bin_path("kpc"), "verify", "--state", good, "--partial", log, "--full", good});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("kpc cannot say what nft does"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kpc::test
