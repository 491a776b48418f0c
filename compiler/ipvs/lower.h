// syncProxyRules of kube-proxy's IPVS proxier (pkg/proxy/ipvs/proxier.go), as one full
// sync from nothing: every service port's virtual servers (ClusterIP, externalIPs,
// load-balancer IPs, a NodePort per node address) with the real servers kube-proxy's
// syncEndpoint picks, the ipset entries, the addresses bound to kube-ipvs0, and the
// companion iptables program writeIptablesRules restores.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "compiler/ipvs/program.h"
#include "compiler/proxy/node_context.h"
#include "compiler/proxy/service_ports.h"

namespace kpc::ipvs {

struct LowerOptions {
  std::string scheduler = "rr";  ///< ipvs.scheduler ("" in the configuration = rr)
  /// kube-proxy's nodeAddressSet: the node's local addresses of the family on every
  /// interface but kube-ipvs0, loopback and IPv6 link-local left out (netlink's
  /// GetAllLocalAddressesExcept). NodePorts listen on these when nodePortAddresses matches
  /// everything; an externalIP or LB IP among them is not bound to kube-ipvs0.
  std::vector<IPAddr> node_addresses;
};

/// The node's addresses kube-proxy's nodeAddressSet holds, from the node context's host
/// addresses (NodeEnvironment interfaces, or the Node's addresses and loopback).
std::vector<IPAddr> node_address_set(const Snapshot& snap, const proxy::NodeContext& node);

Program lower_ipvs(std::span<const proxy::ServicePortInfo> ports, const proxy::NodeContext& node,
                   const LowerOptions& opts);

}  // namespace kpc::ipvs
