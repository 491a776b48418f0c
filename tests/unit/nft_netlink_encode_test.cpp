// The netlink encoder's vocabulary (applier/node/nft_netlink_encode.h) covers every nftables
// program kpc's golden fixtures give: full, stale-chain deletions and partials of kube-proxy's
// step fixtures, both families, the example's pinned programs and its fast path. A new rule
// shape in compiler/nftables/lower.cpp or compiler/fastpath fails here until the encoder knows
// it (the kernel test, tests/kernel/nft_netlink_kernel_test.cpp, checks the encodings). And it
// refuses, whole, what it does not know.
#include <gtest/gtest.h>

#include "applier/node/nft_netlink_encode.h"
#include "tests/support/nft_programs.h"

namespace kpc::test {
namespace {
namespace nl = kpc::applier::nftnl;

TEST(NftNetlinkEncode, EveryGoldenProgramIsFullySupported) {
  size_t programs = 0, messages = 0, partials = 0;
  for (const auto& seq : golden_nft_program_sequences()) {
    // What the kernel holds: the sets every program so far declared (a partial declares only
    // the sets it adds; the kernel is asked for the others).
    std::map<std::string, nl::SetInfo, std::less<>> kernel;
    for (size_t i = 0; i < seq.programs.size(); ++i) {
      nl::EncodeResult r = nl::encode_program(seq.programs[i], nl::lookup_from(kernel));
      EXPECT_TRUE(r.ok) << seq.name << " program " << i << ": " << r.why;
      if (!r.ok) continue;
      for (auto& [name, info] : r.declared) kernel[name] = info;
      ++programs;
      partials += i > 0;
      messages += r.batch.messages;
      EXPECT_EQ(r.batch.line_of.size(), r.batch.messages + 2);
    }
  }
  EXPECT_GE(programs, 100u);
  EXPECT_GE(partials, 20u);
  EXPECT_GT(messages, 8000u);
}

// Whole programs or nothing: one line outside the vocabulary makes the program unsupported,
// with the line named.
TEST(NftNetlinkEncode, AnythingElseIsUnsupported) {
  const std::string head = "add table ip kube-proxy\nadd chain ip kube-proxy c\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"a statement kpc does not write", "add rule ip kube-proxy c tcp dport 80 drop\n"},
      {"a second table", "add table ip other\n"},
      {"an injected command", "add rule ip kube-proxy c drop ; flush ruleset\n"},
      {"a name with a quote", "add chain ip kube-proxy \"c\"\n"},
      {"a name with a semicolon", "add chain ip kube-proxy c;d\n"},
      {"a comment with an escape", "add rule ip kube-proxy c drop comment \"a\\\" b\"\n"},
      {"a comment too long", "add rule ip kube-proxy c drop comment \"" + std::string(129, 'x') + "\"\n"},
      {"a statement after the verdict", "add rule ip kube-proxy c drop accept\n"},
      {"host bits in a prefix", "add rule ip kube-proxy c ip saddr 10.0.0.1/8 drop\n"},
      {"an address of the other family", "add rule ip kube-proxy c ip6 saddr ::1 drop\n"},
      {"an address in another spelling", "add rule ip kube-proxy c ip saddr 010.0.0.1 drop\n"},
      {"ranges nft would merge", "add rule ip kube-proxy c ip saddr { 10.0.0.0/8 , 10.1.0.0/16 } drop\n"},
      {"an element of an unknown set", "add element ip kube-proxy nowhere { 10.0.0.1 }\n"},
      {"an element of the wrong type", "add set ip kube-proxy s { type ipv4_addr ; }\nadd element ip kube-proxy s { tcp . 80 }\n"},
      {"a lookup of the wrong type",
       "add set ip kube-proxy s { type ipv4_addr ; }\nadd rule ip kube-proxy c meta l4proto . th dport vmap @s\n"},
      {"dnat without a protocol", "add rule ip kube-proxy c dnat to 10.0.0.1:80\n"},
      {"numgen keys out of order", "add rule ip kube-proxy c numgen random mod 2 vmap { 1 : goto c , 0 : goto c }\n"},
      {"set flags kpc does not write", "add set ip kube-proxy s { type ipv4_addr ; flags interval ; }\n"},
      {"a control character", "add rule ip kube-proxy c\tdrop\n"},
      {"a comment line", "# hello\n"},
  };
  for (const auto& [what, line] : bad) {
    nl::EncodeResult r = nl::encode_program(head + line, nl::SetLookup{});
    EXPECT_FALSE(r.ok) << what;
    EXPECT_EQ(r.why.rfind("line ", 0), 0u) << what << ": " << r.why;
    EXPECT_TRUE(r.batch.bytes.empty()) << what;
  }
  // And what it knows is encoded: begin, table, chain, end.
  nl::EncodeResult ok = nl::encode_program(head, nl::SetLookup{});
  ASSERT_TRUE(ok.ok) << ok.why;
  EXPECT_EQ(ok.batch.messages, 2u);
}

}  // namespace
}  // namespace kpc::test
