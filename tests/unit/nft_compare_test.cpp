// kube-proxy's nftables comparison (tests/support/nft_compare.h) on kube-proxy's own
// helper test data and on every expected table of the kp-nft-* fixtures
// (fixtures/KUBEPROXY_NFT_TESTS.md).
#include "tests/support/nft_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "\n" : "") + v[i];
  return out;
}

// Every kubeproxy/*.dump of the kp-nft-* fixtures (expected tables and initial states).
std::vector<fs::path> dump_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(source_path("fixtures"))) {
    auto p = e.path();
    if (p.extension() != ".dump" || p.parent_path().filename() != "kubeproxy") continue;
    if (fs::relative(p, source_path("fixtures")).begin()->string().rfind("kp-nft-", 0) != 0) continue;
    out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// kube-proxy's own unit-test data for the helper (Test_sortNFTablesTransaction in
// helpers_test.go @803d40a5): an unsorted input and its sorted form.
const char* kHelperInput = R"(
add table ip testing { comment "rules for kube-proxy" ; }

add chain ip testing mark-for-masquerade
add rule ip testing mark-for-masquerade mark set mark or 0x4000
add chain ip testing masquerading
add rule ip testing masquerading mark and 0x4000 == 0 return
add rule ip testing masquerading mark set mark xor 0x4000
add rule ip testing masquerading masquerade fully-random

add set ip testing firewall { type ipv4_addr . inet_proto . inet_service ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add set ip testing firewall-allow { type ipv4_addr . inet_proto . inet_service . ipv4_addr ; flags interval ; comment "destinations+sources that are allowed by LoadBalancerSourceRanges" ; }
add chain ip testing firewall-check
add chain ip testing firewall-allow-check
add rule ip testing firewall-allow-check ip daddr . meta l4proto . th dport . ip saddr @firewall-allow return
add rule ip testing firewall-allow-check drop
add rule ip testing firewall-check ip daddr . meta l4proto . th dport @firewall jump firewall-allow-check

# svc1
add chain ip testing service-ULMVA6XW-ns1/svc1/tcp/p80
add rule ip testing service-ULMVA6XW-ns1/svc1/tcp/p80 ip daddr 172.30.0.41 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip testing service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 }

add chain ip testing endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80
add rule ip testing endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 ip saddr 10.180.0.1 jump mark-for-masquerade
add rule ip testing endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80

add element ip testing service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }

# svc2
add chain ip testing service-42NFTM6N-ns2/svc2/tcp/p80
add rule ip testing service-42NFTM6N-ns2/svc2/tcp/p80 ip daddr 172.30.0.42 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip testing service-42NFTM6N-ns2/svc2/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 }
add chain ip testing external-42NFTM6N-ns2/svc2/tcp/p80
add rule ip testing external-42NFTM6N-ns2/svc2/tcp/p80 ip saddr 10.0.0.0/8 goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit pod traffic"
add rule ip testing external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local jump mark-for-masquerade comment "masquerade local traffic"
add rule ip testing external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit local traffic"
add chain ip testing endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80
add rule ip testing endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 ip saddr 10.180.0.2 jump mark-for-masquerade
add rule ip testing endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 meta l4proto tcp dnat to 10.180.0.2:80

add element ip testing service-ips { 172.30.0.42 . tcp . 80 : goto service-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip testing service-ips { 192.168.99.22 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip testing service-ips { 1.2.3.4 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip testing service-nodeports { tcp . 3001 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }

add element ip testing no-endpoint-nodeports { tcp . 3001 comment "ns2/svc2:p80" : drop }
add element ip testing no-endpoint-services { 1.2.3.4 . tcp . 80 comment "ns2/svc2:p80" : drop }
add element ip testing no-endpoint-services { 192.168.99.22 . tcp . 80 comment "ns2/svc2:p80" : drop }
)";

const char* kHelperExpected = R"(add table ip testing { comment "rules for kube-proxy" ; }
add chain ip testing endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80
add chain ip testing endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80
add chain ip testing external-42NFTM6N-ns2/svc2/tcp/p80
add chain ip testing firewall-allow-check
add chain ip testing firewall-check
add chain ip testing mark-for-masquerade
add chain ip testing masquerading
add chain ip testing service-42NFTM6N-ns2/svc2/tcp/p80
add chain ip testing service-ULMVA6XW-ns1/svc1/tcp/p80
add rule ip testing endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 ip saddr 10.180.0.1 jump mark-for-masquerade
add rule ip testing endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80
add rule ip testing endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 ip saddr 10.180.0.2 jump mark-for-masquerade
add rule ip testing endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 meta l4proto tcp dnat to 10.180.0.2:80
add rule ip testing external-42NFTM6N-ns2/svc2/tcp/p80 ip saddr 10.0.0.0/8 goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit pod traffic"
add rule ip testing external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local jump mark-for-masquerade comment "masquerade local traffic"
add rule ip testing external-42NFTM6N-ns2/svc2/tcp/p80 fib saddr type local goto service-42NFTM6N-ns2/svc2/tcp/p80 comment "short-circuit local traffic"
add rule ip testing firewall-allow-check ip daddr . meta l4proto . th dport . ip saddr @firewall-allow return
add rule ip testing firewall-allow-check drop
add rule ip testing firewall-check ip daddr . meta l4proto . th dport @firewall jump firewall-allow-check
add rule ip testing mark-for-masquerade mark set mark or 0x4000
add rule ip testing masquerading mark and 0x4000 == 0 return
add rule ip testing masquerading mark set mark xor 0x4000
add rule ip testing masquerading masquerade fully-random
add rule ip testing service-42NFTM6N-ns2/svc2/tcp/p80 ip daddr 172.30.0.42 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip testing service-42NFTM6N-ns2/svc2/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-SGOXE6O3-ns2/svc2/tcp/p80__10.180.0.2/80 }
add rule ip testing service-ULMVA6XW-ns1/svc1/tcp/p80 ip daddr 172.30.0.41 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade
add rule ip testing service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 }
add set ip testing firewall { type ipv4_addr . inet_proto . inet_service ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add set ip testing firewall-allow { type ipv4_addr . inet_proto . inet_service . ipv4_addr ; flags interval ; comment "destinations+sources that are allowed by LoadBalancerSourceRanges" ; }
add element ip testing no-endpoint-nodeports { tcp . 3001 comment "ns2/svc2:p80" : drop }
add element ip testing no-endpoint-services { 1.2.3.4 . tcp . 80 comment "ns2/svc2:p80" : drop }
add element ip testing no-endpoint-services { 192.168.99.22 . tcp . 80 comment "ns2/svc2:p80" : drop }
add element ip testing service-ips { 1.2.3.4 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip testing service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip testing service-ips { 172.30.0.42 . tcp . 80 : goto service-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip testing service-ips { 192.168.99.22 . tcp . 80 : goto external-42NFTM6N-ns2/svc2/tcp/p80 }
add element ip testing service-nodeports { tcp . 3001 : goto external-42NFTM6N-ns2/svc2/tcp/p80 })";

TEST(NftCompare, KubeProxyHelperTestData) {
  EXPECT_EQ(sort_nftables_transaction(kHelperInput), kHelperExpected);
  EXPECT_TRUE(diff_nftables_transaction(kHelperInput, kHelperExpected).equal);
  // Test_diffNFTablesTransaction: dropping the first lines of the expected text is a difference.
  auto v = lines_of(kHelperExpected);
  auto missing = join(std::vector<std::string>(v.begin() + 1, v.end()));
  auto d = diff_nftables_transaction(kHelperInput, missing);
  EXPECT_FALSE(d.equal);
  EXPECT_EQ(d.line, 1u);
  EXPECT_EQ(d.expected, v[0]);
}

TEST(NftCompare, Basics) {
  EXPECT_EQ(sort_nftables_transaction(""), "");
  EXPECT_EQ(sort_nftables_transaction("\n# only a comment\n\n"), "");
  // Whitespace-only lines are not dropped (only "" and '#' lines are), and are short lines.
  EXPECT_EQ(sort_nftables_transaction(" \nadd table ip t { comment \"x\" ; }\n"), " \nadd table ip t { comment \"x\" ; }");
  // Types rank table > chain > rule > set > map > element; names in byte order.
  EXPECT_EQ(sort_nftables_transaction("add element ip t s { 1 }\nadd map ip t m { type x ; }\nadd set ip t s { type y ; }\n"
                                      "add rule ip t c accept\nadd chain ip t c\nadd table ip t { comment \"x\" ; }"),
            "add table ip t { comment \"x\" ; }\nadd chain ip t c\nadd rule ip t c accept\nadd set ip t s { type y ; }\n"
            "add map ip t m { type x ; }\nadd element ip t s { 1 }");
  EXPECT_EQ(sort_nftables_transaction("add chain ip t b\nadd chain ip t a\nadd chain ip t B"),
            "add chain ip t B\nadd chain ip t a\nadd chain ip t b");
  // Rules of one chain keep their order; elements of one container are sorted by line.
  EXPECT_EQ(sort_nftables_transaction("add rule ip t c z\nadd rule ip t b x\nadd rule ip t c a"),
            "add rule ip t b x\nadd rule ip t c z\nadd rule ip t c a");
  EXPECT_EQ(sort_nftables_transaction("add element ip t s { 2 }\nadd element ip t s { 10 }"),
            "add element ip t s { 10 }\nadd element ip t s { 2 }");
}

// The Go helper's quirks, reproduced because the sort is Go's sort.SliceStable algorithm.
TEST(NftCompare, GoSortQuirks) {
  // A line of fewer than five words is never "less": "add table ip t" (no comment) stays put.
  EXPECT_EQ(sort_nftables_transaction("add table ip t\nadd chain ip t x"), "add table ip t\nadd chain ip t x");
  EXPECT_EQ(sort_nftables_transaction("add chain ip t x\nadd table ip t"), "add chain ip t x\nadd table ip t");
  // Two different object types outside kube-proxy's list (rank 0 both): less() is true
  // both ways, and insertion sort swaps them whatever their order.
  EXPECT_EQ(sort_nftables_transaction("add flowtable ip t f\nadd counter ip t c"), "add counter ip t c\nadd flowtable ip t f");
  EXPECT_EQ(sort_nftables_transaction("add counter ip t c\nadd flowtable ip t f"), "add flowtable ip t f\nadd counter ip t c");
  // The verb is not looked at: flush/delete chain lines sort with the chains, by name.
  EXPECT_EQ(sort_nftables_transaction("flush chain ip t b\ndelete chain ip t a"), "delete chain ip t a\nflush chain ip t b");
  // Word 2 is the type for any verb: "delete rule" sorts with the rules.
  EXPECT_EQ(sort_nftables_transaction("add set ip t s { type y ; }\ndelete rule ip t c handle 3"),
            "delete rule ip t c handle 3\nadd set ip t s { type y ; }");
  // Empty words count: two spaces shift the name to a different word.
  EXPECT_EQ(sort_nftables_transaction("add chain ip t  b\nadd chain ip t a"), "add chain ip t  b\nadd chain ip t a");
}

TEST(NftCompare, FixtureDumpsSortLikeTheHelper) {
  auto files = dump_files();
  // 12 expected tables of TestSyncProxyRulesRepeated, TestOverallNFTablesRules,
  // TestBadIPs, TestSyncProxyRulesStartup (expected + initial state).
  ASSERT_EQ(files.size(), 16u);
  size_t fixed_points = 0;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    std::string text = read_file(f.string());
    std::string sorted = sort_nftables_transaction(text);
    // The sort is idempotent; kube-proxy's expected texts are not in sorted order (the
    // helper sorts both sides), but equal their own sorted form under the comparison.
    EXPECT_EQ(sort_nftables_transaction(sorted), sorted);
    EXPECT_TRUE(diff_nftables_transaction(text, sorted).equal);
    fixed_points += sorted + "\n" == text;
    // The fake's Dump() order of the same table compares equal.
    EXPECT_TRUE(diff_nftables_transaction(text, nftables_dump_order(text)).equal);
    EXPECT_EQ(sort_nftables_transaction(nftables_dump_order(text)), sorted);
    // Every line is an "add" of the kube-proxy table; the one edit (real mark) is made.
    for (const auto& l : lines_of(sorted)) {
      EXPECT_EQ(l.rfind("add ", 0), 0u) << l;
      EXPECT_NE(l.find(" ip kube-proxy"), std::string::npos) << l;
    }
    EXPECT_NE(text.find("mark set mark or 0x00004000"), std::string::npos);
    EXPECT_EQ(text.find("0x4000"), std::string::npos);
  }
  EXPECT_EQ(fixed_points, 0u) << "kube-proxy's expected texts are written in test order, not sorted";
}

// Shuffled lines (with rules of one chain kept in order, as kube-proxy's comparison
// requires), blank lines and comments sort back to the same text.
TEST(NftCompare, ShuffledFixtureDumpsSortBack) {
  std::mt19937 rng(20261121);
  for (const auto& f : dump_files()) {
    SCOPED_TRACE(f.string());
    std::string sorted = sort_nftables_transaction(read_file(f.string()));
    auto lines = lines_of(sorted);
    for (int round = 0; round < 20; ++round) {
      std::vector<std::string> shuffled = lines;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      // Put each chain's rules back in their original relative order, in the slots they now occupy.
      std::map<std::string, std::vector<std::string>> rules_by_chain;
      auto chain_of = [](const std::string& l) -> std::string {
        if (l.rfind("add rule ", 0) != 0) return "";
        std::stringstream ss(l);
        std::string w;
        for (int i = 0; i < 5; ++i) ss >> w;
        return w;
      };
      for (const auto& l : lines)
        if (auto c = chain_of(l); !c.empty()) rules_by_chain[c].push_back(l);
      std::map<std::string, size_t> next;
      for (auto& l : shuffled)
        if (auto c = chain_of(l); !c.empty()) l = rules_by_chain[c][next[c]++];
      // Sprinkle blank lines and comments.
      std::vector<std::string> noisy;
      for (const auto& l : shuffled) {
        if (rng() % 7 == 0) noisy.push_back("");
        if (rng() % 11 == 0) noisy.push_back("# comment " + std::to_string(rng() % 100));
        noisy.push_back(l);
      }
      std::string text = join(noisy) + (round % 2 ? "\n" : "");
      ASSERT_EQ(sort_nftables_transaction(text), sorted) << "round " << round;
      ASSERT_TRUE(diff_nftables_transaction(text, sorted).equal);
    }
  }
}

TEST(NftCompare, ReportsTheFirstDifferingLine) {
  std::string path = source_path("fixtures/kp-nft-overall-nftables-rules/kubeproxy/nftables.dump");
  std::string text = read_file(path);
  const std::string from = "meta l4proto tcp dnat to 10.180.0.4:80", to = "meta l4proto tcp dnat to 10.180.0.9:80";
  size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos);
  std::string changed = text;
  changed.replace(at, from.size(), to);
  size_t source_line = std::count(text.begin(), text.begin() + static_cast<long>(at), '\n') + 1;
  auto original_line = lines_of(text)[source_line - 1];
  auto changed_line = lines_of(changed)[source_line - 1];

  auto sorted = lines_of(sort_nftables_transaction(text));
  size_t sorted_line = std::find(sorted.begin(), sorted.end(), original_line) - sorted.begin() + 1;

  auto d = diff_nftables_transaction(text, changed);
  ASSERT_FALSE(d.equal);
  EXPECT_EQ(d.line, sorted_line);
  EXPECT_EQ(d.expected, original_line);
  EXPECT_EQ(d.actual, changed_line);
  EXPECT_EQ(d.expected_source_line, source_line);
  EXPECT_EQ(d.actual_source_line, source_line);
  std::string msg = describe(d);
  EXPECT_NE(msg.find("sorted line " + std::to_string(sorted_line)), std::string::npos) << msg;
  EXPECT_NE(msg.find(to), std::string::npos) << msg;
  EXPECT_EQ(describe(diff_nftables_transaction(text, text)), "");

  // A rule order change inside one chain is a difference; across chains it is not.
  std::string swapped_in_chain = text;
  const std::string r1 = "add rule ip kube-proxy masquerading mark set mark xor 0x00004000\n";
  const std::string r2 = "add rule ip kube-proxy masquerading masquerade fully-random\n";
  swapped_in_chain.replace(swapped_in_chain.find(r1 + r2), r1.size() + r2.size(), r2 + r1);
  EXPECT_FALSE(diff_nftables_transaction(text, swapped_in_chain).equal);

  // A missing last line: the actual text ends first.
  auto v = lines_of(sort_nftables_transaction(text));
  auto shorter = join(std::vector<std::string>(v.begin(), v.end() - 1));
  auto d2 = diff_nftables_transaction(text, shorter);
  EXPECT_EQ(d2.line, v.size());
  EXPECT_TRUE(d2.actual_ended);
  EXPECT_FALSE(d2.expected_ended);
  EXPECT_NE(describe(d2).find("<end of text>"), std::string::npos);
}

TEST(NftCompare, DumpOrderPutsObjectsBeforeTheirUsers) {
  std::string text = read_file(source_path("fixtures/kp-nft-overall-nftables-rules/kubeproxy/nftables.dump"));
  auto out = lines_of(nftables_dump_order(text));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0], "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }");
  // Kinds appear in the order table, chain, set, map, rule, element.
  std::string kinds;
  for (const auto& l : out) {
    std::string k = l.substr(4, l.find(' ', 4) - 4);
    if (kinds.empty() || kinds.substr(kinds.rfind(',') + 1) != k) kinds += (kinds.empty() ? "" : ",") + k;
  }
  EXPECT_EQ(kinds, "table,chain,set,map,rule,element");
  // Set elements (cluster-ips, nodeport-ips) before map elements; chains sorted by name.
  auto first_map_elem = std::find_if(out.begin(), out.end(), [](const std::string& l) {
    return l.rfind("add element ip kube-proxy service-ips", 0) == 0 || l.rfind("add element ip kube-proxy firewall-ips", 0) == 0;
  });
  auto last_set_elem = std::find_if(out.rbegin(), out.rend(), [](const std::string& l) {
    return l.rfind("add element ip kube-proxy cluster-ips", 0) == 0 || l.rfind("add element ip kube-proxy nodeport-ips", 0) == 0;
  });
  EXPECT_LT(last_set_elem.base() - out.begin(), first_map_elem - out.begin() + 1);
  std::vector<std::string> chains;
  for (const auto& l : out)
    if (l.rfind("add chain ", 0) == 0) chains.push_back(l.substr(0, l.find(' ', 24)));
  EXPECT_TRUE(std::is_sorted(chains.begin(), chains.end()));
}

}  // namespace
}  // namespace kpc::test
