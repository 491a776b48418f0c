// The IPVS back end's pipeline: snapshot -> node context (kube-proxy's IPVS proxier reads
// the iptables section's masqueradeBit and masqueradeAll) -> service ports ->
// ipvs::lower_ipvs -> the four texts (compiler/ipvs/print.h) and the node plan.
#pragma once

#include <optional>
#include <string>

#include "compiler/ipvs/node_plan.h"
#include "compiler/ipvs/program.h"
#include "compiler/model/objects.h"
#include "compiler/support/diag.h"

namespace kpc {

struct IpvsCompileResult {
  ipvs::Program program;
  ipvs::NodePlan plan;
  std::string ipvs_rules;      ///< ipvs.rules
  std::string ipset_rules;     ///< ipset.rules
  std::string iptables_rules;  ///< iptables.rules
  std::string node_plan;       ///< node.plan
};

/// The files of an IPVS compile, in the order they are written.
inline constexpr const char* kIpvsFiles[] = {"ipvs.rules", "ipset.rules", "iptables.rules", "node.plan"};

/// One full sync of kube-proxy's IPVS proxier for `family`. Reports E0701 when the node has
/// no address of the family.
std::optional<IpvsCompileResult> compile_ipvs(const Snapshot& snap, IPFamily family, DiagSink& diags);

/// The text of one of kIpvsFiles.
const std::string& ipvs_file_text(const IpvsCompileResult& r, std::string_view file);

}  // namespace kpc
