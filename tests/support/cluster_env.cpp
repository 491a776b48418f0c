#include "tests/support/cluster_env.h"

#include <cstdio>
#include <cstdlib>

#include "compiler/model/loader.h"

namespace kpc::test {

const char* const kDualStackEnvironment = R"(apiVersion: kpc.dev/v1alpha1
kind: NodeEnvironment
iptables: {randomFully: true, nfacctCounters: true}
interfaces:
- {name: lo, addresses: ["127.0.0.1/8", "::1/128"]}
- {name: eth0, addresses: ["192.168.0.10/24", "2001:db8::10/64"]}
)";

testgen::GeneratedCluster make_compilable(testgen::GeneratedCluster c) {
  if (c.nodes.empty()) c.nodes.push_back({"node-0", "", {}, {"192.168.0.10"}});
  if (!c.config) c.config = testgen::GenProxyConfig{};
  c.config->mode = "iptables";
  c.config->hostname_override = c.nodes[0].name;
  return c;
}

std::optional<Snapshot> load_with_environment(const std::vector<std::pair<std::string, std::string>>& files) {
  auto all = files;
  all.emplace_back("environment.yaml", kDualStackEnvironment);
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  if (!load_snapshot_text(all, LoadOptions{}, sm, &snap, diags)) {
    if (std::getenv("KPC_DEBUG")) std::fprintf(stderr, "%s\n", diags.render(sm).c_str());
    return std::nullopt;
  }
  return snap;
}

std::optional<Snapshot> load_compilable(const testgen::GeneratedCluster& c) {
  return load_with_environment({{"cluster.yaml", make_compilable(c).to_yaml()}});
}

}  // namespace kpc::test
