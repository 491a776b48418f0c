// The pieces `kpc golden` explains a difference with: the bounded unified diff
// (compiler/support/line_diff.h) and the by-object summary of two nft programs
// (applier/core/nft_objects.h).
#include <gtest/gtest.h>

#include "applier/core/nft_objects.h"
#include "compiler/support/line_diff.h"

namespace kpc {
namespace {

TEST(LineDiff, EqualIsEmptyAndAChangeIsAHunkAsDiffUPrintsIt) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "x", "y"), "");
  std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n", b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  EXPECT_EQ(unified_diff(a, b, "x", "y"), "--- x\n+++ y\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  // Insertions at the start, deletions at the end, a last line without a newline.
  EXPECT_EQ(unified_diff("b\n", "a\nb\n", "x", "y"), "--- x\n+++ y\n@@ -1 +1,2 @@\n+a\n b\n");
  EXPECT_EQ(unified_diff("a\nb", "a\n", "x", "y"), "--- x\n+++ y\n@@ -1,2 +1 @@\n a\n-b\n\\ No newline at end of file\n");
  // Hostile bytes are escaped; far-apart changes get hunks of their own.
  std::string far_a, far_b;
  for (int i = 0; i < 30; ++i) far_a += std::to_string(i) + "\n", far_b += (i == 2 || i == 25 ? "x\x1b" : std::to_string(i)) + "\n";
  std::string d = unified_diff(far_a, far_b, "x", "y");
  EXPECT_NE(d.find("@@ -1,6 +1,6 @@"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -23,7 +23,7 @@"), std::string::npos) << d;
  EXPECT_NE(d.find("+x\\x1B\n"), std::string::npos) << d;
}

TEST(LineDiff, CappedInLinesAndInEdits) {
  std::string a, b;
  for (int i = 0; i < 500; ++i) {
    std::string n = std::to_string(i) + "\n";
    a.append("a").append(n), b.append("b").append(n);
  }
  UnifiedDiffOptions o;
  o.max_lines = 10;
  o.max_edits = 50;  // 1000 edits needed: the region as one block
  std::string d = unified_diff(a, b, "x", "y", o);
  EXPECT_NE(d.find("more than 50 line edits"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -1,500 +1,500 @@"), std::string::npos) << d;
  EXPECT_NE(d.find("... 990 more changed lines not shown"), std::string::npos) << d;
  EXPECT_LT(std::count(d.begin(), d.end(), '\n'), 20);
}

const char* kBefore =
    "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n"
    "add chain ip kube-proxy endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080\n"
    "add chain ip kube-proxy endpoint-NEDU63VM-shop/web/tcp/http__10.244.2.6/8080\n"
    "add chain ip kube-proxy service-KHN6ECMT-shop/web/tcp/http\n"
    "add element ip kube-proxy cluster-ips { 10.96.10.10 }\n"
    "add element ip kube-proxy service-ips { 10.96.10.10 . tcp . 80 : goto service-KHN6ECMT-shop/web/tcp/http }\n"
    "add rule ip kube-proxy service-KHN6ECMT-shop/web/tcp/http numgen random mod 2 vmap { 0 : goto "
    "endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 , 1 : goto endpoint-NEDU63VM-shop/web/tcp/http__10.244.2.6/8080 }\n"
    "add chain ip6 kube-proxy endpoint-AAAAAAAA-ns/v6/tcp/p__fd00.10.244..5/80\n"
    "add element ip kube-proxy no-endpoint-services { 10.96.50.50 . tcp . 80 comment \"shop/gone:p\" : goto reject-chain }\n"
    "add element ip kube-proxy cluster-ips { 10.96.50.50 }\n";

TEST(NftObjects, ChangesByServiceFromNamesAndComments) {
  std::string after = kBefore;
  // web loses 10.244.2.6; ns/v6 loses its endpoint; shop/gone disappears with its cluster IP.
  auto cut = [&](const std::string& line) { after.erase(after.find(line), line.size()); };
  cut("add chain ip kube-proxy endpoint-NEDU63VM-shop/web/tcp/http__10.244.2.6/8080\n");
  cut("add chain ip6 kube-proxy endpoint-AAAAAAAA-ns/v6/tcp/p__fd00.10.244..5/80\n");
  cut("add element ip kube-proxy no-endpoint-services { 10.96.50.50 . tcp . 80 comment \"shop/gone:p\" : goto reject-chain }\n");
  cut("add element ip kube-proxy cluster-ips { 10.96.50.50 }\n");
  cut(std::string(kBefore).substr(std::string(kBefore).find("add rule "), std::string(kBefore).find("add chain ip6") -
                                                                            std::string(kBefore).find("add rule ")));
  after += "add rule ip kube-proxy service-KHN6ECMT-shop/web/tcp/http numgen random mod 1 vmap { 0 : goto "
           "endpoint-FDH7QP7U-shop/web/tcp/http__10.244.1.5/8080 }\n";
  after += "add element ip kube-proxy cluster-ips { 192.0.2.1 }\n";
  auto c = applier::nft_object_changes(kBefore, after);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].service, "ns/v6:p");
  EXPECT_EQ(applier::nft_change_words(c[0]), "Service port removed (1 endpoint, 1 chain, 0 map/set elements, 0 rules)");
  EXPECT_EQ(c[1].service, "shop/gone:p");  // its element by comment, its cluster IP by address
  EXPECT_TRUE(c[1].removed);
  EXPECT_EQ(applier::nft_change_words(c[1]), "Service port removed (0 endpoints, 0 chains, 2 map/set elements, 0 rules)");
  EXPECT_EQ(c[2].service, "shop/web:http");
  EXPECT_EQ(applier::nft_change_words(c[2]), "endpoint removed 10.244.2.6:8080; rules +1 -1");
  EXPECT_EQ(c[3].service, "");  // no Service named
  EXPECT_EQ(applier::nft_change_words(c[3]), "cluster-ips element 192.0.2.1 added");
  EXPECT_TRUE(applier::nft_object_changes(kBefore, kBefore).empty());
}

TEST(NftObjects, IPv6EndpointsAndVerdictChanges) {
  std::string before = "add chain ip6 kube-proxy endpoint-AAAAAAAA-ns/a/tcp/p__fd00.10.244..5/80\n"
                       "add element ip6 kube-proxy service-ips { fd00::1 . tcp . 80 : goto service-BBBBBBBB-ns/a/tcp/p }\n";
  std::string after = "add element ip6 kube-proxy service-ips { fd00::1 . tcp . 80 : goto external-BBBBBBBB-ns/a/tcp/p }\n";
  auto c = applier::nft_object_changes(before, after);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(applier::nft_change_words(c[0]),
            "endpoint removed [fd00:10:244::5]:80; service-ips element fd00::1 . tcp . 80 changed: goto "
            "service-BBBBBBBB-ns/a/tcp/p -> goto external-BBBBBBBB-ns/a/tcp/p");
}

TEST(NftObjects, AnObjectWhoseLinesAreBothGoneAndNewIsChanged) {
  // The endpoint's chain is renamed (another protocol in the name, same Service port).
  std::string before = "add chain ip kube-proxy endpoint-AAAAAAAA-ns/a/tcp/p__10.1.0.5/80\n";
  std::string after = "add chain ip kube-proxy endpoint-CCCCCCCC-ns/a/udp/p__10.1.0.5/80\n";
  auto c = applier::nft_object_changes(before, after);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(applier::nft_change_words(c[0]), "endpoint 10.1.0.5:80 changed");
}

}  // namespace
}  // namespace kpc
