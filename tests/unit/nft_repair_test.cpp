// nftables drift repair (applier/core/nft_repair.h): one test per kind of drift. The desired
// state is the example cluster's full transaction (fixtures/example/expected/nftables-ipv4.nft,
// kpc's own output, pinned by the golden tests); the node's state is that transaction applied
// by the nft model and then damaged with nft commands. Each repair must apply to the damaged
// state and give a table that lists as the desired one (blocks in any order), touch nothing
// else, and be small: only what differs is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "applier/core/nft_repair.h"
#include "tests/support/nft_compare.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::applier {
namespace {

namespace nft = verifier::nft;

std::string source(const std::string& rel) {
  std::ifstream f(std::string(KPC_SOURCE_DIR) + "/" + rel);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

const std::string& desired_text() {
  static const std::string t = source("fixtures/example/expected/nftables-ipv4.nft");
  return t;
}

const std::string kSvcWeb = "service-KHN6ECMT-shop/web/tcp/http";
const std::string kSvcCart = "service-IJTWSMUZ-shop/cart/tcp/";
const std::string kEpCart = "endpoint-FJP66IDO-shop/cart/tcp/__10.244.2.32/9000";
const std::string kAffCart = "affinity-FJP66IDO-shop/cart/tcp/__10.244.2.32/9000";

nft::NftState desired_state() {
  nft::NftState s;
  auto r = nft::apply_script(s, desired_text(), "desired.nft");
  EXPECT_TRUE(r.ok) << (r.error ? r.error->render() : "");
  return s;
}

// Applies damage (nft commands) to a state; the damage must itself be valid.
void damage(nft::NftState& s, const std::string& script) {
  auto r = nft::apply_script(s, script, "damage.nft");
  ASSERT_TRUE(r.ok) << (r.error ? r.error->render() : "") << script;
}

uint64_t rule_handle(const nft::NftState& s, const std::string& chain, std::string_view containing) {
  for (const auto& r : s.find_table(nft::Family::Ip, "kube-proxy")->find_chain(chain)->rules)
    if (r.canonical().find(containing) != std::string::npos) return r.handle;
  ADD_FAILURE() << "no rule with " << containing << " in " << chain;
  return 0;
}

std::string listing_of(const nft::NftState& s, nft::Family f, const std::string& table) {
  nft::NftState one;
  if (const auto* t = s.find_table(f, table)) one.tables.push_back(*t);
  return test::normalized_nft_listing(nft::print_ruleset(one));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Repairs `actual`, checks the result independently of the repair's own check, and returns it.
NftRepairResult repaired(const nft::NftState& actual, nft::Family family = nft::Family::Ip,
                         const std::string& desired = desired_text()) {
  NftRepairResult r = repair_nft(actual, desired, family);
  EXPECT_TRUE(r.ok) << r.error;
  if (!r.ok) return r;
  nft::NftState after = actual;
  if (!r.transaction.empty()) {
    auto a = nft::apply_script(after, r.transaction, "repair.nft");
    EXPECT_TRUE(a.ok) << (a.error ? a.error->render() : "") << r.transaction;
  }
  nft::NftState want;
  EXPECT_TRUE(nft::apply_script(want, desired, "desired.nft").ok);
  EXPECT_EQ(listing_of(after, family, "kube-proxy"), listing_of(want, family, "kube-proxy")) << r.transaction;
  // Everything else as it was.
  for (const auto& t : actual.tables)
    if (!(t.family == family && t.name == "kube-proxy"))
      EXPECT_EQ(listing_of(after, t.family, t.name), listing_of(actual, t.family, t.name)) << t.name;
  EXPECT_EQ(lines_of(r.transaction).size(), r.stats.operations);
  // Rules are written as kube-proxy writes them: every rule line is one of the desired
  // transaction's own lines.
  auto want_lines = lines_of(desired);
  for (const auto& l : lines_of(r.transaction))
    if (l.rfind("add rule ", 0) == 0 || l.rfind("add element ", 0) == 0 || l.rfind("add set ", 0) == 0 ||
        l.rfind("add map ", 0) == 0)
      EXPECT_NE(std::find(want_lines.begin(), want_lines.end(), l), want_lines.end()) << l;
  return r;
}

TEST(NftRepair, IdenticalStateNeedsNothing) {
  auto r = repaired(desired_state());
  EXPECT_EQ(r.transaction, "");
  EXPECT_EQ(r.stats.operations, 0u);
  EXPECT_EQ(r.stats.chains_kept, 36u);
  EXPECT_EQ(r.stats.sets_kept, 9u);
}

TEST(NftRepair, RuleDeletedFromAServiceChainRewritesThatChainOnly) {
  auto s = desired_state();
  damage(s, "delete rule ip kube-proxy " + kSvcWeb + " handle " + std::to_string(rule_handle(s, kSvcWeb, "numgen")) + "\n");
  auto r = repaired(s);
  EXPECT_EQ(r.transaction,
            "flush chain ip kube-proxy " + kSvcWeb + "\n"
            "add rule ip kube-proxy " + kSvcWeb + " ip daddr 10.96.10.10 ip saddr != 10.244.0.0/16 jump mark-for-masquerade\n"
            "add rule ip kube-proxy " + kSvcWeb + " numgen random mod 2 vmap { 0 : goto endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 , 1 : goto endpoint-NEDU63VM-shop/web/tcp/http__10.244.2.6/8080 }\n");
  EXPECT_EQ(r.stats.chains_rewritten, 1u);
  EXPECT_EQ(r.stats.chains_kept, 35u);
  EXPECT_EQ(r.stats.rules_written, 2u);
}

TEST(NftRepair, ExtraRuleRewritesTheChain) {
  auto s = desired_state();
  damage(s, "insert rule ip kube-proxy " + kSvcWeb + " ip saddr 1.2.3.4 drop\n");
  auto r = repaired(s);
  EXPECT_EQ(r.stats.chains_rewritten, 1u);
  EXPECT_EQ(r.stats.rules_written, 2u);
  EXPECT_EQ(r.stats.operations, 3u);
}

TEST(NftRepair, RulesInAnotherOrderAreDrift) {
  auto s = desired_state();
  damage(s, "delete rule ip kube-proxy " + kSvcWeb + " handle " + std::to_string(rule_handle(s, kSvcWeb, "daddr")) +
                "\nadd rule ip kube-proxy " + kSvcWeb +
                " ip daddr 10.96.10.10 ip saddr != 10.244.0.0/16 jump mark-for-masquerade\n");
  auto r = repaired(s);
  EXPECT_EQ(r.stats.chains_rewritten, 1u);
}

TEST(NftRepair, MissingElementIsAdded) {
  auto s = desired_state();
  damage(s, "delete element ip kube-proxy cluster-ips { 10.96.30.30 }\n");
  auto r = repaired(s);
  EXPECT_EQ(r.transaction, "add element ip kube-proxy cluster-ips { 10.96.30.30 }\n");
  EXPECT_EQ(r.stats.elements_added, 1u);
  EXPECT_EQ(r.stats.elements_deleted, 0u);
}

TEST(NftRepair, ExtraElementIsDeleted) {
  auto s = desired_state();
  damage(s, "add element ip kube-proxy cluster-ips { 10.96.99.1 }\n"
            "add element ip kube-proxy no-endpoint-services { 10.96.99.1 . tcp . 80 comment \"x/y:z\" : drop }\n");
  auto r = repaired(s);
  EXPECT_EQ(r.transaction,
            "delete element ip kube-proxy cluster-ips { 10.96.99.1 }\n"
            "delete element ip kube-proxy no-endpoint-services { 10.96.99.1 . tcp . 80 }\n");
}

TEST(NftRepair, ElementWithAWrongVerdictIsDeletedAndAddedAgain) {
  auto s = desired_state();
  damage(s, "delete element ip kube-proxy service-ips { 10.96.10.10 . tcp . 80 }\n"
            "add element ip kube-proxy service-ips { 10.96.10.10 . tcp . 80 : goto " + kSvcCart + " }\n");
  auto r = repaired(s);
  EXPECT_EQ(r.transaction,
            "delete element ip kube-proxy service-ips { 10.96.10.10 . tcp . 80 }\n"
            "add element ip kube-proxy service-ips { 10.96.10.10 . tcp . 80 : goto " + kSvcWeb + " }\n");
  EXPECT_EQ(r.stats.elements_added, 1u);
  EXPECT_EQ(r.stats.elements_deleted, 1u);
}

TEST(NftRepair, StaleServiceChainReferencedByAMapElementIsUnreferencedFirst) {
  auto s = desired_state();
  const std::string stale = "service-AAAAAAAA-old/gone/tcp/x";
  const std::string stale_ep = "endpoint-BBBBBBBB-old/gone/tcp/x__10.244.9.9/80";
  damage(s, "add chain ip kube-proxy " + stale_ep + "\nadd chain ip kube-proxy " + stale +
                "\nadd rule ip kube-proxy " + stale + " numgen random mod 1 vmap { 0 : goto " + stale_ep + " }\n"
                "add rule ip kube-proxy " + stale_ep + " meta l4proto tcp dnat to 10.244.9.9:80\n"
                "add element ip kube-proxy service-ips { 10.96.99.99 . tcp . 80 : goto " + stale + " }\n"
                "add element ip kube-proxy cluster-ips { 10.96.99.99 }\n");
  auto r = repaired(s);
  auto lines = lines_of(r.transaction);
  auto at = [&](const std::string& l) { return std::find(lines.begin(), lines.end(), l) - lines.begin(); };
  const std::string del_elem = "delete element ip kube-proxy service-ips { 10.96.99.99 . tcp . 80 }";
  const std::string del_svc = "delete chain ip kube-proxy " + stale;
  const std::string del_ep = "delete chain ip kube-proxy " + stale_ep;
  ASSERT_LT(at(del_elem), lines.size()) << r.transaction;
  ASSERT_LT(at(del_svc), lines.size()) << r.transaction;
  ASSERT_LT(at(del_ep), lines.size()) << r.transaction;
  EXPECT_LT(at(del_elem), at(del_svc));
  EXPECT_LT(at(del_svc), at(del_ep));  // the service chain's vmap references the endpoint chain
  EXPECT_EQ(r.stats.chains_deleted, 2u);
  EXPECT_EQ(r.stats.elements_deleted, 2u);
  EXPECT_EQ(r.stats.operations, 4u);
}

TEST(NftRepair, MissingAffinitySetIsCreatedAndItsUsersRewritten) {
  // A node synced before the Service had session affinity for this endpoint: neither the set
  // nor the rules that use it.
  std::string text;
  for (const auto& l : lines_of(desired_text()))
    if (l.find(kAffCart) == std::string::npos) text += l + "\n";
  nft::NftState s;
  damage(s, text);
  auto r = repaired(s);
  EXPECT_EQ(r.stats.sets_created, 1u);
  EXPECT_EQ(r.stats.chains_rewritten, 2u);  // the service chain (lookup) and the endpoint chain (update)
  EXPECT_NE(r.transaction.find("add set ip kube-proxy " + kAffCart +
                               " { type ipv4_addr ; flags dynamic,timeout ; timeout 600s ; }\n"),
            std::string::npos)
      << r.transaction;
  // The set comes before the rules that use it.
  EXPECT_LT(r.transaction.find("add set"), r.transaction.find("add rule"));
}

TEST(NftRepair, SetWithAnotherTimeoutIsRecreatedAroundItsUsers) {
  auto s = desired_state();
  // kube-proxy's affinity sets: the timeout is the Service's; a node with the old one.
  std::string text = desired_text();
  size_t at = text.find("add set ip kube-proxy " + kAffCart);
  text.replace(text.find("timeout 600s", at), 12, "timeout 300s");
  nft::NftState actual;
  damage(actual, text);
  auto r = repaired(actual);
  EXPECT_EQ(r.stats.sets_recreated, 1u);
  EXPECT_EQ(r.stats.chains_rewritten, 2u);
  auto lines = lines_of(r.transaction);
  auto pos = [&](std::string_view prefix) {
    for (size_t i = 0; i < lines.size(); ++i)
      if (lines[i].rfind(prefix, 0) == 0) return i;
    return lines.size();
  };
  EXPECT_LT(pos("flush chain ip kube-proxy " + kSvcCart), pos("delete set ip kube-proxy " + kAffCart));
  EXPECT_LT(pos("flush chain ip kube-proxy " + kEpCart), pos("delete set ip kube-proxy " + kAffCart));
  EXPECT_LT(pos("delete set ip kube-proxy " + kAffCart), pos("add set ip kube-proxy " + kAffCart));
  EXPECT_LT(pos("add set ip kube-proxy " + kAffCart), pos("add rule ip kube-proxy " + kEpCart));
}

TEST(NftRepair, BaseChainWithTheWrongPriorityIsRecreatedWithItsRules) {
  auto s = desired_state();
  damage(s, "delete chain ip kube-proxy nat-output\n"
            "add chain ip kube-proxy nat-output { type nat hook output priority -99 ; }\n"
            "add rule ip kube-proxy nat-output jump services\n");
  auto r = repaired(s);
  EXPECT_EQ(r.transaction,
            "delete chain ip kube-proxy nat-output\n"
            "add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }\n"
            "add rule ip kube-proxy nat-output jump services\n");
  EXPECT_EQ(r.stats.chains_recreated, 1u);
}

TEST(NftRepair, BaseChainWithAnotherHookOrTypeIsRecreated) {
  for (const std::string props : {"type filter hook output priority -100", "type nat hook prerouting priority -100"}) {
    auto s = desired_state();
    damage(s, "delete chain ip kube-proxy nat-output\nadd chain ip kube-proxy nat-output { " + props + " ; }\n");
    auto r = repaired(s);
    EXPECT_EQ(r.stats.chains_recreated, 1u) << props;
    EXPECT_EQ(r.stats.rules_written, 1u) << props;
  }
}

TEST(NftRepair, BaseChainPolicyIsSetInPlace) {
  auto s = desired_state();
  damage(s, "add chain ip kube-proxy filter-input { type filter hook input priority 0 ; policy drop ; }\n");
  auto r = repaired(s);
  EXPECT_EQ(r.transaction,
            "add chain ip kube-proxy filter-input { type filter hook input priority 0 ; policy accept ; }\n");
  EXPECT_EQ(r.stats.policies_set, 1u);
}

TEST(NftRepair, ChainMissingEntirelyIsCreated) {
  auto s = desired_state();
  damage(s, "delete element ip kube-proxy service-nodeports { tcp . 30080 }\n"
            "flush chain ip kube-proxy external-KHN6ECMT-shop/web/tcp/http\n"
            "delete chain ip kube-proxy external-KHN6ECMT-shop/web/tcp/http\n");
  auto r = repaired(s);
  EXPECT_EQ(r.stats.chains_created, 1u);
  EXPECT_EQ(r.stats.elements_added, 1u);
  // chain, rules, then the element that jumps to it
  EXPECT_LT(r.transaction.find("add chain"), r.transaction.find("add rule"));
  EXPECT_LT(r.transaction.find("add rule"), r.transaction.find("add element"));
}

TEST(NftRepair, ChainWithAnotherCommentIsRecreatedAndItsReferrersTooAreRedone) {
  // reject-chain is referenced by no-endpoint elements; nft keeps an existing chain's comment.
  std::string text = desired_text() +
                     "add element ip kube-proxy no-endpoint-services { 10.96.99.1 . tcp . 80 comment \"a/b:c\" : goto reject-chain }\n";
  nft::NftState actual;
  std::string damaged = text;
  damaged.replace(damaged.find("helper for @no-endpoint-services"), 6, "HELPER");
  damage(actual, damaged);
  auto r = repaired(actual, nft::Family::Ip, text);
  EXPECT_EQ(r.stats.chains_recreated, 1u);
  EXPECT_EQ(r.stats.elements_deleted, 1u);
  EXPECT_EQ(r.stats.elements_added, 1u);
}

TEST(NftRepair, ForeignTablesAreLeftAlone) {
  auto s = desired_state();
  damage(s, "add table ip foreign\nadd chain ip foreign c { type filter hook input priority 0 ; policy drop ; }\n"
            "add rule ip foreign c ip saddr 1.2.3.4 accept\n"
            "add table ip6 kube-proxy\nadd chain ip6 kube-proxy stale\n"
            "add table inet kube-proxy\nadd chain inet kube-proxy x\n"
            "delete element ip kube-proxy cluster-ips { 10.96.30.30 }\n");
  auto r = repaired(s);
  EXPECT_EQ(r.transaction, "add element ip kube-proxy cluster-ips { 10.96.30.30 }\n");
}

TEST(NftRepair, StaleObjectsOfTheTableAreDeleted) {
  auto s = desired_state();
  damage(s, "add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment \"IPs that accept NodePort traffic\" ; }\n"
            "add chain ip kube-proxy leftover\nadd rule ip kube-proxy leftover ip daddr @nodeport-ips drop\n");
  auto r = repaired(s);
  EXPECT_EQ(r.stats.chains_deleted, 1u);
  EXPECT_EQ(r.stats.sets_deleted, 1u);
  // the chain that uses the set goes first
  EXPECT_LT(r.transaction.find("delete chain"), r.transaction.find("delete set"));
}

TEST(NftRepair, MissingTableIsWrittenWhole) {
  nft::NftState s;
  damage(s, "add table ip foreign\n");
  auto r = repaired(s);
  EXPECT_TRUE(r.stats.table_created);
  EXPECT_EQ(r.stats.chains_created, 36u);
  EXPECT_EQ(r.stats.sets_created, 9u);
}

TEST(NftRepair, TableCommentIsFixedByRecreatingTheTable) {
  std::string text = desired_text();
  text.replace(text.find("rules for kube-proxy"), 5, "RULES");
  nft::NftState s;
  damage(s, text);
  auto r = repaired(s);
  EXPECT_TRUE(r.stats.table_recreated);
  EXPECT_EQ(lines_of(r.transaction).at(0), "delete table ip kube-proxy");
  EXPECT_EQ(lines_of(r.transaction).at(1), "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }");
}

TEST(NftRepair, ManyKindsOfDriftAtOnce) {
  auto s = desired_state();
  damage(s, "delete rule ip kube-proxy " + kSvcWeb + " handle " + std::to_string(rule_handle(s, kSvcWeb, "numgen")) +
                "\ndelete element ip kube-proxy cluster-ips { 10.96.30.30 }\n"
                "delete element ip kube-proxy service-ips { 10.96.10.10 . tcp . 80 }\n"
                "add element ip kube-proxy service-ips { 10.96.10.10 . tcp . 80 : goto " + kSvcCart + " }\n"
                "add chain ip kube-proxy service-AAAAAAAA-old/gone/tcp/x\n"
                "add element ip kube-proxy service-ips { 10.96.99.99 . tcp . 80 : goto service-AAAAAAAA-old/gone/tcp/x }\n"
                "delete chain ip kube-proxy nat-output\n"
                "add chain ip kube-proxy nat-output { type nat hook output priority -99 ; }\n"
                "flush chain ip kube-proxy " + kEpCart + "\n"
                "add table ip foreign\n");
  auto r = repaired(s);
  EXPECT_EQ(r.stats.chains_rewritten, 2u);
  EXPECT_EQ(r.stats.chains_recreated, 1u);
  EXPECT_EQ(r.stats.chains_deleted, 1u);
}

TEST(NftRepair, NodeStateFromAListingOrAScript) {
  auto want = desired_state();
  for (bool handles : {false, true}) {
    std::string listing = nft::print_ruleset(want, nft::PrintOptions{handles});
    nft::NftState s;
    std::string error;
    ASSERT_TRUE(read_nft_state(listing, "node.nft", &s, &error)) << error;
    auto r = repaired(s);
    EXPECT_EQ(r.transaction, "") << handles;
  }
  nft::NftState s;
  std::string error;
  ASSERT_TRUE(read_nft_state(desired_text(), "node.nft", &s, &error)) << error;
  EXPECT_EQ(repaired(s).transaction, "");
  EXPECT_FALSE(read_nft_state("add rule ip nope c accept\n", "node.nft", &s, &error));
  EXPECT_NE(error.find("node.nft:1:"), std::string::npos) << error;
}

TEST(NftRepair, OnlyTheKubeProxyTableOfAListingIsReadWhenAsked) {
  // firewalld's and CNIs' tables hold interval sets and more that the model does not read.
  std::string foreign =
      "table inet firewalld {\n\tset s {\n\t\ttype ipv4_addr\n\t\tflags interval\n"
      "\t\telements = { 10.0.0.0/8 }\n\t}\n}\n";
  auto s = desired_state();
  damage(s, "delete element ip kube-proxy cluster-ips { 10.96.30.30 }\n");
  std::string listing = foreign + nft::print_ruleset(s) + "table ip6 kube-proxy {\n\tchain x {\n\t}\n}\n";
  nft::NftState all, only;
  std::string error;
  EXPECT_FALSE(read_nft_state(listing, "node.nft", &all, &error));
  TableName t{nft::Family::Ip, "kube-proxy"};
  ASSERT_TRUE(read_nft_state(listing, "node.nft", &only, &error, &t)) << error;
  ASSERT_EQ(only.tables.size(), 1u);
  EXPECT_EQ(repaired(only).transaction, "add element ip kube-proxy cluster-ips { 10.96.30.30 }\n");
  // Line numbers stay those of the file.
  std::string bad = foreign + "table ip kube-proxy {\n\tchain c {\n\t\tjump nowhere\n\t}\n}\n";
  EXPECT_FALSE(read_nft_state(bad, "node.nft", &only, &error, &t));
  EXPECT_NE(error.find("node.nft:10:"), std::string::npos) << error;
  // A listing without the table: an empty state.
  TableName v6{nft::Family::Ip6, "kube-proxy"};
  ASSERT_TRUE(read_nft_state(foreign, "node.nft", &only, &error, &v6)) << error;
  EXPECT_TRUE(only.tables.empty());
}

TEST(NftRepair, DesiredTransactionThatDoesNotApplyIsAnError) {
  nft::NftState s;
  auto r = repair_nft(s, "add rule ip kube-proxy nope accept\n", nft::Family::Ip);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("desired transaction"), std::string::npos) << r.error;
}

TEST(NftRepair, Ipv6Table) {
  std::string v6 = source("fixtures/example/expected/nftables-ipv6.nft");
  nft::NftState s;
  damage(s, v6);
  damage(s, "add table ip kube-proxy\nflush chain ip6 kube-proxy " + kSvcWeb + "\n");
  auto r = repaired(s, nft::Family::Ip6, v6);
  EXPECT_EQ(r.stats.chains_rewritten, 1u);
  EXPECT_EQ(r.transaction.find("ip kube-proxy"), std::string::npos);
}

// The CLI: kpc compile --backend nftables --prior-state FILE.
TEST(NftRepairCli, PriorStateListingGivesTheRepair) {
  using test::bin_path;
  using test::run;
  std::string dir = test::temp_dir("nft-repair");
  auto s = desired_state();
  damage(s, "delete element ip kube-proxy cluster-ips { 10.96.30.30 }\nadd table ip foreign\n");
  test::write_file(dir + "/node.nft", nft::print_ruleset(s, nft::PrintOptions{true}));
  std::string ex = test::source_path("fixtures/example");
  auto r = run({bin_path("kpc"), "compile", ex, "--backend", "nftables", "--prior-state", dir + "/node.nft", "--stats"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "add element ip kube-proxy cluster-ips { 10.96.30.30 }\n");
  EXPECT_NE(r.err.find("repair: 1 operations"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chains: kept 36, rewritten 0, created 0, re-created 0, deleted 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("elements added 1, deleted 0"), std::string::npos) << r.err;
  // -o, and a state that is a script kpc wrote: nothing to do.
  auto same = run({bin_path("kpc"), "compile", ex, "--backend", "nftables", "--prior-state",
                   ex + "/expected/nftables-ipv4.nft", "-o", dir + "/repair.nft"});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(test::read_file(dir + "/repair.nft"), "");
  // IPv6: the ip6 table of the same listing is absent: written whole.
  auto v6 = run({bin_path("kpc"), "compile", ex, "--backend", "nftables", "--family", "ipv6", "--prior-state",
                 dir + "/node.nft", "--stats"});
  EXPECT_EQ(v6.exit_code, 0) << v6.err;
  EXPECT_EQ(v6.out.rfind("add table ip6 kube-proxy { comment \"rules for kube-proxy\" ; }\n", 0), 0u) << v6.out;
  EXPECT_NE(v6.err.find("(table created)"), std::string::npos) << v6.err;
}

TEST(NftRepairCli, BadStateIsAnErrorAndNothingIsWritten) {
  using test::bin_path;
  using test::run;
  std::string dir = test::temp_dir("nft-repair");
  test::write_file(dir + "/node.nft", "table ip kube-proxy {\n\tchain c {\n\t\tjump nowhere\n\t}\n}\n");
  std::string ex = test::source_path("fixtures/example");
  auto r = run({bin_path("kpc"), "compile", ex, "--backend", "nftables", "--prior-state", dir + "/node.nft", "-o",
                dir + "/out.nft"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("node.nft"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a loadable nft listing"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(dir + "/out.nft").good());
  auto fp = run({bin_path("kpc"), "compile", ex, "--backend", "fastpath", "--prior-state", dir + "/node.nft"});
  EXPECT_EQ(fp.exit_code, 2);
  EXPECT_NE(fp.err.find("fast-path table has no drift repair"), std::string::npos) << fp.err;
}

}  // namespace
}  // namespace kpc::applier
