// Regression (issue 6, adversarial corpus): a Node with two pod CIDRs of one IP family
// loaded cleanly; the API server allows one per family (ValidateDualStackCIDRs), and
// NodeCIDR local-traffic detection silently used the first. Now E0203 at the second.
#include <gtest/gtest.h>

#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {
using loadtest::has_diag;
using loadtest::load_yaml;
using loadtest::pos_of;

TEST(RegressPodCIDRs, TwoOfOneFamilyAreRefusedAtTheSecond) {
  for (const char* pair : {"[10.244.1.0/24, 10.244.2.0/24]", "[\"fd00:1::/64\", \"fd00:2::/64\"]",
                           "[10.244.1.0/24, \"fd00:1::/64\", 10.244.2.0/24]"}) {
    std::string text = std::string("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {podCIDRs: ") + pair + "}\n";
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << pair;
    std::string second = std::string(pair).find("fd00:2") != std::string::npos ? "\"fd00:2::/64\"" : "10.244.2.0/24";
    size_t index = std::string(pair).find("fd00:1::/64\", 10.244") != std::string::npos ? 2 : 1;
    EXPECT_TRUE(has_diag(l, DiagCode::InvalidCIDR, "Node n1", "spec.podCIDRs[" + std::to_string(index) + "]",
                         pos_of(text, second)))
        << pair;
  }
}

TEST(RegressPodCIDRs, OnePerFamilyStillLoads) {
  for (const char* pair : {"[10.244.1.0/24]", "[\"fd00:1::/64\"]", "[10.244.1.0/24, \"fd00:1::/64\"]",
                           "[\"fd00:1::/64\", 10.244.1.0/24]"}) {
    auto l = load_yaml(std::string("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {podCIDRs: ") + pair + "}\n");
    EXPECT_TRUE(l.ok) << pair << "\n" << l.rendered();
  }
}

}  // namespace
}  // namespace kpc
