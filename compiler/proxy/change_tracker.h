// What kube-proxy's change trackers would report between two snapshots, for one
// IP family (pkg/proxy/servicechangetracker.go, endpointschangetracker.go), and
// whether the sync must be a full one (KEP-3453: partial syncs write only the
// chains of services whose Service or EndpointSlices changed).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "compiler/model/objects.h"
#include "compiler/proxy/service_ports.h"

namespace kpc::proxy {

struct ChangeSet {
  std::set<std::string> services;  ///< "ns/name" of every changed Service (either tracker)
  bool full_sync = false;          ///< the sync cannot be partial
  std::string full_sync_reason;    ///< why (empty when partial)
};

/// Compares prior and next as kube-proxy would on one proxier (one family).
ChangeSet compute_changes(const Snapshot& prior, const std::vector<ServicePortInfo>& prior_ports,
                          const NodeContext& prior_node, const Snapshot& next,
                          const std::vector<ServicePortInfo>& next_ports, const NodeContext& next_node);

}  // namespace kpc::proxy
