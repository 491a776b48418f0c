// The IPVS back end's program: what kube-proxy's IPVS proxier (pkg/proxy/ipvs/proxier.go)
// leaves on a node after one full sync, for one IP family. Four parts, four kinds of state:
//   - virtual servers with their real servers (the kernel's IPVS table; `ipvsadm -S -n`),
//   - the KUBE-* ipsets it creates and fills (`ipset save`),
//   - the companion iptables chains it restores (an ir::Program, kube-proxy's restore text),
//   - what it does to the host once: addresses bound to the dummy device kube-ipvs0, and
//     the sysctls/timeouts it sets at start (the node plan, node_plan.h).
// Everything here is typed (addresses, ports, enumerations); text is made only by the
// printers (print.h), so no Kubernetes object can put words into ipvsadm or ipset input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/program.h"
#include "compiler/model/objects.h"

namespace kpc::ipvs {

/// A destination of a virtual server. kube-proxy always adds weight 1 and masquerading
/// (ipvsadm -m); weight 0 only appears on a node while a removed TCP server drains.
struct RealServer {
  IPAddr address;
  uint16_t port = 0;
  uint32_t weight = 1;
  friend auto operator<=>(const RealServer&, const RealServer&) = default;
};

/// What a virtual server is for (the node plan's reasons, reports).
enum class VsKind : uint8_t { ClusterIP, ExternalIP, LoadBalancer, NodePort };
const char* vs_kind_name(VsKind k);  ///< "ClusterIP", "externalIP", "load-balancer IP", "NodePort"

struct VirtualServer {
  Protocol protocol = Protocol::TCP;
  IPAddr address;
  uint16_t port = 0;
  std::string scheduler = "rr";  ///< ipvs.scheduler (a closed enumeration in the config decoder)
  bool persistent = false;       ///< ClientIP affinity: IP_VS_SVC_F_PERSISTENT with `timeout`
  uint32_t timeout = 0;          ///< seconds, when persistent
  bool source_port_hash = false; ///< scheduler mh: flag 0x10, printed `-b mh-port` (after -p)
  std::vector<RealServer> real_servers;  ///< sorted as ipvsadm -S lists them
  // Where it comes from (not IPVS state).
  VsKind kind = VsKind::ClusterIP;
  std::string service_port;  ///< "ns/name:port"
};

/// ipvsadm -S order: protocol number (TCP 6 < UDP 17 < SCTP 132), address, port.
bool ipvsadm_less(const VirtualServer& a, const VirtualServer& b);

enum class SetType : uint8_t { HashIP, HashIPPort, HashIPPortIP, HashIPPortNet, BitmapPort };
const char* set_type_name(SetType t);  ///< "hash:ip,port", ...

struct IpSet {
  std::string name;     ///< KUBE-... (KUBE-6-... for IPv6, cut to 31 characters as kube-proxy does)
  std::string base;     ///< the IPv4 name, kube-proxy's constant
  SetType type = SetType::HashIP;
  IPFamily family = IPFamily::V4;
  std::string comment;  ///< kube-proxy's purpose text (the iptables rules' -m comment)
  std::vector<std::string> entries;  ///< kube-proxy's entry strings, sorted, unique
};

/// An address kube-proxy binds to kube-ipvs0 (a /32 or /128), with why.
struct BoundAddress {
  IPAddr address;
  std::vector<std::string> reasons;  ///< "ClusterIP of ns/name:port", sorted, unique
};

struct Program {
  IPFamily family = IPFamily::V4;
  std::vector<VirtualServer> virtual_servers;  ///< ipvsadm -S order
  std::vector<IpSet> sets;                     ///< every set kube-proxy creates, in its ipsetInfo order
  ir::Program iptables;                        ///< the companion restore program (nat, then filter)
  std::vector<BoundAddress> bound;             ///< kube-ipvs0's addresses, sorted
  size_t real_servers = 0;
  /// ipvs.excludeCIDRs: the node's virtual servers there are never deleted by a sync from the
  /// node's state (kube-proxy's cleanLegacyService skips them). No effect on the full program.
  std::vector<CIDR> exclude_cidrs;

  const IpSet* set(std::string_view base_name) const;
};

}  // namespace kpc::ipvs
