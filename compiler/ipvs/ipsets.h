// The ipsets kube-proxy's IPVS proxier creates (pkg/proxy/ipvs/ipset.go: the set names and
// comments; proxier.go: ipsetInfo, their types), and the entry strings it puts in them
// (utilipset.Entry.String()). Names and comments are kpc constants; entries are made from
// typed addresses and numbers only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ipvs/program.h"

namespace kpc::ipvs {

// The IPv4 names (kube-proxy's constants); the IPv6 proxier's are set_name(base, V6).
inline constexpr const char* kLoopBack = "KUBE-LOOP-BACK";
inline constexpr const char* kClusterIP = "KUBE-CLUSTER-IP";
inline constexpr const char* kExternalIP = "KUBE-EXTERNAL-IP";
inline constexpr const char* kExternalIPLocal = "KUBE-EXTERNAL-IP-LOCAL";
inline constexpr const char* kLoadBalancer = "KUBE-LOAD-BALANCER";
inline constexpr const char* kLoadBalancerFW = "KUBE-LOAD-BALANCER-FW";
inline constexpr const char* kLoadBalancerLocal = "KUBE-LOAD-BALANCER-LOCAL";
inline constexpr const char* kLoadBalancerSourceIP = "KUBE-LOAD-BALANCER-SOURCE-IP";
inline constexpr const char* kLoadBalancerSourceCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR";
inline constexpr const char* kNodePortTCP = "KUBE-NODE-PORT-TCP";
inline constexpr const char* kNodePortLocalTCP = "KUBE-NODE-PORT-LOCAL-TCP";
inline constexpr const char* kNodePortUDP = "KUBE-NODE-PORT-UDP";
inline constexpr const char* kNodePortLocalUDP = "KUBE-NODE-PORT-LOCAL-UDP";
inline constexpr const char* kNodePortSCTP = "KUBE-NODE-PORT-SCTP-HASH";
inline constexpr const char* kNodePortLocalSCTP = "KUBE-NODE-PORT-LOCAL-SCTP-HASH";
inline constexpr const char* kHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT";
inline constexpr const char* kIPVSIPs = "KUBE-IPVS-IPS";

/// The name a set has in the family's proxier: the IPv6 proxier replaces "KUBE-" by
/// "KUBE-6-" and cuts the name to ipset's 31 characters (KUBE-6-LOAD-BALANCER-SOURCE-CID).
std::string set_name(std::string_view base, IPFamily family);

/// Every set, empty, in kube-proxy's ipsetInfo order.
std::vector<IpSet> empty_sets(IPFamily family);

// Entry strings (utilipset.Entry.String()).
std::string entry_ip(const IPAddr& ip);                                                     ///< hash:ip
std::string entry_ip_port(const IPAddr& ip, Protocol p, int32_t port);                      ///< "10.0.0.1,tcp:80"
std::string entry_ip_port_ip(const IPAddr& ip, Protocol p, int32_t port, const IPAddr& ip2);  ///< "...,10.0.0.1"
std::string entry_ip_port_net(const IPAddr& ip, Protocol p, int32_t port, const CIDR& net);   ///< "...,10.0.0.0/8"
std::string entry_port(int32_t port);                                                       ///< bitmap:port "3001"

/// Sorts a set's entries (bitmap:port numerically, the others by text) and removes duplicates.
void normalize_entries(IpSet& set);

}  // namespace kpc::ipvs
