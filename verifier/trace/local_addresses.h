// The node's own addresses, read off a rule set where it names them (issue 12, part 3).
//
// A packet-level answer on a node's dump depends on which addresses are the node's
// (addrtype LOCAL, routing to INPUT): a NodePort on an address taken as not local is
// "forwarded", which is wrong on the node. When the user names none (--local-address)
// and no snapshot gives the Node, these rules name some, each with why:
//  * kube-proxy's nodePortAddresses: `-A KUBE-SERVICES -d A -j KUBE-NODEPORTS` (nat) is
//    written for each node address inside the configured CIDRs;
//  * `-j SNAT --to-source A` with one address: source NAT to an address of the node.
// Loopback is always local and not listed. The list can be incomplete (a node with no
// such rules names none); callers say what they used.
#pragma once

#include <string>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/state/state.h"

namespace kpc::verifier::trace {

struct InferredAddress {
  IPAddr address;
  std::string reason;  ///< "nat KUBE-SERVICES sends NodePorts to it (kube-proxy's nodePortAddresses)"
};

/// Addresses of the state's family, each once (first reason kept), in address order.
std::vector<InferredAddress> infer_local_addresses(const RulesetState& state);

}  // namespace kpc::verifier::trace
