// Kubernetes name rules, at and past every length bound.
#include <gtest/gtest.h>

#include <string>

#include "compiler/model/names.h"

namespace kpc {
namespace {

std::string rep(char c, size_t n) { return std::string(n, c); }

#define VALID(check, s) EXPECT_EQ(check(s), std::nullopt) << "\"" << (s) << "\""
#define INVALID(check, s) EXPECT_NE(check(s), std::nullopt) << "\"" << (s) << "\""

TEST(NamesDns1123Label, Rules) {
  for (const char* ok : {"a", "0", "a-b", "0abc", "abc0", "a--b", "web-1", "kube-system"}) VALID(check_dns1123_label, ok);
  for (const char* bad : {"", "-a", "a-", "A", "aB", "a.b", "a_b", "a b", " a", "a\n", "é", "a/b"})
    INVALID(check_dns1123_label, bad);
}

TEST(NamesDns1123Label, LengthBound63) {
  VALID(check_dns1123_label, rep('a', 63));
  INVALID(check_dns1123_label, rep('a', 64));
  EXPECT_EQ(*check_dns1123_label(rep('a', 64)), "must be no more than 63 characters");
  EXPECT_EQ(*check_dns1123_label(""), "must not be empty");
}

TEST(NamesDns1123Subdomain, Rules) {
  for (const char* ok : {"a", "a.b", "a.b.c", "web-1.shop", "0.0", "node-a.example.com"}) VALID(check_dns1123_subdomain, ok);
  for (const char* bad : {"", ".a", "a.", "a..b", "a.-b", "a-.b", "A.b", "a_b", "a b", "a.b\n"})
    INVALID(check_dns1123_subdomain, bad);
}

TEST(NamesDns1123Subdomain, LengthBound253) {
  // 4 labels of 63 + 3 dots = 255; trim to the bound.
  std::string s = rep('a', 63) + "." + rep('b', 63) + "." + rep('c', 63) + "." + rep('d', 61);  // 253
  ASSERT_EQ(s.size(), 253u);
  VALID(check_dns1123_subdomain, s);
  INVALID(check_dns1123_subdomain, s + "d");
  EXPECT_EQ(*check_dns1123_subdomain(s + "d"), "must be no more than 253 characters");
  // The subdomain rule (like apimachinery's IsDNS1123Subdomain) bounds only the total length.
  VALID(check_dns1123_subdomain, rep('a', 64) + ".b");
}

TEST(NamesDns1035Label, Rules) {
  for (const char* ok : {"a", "a0", "web", "web-1", "a-b-c"}) VALID(check_dns1035_label, ok);
  for (const char* bad : {"", "0a", "1", "-a", "a-", "A", "a.b", "a_b", "web\"", "wеb" /* Cyrillic е */})
    INVALID(check_dns1035_label, bad);
  VALID(check_dns1035_label, rep('a', 63));
  INVALID(check_dns1035_label, rep('a', 64));
}

TEST(NamesLabelValue, Rules) {
  for (const char* ok : {"", "a", "A", "0", "a_b", "a.b", "a-b", "Zone_A.1-x"}) VALID(check_label_value, ok);
  for (const char* bad : {"_a", "a_", "-a", "a-", ".a", "a.", "a b", "a/b", "a\nb", "é"}) INVALID(check_label_value, bad);
  VALID(check_label_value, rep('a', 63));
  INVALID(check_label_value, rep('a', 64));
}

TEST(NamesLabelKey, Rules) {
  for (const char* ok : {"app", "App_1", "a.b", "kubernetes.io/service-name", "topology.kubernetes.io/zone", "x/Y", "a/b_c"})
    VALID(check_label_key, ok);
  for (const char* bad : {"", "/", "/x", "x/", "a/b/c", "Kubernetes.io/x", "-a", "a-", "_a", "a b", "a\n", "é/x", "x/é"})
    INVALID(check_label_key, bad);
}

TEST(NamesLabelKey, LengthBounds) {
  VALID(check_label_key, rep('a', 63));
  INVALID(check_label_key, rep('a', 64));
  std::string prefix = rep('p', 63) + "." + rep('q', 63) + "." + rep('r', 63) + "." + rep('s', 61);  // 253
  VALID(check_label_key, prefix + "/" + rep('n', 63));
  INVALID(check_label_key, prefix + "s/n");
  INVALID(check_label_key, prefix + "/" + rep('n', 64));
  EXPECT_EQ(check_label_key(prefix + "s/n")->rfind("prefix part ", 0), 0u);
}

TEST(NamesIana, Rules) {
  for (const char* ok : {"http", "h", "a1", "1a", "http-alt", "tcp8080", "8080-tcp"}) VALID(check_iana_svc_name, ok);
  for (const char* bad : {"", "123", "-ab", "ab-", "a--b", "HTTP", "a_b", "a.b", "a b"}) INVALID(check_iana_svc_name, bad);
  EXPECT_EQ(*check_iana_svc_name("123"), "must contain at least one letter (a-z)");
  EXPECT_EQ(*check_iana_svc_name("a--b"), "must not contain consecutive hyphens");
  EXPECT_EQ(*check_iana_svc_name("-ab"), "must not begin or end with a hyphen");
}

TEST(NamesIana, LengthBound15) {
  VALID(check_iana_svc_name, rep('a', 15));
  INVALID(check_iana_svc_name, rep('a', 16));
  EXPECT_EQ(*check_iana_svc_name(rep('a', 16)), "must be no more than 15 characters");
}

TEST(Names, EmbeddedNulIsRejected) {
  // string_view lengths, not C strings: a NUL must not end the check early.
  std::string s("web\0x", 5);
  INVALID(check_dns1123_label, s);
  INVALID(check_dns1123_subdomain, s);
  INVALID(check_dns1035_label, s);
  INVALID(check_label_value, s);
  INVALID(check_label_key, s);
  INVALID(check_iana_svc_name, s);
}

}  // namespace
}  // namespace kpc
