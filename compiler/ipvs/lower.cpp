#include "compiler/ipvs/lower.h"

#include <algorithm>
#include <map>
#include <set>

#include "compiler/ipvs/iptables_rules.h"
#include "compiler/ipvs/ipsets.h"

namespace kpc::ipvs {

namespace {

bool link_local_v6(const IPAddr& ip) {
  return ip.family == IPFamily::V6 && ip.bytes[0] == 0xfe && (ip.bytes[1] & 0xc0) == 0x80;
}

// netlinkHandle.isValidForSet: the family's addresses, no loopback, no IPv6 link-local.
bool valid_for_set(const IPAddr& ip, IPFamily family) {
  return ip.family == family && !ip.is_loopback() && !link_local_v6(ip);
}

void sort_unique(std::vector<IPAddr>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// One sync's accumulators, named as in proxier.go.
struct Sync {
  const proxy::NodeContext& node;
  const LowerOptions& opts;
  Program prog;
  std::map<std::string, IpSet*> sets;  ///< by base name
  std::map<std::tuple<int, IPAddr, uint16_t>, size_t> vs_index;  ///< activeIPVSServices
  std::map<IPAddr, std::set<std::string>> bind;                  ///< activeBindAddrs, with reasons
  std::vector<std::pair<IPAddr, std::pair<Protocol, int32_t>>> lb_no_node_access;
  std::vector<IPAddr> node_ips;  ///< NodePort addresses

  Sync(const proxy::NodeContext& n, const LowerOptions& o) : node(n), opts(o) {
    prog.family = n.family;
    prog.sets = empty_sets(n.family);
    for (auto& s : prog.sets) sets[s.base] = &s;
  }

  void add(const char* set, std::string entry) { sets.at(set)->entries.push_back(std::move(entry)); }

  bool has_address(const IPAddr& ip) const {
    return std::binary_search(opts.node_addresses.begin(), opts.node_addresses.end(), ip);
  }

  // syncService + syncEndpoint: the virtual server (kept once per address, protocol and
  // port: a later service port with the same one replaces its real servers, as the later
  // syncEndpoint would) and its real servers.
  void virtual_server(const proxy::ServicePortInfo& sp, VsKind kind, const IPAddr& address, int32_t port,
                      bool only_node_local, const proxy::Categorized& cat) {
    VirtualServer vs;
    vs.protocol = sp.protocol;
    vs.address = address;
    vs.port = static_cast<uint16_t>(port);
    vs.scheduler = opts.scheduler;
    if (sp.affinity_client_ip) {
      vs.persistent = true;
      vs.timeout = static_cast<uint32_t>(sp.affinity_seconds);
    }
    vs.source_port_hash = opts.scheduler == "mh";
    vs.kind = kind;
    vs.service_port = sp.spn;
    // kube-proxy's IPVS fallback (PR #97081): with a Local policy and no local endpoint,
    // the cluster endpoints are used (iptables and nftables drop instead).
    const auto& eps = only_node_local && !cat.local.empty() ? cat.local : cat.cluster;
    for (const proxy::EndpointInfo* e : eps)
      vs.real_servers.push_back(RealServer{e->ip, static_cast<uint16_t>(e->port), 1});
    std::sort(vs.real_servers.begin(), vs.real_servers.end());
    vs.real_servers.erase(std::unique(vs.real_servers.begin(), vs.real_servers.end()), vs.real_servers.end());
    auto key = std::make_tuple(static_cast<int>(vs.protocol), vs.address, vs.port);
    if (auto it = vs_index.find(key); it != vs_index.end()) {
      prog.virtual_servers[it->second] = std::move(vs);
    } else {
      vs_index.emplace(key, prog.virtual_servers.size());
      prog.virtual_servers.push_back(std::move(vs));
    }
  }

  void bind_address(const IPAddr& ip, VsKind kind, const std::string& spn) {
    bind[ip].insert(std::string(vs_kind_name(kind)) + " of " + spn);
  }

  void service_port(const proxy::ServicePortInfo& sp) {
    Protocol p = sp.protocol;
    auto cat = proxy::categorize_endpoints(sp, node);
    // Hairpin: every local endpoint of the port, whatever its conditions.
    for (const auto& e : sp.endpoints)
      if (e.local) add(kLoopBack, entry_ip_port_ip(e.ip, p, e.port, e.ip));

    add(kClusterIP, entry_ip_port(sp.cluster_ip, p, sp.port));
    virtual_server(sp, VsKind::ClusterIP, sp.cluster_ip, sp.port, sp.internal_policy_local, cat);
    bind_address(sp.cluster_ip, VsKind::ClusterIP, sp.spn);

    for (const auto& ip : sp.external_ips) {
      add(sp.external_policy_local ? kExternalIPLocal : kExternalIP, entry_ip_port(ip, p, sp.port));
      virtual_server(sp, VsKind::ExternalIP, ip, sp.port, sp.external_policy_local, cat);
      // Not bound when it is already an address of the node's other interfaces.
      if (!has_address(ip)) bind_address(ip, VsKind::ExternalIP, sp.spn);
    }

    for (const auto& vip : sp.lb_vips) {
      std::string entry = entry_ip_port(vip, p, sp.port);
      add(kLoadBalancer, entry);
      if (sp.external_policy_local) add(kLoadBalancerLocal, entry);
      if (!sp.source_ranges.empty()) {
        add(kLoadBalancerFW, entry);
        bool allow_from_node = false;
        for (const auto& cidr : sp.source_ranges) {
          add(kLoadBalancerSourceCIDR, entry_ip_port_net(vip, p, sp.port, cidr));
          if (node.node_ip && cidr.contains(*node.node_ip)) allow_from_node = true;
        }
        // The node's own IP in a range: requests from the node to the VIP (routed back
        // locally) are allowed; otherwise the node may not reach the VIP at all (#119656).
        if (allow_from_node)
          add(kLoadBalancerSourceIP, entry_ip_port_ip(vip, p, sp.port, vip));
        else
          lb_no_node_access.push_back({vip, {p, sp.port}});
      }
      virtual_server(sp, VsKind::LoadBalancer, vip, sp.port, sp.external_policy_local, cat);
      if (!has_address(vip)) bind_address(vip, VsKind::LoadBalancer, sp.spn);
    }

    if (sp.node_port != 0) {
      // No node address to listen on: kube-proxy skips the rest of the port (its
      // health-check node port too).
      if (node_ips.empty()) return;
      const char* set = p == Protocol::TCP ? kNodePortTCP : p == Protocol::UDP ? kNodePortUDP : kNodePortSCTP;
      const char* local = p == Protocol::TCP   ? kNodePortLocalTCP
                          : p == Protocol::UDP ? kNodePortLocalUDP
                                               : kNodePortLocalSCTP;
      std::vector<std::string> entries;
      if (p == Protocol::SCTP)  // hash:ip,port: one entry per node address
        for (const auto& ip : node_ips) entries.push_back(entry_ip_port(ip, p, sp.node_port));
      else
        entries.push_back(entry_port(sp.node_port));
      for (const auto& e : entries) add(set, e);
      if (sp.external_policy_local)
        for (const auto& e : entries) add(local, e);
      for (const auto& ip : node_ips)
        virtual_server(sp, VsKind::NodePort, ip, sp.node_port, sp.external_policy_local, cat);
    }

    if (sp.health_check_node_port != 0) add(kHealthCheckNodePort, entry_port(sp.health_check_node_port));
  }
};

}  // namespace

std::vector<IPAddr> node_address_set(const Snapshot& snap, const proxy::NodeContext& node) {
  std::vector<IPAddr> out;
  if (snap.env.interfaces_set) {
    for (const auto& itf : snap.env.interfaces) {
      if (itf.name == "kube-ipvs0") continue;
      for (const auto& c : itf.addresses)
        if (valid_for_set(c.addr, node.family)) out.push_back(c.addr);
    }
  } else {
    for (const auto& ip : node.host_addresses)
      if (valid_for_set(ip, node.family)) out.push_back(ip);
  }
  sort_unique(out);
  return out;
}

Program lower_ipvs(std::span<const proxy::ServicePortInfo> ports, const proxy::NodeContext& node,
                   const LowerOptions& opts) {
  Sync s(node, opts);
  bool has_node_port = std::any_of(ports.begin(), ports.end(), [](const auto& sp) { return sp.node_port != 0; });
  if (has_node_port) {
    if (node.node_ports_match_all) {
      s.node_ips = opts.node_addresses;
    } else {
      for (const auto& ip : node.node_port_ips())
        if (!ip.is_loopback()) s.node_ips.push_back(ip);
    }
    sort_unique(s.node_ips);
  }
  for (const auto& sp : ports) s.service_port(sp);

  Program& prog = s.prog;
  for (const auto& [ip, reasons] : s.bind) {
    prog.bound.push_back(BoundAddress{ip, {reasons.begin(), reasons.end()}});
    s.add(kIPVSIPs, entry_ip(ip));
  }
  for (auto& set : prog.sets) normalize_entries(set);
  std::sort(prog.virtual_servers.begin(), prog.virtual_servers.end(), ipvsadm_less);
  for (const auto& vs : prog.virtual_servers) prog.real_servers += vs.real_servers.size();
  prog.iptables = companion_iptables(prog, node, s.lb_no_node_access);
  return prog;
}

}  // namespace kpc::ipvs
