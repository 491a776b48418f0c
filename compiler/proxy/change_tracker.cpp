#include "compiler/proxy/change_tracker.h"

#include <map>
#include <tuple>

namespace kpc::proxy {
namespace {

// Everything of a service port except its endpoints (the service tracker's deep equality
// of the per-family service-port map).
auto port_fields(const ServicePortInfo& p) {
  return std::tie(p.port_name, p.protocol, p.cluster_ip, p.port, p.node_port, p.external_ips, p.lb_vips,
                  p.source_ranges, p.external_policy_local, p.internal_policy_local, p.health_check_node_port,
                  p.affinity_client_ip, p.affinity_seconds);
}

// The ports of each Service: runs of consecutive ports (ports are sorted by namespace/name).
std::map<std::string, std::span<const ServicePortInfo>> by_service(const std::vector<ServicePortInfo>& ports) {
  std::map<std::string, std::span<const ServicePortInfo>> out;
  for (size_t i = 0; i < ports.size();) {
    size_t end = i + 1;
    while (end < ports.size() && ports[end].ns == ports[i].ns && ports[end].name == ports[i].name) ++end;
    out[ports[i].ns + "/" + ports[i].name] = std::span<const ServicePortInfo>(ports).subspan(i, end - i);
    i = end;
  }
  return out;
}

bool same_endpoint(const Endpoint& a, const Endpoint& b) {
  return std::tie(a.addresses, a.fqdn_addresses, a.ready, a.serving, a.terminating, a.node_name, a.zone, a.hint_zones,
                  a.hint_nodes, a.has_zone_hints, a.has_node_hints) ==
         std::tie(b.addresses, b.fqdn_addresses, b.ready, b.serving, b.terminating, b.node_name, b.zone, b.hint_zones,
                  b.hint_nodes, b.has_zone_hints, b.has_node_hints);
}

bool same_port(const EndpointPort& a, const EndpointPort& b) {
  return std::tie(a.name, a.protocol, a.port, a.app_protocol) == std::tie(b.name, b.protocol, b.port, b.app_protocol);
}

// The endpoints tracker marks a service on any change of one of its slices' objects.
bool same_slice(const EndpointSlice& a, const EndpointSlice& b) {
  if (a.meta.labels != b.meta.labels || a.meta.annotations != b.meta.annotations || a.address_type != b.address_type ||
      a.endpoints.size() != b.endpoints.size() || a.ports.size() != b.ports.size())
    return false;
  for (size_t i = 0; i < a.endpoints.size(); ++i)
    if (!same_endpoint(a.endpoints[i], b.endpoints[i])) return false;
  for (size_t i = 0; i < a.ports.size(); ++i)
    if (!same_port(a.ports[i], b.ports[i])) return false;
  return true;
}

std::map<std::string, const EndpointSlice*> slices_of_family(const Snapshot& s, IPFamily f) {
  AddressType want = f == IPFamily::V4 ? AddressType::IPv4 : AddressType::IPv6;
  std::map<std::string, const EndpointSlice*> out;
  for (const auto& sl : s.slices)
    if (sl.address_type == want) out[sl.meta.key()] = &sl;
  return out;
}

std::map<std::string, std::string> topology_labels(const NodeContext& n) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : n.node_labels)
    if (k.rfind("topology.kubernetes.io/", 0) == 0) out[k] = v;
  return out;
}

}  // namespace

// kube-proxy restarts (and so syncs fully) when its configuration or host changes.
std::string full_sync_reason(const NodeContext& a, const NodeContext& b) {
  if (a.node_name != b.node_name) return "the node name changed";
  if (topology_labels(a) != topology_labels(b)) return "the node's topology labels changed";
  if (std::tie(a.node_ip, a.host_addresses, a.node_ports_match_all, a.node_port_cidrs, a.localhost_node_ports,
               a.masquerade_all, a.masquerade_mark, a.random_fully, a.nfacct_counters, a.tcp_be_liberal,
               a.prefer_same_traffic_distribution) !=
      std::tie(b.node_ip, b.host_addresses, b.node_ports_match_all, b.node_port_cidrs, b.localhost_node_ports,
               b.masquerade_all, b.masquerade_mark, b.random_fully, b.nfacct_counters, b.tcp_be_liberal,
               b.prefer_same_traffic_distribution))
    return "kube-proxy's configuration or host facts changed (a restart syncs fully)";
  if (a.detector.kind != b.detector.kind || a.detector.cidr != b.detector.cidr || a.detector.iface != b.detector.iface)
    return "the local-traffic detector changed (a restart syncs fully)";
  return "";
}

bool service_ports_changed(std::span<const ServicePortInfo> a, std::span<const ServicePortInfo> b) {
  if (a.size() != b.size()) return true;
  for (size_t i = 0; i < a.size(); ++i)
    if (port_fields(a[i]) != port_fields(b[i])) return true;
  return false;
}

void mark_slice_change(const EndpointSlice* prior, const EndpointSlice* next, std::set<std::string>& services) {
  auto mark = [&](const EndpointSlice& s) {
    if (!s.service_name().empty()) services.insert(s.meta.ns + "/" + s.service_name());
  };
  if (prior && (!next || !same_slice(*prior, *next))) {
    mark(*prior);
    if (next) mark(*next);
  }
  if (!prior && next) mark(*next);
}

ChangeSet compute_changes(const Snapshot& prior, const std::vector<ServicePortInfo>& prior_ports,
                          const NodeContext& prior_node, const Snapshot& next,
                          const std::vector<ServicePortInfo>& next_ports, const NodeContext& next_node) {
  ChangeSet cs;
  cs.full_sync_reason = full_sync_reason(prior_node, next_node);
  cs.full_sync = !cs.full_sync_reason.empty();

  auto a = by_service(prior_ports), b = by_service(next_ports);
  for (const auto& [name, ports] : a) {
    auto it = b.find(name);
    if (it == b.end() || service_ports_changed(ports, it->second)) cs.services.insert(name);
  }
  for (const auto& [name, ports] : b)
    if (!a.count(name)) cs.services.insert(name);

  auto sa = slices_of_family(prior, prior_node.family), sb = slices_of_family(next, next_node.family);
  for (const auto& [key, s] : sa) {
    auto it = sb.find(key);
    mark_slice_change(s, it == sb.end() ? nullptr : it->second, cs.services);
  }
  for (const auto& [key, s] : sb)
    if (!sa.count(key)) mark_slice_change(nullptr, s, cs.services);
  return cs;
}

}  // namespace kpc::proxy
