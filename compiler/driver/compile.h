// The compiler's entry point: one call from a loaded Snapshot to a back end's
// program. The pipeline, in order (docs/architecture.md):
//   1. proxy::build_node_context   node name, IPs, nodePortAddresses, detector
//   2. proxy::build_service_ports  Services x EndpointSlices -> service ports + endpoints
//   3. iptables::lower_iptables    syncProxyRules -> ir::Program
//   4. ir::print_program           restore text, byte for byte as kube-proxy writes it
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/iptables/lower.h"
#include "compiler/model/objects.h"
#include "compiler/proxy/node_context.h"
#include "compiler/support/diag.h"

namespace kpc {

enum class Backend { IPTables, IP6Tables };
std::optional<Backend> backend_from_name(std::string_view name);
inline IPFamily backend_family(Backend b) { return b == Backend::IPTables ? IPFamily::V4 : IPFamily::V6; }

/// Whether the node has an address of the context's family; reports E0701 when not (kube-proxy
/// would run no proxier of that family). Shared by every back end.
bool has_family_address(const Snapshot& snap, const proxy::NodeContext& node, DiagSink& diags);

/// The node context for the back end's family; reports E0701 (and returns nullopt) when
/// the node has no address of that family, so that kube-proxy would run no such proxier.
std::optional<proxy::NodeContext> node_context_for(const Snapshot& snap, Backend backend, DiagSink& diags);

struct CompileResult {
  iptables::SyncResult sync;  ///< the program and its statistics
  std::string text;           ///< the restore program
  bool partial = false;             ///< a KEP-3453 partial restore (only with a prior)
  std::string full_sync_reason;     ///< why a sync from a prior had to be full
  std::set<std::string> changed_services;  ///< "ns/name" whose chains were rewritten
};

/// The back end a node runs when none is named: the snapshot's KubeProxyConfiguration.mode
/// (iptables when unset), as kube-proxy picks its proxier, for the family. The one place that
/// maps modes to back ends. Modes without a back end in kpc yet (nftables, ipvs) are an error
/// (E0702) at the `mode` field rather than a silent iptables program.
std::optional<Backend> backend_for_mode(const Snapshot& snap, IPFamily family, DiagSink& diags);

/// Compiles a full sync (or, with opts.partial, a partial one) for the given back end.
std::optional<CompileResult> compile_iptables(const Snapshot& snap, Backend backend, const iptables::SyncOptions& opts,
                                              DiagSink& diags);

struct PriorOptions {
  bool force_full = false;  ///< a full sync (first sync, after a failure, forceSyncProxyRules, hourly)
  /// Time since kube-proxy last deleted stale chains. In large-cluster mode it does so at
  /// most once per iptables.syncPeriod; unset = long ago (the cleanup runs).
  std::optional<Duration> since_last_cleanup;
  /// The nat chains the kernel has (what `iptables-save -t nat` lists), when known; by
  /// default those the prior sync produced. Leftovers of throttled cleanups show up here.
  std::optional<std::vector<std::string>> existing_nat_chains;
  bool keep_ir = false;
};

/// The restore kube-proxy writes when it last synced `prior` successfully and now syncs
/// `next`: partial (chains of changed services only, stale chains deleted) unless a full
/// sync is forced (opts.force_full, or a change kube-proxy answers with a full sync).
std::optional<CompileResult> compile_iptables_from_prior(const Snapshot& next, const Snapshot& prior, Backend backend,
                                                         const PriorOptions& opts, DiagSink& diags);

}  // namespace kpc
