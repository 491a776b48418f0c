#include "compiler/proxy/node_context.h"

#include <algorithm>
#include <tuple>

namespace kpc::proxy {

const std::string& NodeContext::zone() const {
  // Static keys and result: a lookup per service port must not allocate.
  static const std::string kZoneLabel = "topology.kubernetes.io/zone", kNone;
  auto it = node_labels.find(kZoneLabel);
  return it == node_labels.end() ? kNone : it->second;
}

std::vector<IPAddr> NodeContext::node_port_ips() const {
  std::vector<IPAddr> out;
  for (const auto& ip : host_addresses) {
    bool in = false;
    for (const auto& c : node_port_cidrs) in |= c.contains(ip);
    // Loopback NodePorts exist only for IPv4 with localhost NodePorts enabled.
    if (!in || (ip.is_loopback() && !localhost_node_ports)) continue;
    if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool same_context(const NodeContext& a, const NodeContext& b) {
  auto fields = [](const NodeContext& n) {
    return std::tie(n.family, n.node_name, n.node_labels, n.node_ip, n.host_addresses, n.node_ports_match_all,
                    n.node_port_cidrs, n.localhost_node_ports, n.detector.kind, n.detector.cidr, n.detector.iface,
                    n.masquerade_all, n.masquerade_mark, n.random_fully, n.nfacct_counters, n.tcp_be_liberal,
                    n.prefer_same_traffic_distribution);
  };
  return fields(a) == fields(b);
}

std::optional<std::string> resolve_node_name(const Snapshot& snap, DiagSink& diags) {
  if (!snap.config.hostname_override.empty()) return snap.config.hostname_override;
  if (!snap.env.hostname.empty()) return snap.env.hostname;
  if (snap.nodes.size() == 1) return snap.nodes[0].meta.name;
  diags.report(DiagCode::NodeUnknown, snap.config.pos, "", "",
               snap.nodes.empty()
                   ? "no node to compile for: give --node NAME, or set KubeProxyConfiguration.hostnameOverride or "
                     "NodeEnvironment.hostname"
                   : "the snapshot has " + std::to_string(snap.nodes.size()) +
                         " Nodes: pick one with --node NAME (or every one with `kpc compile --node all -o DIR`), or "
                         "set KubeProxyConfiguration.hostnameOverride (or NodeEnvironment.hostname)");
  return std::nullopt;
}

namespace {

LocalDetector make_detector(const ProxyConfig& cfg, const Node* node, IPFamily family) {
  LocalDetector d;
  switch (cfg.detect_local_mode) {
    case DetectLocalMode::ClusterCIDR:
      for (const auto& c : cfg.cluster_cidrs)
        if (c.family() == family) return LocalDetector{LocalDetector::Kind::CIDR, c.masked(), ""};
      return d;
    case DetectLocalMode::NodeCIDR:
      if (node)
        for (const auto& c : node->pod_cidrs)
          if (c.family() == family) return LocalDetector{LocalDetector::Kind::CIDR, c.masked(), ""};
      return d;
    case DetectLocalMode::BridgeInterface:
      return LocalDetector{LocalDetector::Kind::Bridge, {}, cfg.bridge_interface};
    case DetectLocalMode::InterfaceNamePrefix:
      return LocalDetector{LocalDetector::Kind::InterfacePrefix, {}, cfg.interface_name_prefix};
  }
  return d;
}

std::vector<IPAddr> host_addresses(const Snapshot& snap, const Node* node, IPFamily family) {
  std::vector<IPAddr> out;
  if (snap.env.interfaces_set) {
    for (const auto& itf : snap.env.interfaces)
      for (const auto& c : itf.addresses)
        if (c.family() == family) out.push_back(c.addr);
    return out;
  }
  // Default host: loopback plus the Node's addresses.
  out.push_back(family == IPFamily::V4 ? IPAddr::v4(127, 0, 0, 1) : *IPAddr::parse("::1"));
  if (node)
    for (const auto& a : node->addresses)
      if (a.type == "InternalIP" || a.type == "ExternalIP")
        if (auto ip = IPAddr::parse(a.address, true); ip && ip->family == family) out.push_back(*ip);
  return out;
}

}  // namespace

std::optional<NodeContext> build_node_context(const Snapshot& snap, IPFamily family, DiagSink& diags) {
  auto name = resolve_node_name(snap, diags);
  if (!name) return std::nullopt;
  const ProxyConfig& cfg = snap.config;
  const Node* node = snap.find_node(*name);
  if (!node && !snap.nodes.empty())
    diags.report(DiagCode::WarnNodeMissing, cfg.pos, "", "",
                 "Node \"" + *name + "\" is not in the snapshot: no topology labels, node IPs from NodeEnvironment only");
  NodeContext ctx;
  ctx.family = family;
  ctx.config = &cfg;
  ctx.node_name = *name;
  if (node) ctx.node_labels = node->meta.labels;
  // Node IP: bindAddress when it is a specific address of this family, else the Node's.
  if (auto bind = IPAddr::parse(cfg.bind_address, true); bind && !bind->is_unspecified() && bind->family == family)
    ctx.node_ip = bind;
  else if (node)
    ctx.node_ip = node->node_ip(family);
  ctx.host_addresses = host_addresses(snap, node, family);

  bool any_cidr_of_family = false;
  for (const auto& c : cfg.node_port_addresses)
    if (c.family() == family) {
      any_cidr_of_family = true;
      ctx.node_port_cidrs.push_back(c);
    }
  if (cfg.node_port_addresses_primary && ctx.node_ip) {
    ctx.node_port_cidrs.push_back(CIDR::host(*ctx.node_ip));
    any_cidr_of_family = true;
  }
  ctx.node_ports_match_all = !any_cidr_of_family;
  for (const auto& c : ctx.node_port_cidrs)
    if (c.len == 0) ctx.node_ports_match_all = true;
  if (ctx.node_ports_match_all) ctx.node_port_cidrs.clear();

  // Localhost NodePorts: IPv4 only, and only when nodePortAddresses allows 127.0.0.0.
  bool allows_loopback = ctx.node_ports_match_all;
  for (const auto& c : ctx.node_port_cidrs) allows_loopback |= c.contains(IPAddr::v4(127, 0, 0, 0));
  ctx.localhost_node_ports = family == IPFamily::V4 && cfg.iptables.localhost_node_ports && allows_loopback;

  ctx.detector = make_detector(cfg, node, family);
  ctx.masquerade_all = cfg.iptables.masquerade_all;
  ctx.masquerade_mark = 1u << cfg.iptables.masquerade_bit;
  ctx.random_fully = snap.env.random_fully;
  ctx.nfacct_counters = snap.env.nfacct_counters;
  ctx.tcp_be_liberal = cfg.conntrack.tcp_be_liberal;
  ctx.prefer_same_traffic_distribution = cfg.feature("PreferSameTrafficDistribution", false);
  return ctx;
}

}  // namespace kpc::proxy
