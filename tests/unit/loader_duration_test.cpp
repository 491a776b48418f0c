// Go time.ParseDuration, as parse_go_duration reimplements it for KubeProxyConfiguration.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "compiler/model/decode.h"

namespace kpc {
namespace {

constexpr int64_t kNs = 1, kUs = 1000, kMs = 1'000'000, kS = 1'000'000'000, kM = 60 * kS, kH = 60 * kM;

std::optional<int64_t> ns(const char* s) {
  auto d = parse_go_duration(s);
  return d ? std::optional<int64_t>(d->ns) : std::nullopt;
}

TEST(GoDuration, Valid) {
  EXPECT_EQ(ns("0"), 0);
  EXPECT_EQ(ns("+0"), 0);
  EXPECT_EQ(ns("-0"), 0);
  EXPECT_EQ(ns("0s"), 0);
  EXPECT_EQ(ns("1ns"), 1 * kNs);
  EXPECT_EQ(ns("1us"), 1 * kUs);
  EXPECT_EQ(ns("1\xC2\xB5s"), 1 * kUs);  // U+00B5 micro sign
  EXPECT_EQ(ns("1\xCE\xBCs"), 1 * kUs);  // U+03BC Greek mu
  EXPECT_EQ(ns("300ms"), 300 * kMs);
  EXPECT_EQ(ns("30s"), 30 * kS);
  EXPECT_EQ(ns("1m0s"), 1 * kM);
  EXPECT_EQ(ns("1m30s"), 90 * kS);
  EXPECT_EQ(ns("2h45m"), 2 * kH + 45 * kM);
  EXPECT_EQ(ns("1h2m3s4ms5us6ns"), kH + 2 * kM + 3 * kS + 4 * kMs + 5 * kUs + 6);
  EXPECT_EQ(ns("1.5s"), 1500 * kMs);
  EXPECT_EQ(ns("1h2m3.5s"), kH + 2 * kM + 3500 * kMs);
  EXPECT_EQ(ns(".5s"), 500 * kMs);
  EXPECT_EQ(ns("5.s"), 5 * kS);
  EXPECT_EQ(ns("-1s"), -kS);
  EXPECT_EQ(ns("+1s"), kS);
  EXPECT_EQ(ns("1s1s"), 2 * kS);  // Go allows repeated units
  EXPECT_EQ(ns("24h"), 24 * kH);
}

TEST(GoDuration, Invalid) {
  for (const char* bad : {"", "+", "-", "1", "s", ".", ".s", "1S", "1d", "1 s", " 1s", "1s ", "1s1", "1e3s", "1.2.3s",
                          "--1s", "1h-2m", "infs", "1ss", "0x10s", "١s"})
    EXPECT_EQ(ns(bad), std::nullopt) << "\"" << bad << "\"";
}

TEST(GoDuration, Overflow) {
  EXPECT_EQ(ns("2562048h"), std::nullopt);  // > 2^63-1 ns
  EXPECT_EQ(ns("9999999999999999999h"), std::nullopt);
  EXPECT_EQ(ns("10000000000s"), std::nullopt);
}

// Regression: fractions were accumulated in long double and truncated (1ns short).
TEST(GoDuration, FractionsAreExact) {
  EXPECT_EQ(ns("0.000000001s"), 1);
  EXPECT_EQ(ns("0.3s"), 300 * kMs);
  EXPECT_EQ(ns("1.1s"), 1100 * kMs);
  EXPECT_EQ(ns("0.7s"), 700 * kMs);
  EXPECT_EQ(ns("2.675s"), 2675 * kMs);
  EXPECT_EQ(ns("1.001ms"), 1001 * kUs);
  EXPECT_EQ(ns("0.1h"), 6 * kM);
  EXPECT_EQ(ns("1.000000001s"), kS + 1);
}

// Regression: the overflow guard was "total > 9.2e18", below 2^63-1 ns.
TEST(GoDuration, AcceptsTheLargestGoDuration) {
  EXPECT_EQ(ns("2562047h47m16.854775807s"), INT64_MAX);
  EXPECT_EQ(ns("2562047h"), 2562047 * kH);
}

TEST(GoDuration, LimitsAreExact) {
  EXPECT_EQ(ns("2562047h47m16.854775808s"), std::nullopt);  // INT64_MAX + 1
  EXPECT_EQ(ns("9223372036854775807ns"), INT64_MAX);
  EXPECT_EQ(ns("9223372036854775808ns"), std::nullopt);
  EXPECT_EQ(ns("-9223372036854775808ns"), INT64_MIN);  // Go allows the most negative duration
  EXPECT_EQ(ns("-2562047h47m16.854775808s"), INT64_MIN);
  EXPECT_EQ(ns("-9223372036854775809ns"), std::nullopt);
  EXPECT_EQ(ns("9223372036854775807ns1ns"), std::nullopt);  // overflow across components
  EXPECT_EQ(ns("-9223372036854775808ns9223372036854775808ns"), std::nullopt);
  EXPECT_EQ(ns("1.5ns"), 1);  // fractions of a nanosecond truncate, as in Go
  EXPECT_EQ(ns("1.5000000000000000000000000000s"), 1500 * kMs);  // digits past 2^63 are ignored, as in Go
}

}  // namespace
}  // namespace kpc
