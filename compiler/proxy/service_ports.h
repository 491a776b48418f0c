// Services and EndpointSlices as kube-proxy's change trackers see them for one
// IP family (pkg/proxy/serviceport.go, endpointslicecache.go, topology.go):
// one ServicePortInfo per (Service, port) with its endpoints merged from every
// slice, sorted as kube-proxy sorts them, and categorised for the node.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/model/objects.h"
#include "compiler/proxy/node_context.h"

namespace kpc::proxy {

struct EndpointInfo {
  IPAddr ip;
  int32_t port = 0;
  bool ready = false, serving = false, terminating = false, local = false;
  std::vector<std::string> zone_hints, node_hints;
  bool has_zone(const std::string& z) const;
  bool has_node(const std::string& n) const;

  /// Sets ip and port, and the text "ip:port" / "[ip]:port" (Go JoinHostPort).
  void set_address(const IPAddr& address, int32_t port_number);
  /// "ip:port" / "[ip]:port": the endpoint's identity, sort key and hash input.
  std::string_view str() const { return {str_, str_len_}; }

 private:
  // Kept inline (at most "[" + 39 + "]:" + an int32): a 10k-service sync has ~100k endpoints.
  char str_[56] = {};
  uint8_t str_len_ = 0;
};

struct ServicePortInfo {
  const Service* service = nullptr;  ///< origin, for diagnostics
  std::string ns, name, port_name;
  std::string spn;  ///< "ns/name:port" or "ns/name"
  Protocol protocol = Protocol::TCP;
  IPAddr cluster_ip;
  int32_t port = 0;
  int32_t node_port = 0;
  std::vector<IPAddr> external_ips;
  std::vector<IPAddr> lb_vips;
  std::vector<CIDR> source_ranges;
  bool external_policy_local = false;
  bool internal_policy_local = false;
  int32_t health_check_node_port = 0;
  bool affinity_client_ip = false;
  int32_t affinity_seconds = 0;
  std::vector<EndpointInfo> endpoints;  ///< every endpoint of the port, sorted by str (byte order)

  bool externally_accessible() const { return node_port != 0 || !lb_vips.empty() || !external_ips.empty(); }
  bool uses_cluster_endpoints() const { return !internal_policy_local || externally_accessible(); }
  bool uses_local_endpoints() const {
    return internal_policy_local || (external_policy_local && externally_accessible());
  }
};

/// All service ports of one family, sorted by (namespace, name, port name, protocol).
std::vector<ServicePortInfo> build_service_ports(const Snapshot& snap, const NodeContext& node);

/// The ports of one Service for the node's family (none when kube-proxy ignores the
/// Service), appended to `out` ordered by (port name, protocol), with endpoints merged
/// from `slices`: the EndpointSlices labelled with this Service's name in its namespace,
/// ordered by slice name (any family; slices kube-proxy ignores are skipped here).
/// build_service_ports is this function over every Service; the incremental compiler
/// calls it for the Services that changed.
void append_service_ports(const Service& svc, std::span<const EndpointSlice* const> slices, const NodeContext& node,
                          std::vector<ServicePortInfo>& out);

/// The endpoints the compiler attaches to the snapshot's service ports of one family (the sum over
/// ports, as `kpc compile --stats` counts them): slice endpoints of a port kube-proxy reads, merged.
/// Which endpoints a port has does not depend on the node, so no node is needed.
size_t count_service_endpoints(const Snapshot& snap, IPFamily family);

/// The result of CategorizeEndpoints (pkg/proxy/topology.go).
struct Categorized {
  std::vector<const EndpointInfo*> cluster;
  std::vector<const EndpointInfo*> local;
  std::vector<const EndpointInfo*> all_reachable;  ///< endpoints that get KUBE-SEP chains
  bool has_any = false;
};
Categorized categorize_endpoints(const ServicePortInfo& sp, const NodeContext& node);

}  // namespace kpc::proxy
