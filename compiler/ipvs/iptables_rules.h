// The iptables rules kube-proxy's IPVS proxier still needs (writeIptablesRules in
// pkg/proxy/ipvs/proxier.go): masquerading, NodePort and load-balancer marking, source-range
// firewalls and the access filters, each keyed on the ipsets. Restored with --noflush; the
// jumps from the built-in chains are ensured separately (kube_jumps), as kube-proxy does.
#pragma once

#include <utility>
#include <vector>

#include "compiler/ipvs/program.h"
#include "compiler/proxy/node_context.h"

namespace kpc::ipvs {

/// A load-balancer IP, protocol and port the node itself may not reach (source ranges that
/// do not contain the node's IP).
using NoNodeAccess = std::pair<IPAddr, std::pair<Protocol, int32_t>>;

/// The restore program for `prog`'s sets (their entries must be final): *nat, then *filter,
/// chains declared and rules in kube-proxy's order.
ir::Program companion_iptables(const Program& prog, const proxy::NodeContext& node,
                               const std::vector<NoNodeAccess>& lb_no_node_access);

/// kube-proxy's jump rules from the built-in chains (iptablesJumpChain), as
/// {table, built-in chain, comment, kube chain}, in the order it ensures them.
struct KubeJump {
  ir::TableId table;
  const char* from;
  const char* comment;
  const char* to;
};
const std::vector<KubeJump>& kube_jumps();

}  // namespace kpc::ipvs
