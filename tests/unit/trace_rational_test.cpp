// Exact probabilities of the tracer (verifier/trace/rational.h): the kernel's 31-bit
// statistic thresholds, products and complements, and kube-proxy's cascades summing to
// exactly 1 — including cascades whose denominators exceed 128 bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "verifier/parse/parser.h"
#include "verifier/trace/rational.h"

namespace kpc::verifier::trace {
namespace {

// The threshold iptables stores for "--probability P" (read by the verifier's parser).
uint32_t threshold_of(const std::string& p) {
  auto r = parse_rule_text("-A X -m statistic --mode random --probability " + p + " -j ACCEPT", IPFamily::V4);
  EXPECT_TRUE(r.has_value()) << p;
  for (const auto& a : r->args)
    if (a.kind == ir::ArgKind::Probability) return a.value;
  ADD_FAILURE() << "no probability in the parsed rule";
  return 0;
}

// kube-proxy's probability text for 1/n (computeProbability: "%0.10f").
std::string kube_proxy_probability(int n) {
  char b[32];
  std::snprintf(b, sizeof b, "%0.10f", 1.0 / n);
  return b;
}

// The realised distribution of kube-proxy's cascade over n endpoints:
// endpoint i matches with p_i = t_i/2^31 after all earlier rules missed; the last has no statistic.
std::vector<Probability> cascade(int n) {
  std::vector<Probability> out;
  Probability reach = Probability::one();
  for (int i = 0; i < n - 1; ++i) {
    Probability m = Probability::statistic_match(threshold_of(kube_proxy_probability(n - i)));
    out.push_back(reach * m);
    reach = reach * m.complement();
  }
  out.push_back(reach);
  return out;
}

TEST(TraceBigUInt, DecimalAndArithmetic) {
  BigUInt a(1);
  a.shl(100);
  EXPECT_EQ(a.str(), "1267650600228229401496703205376");
  EXPECT_EQ(a.bit_length(), 101u);
  EXPECT_EQ(a.trailing_zeros(), 100u);
  BigUInt b(0xffffffffffffffffull);
  BigUInt c = b * b;  // (2^64-1)^2 = 2^128 - 2^65 + 1
  EXPECT_EQ(c.str(), "340282366920938463426481119284349108225");
  c -= BigUInt(1);
  c.shr(65);
  EXPECT_EQ(c.str(), "9223372036854775807");  // 2^63 - 1
  BigUInt d(123456789);
  EXPECT_EQ(d.divmod_small(1000), 789u);
  EXPECT_EQ(d.str(), "123456");
  EXPECT_EQ(BigUInt().str(), "0");
  EXPECT_TRUE(BigUInt(5) > BigUInt(4));
  EXPECT_TRUE(a > b);
}

TEST(TraceProbability, ThresholdsAreExactAndReduced) {
  EXPECT_EQ(threshold_of("0.5000000000"), 1u << 30);
  EXPECT_EQ(threshold_of("1.0000000000"), 1u << 31);
  EXPECT_EQ(threshold_of("0.3333333333"), 715827883u);  // lround(2^31 * 0.3333333333)
  Probability half = Probability::statistic_match(1u << 30);
  EXPECT_EQ(half.fraction(), "1/2");
  EXPECT_EQ(half.denominator_log2(), 1u);
  EXPECT_EQ(half.decimal(10), "0.5000000000");
  Probability third = Probability::statistic_match(715827883u);
  EXPECT_EQ(third.fraction(), "715827883/2147483648");
  EXPECT_EQ(third.decimal(10), "0.3333333335");
  EXPECT_EQ(third.complement().fraction(), "1431655765/2147483648");
  EXPECT_TRUE(Probability::statistic_match(1u << 31).is_one());
  EXPECT_TRUE(Probability::statistic_match(0).is_zero());
  EXPECT_EQ(Probability::statistic_match(0).fraction(), "0");
  EXPECT_EQ(Probability::one().fraction(), "1");
  EXPECT_EQ(Probability::one().decimal(3), "1.000");
  // Reduction: 2/4 == 1/2, so equal values compare equal.
  EXPECT_EQ(Probability::ratio_pow2(2, 2), half);
  EXPECT_EQ(Probability::ratio_pow2(6, 3).fraction(), "3/4");
}

TEST(TraceProbability, DecimalRoundsHalfUp) {
  EXPECT_EQ(Probability::ratio_pow2(1, 3).decimal(2), "0.13");  // 0.125
  EXPECT_EQ(Probability::ratio_pow2(1, 3).decimal(3), "0.125");
  EXPECT_EQ(Probability::ratio_pow2(1, 40).decimal(10), "0.0000000000");
  EXPECT_EQ(Probability::ratio_pow2(1, 40).decimal(13), "0.0000000000009");
  EXPECT_EQ(Probability::ratio_pow2(1, 1).decimal(0), "1");
}

TEST(TraceProbability, ProductsComplementsAndOrder) {
  Probability a = Probability::ratio_pow2(3, 2), b = Probability::ratio_pow2(1, 3);
  EXPECT_EQ((a * b).fraction(), "3/32");
  EXPECT_EQ((a + b).fraction(), "7/8");
  EXPECT_EQ(a.complement().fraction(), "1/4");
  EXPECT_TRUE(b < a);
  EXPECT_TRUE(Probability::zero() < b);
  EXPECT_EQ(a + a.complement(), Probability::one());
  EXPECT_NEAR((a * b).to_double(), 3.0 / 32, 1e-15);
}

TEST(TraceProbability, ThreeEndpointCascadeIsExactAndSumsToOne) {
  // 0.3333333333 / 0.5000000000 / last
  auto d = cascade(3);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].fraction(), "715827883/2147483648");
  EXPECT_EQ(d[1].fraction(), "1431655765/4294967296");
  EXPECT_EQ(d[2].fraction(), "1431655765/4294967296");
  EXPECT_EQ(d[0].decimal(10), "0.3333333335");
  EXPECT_EQ(d[1].decimal(10), "0.3333333333");
  EXPECT_EQ(d[0] + d[1] + d[2], Probability::one());
  // The intent (uniform 1/3) holds within the kernel's precision of 2^-31.
  for (const auto& p : d) EXPECT_NEAR(p.to_double(), 1.0 / 3, std::ldexp(1.0, -31));
}

TEST(TraceProbability, LongCascadesStayExactBeyond128Bits) {
  for (int n : {2, 4, 7, 10, 33, 100}) {
    auto d = cascade(n);
    Probability sum = Probability::zero();
    for (const auto& p : d) sum = sum + p;
    EXPECT_EQ(sum, Probability::one()) << n << " endpoints";
    // Each endpoint is within n * 2^-31 of 1/n: the thresholds are rounded once per rule.
    for (const auto& p : d) EXPECT_NEAR(p.to_double(), 1.0 / n, n * std::ldexp(1.0, -31)) << n;
  }
  auto d = cascade(10);
  EXPECT_GT(d[9].denominator_log2(), 128u);  // beyond any 128-bit rational
  EXPECT_FALSE(d[9].fraction().empty());
}

}  // namespace
}  // namespace kpc::verifier::trace
