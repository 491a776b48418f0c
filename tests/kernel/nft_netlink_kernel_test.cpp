// The netlink encoder against nft 1.0.6 itself (applier/node/nft_netlink.h): every golden
// nftables program and the partials of kube-proxy's step fixtures (tests/support/nft_programs.h),
// applied as kpc's netlink batch in one network namespace and with the real `nft -f` in another,
// must leave the same `nft list ruleset` and the same bytecode (`nft --debug=netlink list
// ruleset`, set elements sorted: a hash set lists in an order of its own). A transaction the
// kernel refuses leaves it unchanged and, through KernelDataplane, reports nft's own message; one
// outside the vocabulary falls back to libnftables with the same result. The fast path's table
// is not loaded (its flowtable needs a device this kernel's namespaces do not offer).
// Size: the namespaces are made once and flushed between programs (~3 s in release).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "applier/node/kernel_dataplane.h"
#include "applier/node/nft_netlink.h"
#include "tests/support/netns.h"
#include "tests/support/nft_programs.h"

namespace kpc::test {
namespace {

#define NEED_NETNS()    \
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces"

applier::NetlinkApplyResult netlink_apply(const Netns& ns, const std::string& program) {
  applier::NetlinkApplyResult r;
  in_netns(ns, [&] { r = applier::nft_netlink_apply(program); });
  return r;
}

// `nft --debug=netlink list ruleset` prints the bytecode of every set and rule, then the
// ruleset as `nft list ruleset` does: one listing compares both.
std::string listing(const Netns& ns) { return sorted_set_elements(ns.exec({"nft", "--debug=netlink", "list", "ruleset"}).out); }

TEST(NftNetlink, EveryGoldenProgramAndPartialGivesNftsRulesetAndBytecode) {
  NEED_NETNS();
  Netns batch, tool;  // batch: kpc's netlink batch; tool: nft -f
  ASSERT_TRUE(batch.ok() && tool.ok());
  size_t applied = 0, partials = 0;
  std::set<std::vector<std::string>> seen;  // fixtures that compile to the same programs run once
  for (const auto& seq : golden_nft_program_sequences()) {
    if (seq.fastpath || !seen.insert(seq.programs).second) continue;
    batch.exec({"nft", "flush", "ruleset"});
    tool.exec({"nft", "flush", "ruleset"});
    for (size_t i = 0; i < seq.programs.size(); ++i) {
      const std::string where = seq.name + " program " + std::to_string(i);
      auto t = tool.exec({"nft", "-f", "-"}, seq.programs[i]);
      auto n = netlink_apply(batch, seq.programs[i]);
      ASSERT_NE(n.outcome, applier::NetlinkOutcome::Unsupported) << where << ": " << n.detail;
      ASSERT_EQ(n.outcome == applier::NetlinkOutcome::Applied, t.exit_code == 0)
          << where << "\nnft: " << t.err << "\nnetlink: " << n.detail;
      const std::string a = listing(batch), b = listing(tool);
      ASSERT_TRUE(a == b) << where << "\n" << first_difference(a, b, "netlink batch", "nft -f");
      ++applied;
      partials += i > 0;
    }
  }
  EXPECT_GE(applied, 60u);
  EXPECT_GE(partials, 20u);
}

// Refused by the kernel (EBUSY: a chain a rule still jumps to; ENOENT: a missing chain): the
// batch is atomic, nothing changes; through KernelDataplane the error is nft's message.
TEST(NftNetlink, RefusedBatchesChangeNothingAndReportNftsError) {
  NEED_NETNS();
  Netns batch, tool;
  const auto& seqs = golden_nft_program_sequences();
  const std::string& full = seqs.back().fastpath ? seqs[seqs.size() - 3].programs[0] : seqs.back().programs[0];
  ASSERT_EQ(netlink_apply(batch, full).outcome, applier::NetlinkOutcome::Applied);
  ASSERT_EQ(tool.exec({"nft", "-f", "-"}, full).exit_code, 0);
  const std::string before = listing(batch);
  for (const std::string program :
       {"add chain ip kube-proxy kpc-probe\ndelete chain ip kube-proxy services\n",
        "add chain ip kube-proxy kpc-probe\nadd rule ip kube-proxy kpc-probe jump no-such-chain\n"}) {
    auto n = netlink_apply(batch, program);
    EXPECT_EQ(n.outcome, applier::NetlinkOutcome::Refused) << program << n.detail;
    EXPECT_NE(n.error, 0) << program;
    EXPECT_EQ(listing(batch), before) << program;
    auto t = tool.exec({"nft", "-f", "-"}, program);
    EXPECT_NE(t.exit_code, 0);
    applier::DataplaneResult r;
    in_netns(batch, [&] {
      applier::KernelTools tools;
      tools.apply_with = applier::ApplyWith::InProcess;
      applier::KernelDataplane dp(tools);
      r = dp.apply(BackendKind::NFTables, IPFamily::V4, program);
      EXPECT_EQ(dp.in_process_counts().refused.load(), 1u);
      EXPECT_EQ(dp.in_process_counts().encoder_bugs.load(), 0u);
    });
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, t.err) << program;
    EXPECT_EQ(listing(batch), before) << program;
  }
}

// Outside the vocabulary: nothing sent, libnftables applies it, the same result as nft's.
TEST(NftNetlink, UnsupportedProgramsFallBackToLibnftables) {
  NEED_NETNS();
  Netns batch, tool;
  const std::string program = "add table ip kube-proxy\nadd chain ip kube-proxy c\nadd rule ip kube-proxy c tcp dport 80 drop\n";
  auto n = netlink_apply(batch, program);
  EXPECT_EQ(n.outcome, applier::NetlinkOutcome::Unsupported);
  EXPECT_EQ(batch.exec({"nft", "list", "ruleset"}).out, "") << "an unsupported program sent something";
  std::vector<std::string> logged;
  applier::DataplaneResult r;
  in_netns(batch, [&] {
    applier::KernelTools tools;
    tools.apply_with = applier::ApplyWith::InProcess;
    tools.log = [&](const std::string& l) { logged.push_back(l); };
    applier::KernelDataplane dp(tools);
    r = dp.apply(BackendKind::NFTables, IPFamily::V4, program);
    EXPECT_EQ(dp.in_process_counts().unsupported.load(), 1u);
  });
  EXPECT_TRUE(r.ok) << r.error;
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].find("line 3"), std::string::npos) << logged[0];
  ASSERT_EQ(tool.exec({"nft", "-f", "-"}, program).exit_code, 0);
  EXPECT_EQ(listing(batch), listing(tool));
}

}  // namespace
}  // namespace kpc::test
