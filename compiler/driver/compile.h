// The compiler's entry point: one call from a loaded Snapshot to a back end's
// program. The pipeline, in order (docs/architecture.md):
//   1. proxy::build_node_context   node name, IPs, nodePortAddresses, detector
//   2. proxy::build_service_ports  Services x EndpointSlices -> service ports + endpoints
//   3. iptables::lower_iptables    syncProxyRules -> ir::Program
//   4. ir::print_program           restore text, byte for byte as kube-proxy writes it
#pragma once

#include <optional>
#include <string>

#include "compiler/iptables/lower.h"
#include "compiler/model/objects.h"
#include "compiler/support/diag.h"

namespace kpc {

enum class Backend { IPTables, IP6Tables };
std::optional<Backend> backend_from_name(std::string_view name);
inline IPFamily backend_family(Backend b) { return b == Backend::IPTables ? IPFamily::V4 : IPFamily::V6; }

struct CompileResult {
  iptables::SyncResult sync;  ///< the program and its statistics
  std::string text;           ///< the restore program
};

/// Compiles a full sync (or, with opts.partial, a partial one) for the given back end.
std::optional<CompileResult> compile_iptables(const Snapshot& snap, Backend backend, const iptables::SyncOptions& opts,
                                              DiagSink& diags);

}  // namespace kpc
