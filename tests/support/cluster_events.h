// Random host changes and the informer events between two generated clusters, shared by the
// incremental compiler's property tests (tests/property/incremental*_props_test.cpp). Call
// inside a rapidcheck property: they draw from rc::gen.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "compiler/driver/incremental.h"
#include "tests/support/snapshot_gen.h"

namespace kpc::test {

using Key = std::pair<std::string, std::string>;

/// Changes to the node kube-proxy runs on (topology zone: a full sync), another node, or the
/// configuration (masqueradeAll: a restart; syncPeriod).
void change_host(testgen::GeneratedCluster& c, int serial);

/// The objects of a cluster by key, as rendered documents (what an informer would deliver).
struct Documents {
  std::map<Key, std::string> services, slices, nodes;
  std::string config;
};
Documents documents(const testgen::GeneratedCluster& compilable);

/// Feeds `ic` the events that take cluster `from` to `to` (loaded as `next`): updates of
/// objects whose document changed or appeared, deletions of those that went, in a random
/// order, plus (sometimes) unchanged objects sent again.
void send_events(IncrementalCompiler& ic, const Documents& from, const Documents& to, const Snapshot& next);

}  // namespace kpc::test
