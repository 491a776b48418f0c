// The program set kube-proxy's IPVS mode leaves on a node (issue 17 §1), read back as the node
// would hold it after loading it, for the IPVS tracer (tracer.h):
//   ipvs.rules      `ipvsadm -R` input: the virtual and real servers (verifier/ipvs);
//   ipset.rules     `ipset restore` input: the KUBE-* sets (verifier/ipset);
//   iptables.rules  the companion `iptables-restore --noflush` program, loaded on an empty node,
//                   plus the jumps from the built-in chains kube-proxy ensures outside it;
//   node.plan       the addresses bound to kube-ipvs0 and the sysctls (optional).
// Independent of the compiler: the jump list below is kube-proxy's iptablesJumpChain as the
// reference notes give it (kubeproxy-nftables-ipvs.md §2.4), not the compiler's.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/ipset/ipset.h"
#include "verifier/ipvs/ipvsadm.h"
#include "verifier/state/state.h"

namespace kpc::verifier::ipvs_trace {

/// The four texts and the names errors cite.
struct ProgramTexts {
  std::string ipvs, ipset, iptables;
  std::optional<std::string> node_plan;  ///< unset: no node.plan (nothing bound, kernel sysctl defaults)
  std::string ipvs_name = "ipvs.rules", ipset_name = "ipset.rules", iptables_name = "iptables.rules",
              node_plan_name = "node.plan";
};

struct NodePlan {
  std::vector<IPAddr> bound;                    ///< `ip addr add A/len dev kube-ipvs0`
  std::map<std::string, std::string> sysctls;   ///< `name = value`
  bool present = false;
};

struct ProgramSet {
  IPFamily family = IPFamily::V4;
  ipvs::Table ipvs;
  ipset::Table sets;
  RulesetState iptables;
  NodePlan plan;
  /// A sysctl's value as the node has it: the plan's, else the kernel's default (IPVS's
  /// defaults: conntrack 0, conn_reuse_mode 1, expire_nodest_conn 0, expire_quiescent_template 0).
  int sysctl(const std::string& name) const;
};

/// A located error: file, 1-based line (0: the file as a whole), message.
struct LoadError {
  std::string file;
  uint32_t line = 0;
  std::string message;
  std::string text() const;  ///< "file:line: message"
};

/// Reads the texts. `family`: the program's family (unset: from the first virtual server or
/// bound address, IPv4 if none). False with *err on the first thing a real tool would refuse
/// or that is not of that family.
bool load_program_set(const ProgramTexts& texts, std::optional<IPFamily> family, ProgramSet* out, LoadError* err);

/// kube-proxy's IPVS-mode jump rules from the built-in chains, in the order it ensures them
/// (each prepended when missing: EnsureRule(Prepend)).
struct IpvsJump {
  ir::TableId table;
  const char* from;
  const char* comment;
  const char* to;
};
const std::vector<IpvsJump>& ipvs_mode_jumps();

}  // namespace kpc::verifier::ipvs_trace
