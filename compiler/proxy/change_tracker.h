// What kube-proxy's change trackers would report between two snapshots, for one
// IP family (pkg/proxy/servicechangetracker.go, endpointschangetracker.go), and
// whether the sync must be a full one (KEP-3453: partial syncs write only the
// chains of services whose Service or EndpointSlices changed).
#pragma once

#include <set>
#include <span>
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

// The per-object rules compute_changes applies, for callers that track objects one by one
// (the incremental compiler): the same decisions, object by object.

/// The service tracker: one Service's ports of this family (as append_service_ports gives
/// them, endpoints aside) differ between the two states.
bool service_ports_changed(std::span<const ServicePortInfo> prior, std::span<const ServicePortInfo> next);

/// The endpoints tracker, for one slice (namespace/name) in the two states: `prior` and
/// `next` are its versions, null when absent or not of the proxier's address family.
/// Inserts "ns/service" of every service whose endpoints the change concerns.
void mark_slice_change(const EndpointSlice* prior, const EndpointSlice* next, std::set<std::string>& services);

/// Why kube-proxy would restart (and so sync fully) going from one node context to the
/// other; empty when it would not.
std::string full_sync_reason(const NodeContext& prior, const NodeContext& next);

}  // namespace kpc::proxy
