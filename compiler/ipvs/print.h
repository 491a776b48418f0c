// The IPVS program's four texts (docs/ipvs.md):
//   ipvs.rules      `ipvsadm -R` input, in `ipvsadm -S -n` form and order
//   ipset.rules     `ipset restore` input: every KUBE-* set created, flushed and filled
//   iptables.rules  the companion `iptables-restore --noflush` program, kube-proxy's text
//   node.plan       kube-ipvs0's addresses (ip commands) and the sysctls (sysctl.conf lines),
//                   each after a "#" line saying why
// Every word comes from a typed value or a kpc constant: nothing an object says is copied.
#pragma once

#include <string>

#include "compiler/ipvs/node_plan.h"
#include "compiler/ipvs/program.h"

namespace kpc::ipvs {

std::string print_ipvsadm(const Program& prog);
std::string print_ipsets(const Program& prog);
std::string print_iptables(const Program& prog);
std::string print_node_plan(const NodePlan& plan, const Program& prog, const std::string& node_name);

/// "10.0.0.1:80" / "[fd00::1]:80", as ipvsadm writes a service or server address.
std::string host_port(const IPAddr& ip, uint16_t port);
/// "-t", "-u", "--sctp-service": ipvsadm's option for a virtual service of the protocol.
const char* protocol_option(Protocol p);
/// "create NAME TYPE ... -exist\n": kube-proxy's arguments for the set.
std::string ipset_create_line(const IpSet& s, IPFamily family);

}  // namespace kpc::ipvs
