// iptables-nft-restore 1.8.9 answers some command sequences from its cache rather than
// from the kernel; the restore model must answer the same. Found by the restore
// differential (pair 1296 of a 1,300-pair run, session 7): after an unnamed -X the
// tool's cache no longer holds the table's built-in chains (the kernel keeps them and
// their rules), and a failing -Z CHAIN is worded by the command before it. Each case
// runs in a fresh namespace through the real tool and through the model: the same exit,
// the same stderr byte for byte, the same iptables-save afterwards.

#include <gtest/gtest.h>

#include <string>

#include "tests/support/netns.h"
#include "tests/support/test_util.h"
#include "verifier/state/state.h"

namespace kpc::test {
namespace {

using verifier::Flavor;

struct CacheCase {
  const char* name;
  const char* init;     ///< applied with --noflush first (both sides)
  const char* program;  ///< applied with --noflush; the compared step
};

constexpr const char* kOutputWithRule = "*raw\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j ACCEPT\nCOMMIT\n";
constexpr const char* kOutputDropWithRule = "*raw\n:OUTPUT DROP [0:0]\n-A OUTPUT -j ACCEPT\nCOMMIT\n";

const CacheCase kCases[] = {
    // -X drops the built-in chains from the cache: -Z, -D N, -R, -X CHAIN find no chain.
    {"x_then_zero", kOutputWithRule, "*raw\n-X\n-Z OUTPUT\nCOMMIT\n"},
    {"declared_x_then_zero", "", "*raw\n:OUTPUT ACCEPT [0:0]\n-X\n-Z OUTPUT\nCOMMIT\n"},
    {"x_then_delete_num", kOutputWithRule, "*raw\n-X\n-D OUTPUT 1\nCOMMIT\n"},
    {"x_then_delete_rule", kOutputWithRule, "*raw\n-X\n-D OUTPUT -j ACCEPT\nCOMMIT\n"},
    {"x_then_replace", kOutputWithRule, "*raw\n-X\n-R OUTPUT 1 -j DROP\nCOMMIT\n"},
    {"x_then_delete_builtin", kOutputWithRule, "*raw\n-X\n-X OUTPUT\nCOMMIT\n"},
    {"x_then_zero_rule", kOutputWithRule, "*raw\n-X\n-Z OUTPUT 1\nCOMMIT\n"},
    // ... the kernel keeps the chain and its rules:
    {"x_alone", kOutputWithRule, "*raw\n-X\nCOMMIT\n"},
    {"x_then_append", kOutputWithRule, "*raw\n-X\n-A OUTPUT -j DROP\nCOMMIT\n"},
    // ... a command that creates the chain again brings it back to the cache, empty:
    {"x_insert_at_head", kOutputWithRule, "*raw\n-X\n-I OUTPUT -j DROP\nCOMMIT\n"},
    {"x_insert_two_too_big", kOutputWithRule, "*raw\n-X\n-I OUTPUT 2 -j DROP\nCOMMIT\n"},
    {"x_append_insert_after_it", kOutputWithRule, "*raw\n-X\n-A OUTPUT -j DROP\n-I OUTPUT 2 -j RETURN\nCOMMIT\n"},
    {"x_append_delete_one", kOutputWithRule, "*raw\n-X\n-A OUTPUT -j DROP\n-D OUTPUT 1\nCOMMIT\n"},
    {"x_append_delete_hidden_rule", kOutputWithRule, "*raw\n-X\n-A OUTPUT -j DROP\n-D OUTPUT -j ACCEPT\nCOMMIT\n"},
    {"x_policy_delete_num", kOutputWithRule, "*raw\n-X\n-P OUTPUT DROP\n-D OUTPUT 1\nCOMMIT\n"},
    {"x_declared_insert_two", kOutputWithRule, "*raw\n-X\n:OUTPUT DROP [0:0]\n-I OUTPUT 2 -j DROP\nCOMMIT\n"},
    {"x_append_delete_builtin", kOutputWithRule, "*raw\n-X\n-A OUTPUT -j DROP\n-X OUTPUT\nCOMMIT\n"},
    {"x_append_zero", kOutputWithRule, "*raw\n-X\n-A OUTPUT -j DROP\n-Z OUTPUT\nCOMMIT\n"},
    {"x_flush_chain", kOutputWithRule, "*raw\n-X\n-F OUTPUT\n-Z OUTPUT\nCOMMIT\n"},
    {"x_flush_all_then_zero", kOutputWithRule, "*raw\n-X\n-F\n-Z OUTPUT\nCOMMIT\n"},
    // ... and zeroing re-sends a chain as the cache has it: a chain created again there is
    // fresh (policy ACCEPT), one still dropped keeps the kernel's policy.
    {"x_zero_all_keeps_policy", kOutputDropWithRule, "*raw\n-X\n-Z\nCOMMIT\n"},
    {"x_append_zero_all_resets_policy", kOutputDropWithRule, "*raw\n-X\n-A OUTPUT -j DROP\n-Z\nCOMMIT\n"},
    {"x_policy_zero_all", kOutputWithRule, "*raw\n-X\n-P OUTPUT DROP\n-Z\nCOMMIT\n"},
    // -Z CHAIN's "no such chain" is worded by the command before it (nft_fn).
    {"zero_missing_alone", kOutputWithRule, "*raw\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_after_policy", kOutputWithRule, "*raw\n-P OUTPUT ACCEPT\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_after_declared_builtin", kOutputWithRule, "*raw\n:OUTPUT ACCEPT [0:0]\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_after_delete_rule", kOutputWithRule, "*raw\n-D OUTPUT -j ACCEPT\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_after_append", kOutputWithRule, "*raw\n-A OUTPUT -j DROP\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_after_zero", kOutputWithRule, "*raw\n-P OUTPUT ACCEPT\n-Z OUTPUT\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_after_user_decl", kOutputWithRule, "*raw\n:U - [0:0]\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_policy_then_user_decl", kOutputWithRule, "*raw\n-P OUTPUT ACCEPT\n:U - [0:0]\n-Z NOPE\nCOMMIT\n"},
    {"zero_missing_policy_then_new_chain", kOutputWithRule, "*raw\n-P OUTPUT ACCEPT\n-N U\n-Z NOPE\nCOMMIT\n"},
    {"zero_rule_missing_chain", kOutputWithRule, "*raw\n-Z NOPE 1\nCOMMIT\n"},
    // The differential's pair: "Bad built-in chain name" after ":PREROUTING ACCEPT".
    {"pair_1296", "",
     "*raw\n:A - [0:0]\n:OUTPUT ACCEPT [0:0]\n-N KUBE-SVC-AAAA2\n-X\n\n:PREROUTING ACCEPT [0:0]\n:A - [0:0]\n-Z OUTPUT\n"
     "-A PREROUTING -j A\nCOMMIT\n"},
    // -Z CHAIN N checks no position; a rule added in this batch makes the tool crash.
    {"zero_rule_beyond_end", kOutputWithRule, "*raw\n-Z OUTPUT 3\nCOMMIT\n"},
    {"zero_new_rule_crashes", kOutputWithRule, "*raw\n-A OUTPUT -j DROP\n-Z OUTPUT 2\nCOMMIT\n"},
};

class RestoreNftCacheKernel : public ::testing::TestWithParam<CacheCase> {};

TEST_P(RestoreNftCacheKernel, TheModelAnswersAsIptablesNftRestore) {
  const CacheCase& c = GetParam();
  Netns ns;
  if (!ns.ok()) GTEST_SKIP() << "no network namespace (needs root)";
  const IptablesTools tools = iptables_tools("nft", false);
  verifier::ApplyOptions ao;
  ao.noflush = true;
  ao.flavor = Flavor::Nft;
  auto model = verifier::RulesetState::empty(IPFamily::V4);
  if (*c.init) {
    ASSERT_EQ(ns.exec({tools.restore, "--noflush"}, c.init).exit_code, 0);
    ASSERT_TRUE(verifier::apply_text(model, c.init, ao).ok());
  }
  auto real = ns.exec({tools.restore, "--noflush"}, c.program);
  auto sim = verifier::apply_text(model, c.program, ao);
  const bool real_crashed = real.exit_code < 0 || real.exit_code >= 128;
  if (real_crashed) {
    ASSERT_FALSE(sim.ok()) << c.program;
    EXPECT_EQ(verifier::error_class_name(sim.error->cls), std::string("tool-crash")) << c.program;
  } else {
    ASSERT_EQ(real.exit_code == 0, sim.ok()) << c.program << "real: " << real.err
                                             << "model: " << (sim.ok() ? "" : sim.error->message);
    if (!sim.ok()) {
      EXPECT_EQ(real.err, sim.error->message) << c.program;
    }
  }
  // A failed batch leaves the kernel as it was: the model's state must say so too.
  EXPECT_EQ(save_with_zero_counters(ns.exec({tools.save}).out), verifier::print_save(model, Flavor::Nft)) << c.program;
}

INSTANTIATE_TEST_SUITE_P(Cases, RestoreNftCacheKernel, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kpc::test
