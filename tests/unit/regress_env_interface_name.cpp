// Regression (issue 6, adversarial corpus): NodeEnvironment.interfaces[].name took any
// text ("eth0 -j ACCEPT", quotes, newlines, 200 characters). It reaches no rule today,
// but it is the one name in the model that was never checked; it now follows the same
// ifname rule as detectLocal.bridgeInterface/interfaceNamePrefix (E0500).
#include <gtest/gtest.h>

#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {
using loadtest::has_diag;
using loadtest::load_yaml;
using loadtest::pos_of;

std::string env_with(const std::string& name) {
  return "apiVersion: kpc.dev/v1alpha1\nkind: NodeEnvironment\ninterfaces:\n- {name: lo, addresses: [127.0.0.1/8]}\n"
         "- {name: " + name + ", addresses: [192.168.0.10/24]}\n";
}

TEST(RegressEnvInterfaceName, HostileNamesAreRefusedWhereWritten) {
  for (const std::string& name : std::vector<std::string>{"\"eth0 -j ACCEPT\"", "\"eth0\\nCOMMIT\"", "\"a/b\"", "\"e\\\"th0\"", "\"eth'0\"",
                           "\"" + std::string(16, 'e') + "\"", "\".\"", "\"..\"", "\"\\u0435th0\"", "\"eth\\t0\""}) {
    std::string text = env_with(name);
    auto l = load_yaml(text);
    EXPECT_FALSE(l.ok) << name;
    EXPECT_TRUE(has_diag(l, DiagCode::InvalidConfig, "NodeEnvironment", "interfaces[1].name", pos_of(text, name)))
        << name << "\n" << l.rendered();
  }
}

TEST(RegressEnvInterfaceName, RealInterfaceNamesLoad) {
  for (const std::string& name : std::vector<std::string>{"eth0", "ens3", "br-0", "veth1234abcd", "wlp2s0", std::string(15, 'e'), "eth0.100", "cni@0"}) {
    auto l = load_yaml(env_with(name));
    EXPECT_TRUE(l.ok) << name << "\n" << l.rendered();
  }
}

}  // namespace
}  // namespace kpc
