#include "compiler/model/objects.h"

#include <algorithm>

namespace kpc {

Pos FieldPositions::at(std::string_view path) const {
  // Exact match first, then the longest recorded prefix ending at a '.' or '['.
  Pos best;
  size_t best_len = 0;
  for (const auto& [p, pos] : table_) {
    if (p == path) return pos;
    if (p.size() > best_len && path.substr(0, p.size()) == p && path.size() > p.size() &&
        (path[p.size()] == '.' || path[p.size()] == '[')) {
      best = pos;
      best_len = p.size();
    }
  }
  return best;
}

const char* protocol_name(Protocol p) {
  switch (p) {
    case Protocol::TCP: return "TCP";
    case Protocol::UDP: return "UDP";
    case Protocol::SCTP: return "SCTP";
  }
  return "?";
}

const char* protocol_lower(Protocol p) {
  switch (p) {
    case Protocol::TCP: return "tcp";
    case Protocol::UDP: return "udp";
    case Protocol::SCTP: return "sctp";
  }
  return "?";
}

std::string Service::proxy_name() const {
  static const std::string kProxyName = "service.kubernetes.io/service-proxy-name";
  auto it = meta.labels.find(kProxyName);
  return it == meta.labels.end() ? "" : it->second;
}

const std::string& EndpointSlice::service_name() const {
  // Static key and result: kube-proxy's code paths look this up for every slice.
  static const std::string kServiceName = "kubernetes.io/service-name", kNone;
  auto it = meta.labels.find(kServiceName);
  return it == meta.labels.end() ? kNone : it->second;
}

std::optional<IPAddr> Node::node_ip(IPFamily f) const {
  for (const char* type : {"InternalIP", "ExternalIP"})
    for (const auto& a : addresses)
      if (a.type == type)
        if (auto ip = IPAddr::parse(a.address, true); ip && ip->family == f) return ip;
  return std::nullopt;
}

bool ProxyConfig::feature(std::string_view gate, bool default_value) const {
  auto it = feature_gates.find(std::string(gate));
  return it == feature_gates.end() ? default_value : it->second;
}

const Node* Snapshot::find_node(std::string_view name) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), name,
                             [](const Node& n, std::string_view v) { return n.meta.name < v; });
  return it != nodes.end() && it->meta.name == name ? &*it : nullptr;
}

}  // namespace kpc
