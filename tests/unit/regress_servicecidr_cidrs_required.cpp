// Regression (schema agreement test): a ServiceCIDR without ranges (no spec, no cidrs, null
// or []) loaded cleanly; the API server's ValidateServiceCIDR refuses it ("at least one CIDR
// required"). Now E0101 at spec.cidrs; a spec or cidrs of the wrong type stays E0100 alone.
#include <gtest/gtest.h>

#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {
using loadtest::has_diag;
using loadtest::load_yaml;
using loadtest::pos_of;

const std::string kHead = "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\n";

TEST(RegressServiceCIDR, NoRangeIsAMissingField) {
  struct Case {
    const char* spec;
    const char* at;  // where the diagnostic points (nullptr: the object)
  };
  for (const Case& c : {Case{"", nullptr}, Case{"spec: null\n", nullptr}, Case{"spec: {}\n", "{}"},
                        Case{"spec: {cidrs: null}\n", "null}"}, Case{"spec: {cidrs: []}\n", "[]"}}) {
    std::string text = kHead + c.spec;
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << c.spec;
    Pos at = c.at ? pos_of(text, c.at) : pos_of(text, "apiVersion");
    EXPECT_TRUE(has_diag(l, DiagCode::MissingField, "ServiceCIDR kubernetes", "spec.cidrs", at)) << c.spec;
    EXPECT_EQ(l.codes(), std::vector<std::string>{"E0101"}) << c.spec << l.rendered();
  }
}

TEST(RegressServiceCIDR, WrongTypesAreOnlyWrongTypes) {
  for (const char* spec : {"spec: [a]\n", "spec: {cidrs: 10.0.0.0/16}\n", "spec: {cidrs: {a: b}}\n"}) {
    auto l = load_yaml(kHead + spec);
    EXPECT_FALSE(l.ok) << spec;
    EXPECT_EQ(l.codes(), std::vector<std::string>{"E0100"}) << spec << l.rendered();
  }
}

TEST(RegressServiceCIDR, OneOrTwoRangesStillLoad) {
  for (const char* cidrs : {"[10.96.0.0/12]", "[\"fd00:10:96::/112\"]", "[10.96.0.0/12, \"fd00:10:96::/112\"]",
                            "[\"fd00:10:96::/112\", 10.96.0.0/12]"}) {
    auto l = load_yaml(kHead + "spec: {cidrs: " + cidrs + "}\n");
    EXPECT_TRUE(l.ok) << cidrs << "\n" << l.rendered();
    ASSERT_EQ(l.snap.service_cidrs.size(), 1u);
    EXPECT_FALSE(l.snap.service_cidrs[0].cidrs.empty());
  }
}

}  // namespace
}  // namespace kpc
