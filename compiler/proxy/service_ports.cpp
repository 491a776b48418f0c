#include "compiler/proxy/service_ports.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <tuple>

namespace kpc::proxy {
namespace {

// kube-proxy's informers select objects without these labels (server.go).
bool ignored_by_labels(const ObjectMeta& m) {
  return m.labels.count("service.kubernetes.io/service-proxy-name") || m.labels.count("service.kubernetes.io/headless");
}

std::optional<IPAddr> cluster_ip_for(const Service& s, IPFamily f) {
  if (s.headless || s.cluster_ips.empty() || s.effective_type() == ServiceType::ExternalName) return std::nullopt;
  if (s.ip_families.empty()) {
    if (s.cluster_ips[0].family == f) return s.cluster_ips[0];
    return std::nullopt;
  }
  for (size_t i = 0; i < s.ip_families.size() && i < s.cluster_ips.size(); ++i)
    if (s.ip_families[i] == f) return s.cluster_ips[i];
  return std::nullopt;
}

std::string join_host_port(const IPAddr& ip, int32_t port) {
  if (ip.family == IPFamily::V6) return "[" + ip.str() + "]:" + std::to_string(port);
  return ip.str() + ":" + std::to_string(port);
}

// "ns/service:port/PROTO": the endpoints map key of kube-proxy's endpointslicecache.
std::string port_key(const std::string& ns, const std::string& service, const std::string& port, Protocol p) {
  std::string k;
  k.reserve(ns.size() + service.size() + port.size() + 4);
  k.append(ns).append("/").append(service).append(":").append(port).append("/");
  k += static_cast<char>('0' + static_cast<int>(p));
  return k;
}

// endpointslicecache: merge the endpoints of every slice of a service, per port key.
std::unordered_map<std::string, std::vector<EndpointInfo>> collect_endpoints(const Snapshot& snap,
                                                                             const NodeContext& node) {
  std::unordered_map<std::string, std::vector<EndpointInfo>> merged;
  AddressType want = node.family == IPFamily::V4 ? AddressType::IPv4 : AddressType::IPv6;
  for (const auto& slice : snap.slices) {  // sorted by namespace/name: deterministic merge order
    if (slice.address_type != want || slice.service_name().empty() || ignored_by_labels(slice.meta)) continue;
    for (const auto& port : slice.ports) {
      if (!port.name || !port.protocol || !port.port || *port.port == 0) continue;
      auto& eps = merged[port_key(slice.meta.ns, slice.service_name(), *port.name, *port.protocol)];
      eps.reserve(eps.size() + slice.endpoints.size());
      for (const auto& ep : slice.endpoints) {
        if (ep.addresses.empty()) continue;
        EndpointInfo& e = eps.emplace_back();
        e.ip = ep.addresses[0];
        e.port = *port.port;
        e.str = join_host_port(e.ip, e.port);
        e.ready = ep.ready.value_or(true);
        e.serving = ep.serving.value_or(true);
        e.terminating = ep.terminating.value_or(false);
        e.local = ep.node_name && *ep.node_name == node.node_name;
        e.zone_hints = ep.hint_zones;
        e.node_hints = ep.hint_nodes;
      }
    }
  }
  // Sort by endpoint string (byte order, as kube-proxy) and resolve duplicates: a later
  // non-terminating endpoint replaces an earlier one; a terminating one never does.
  for (auto& [key, eps] : merged) {
    std::stable_sort(eps.begin(), eps.end(), [](const EndpointInfo& a, const EndpointInfo& b) { return a.str < b.str; });
    size_t out = 0;
    for (size_t i = 0; i < eps.size();) {
      size_t end = i + 1;
      size_t pick = i;
      while (end < eps.size() && eps[end].str == eps[i].str) {
        if (!eps[end].terminating) pick = end;
        ++end;
      }
      if (out != pick) eps[out] = std::move(eps[pick]);
      ++out;
      i = end;
    }
    eps.resize(out);
  }
  return merged;
}

}  // namespace

bool EndpointInfo::has_zone(const std::string& z) const {
  return std::find(zone_hints.begin(), zone_hints.end(), z) != zone_hints.end();
}
bool EndpointInfo::has_node(const std::string& n) const {
  return std::find(node_hints.begin(), node_hints.end(), n) != node_hints.end();
}

std::vector<ServicePortInfo> build_service_ports(const Snapshot& snap, const NodeContext& node) {
  auto endpoints = collect_endpoints(snap, node);
  std::vector<ServicePortInfo> out;
  IPFamily f = node.family;
  for (const auto& svc : snap.services) {
    if (ignored_by_labels(svc.meta)) continue;
    auto cip = cluster_ip_for(svc, f);
    if (!cip) continue;
    ServiceType t = svc.effective_type();
    bool typed_external = svc.type && (t == ServiceType::NodePort || t == ServiceType::LoadBalancer ||
                                       (t == ServiceType::ClusterIP && !svc.external_ips.empty()));
    for (const auto& p : svc.ports) {
      ServicePortInfo sp;
      sp.service = &svc;
      sp.ns = svc.meta.ns;
      sp.name = svc.meta.name;
      sp.port_name = p.name;
      sp.spn = svc.meta.ns + "/" + svc.meta.name + (p.name.empty() ? "" : ":" + p.name);
      sp.protocol = p.protocol;
      sp.cluster_ip = *cip;
      sp.port = p.port;
      sp.node_port = p.node_port;
      for (const auto& ip : svc.external_ips)
        if (ip.family == f) sp.external_ips.push_back(ip);
      for (const auto& ing : svc.load_balancer_ingress)
        if (ing.ip && ing.ip->family == f && ing.ip_mode != LoadBalancerIPMode::Proxy) sp.lb_vips.push_back(*ing.ip);
      for (const auto& r : svc.load_balancer_source_ranges)
        if (r.family() == f) sp.source_ranges.push_back(r.masked());
      sp.external_policy_local = typed_external && svc.external_traffic_policy == TrafficPolicy::Local;
      sp.internal_policy_local = svc.internal_traffic_policy == TrafficPolicy::Local;
      if (t == ServiceType::LoadBalancer && sp.external_policy_local) sp.health_check_node_port = svc.health_check_node_port;
      sp.affinity_client_ip = svc.session_affinity == SessionAffinity::ClientIP;
      sp.affinity_seconds = svc.affinity_timeout_seconds;
      // Each key belongs to exactly one Service port (names and port/protocol pairs are unique).
      auto it = endpoints.find(port_key(svc.meta.ns, svc.meta.name, p.name, p.protocol));
      if (it != endpoints.end()) sp.endpoints = std::move(it->second);
      out.push_back(std::move(sp));
    }
  }
  std::sort(out.begin(), out.end(), [](const ServicePortInfo& a, const ServicePortInfo& b) {
    return std::tie(a.ns, a.name, a.port_name, a.protocol) < std::tie(b.ns, b.name, b.port_name, b.protocol);
  });
  return out;
}

namespace {

enum class TopologyMode { None, SameZone, SameNode };

// topologyModeFromHints: decided from the ready endpoints only.
TopologyMode topology_mode(const ServicePortInfo& sp, const NodeContext& node) {
  bool node_hints_all = true, for_node = false, zone_hints_all = true, for_zone = false;
  std::string zone = node.zone();
  for (const auto& e : sp.endpoints) {
    if (!e.ready) continue;
    if (e.node_hints.empty()) node_hints_all = false;
    else if (e.has_node(node.node_name)) for_node = true;
    if (e.zone_hints.empty()) zone_hints_all = false;
    else if (e.has_zone(zone)) for_zone = true;
  }
  if (node.prefer_same_traffic_distribution && node_hints_all && for_node) return TopologyMode::SameNode;
  if (zone_hints_all && for_zone) return TopologyMode::SameZone;
  return TopologyMode::None;
}

bool available(const EndpointInfo& e, TopologyMode m, const NodeContext& node) {
  switch (m) {
    case TopologyMode::None: return true;
    case TopologyMode::SameNode: return e.has_node(node.node_name);
    case TopologyMode::SameZone: return e.has_zone(node.zone());
  }
  return true;
}

}  // namespace

Categorized categorize_endpoints(const ServicePortInfo& sp, const NodeContext& node) {
  Categorized c;
  TopologyMode mode = TopologyMode::None;
  if (sp.uses_cluster_endpoints()) {
    mode = topology_mode(sp, node);
    for (const auto& e : sp.endpoints)
      if (e.ready && available(e, mode, node)) c.cluster.push_back(&e);
    if (c.cluster.empty())  // fall back to serving+terminating endpoints, topology ignored
      for (const auto& e : sp.endpoints)
        if (e.serving && e.terminating) c.cluster.push_back(&e);
    c.has_any = !c.cluster.empty();
  }
  if (!sp.uses_local_endpoints()) {
    c.all_reachable = c.cluster;
    return c;
  }
  bool local_ready = false, local_serving_terminating = false;
  for (const auto& e : sp.endpoints) {
    if (e.ready) {
      c.has_any = true;
      local_ready |= e.local;
    } else if (e.serving && e.terminating) {
      c.has_any = true;
      local_serving_terminating |= e.local;
    }
  }
  bool use_terminating = false;
  if (local_ready) {
    for (const auto& e : sp.endpoints)
      if (e.local && e.ready) c.local.push_back(&e);
  } else if (local_serving_terminating) {
    use_terminating = true;
    for (const auto& e : sp.endpoints)
      if (e.local && e.serving && e.terminating) c.local.push_back(&e);
  }
  if (!sp.uses_cluster_endpoints()) {
    c.all_reachable = c.local;
    return c;
  }
  if (mode == TopologyMode::None && !use_terminating) {
    c.all_reachable = c.cluster;  // a superset of local
    return c;
  }
  // Union of both lists (kube-proxy builds it from a map; kpc orders it by endpoint string).
  c.all_reachable = c.cluster;
  for (const EndpointInfo* e : c.local)
    if (std::find(c.all_reachable.begin(), c.all_reachable.end(), e) == c.all_reachable.end()) c.all_reachable.push_back(e);
  std::sort(c.all_reachable.begin(), c.all_reachable.end(),
            [](const EndpointInfo* a, const EndpointInfo* b) { return a->str < b->str; });
  return c;
}

}  // namespace kpc::proxy
