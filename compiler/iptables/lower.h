// Lowering: service ports + node context -> the iptables-restore program that
// kube-proxy's iptables proxier writes (syncProxyRules), as restore text (and, on
// request, as ir::Program). Mirrors kube-proxy's four output buffers (filter chains,
// filter rules, nat chains, nat rules) so that the emission order is kube-proxy's.
//
// One function lowers one service port (lower_service_port); two callers use it:
//  - lower_iptables, the batch path: every port, streamed straight into the buffers;
//  - the incremental compiler (compiler/driver/incremental.h), which keeps each port's
//    PortFragments between syncs and puts a program together with assemble_iptables.
#pragma once

#include <set>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "compiler/iptables/chain_names.h"
#include "compiler/ir/program.h"
#include "compiler/proxy/service_ports.h"

namespace kpc::iptables {

struct SyncOptions {
  /// Partial sync (KEP-3453): the per-service chains (SVC/SVL/EXT/FW/SEP) are written
  /// only for services in changed_services ("ns/name"). Everything else is always written.
  bool partial = false;
  std::set<std::string> changed_services;
  /// Chains that exist in the kernel's nat table (from the prior state); per-service
  /// chains among them that the new state does not use are flushed and deleted.
  std::vector<std::string> existing_nat_chains;
  /// Large-cluster mode also throttles stale-chain cleanup; false = clean up now.
  bool skip_stale_cleanup = false;
  /// Also keep the program as IR (SyncResult::program). The text is always produced;
  /// the IR costs memory at scale, so tools that only print leave this off.
  bool keep_ir = false;
  /// Fill SyncResult::active_nat_chains (always done when existing_nat_chains is given).
  bool collect_active_chains = false;
  /// Only compute the chain set and statistics; write no text (a prior's chains).
  bool chains_only = false;
};

struct SyncResult {
  std::string text;                         ///< the restore program, as kube-proxy writes it
  ir::Program program;                      ///< the same program as IR (only with SyncOptions::keep_ir)
  size_t chains_written = 0;                ///< ":CHAIN" lines
  size_t rules_written = 0;                 ///< "-A" lines
  /// Every per-service chain the state uses (only with collect_active_chains or a prior).
  std::unordered_set<std::string> active_nat_chains;
  bool large_cluster = false;
  size_t total_endpoints = 0;
  size_t filter_rules = 0;             ///< metric sync_proxy_rules_iptables_total{table=filter}
  size_t nat_rules_written = 0;        ///< rule lines written (incl. -X)
  size_t nat_rules_skipped = 0;        ///< rule lines of unchanged services not written
  size_t deleted_chains = 0;
  size_t no_local_endpoints_internal = 0;
  size_t no_local_endpoints_external = 0;
};

/// kube-proxy's threshold: above this many endpoints, SEP/endpoint-rule comments are dropped.
constexpr size_t kLargeClusterEndpointsThreshold = 1000;

SyncResult lower_iptables(const std::vector<proxy::ServicePortInfo>& ports, const proxy::NodeContext& node,
                          const SyncOptions& opts);

/// What one service port contributes to the program, by where it goes. Each text is
/// whole restore lines, exactly as lower_iptables writes them for that port.
struct PortFragments {
  std::string filter_rules;     ///< its rules in filter KUBE-SERVICES/-EXTERNAL-SERVICES/-PROXY-FIREWALL/-NODEPORTS
  std::string nat_top_rules;    ///< its rules in nat KUBE-SERVICES / KUBE-NODEPORTS: written in every sync
  std::string nat_chains;       ///< ":CHAIN - [0:0]" of its own chains: written in full syncs and when it changed
  std::string nat_chain_rules;  ///< the rules of its own chains: likewise
  std::vector<ChainName> chains;  ///< its own chains (all declared in nat_chains), i.e. its active nat chains
  size_t filter_rule_lines = 0, nat_top_rule_lines = 0, nat_chain_rule_lines = 0;
  bool no_local_endpoints_internal = false;  ///< counts toward the metric of that name
  bool no_local_endpoints_external = false;
};

/// Lowers one service port. `large_cluster` (total endpoints of the state above
/// kLargeClusterEndpointsThreshold) drops the endpoint comments.
PortFragments lower_service_port(const proxy::ServicePortInfo& sp, const proxy::NodeContext& node, bool large_cluster);

/// One port's fragments in a program being assembled.
struct PortRef {
  const PortFragments* fragments = nullptr;
  bool write_chains = true;  ///< false: an unchanged service in a partial sync
};

struct AssemblyOptions {
  bool partial = false;
  bool large_cluster = false;
  size_t total_endpoints = 0;
  /// Stale per-service chains to flush and delete, sorted and unique (empty when the
  /// cleanup is skipped).
  std::vector<std::string> stale_chains;
};

/// The program lower_iptables writes, put together from per-port fragments in kpc's
/// order (ports sorted by namespace, name, port name, protocol). Text only (no IR);
/// active_nat_chains is not filled (the caller has the fragments' chains).
SyncResult assemble_iptables(std::span<const PortRef> ports, const proxy::NodeContext& node,
                             const AssemblyOptions& opts);

}  // namespace kpc::iptables
