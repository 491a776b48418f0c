// Lowering: service ports + node context -> the iptables-restore program that
// kube-proxy's iptables proxier writes (syncProxyRules), as ir::Program.
// Mirrors kube-proxy's four output buffers (filter chains, filter rules, nat
// chains, nat rules) so that the emission order is kube-proxy's.
#pragma once

#include <set>
#include <unordered_set>
#include <string>
#include <vector>

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

}  // namespace kpc::iptables
