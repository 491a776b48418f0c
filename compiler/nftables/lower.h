// syncProxyRules of kube-proxy's nftables proxier (v1.33–v1.35 layout): service ports +
// node context + the proxier's sync state -> the transaction it runs with `nft -f -`
// (plus, when stale chains have aged, the separate deletion transaction it runs first).
//
// Order is kube-proxy's: setupNFTables (full syncs), then each service port (kpc visits
// them sorted; kube-proxy iterates a Go map, which its tests canonicalize away), then stale
// chains, stale affinity sets and leftover elements (sorted; Go sets upstream).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <set>
#include <string>
#include <vector>

#include "compiler/nftables/sync_state.h"
#include "compiler/nftables/transaction.h"
#include "compiler/proxy/service_ports.h"

namespace kpc::nftables {

/// The kube-proxy release whose nftables layout is written. One profile exists today;
/// a later layout (e.g. v1.36's inlined masquerade marks) is a new value, not a fork.
enum class LayoutProfile : uint8_t { V1_33 };

/// The layout kube-proxy `version` ("1.34", "v1.35.2") writes: V1_33 for 1.33-1.35; nullopt for
/// versions whose layout kpc has no profile for (before 1.33: other chains; 1.36 and later: the
/// masquerade marks inlined), with *why set.
std::optional<LayoutProfile> layout_for_version(std::string_view version, std::string* why);

struct SyncOptions {
  LayoutProfile profile = LayoutProfile::V1_33;
  bool full = true;                          ///< setupNFTables runs; every service is rewritten
  std::set<std::string> changed_services;    ///< "ns/name": rewritten in a partial sync
  /// ServiceCIDR ranges of the family (kube-proxy's serviceCIDRs, joined by ","), for the
  /// "Drop traffic to unallocated ClusterIPs" rule; empty: no such rule.
  std::vector<std::string> service_cidrs;
  int64_t now_ms = 0;                        ///< the sync's start (stale-chain ageing)
  int64_t stale_chain_delay_ms = 1000;       ///< kube-proxy deletes chains stale for longer
  /// Record in the state what the kernel holds afterwards (its chains and sets), for the next
  /// sync. A one-shot compile that discards the state saves the work (~110,000 names at
  /// 10,000 Services).
  bool track_kernel = true;
  /// A partial sync that visits only these Services ("ns/name"; `ports` holds exactly their
  /// current ports), taking every other Service's elements and chains from the state's
  /// footprints. Gives the same transaction as visiting every port (the incremental compiler's
  /// fast path); valid only when subset_sync_possible() says so.
  const std::set<std::string>* only = nullptr;
  /// Only the operations of `ports` themselves, as a first full sync on a fresh node writes
  /// them: no setupNFTables, and (with a fresh state) nothing stale. One Service's fragment of
  /// that full transaction, for the incremental compiler's full_nft_program.
  bool ports_only = false;
};

struct SyncResult {
  Transaction cleanup;  ///< stale-chain deletions run before the main transaction (often empty)
  Transaction tx;       ///< the main transaction
  size_t total_endpoints = 0;
  size_t no_local_endpoints_internal = 0;  ///< metric sync_proxy_rules_no_local_endpoints_total
  size_t no_local_endpoints_external = 0;
  size_t services_written = 0;             ///< service ports whose chains were (re)written
  size_t ports_visited = 0;                ///< service ports this sync looked at (all, or a subset's)
  std::set<std::string> stale_chains_flushed;
};

/// Runs one sync against `state` (updated as kube-proxy updates its memory, assuming the
/// transactions succeed; see sync_failed). `listing` overrides what the kernel is assumed
/// to hold.
SyncResult sync_nftables(const std::vector<proxy::ServicePortInfo>& ports, const proxy::NodeContext& node,
                         const SyncOptions& opts, SyncState& state, const KernelListing* listing = nullptr);

/// Whether a partial sync may visit only `services` (with their current `ports`): the state has
/// complete footprints and no element key of theirs is shared with a Service outside the set.
bool subset_sync_possible(const SyncState& state, const std::vector<proxy::ServicePortInfo>& ports,
                          const std::set<std::string>& services);

/// After a failed main transaction: kube-proxy forgets its stale-chain bookkeeping (and
/// syncs fully next time, re-reading the kernel's elements).
void sync_failed(SyncState& state);

}  // namespace kpc::nftables
