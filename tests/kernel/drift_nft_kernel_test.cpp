// `kpc drift` on a real nftables node: the example's full transactions loaded with the real nft
// in a namespace beside a foreign table, then (1) no drift; (2) the node drifted by hand (a rule
// edited, an element deleted): drift named by object and by Service, exit 1; the repair written
// with -o, applied with the real nft, leaves no drift, and the foreign table is untouched.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/netns.h"
#include "tests/support/test_util.h"

namespace kpc {
namespace {

using test::run;

TEST(DriftNftKernel, DriftFoundRepairedAndForeignTablesUntouched) {
  if (!test::can_use_netns()) GTEST_SKIP() << "needs root for network namespaces";
  test::Netns ns;
  ASSERT_TRUE(ns.ok());
  const std::string kpc = test::bin_path("kpc"), ex = test::source_path("fixtures/example");
  std::string dir = test::temp_dir("drift-nft-kernel");
  for (const char* fam : {"ipv4", "ipv6"}) {
    auto c = run({kpc, "compile", ex, "--backend", "nftables", "--family", fam, "-o", dir + "/" + fam + ".nft"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    auto l = ns.exec({"nft", "-f", dir + "/" + fam + ".nft"});
    ASSERT_EQ(l.exit_code, 0) << l.err;
  }
  auto foreign = ns.exec({"nft", "add table inet mine; add chain inet mine input { type filter hook input priority 0; "
                                 "policy accept; }; add rule inet mine input tcp dport 22 counter accept"});
  ASSERT_EQ(foreign.exit_code, 0) << foreign.err;
  auto listing = [&] {
    auto r = ns.exec({"nft", "list", "ruleset"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    test::write_file(dir + "/ruleset.nft", r.out);
    return r.out;
  };
  std::string before = listing();
  auto clean = run({kpc, "drift", ex, "--state", dir + "/ruleset.nft"});
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_NE(clean.out.find("verdict: no drift"), std::string::npos) << clean.out;

  // Drift: shop/api's firewall allows another source range; kube-dns:dns-tcp loses its service-ips element.
  auto edit = ns.exec({"nft", "flush chain ip kube-proxy firewall-F4VWTUNH-shop/api/tcp/https; add rule ip kube-proxy "
                              "firewall-F4VWTUNH-shop/api/tcp/https ip saddr != { 198.51.100.0/24 } drop"});
  ASSERT_EQ(edit.exit_code, 0) << edit.err;
  listing();
  auto drifted = run({kpc, "drift", ex, "--state", dir + "/ruleset.nft", "-o", dir + "/repair.nft"});
  EXPECT_EQ(drifted.exit_code, 1) << drifted.out << drifted.err;
  EXPECT_NE(drifted.out.find("firewall-F4VWTUNH-shop/api/tcp/https"), std::string::npos) << drifted.out;
  EXPECT_NE(drifted.out.find("shop/api:https: source"), std::string::npos) << drifted.out;
  EXPECT_NE(drifted.out.find("table ip6 kube-proxy: as kube-proxy writes it"), std::string::npos) << drifted.out;

  auto repair = ns.exec({"nft", "-f", dir + "/repair.nft"});
  ASSERT_EQ(repair.exit_code, 0) << repair.err << test::read_file(dir + "/repair.nft");
  std::string after = listing();
  auto again = run({kpc, "drift", ex, "--state", dir + "/ruleset.nft"});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  // The foreign table is as it was.
  auto table = [](const std::string& text) {
    size_t b = text.find("table inet mine");
    return b == std::string::npos ? std::string() : text.substr(b, text.find("\n}", b) - b);
  };
  EXPECT_FALSE(table(before).empty());
  EXPECT_EQ(table(after), table(before));
}

}  // namespace
}  // namespace kpc
