// Making a generated cluster (snapshot_gen.h) compilable, shared by the compiler's
// property and kernel tests: at least one node, a KubeProxyConfiguration naming it,
// and a dual-stack NodeEnvironment so that both families compile.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/model/objects.h"
#include "tests/support/snapshot_gen.h"

namespace kpc::test {

/// lo 127.0.0.1/8 + ::1/128, eth0 192.168.0.10/24 + 2001:db8::10/64.
extern const char* const kDualStackEnvironment;

/// The cluster with a node (added if there is none) and an iptables config for node 0.
testgen::GeneratedCluster make_compilable(testgen::GeneratedCluster c);

/// Loads the given documents plus kDualStackEnvironment; nullopt if the loader refuses them
/// (set KPC_DEBUG=1 to print why).
std::optional<Snapshot> load_with_environment(const std::vector<std::pair<std::string, std::string>>& files);

/// make_compilable + render as one YAML stream + load_with_environment.
std::optional<Snapshot> load_compilable(const testgen::GeneratedCluster& c);

}  // namespace kpc::test
