#include "compiler/proxy/service_ports.h"

#include <algorithm>
#include <charconv>
#include <tuple>
#include <unordered_map>

namespace kpc::proxy {
namespace {

// kube-proxy's informers select objects without these labels (server.go).
bool ignored_by_labels(const ObjectMeta& m) {
  // Static keys: a lookup with a string literal would build a temporary std::string.
  static const std::string kProxyName = "service.kubernetes.io/service-proxy-name",
                           kHeadless = "service.kubernetes.io/headless";
  return m.labels.count(kProxyName) || m.labels.count(kHeadless);
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

// A slice of the Service (its service-name label is the Service's) that kube-proxy skips.
bool ignored_slice(const EndpointSlice& slice, AddressType want) {
  return slice.address_type != want || ignored_by_labels(slice.meta);
}

// endpointslicecache: the endpoints of one service port, merged from every slice of
// the Service (usable slices, in slice order), sorted by endpoint string (byte order, as
// kube-proxy) with duplicates resolved: a later non-terminating endpoint replaces an
// earlier one; a terminating one never does.
std::vector<EndpointInfo> merged_endpoints(const ServicePort& sp, const std::vector<const EndpointSlice*>& slices,
                                           const NodeContext& node) {
  std::vector<EndpointInfo> eps;
  for (const EndpointSlice* slice : slices) {
    for (const auto& port : slice->ports) {
      if (!port.name || !port.protocol || !port.port || *port.port == 0) continue;
      if (*port.name != sp.name || *port.protocol != sp.protocol) continue;
      eps.reserve(eps.size() + slice->endpoints.size());
      for (const auto& ep : slice->endpoints) {
        if (ep.addresses.empty()) continue;
        EndpointInfo& e = eps.emplace_back();
        e.set_address(ep.addresses[0], *port.port);
        e.ready = ep.ready.value_or(true);
        e.serving = ep.serving.value_or(true);
        e.terminating = ep.terminating.value_or(false);
        e.local = ep.node_name && *ep.node_name == node.node_name;
        e.zone_hints = ep.hint_zones;
        e.node_hints = ep.hint_nodes;
      }
    }
  }
  auto less = [&](uint32_t a, uint32_t b) { return eps[a].str() < eps[b].str(); };
  bool sorted_unique = true;
  for (size_t i = 1; i < eps.size() && sorted_unique; ++i) sorted_unique = eps[i - 1].str() < eps[i].str();
  if (sorted_unique) return eps;
  // Sort indices, not the (large) endpoints themselves; each endpoint then moves once.
  std::vector<uint32_t> order(eps.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), less);
  std::vector<EndpointInfo> out;
  out.reserve(eps.size());
  for (size_t i = 0; i < order.size();) {
    size_t end = i + 1;
    uint32_t pick = order[i];
    while (end < order.size() && eps[order[end]].str() == eps[order[i]].str()) {
      if (!eps[order[end]].terminating) pick = order[end];
      ++end;
    }
    out.push_back(std::move(eps[pick]));
    i = end;
  }
  return out;
}

auto port_order(const ServicePortInfo& p) { return std::tie(p.ns, p.name, p.port_name, p.protocol); }

// The slices of each Service ("namespace", "service name" label), in snapshot order.
struct ServiceRef {
  std::string_view ns, name;
  friend bool operator==(const ServiceRef&, const ServiceRef&) = default;
};
struct ServiceRefHash {
  size_t operator()(const ServiceRef& r) const {
    return std::hash<std::string_view>()(r.ns) * 31 + std::hash<std::string_view>()(r.name);
  }
};

}  // namespace

void EndpointInfo::set_address(const IPAddr& address, int32_t port_number) {
  ip = address;
  port = port_number;
  char* p = str_;
  if (ip.family == IPFamily::V6) *p++ = '[';
  p += ip.format(p);
  if (ip.family == IPFamily::V6) *p++ = ']';
  *p++ = ':';
  p = std::to_chars(p, str_ + sizeof str_, port).ptr;
  str_len_ = static_cast<uint8_t>(p - str_);
}

bool EndpointInfo::has_zone(const std::string& z) const {
  return std::find(zone_hints.begin(), zone_hints.end(), z) != zone_hints.end();
}
bool EndpointInfo::has_node(const std::string& n) const {
  return std::find(node_hints.begin(), node_hints.end(), n) != node_hints.end();
}

void append_service_ports(const Service& svc, std::span<const EndpointSlice* const> slices, const NodeContext& node,
                          std::vector<ServicePortInfo>& out) {
  if (ignored_by_labels(svc.meta)) return;
  IPFamily f = node.family;
  auto cip = cluster_ip_for(svc, f);
  if (!cip) return;
  ServiceType t = svc.effective_type();
  bool typed_external = svc.type && (t == ServiceType::NodePort || t == ServiceType::LoadBalancer ||
                                     (t == ServiceType::ClusterIP && !svc.external_ips.empty()));
  AddressType want = f == IPFamily::V4 ? AddressType::IPv4 : AddressType::IPv6;
  std::vector<const EndpointSlice*> usable;
  usable.reserve(slices.size());
  for (const EndpointSlice* slice : slices)
    if (!ignored_slice(*slice, want)) usable.push_back(slice);
  size_t first = out.size();
  for (const auto& p : svc.ports) {
    ServicePortInfo& sp = out.emplace_back();
    sp.service = &svc;
    sp.ns = svc.meta.ns;
    sp.name = svc.meta.name;
    sp.port_name = p.name;
    sp.spn.reserve(svc.meta.ns.size() + svc.meta.name.size() + p.name.size() + 2);
    sp.spn.append(svc.meta.ns).append("/").append(svc.meta.name);
    if (!p.name.empty()) sp.spn.append(":").append(p.name);
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
    sp.endpoints = merged_endpoints(p, usable, node);
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
            [](const ServicePortInfo& a, const ServicePortInfo& b) { return port_order(a) < port_order(b); });
}

std::vector<ServicePortInfo> build_service_ports(const Snapshot& snap, const NodeContext& node) {
  std::unordered_map<ServiceRef, std::vector<const EndpointSlice*>, ServiceRefHash> slices_of;
  slices_of.reserve(snap.services.size());
  for (const auto& slice : snap.slices)
    if (const std::string& service = slice.service_name(); !service.empty())
      slices_of[{slice.meta.ns, service}].push_back(&slice);
  std::vector<ServicePortInfo> out;
  out.reserve(snap.services.size() + snap.services.size() / 4);
  for (const auto& svc : snap.services) {
    auto it = slices_of.find({svc.meta.ns, svc.meta.name});
    std::span<const EndpointSlice* const> slices;
    if (it != slices_of.end()) slices = it->second;
    append_service_ports(svc, slices, node, out);
  }
  // The loader sorts Services by (namespace, name), so the ports come out in order; a
  // snapshot built by hand may not be sorted.
  auto less = [](const ServicePortInfo& a, const ServicePortInfo& b) { return port_order(a) < port_order(b); };
  if (!std::is_sorted(out.begin(), out.end(), less)) std::sort(out.begin(), out.end(), less);
  return out;
}

size_t count_service_endpoints(const Snapshot& snap, IPFamily family) {
  NodeContext node;
  node.family = family;
  node.config = &snap.config;
  size_t n = 0;
  for (const auto& p : build_service_ports(snap, node)) n += p.endpoints.size();
  return n;
}

namespace {

enum class TopologyMode { None, SameZone, SameNode };

// topologyModeFromHints: decided from the ready endpoints only.
TopologyMode topology_mode(const ServicePortInfo& sp, const NodeContext& node) {
  bool node_hints_all = true, for_node = false, zone_hints_all = true, for_zone = false;
  const std::string& zone = node.zone();
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
            [](const EndpointInfo* a, const EndpointInfo* b) { return a->str() < b->str(); });
  return c;
}

}  // namespace kpc::proxy
