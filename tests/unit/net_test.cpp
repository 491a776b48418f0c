// IP/CIDR parsing (strict and sloppy) and Go-compatible canonical printing.
#include <gtest/gtest.h>

#include <string>

#include "compiler/support/net.h"

namespace kpc {
namespace {

std::string canon(const char* s, bool sloppy = false) {
  auto ip = IPAddr::parse(s, sloppy);
  return ip ? ip->str() : "<invalid>";
}

std::string canon_cidr(const char* s, bool allow_bare = false) {
  auto c = CIDR::parse(s, false, nullptr, allow_bare);
  return c ? c->str() : "<invalid>";
}

TEST(NetIPv4, ParsesAndPrintsDottedQuad) {
  EXPECT_EQ(canon("0.0.0.0"), "0.0.0.0");
  EXPECT_EQ(canon("10.96.0.1"), "10.96.0.1");
  EXPECT_EQ(canon("255.255.255.255"), "255.255.255.255");
  auto ip = IPAddr::parse("192.168.1.2");
  ASSERT_TRUE(ip);
  EXPECT_EQ(ip->family, IPFamily::V4);
  EXPECT_EQ(ip->bit_length(), 32u);
  EXPECT_EQ(*ip, IPAddr::v4(192, 168, 1, 2));
}

TEST(NetIPv4, RejectsMalformed) {
  for (const char* bad : {"", "1", "1.2.3", "1.2.3.4.", ".1.2.3.4", "1..2.3", "1.2.3.4.5", "256.0.0.0", "1.2.3.256",
                          "1.2.3.-4", "+1.2.3.4", " 1.2.3.4", "1.2.3.4 ", "1.2.3.4/32", "0x1.2.3.4", "1.2.3.a",
                          "1.2.3.1000", "1,2,3,4", "１.2.3.4"})
    EXPECT_FALSE(IPAddr::parse(bad)) << bad;
}

TEST(NetIPv4, LeadingZerosStrictVersusSloppy) {
  EXPECT_FALSE(IPAddr::parse("010.0.0.1"));
  EXPECT_FALSE(IPAddr::parse("10.00.0.1"));
  IPAddr::ParseInfo info;
  auto ip = IPAddr::parse("010.096.000.001", /*sloppy=*/true, &info);
  ASSERT_TRUE(ip);
  EXPECT_TRUE(info.leading_zero);
  EXPECT_EQ(ip->str(), "10.96.0.1");  // decimal, not octal (kube-proxy's ParseIPSloppy)
  IPAddr::ParseInfo clean;
  ASSERT_TRUE(IPAddr::parse("10.0.0.0", true, &clean));
  EXPECT_FALSE(clean.leading_zero);  // a lone "0" is not a leading zero
  EXPECT_FALSE(IPAddr::parse("010.0.0.256", true));
}

// kube-proxy's ParseIPSloppy (Go 1.16 parseIPv4 + dtoi) reads any number of decimal digits
// per part (regression: kpc stopped at 3).
TEST(NetIPv4, SloppyAcceptsLeadingZerosBeyondThreeDigitsLikeGo) {
  IPAddr::ParseInfo info;
  auto ip = IPAddr::parse("10.0.0.0010", /*sloppy=*/true, &info);
  ASSERT_TRUE(ip) << "10.0.0.0010 is 10.0.0.10 for netutils.ParseIPSloppy";
  EXPECT_EQ(ip->str(), "10.0.0.10");
  EXPECT_TRUE(info.leading_zero);
}

TEST(NetIPv4, SloppyPartsStayWithinAByte) {
  EXPECT_EQ(IPAddr::parse("0000000000000000000000010.0.0.1", true)->str(), "10.0.0.1");
  EXPECT_FALSE(IPAddr::parse("10.0.0.0256", true));
  EXPECT_FALSE(IPAddr::parse("10.0.0.4294967306", true));  // 2^32 + 10: no wrap-around
  EXPECT_FALSE(IPAddr::parse("10.0.0.99999999999999999999999", true));
  EXPECT_FALSE(IPAddr::parse("10.0.0.0010"));  // strict stays strict
  EXPECT_FALSE(IPAddr::parse("10.0.0.1000", true));
}

TEST(NetIPv6, CanonicalFormLikeGo) {
  EXPECT_EQ(canon("2001:db8:0:0:0:0:0:1"), "2001:db8::1");
  EXPECT_EQ(canon("2001:0DB8:0000:0000:0000:0000:0000:0001"), "2001:db8::1");
  EXPECT_EQ(canon("fd00:0:0:0:0:0:0:0"), "fd00::");
  EXPECT_EQ(canon("fd00::"), "fd00::");
  EXPECT_EQ(canon("::"), "::");
  EXPECT_EQ(canon("0:0:0:0:0:0:0:0"), "::");
  EXPECT_EQ(canon("::1"), "::1");
  EXPECT_EQ(canon("0:0:0:0:0:0:0:1"), "::1");
  EXPECT_EQ(canon("2001:DB8::ABCD"), "2001:db8::abcd");
  EXPECT_EQ(canon("fd00:10:96::a"), "fd00:10:96::a");
  // Longest run of zero groups wins.
  EXPECT_EQ(canon("1:0:0:2:0:0:0:3"), "1:0:0:2::3");
  EXPECT_EQ(canon("0:0:1:0:0:0:0:2"), "0:0:1::2");
  // Ties: the first run.
  EXPECT_EQ(canon("1:0:0:2:0:0:3:4"), "1::2:0:0:3:4");
  EXPECT_EQ(canon("1:0:0:0:2:0:0:0"), "1::2:0:0:0");
  // A single zero group is never "::".
  EXPECT_EQ(canon("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7");
  EXPECT_EQ(canon("1:2:3:4:5:6:7:0"), "1:2:3:4:5:6:7:0");
  EXPECT_EQ(canon("0:1:2:3:4:5:6:7"), "0:1:2:3:4:5:6:7");
  // Runs at either end.
  EXPECT_EQ(canon("1:2:3:4:5:6:0:0"), "1:2:3:4:5:6::");
  EXPECT_EQ(canon("0:0:1:2:3:4:5:6"), "::1:2:3:4:5:6");
  EXPECT_EQ(canon("1::"), "1::");
  EXPECT_EQ(canon("1:2:3:4:5:6:7::"), "1:2:3:4:5:6:7:0");
  EXPECT_EQ(canon("::2:3:4:5:6:7:8"), "0:2:3:4:5:6:7:8");
  EXPECT_EQ(canon("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  EXPECT_EQ(IPAddr::parse("::1")->family, IPFamily::V6);
  EXPECT_EQ(IPAddr::parse("::1")->bit_length(), 128u);
}

TEST(NetIPv6, RejectsMalformed) {
  for (const char* bad : {":", ":::", "1:::2", "1::2::3", ":1::", "1:", ":1", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7:",
                          "1:2:3:4:5:6:7:8:9", "1::2:3:4:5:6:7:8", "12345::", "g::", "::g", "::1 ", " ::1", "[::1]",
                          "fe80::1%eth0", "::ffff:1.2.3.4", "::1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "::-1", "0x1::"})
    EXPECT_FALSE(IPAddr::parse(bad)) << bad;
}

// "::ffff:a00:1" is "::ffff:10.0.0.1": Go's To4() is non-nil, so Kubernetes treats it as IPv4
// (regression: only the dotted spelling was rejected).
TEST(NetIPv6, RejectsIPv4MappedInHexForm) {
  EXPECT_FALSE(IPAddr::parse("::ffff:a00:1")) << "parsed as " << canon("::ffff:a00:1");
  EXPECT_FALSE(IPAddr::parse("0:0:0:0:0:ffff:c0a8:1"));
}

TEST(NetIP, LoopbackAndUnspecified) {
  EXPECT_TRUE(IPAddr::parse("127.0.0.1")->is_loopback());
  EXPECT_TRUE(IPAddr::parse("127.255.0.9")->is_loopback());
  EXPECT_FALSE(IPAddr::parse("128.0.0.1")->is_loopback());
  EXPECT_TRUE(IPAddr::parse("::1")->is_loopback());
  EXPECT_FALSE(IPAddr::parse("::2")->is_loopback());
  EXPECT_TRUE(IPAddr::parse("0.0.0.0")->is_unspecified());
  EXPECT_TRUE(IPAddr::parse("::")->is_unspecified());
  EXPECT_FALSE(IPAddr::parse("0.0.0.1")->is_unspecified());
  EXPECT_FALSE(IPAddr::parse("::1")->is_unspecified());
}

TEST(NetIP, FamiliesNeverCompareEqual) {
  // 0.0.0.0 and :: have the same byte array prefix; family must distinguish them.
  EXPECT_NE(*IPAddr::parse("0.0.0.0"), *IPAddr::parse("::"));
  EXPECT_LT(*IPAddr::parse("10.0.0.1"), *IPAddr::parse("10.0.0.2"));
}

TEST(NetCIDR, ParsesAndPrintsMaskedNetwork) {
  EXPECT_EQ(canon_cidr("10.0.0.0/8"), "10.0.0.0/8");
  EXPECT_EQ(canon_cidr("10.1.2.3/8"), "10.0.0.0/8");
  EXPECT_EQ(canon_cidr("192.168.1.130/25"), "192.168.1.128/25");
  EXPECT_EQ(canon_cidr("0.0.0.0/0"), "0.0.0.0/0");
  EXPECT_EQ(canon_cidr("1.2.3.4/32"), "1.2.3.4/32");
  EXPECT_EQ(canon_cidr("::/0"), "::/0");
  EXPECT_EQ(canon_cidr("2001:db8:1:2::/48"), "2001:db8:1::/48");
  EXPECT_EQ(canon_cidr("fd00:10:244:1::5/64"), "fd00:10:244:1::/64");
  EXPECT_EQ(canon_cidr("2001:db8::1/128"), "2001:db8::1/128");
  EXPECT_EQ(canon_cidr("ffff::/1"), "8000::/1");
  auto c = CIDR::parse("10.1.2.3/8");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->addr.str(), "10.1.2.3");  // kept as written
  EXPECT_EQ(c->len, 8);
  EXPECT_EQ(c->family(), IPFamily::V4);
  EXPECT_TRUE(CIDR::parse("1.2.3.4/32")->is_host());
  EXPECT_FALSE(CIDR::parse("1.2.3.4/31")->is_host());
}

TEST(NetCIDR, RejectsMalformed) {
  for (const char* bad : {"10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/08", "10.0.0.0/-1", "10.0.0.0/8/8",
                          "10.0.0.0/ 8", "10.0.0.0/8 ", "/8", "2001:db8::/129", "2001:db8::/1000", "10.0.0/8",
                          "10.0.0.0/a", "::ffff:1.2.3.4/104"})
    EXPECT_FALSE(CIDR::parse(bad)) << bad;
}

TEST(NetCIDR, BareAddressOnlyWhenAllowed) {
  EXPECT_EQ(canon_cidr("10.0.0.1", true), "10.0.0.1/32");
  EXPECT_EQ(canon_cidr("2001:db8::1", true), "2001:db8::1/128");
  EXPECT_EQ(canon_cidr("10.0.0.1"), "<invalid>");
}

TEST(NetCIDR, SloppyLeadingZeros) {
  IPAddr::ParseInfo info;
  auto c = CIDR::parse("010.000.0.0/8", /*sloppy=*/true, &info);
  ASSERT_TRUE(c);
  EXPECT_TRUE(info.leading_zero);
  EXPECT_EQ(c->str(), "10.0.0.0/8");
  EXPECT_FALSE(CIDR::parse("010.000.0.0/8"));
}

TEST(NetCIDR, SloppyPrefixLengthReadsAnyLeadingZerosLikeGo) {
  // Go 1.16 ParseCIDR (ParseCIDRSloppy) reads the prefix length with dtoi as well.
  IPAddr::ParseInfo info;
  auto c = CIDR::parse("10.0.0.0010/0008", /*sloppy=*/true, &info);
  ASSERT_TRUE(c);
  EXPECT_TRUE(info.leading_zero);
  EXPECT_EQ(c->str(), "10.0.0.0/8");
  EXPECT_FALSE(CIDR::parse("10.0.0.0/0008"));
  EXPECT_FALSE(CIDR::parse("10.0.0.0/00000000000000000000033", true));
  EXPECT_FALSE(CIDR::parse("10.0.0.0/99999999999999999999", true));  // no wrap-around
  EXPECT_EQ(CIDR::parse("fd00::/000064", true)->str(), "fd00::/64");
}

TEST(NetCIDR, RejectsIPv4MappedNetworks) {
  EXPECT_FALSE(CIDR::parse("::ffff:0:0/96"));
  EXPECT_FALSE(CIDR::parse("::ffff:a00:0/104"));
  EXPECT_TRUE(CIDR::parse("::fffe:0:0/96"));  // next to the mapped range
  EXPECT_TRUE(CIDR::parse("::1:ffff:0:0/96"));
}

TEST(NetCIDR, Contains) {
  auto c = *CIDR::parse("10.1.2.3/8");
  EXPECT_TRUE(c.contains(*IPAddr::parse("10.255.1.1")));
  EXPECT_TRUE(c.contains(*IPAddr::parse("10.0.0.0")));
  EXPECT_FALSE(c.contains(*IPAddr::parse("11.0.0.0")));
  EXPECT_FALSE(c.contains(*IPAddr::parse("::a00:1")));  // other family
  auto all = *CIDR::parse("0.0.0.0/0");
  EXPECT_TRUE(all.contains(*IPAddr::parse("255.1.2.3")));
  EXPECT_FALSE(all.contains(*IPAddr::parse("::")));
  auto v6 = *CIDR::parse("fd00:10:244::/56");
  EXPECT_TRUE(v6.contains(*IPAddr::parse("fd00:10:244:ff::1")));
  EXPECT_FALSE(v6.contains(*IPAddr::parse("fd00:10:244:100::1")));
  EXPECT_TRUE(CIDR::host(*IPAddr::parse("1.2.3.4")).contains(*IPAddr::parse("1.2.3.4")));
}

TEST(NetCIDR, MaskedAtEveryPrefixLength) {
  auto ip = *IPAddr::parse("255.255.255.255");
  for (int len = 0; len <= 32; ++len) {
    CIDR c{ip, static_cast<uint8_t>(len)};
    uint32_t mask = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
    auto m = c.masked().addr;
    uint32_t got = uint32_t(m.bytes[0]) << 24 | uint32_t(m.bytes[1]) << 16 | uint32_t(m.bytes[2]) << 8 | m.bytes[3];
    EXPECT_EQ(got, mask) << "/" << len;
  }
}

}  // namespace
}  // namespace kpc
