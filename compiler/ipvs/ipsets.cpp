#include "compiler/ipvs/ipsets.h"

#include <algorithm>
#include <charconv>

namespace kpc::ipvs {

namespace {

struct SetInfo {
  const char* base;
  SetType type;
  const char* comment;
};

// proxier.go's ipsetInfo, in its order; comments from ipset.go.
constexpr SetInfo kSets[] = {
    {kLoopBack, SetType::HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
    {kClusterIP, SetType::HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
    {kExternalIP, SetType::HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
    {kExternalIPLocal, SetType::HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
    {kLoadBalancer, SetType::HashIPPort, "Kubernetes service lb portal"},
    {kLoadBalancerFW, SetType::HashIPPort,
     "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
    {kLoadBalancerLocal, SetType::HashIPPort,
     "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
    {kLoadBalancerSourceIP, SetType::HashIPPortIP,
     "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
    {kLoadBalancerSourceCIDR, SetType::HashIPPortNet,
     "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
    {kNodePortTCP, SetType::BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
    {kNodePortLocalTCP, SetType::BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
    {kNodePortUDP, SetType::BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
    {kNodePortLocalUDP, SetType::BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
    {kNodePortSCTP, SetType::HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
    {kNodePortLocalSCTP, SetType::HashIPPort,
     "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
    {kHealthCheckNodePort, SetType::BitmapPort, "Kubernetes health check node port"},
    {kIPVSIPs, SetType::HashIP, "Addresses on the ipvs interface"},
};

void append_port(std::string& s, int32_t port) {
  char buf[16];
  auto r = std::to_chars(buf, buf + sizeof buf, port);
  s.append(buf, r.ptr);
}

std::string ip_proto_port(const IPAddr& ip, Protocol p, int32_t port) {
  std::string s = ip.str();
  s += ',';
  s += protocol_lower(p);
  s += ':';
  append_port(s, port);
  return s;
}

}  // namespace

std::string set_name(std::string_view base, IPFamily family) {
  std::string name(base);
  if (family == IPFamily::V6 && name.starts_with("KUBE-")) {
    name.replace(0, 5, "KUBE-6-");
    if (name.size() > 31) name.resize(31);
  }
  return name;
}

std::vector<IpSet> empty_sets(IPFamily family) {
  std::vector<IpSet> out;
  for (const auto& s : kSets) {
    IpSet set;
    set.base = s.base;
    set.name = set_name(s.base, family);
    set.type = s.type;
    set.family = family;
    set.comment = s.comment;
    out.push_back(std::move(set));
  }
  return out;
}

std::string entry_ip(const IPAddr& ip) { return ip.str(); }
std::string entry_ip_port(const IPAddr& ip, Protocol p, int32_t port) { return ip_proto_port(ip, p, port); }
std::string entry_ip_port_ip(const IPAddr& ip, Protocol p, int32_t port, const IPAddr& ip2) {
  return ip_proto_port(ip, p, port) + "," + ip2.str();
}
std::string entry_ip_port_net(const IPAddr& ip, Protocol p, int32_t port, const CIDR& net) {
  return ip_proto_port(ip, p, port) + "," + net.str();
}
std::string entry_port(int32_t port) {
  std::string s;
  append_port(s, port);
  return s;
}

void normalize_entries(IpSet& set) {
  auto& e = set.entries;
  if (set.type == SetType::BitmapPort)
    std::sort(e.begin(), e.end(), [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;  // decimal numbers without leading zeros
    });
  else
    std::sort(e.begin(), e.end());
  e.erase(std::unique(e.begin(), e.end()), e.end());
}

const char* set_type_name(SetType t) {
  switch (t) {
    case SetType::HashIP: return "hash:ip";
    case SetType::HashIPPort: return "hash:ip,port";
    case SetType::HashIPPortIP: return "hash:ip,port,ip";
    case SetType::HashIPPortNet: return "hash:ip,port,net";
    case SetType::BitmapPort: return "bitmap:port";
  }
  return "?";
}

const char* vs_kind_name(VsKind k) {
  switch (k) {
    case VsKind::ClusterIP: return "ClusterIP";
    case VsKind::ExternalIP: return "externalIP";
    case VsKind::LoadBalancer: return "load-balancer IP";
    case VsKind::NodePort: return "NodePort";
  }
  return "?";
}

namespace {
int protocol_number(Protocol p) { return p == Protocol::TCP ? 6 : p == Protocol::UDP ? 17 : 132; }
}  // namespace

bool ipvsadm_less(const VirtualServer& a, const VirtualServer& b) {
  int pa = protocol_number(a.protocol), pb = protocol_number(b.protocol);
  if (pa != pb) return pa < pb;
  if (a.address != b.address) return a.address < b.address;
  return a.port < b.port;
}

const IpSet* Program::set(std::string_view base_name) const {
  for (const auto& s : sets)
    if (s.base == base_name) return &s;
  return nullptr;
}

}  // namespace kpc::ipvs
