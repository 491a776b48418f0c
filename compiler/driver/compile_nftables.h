// The nftables back end's pipeline: snapshot -> node context (with the nftables section of
// the configuration) -> service ports -> nftables::sync_nftables -> knftables text.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/fastpath/fastpath.h"
#include "compiler/model/objects.h"
#include "compiler/nftables/lower.h"
#include "compiler/proxy/node_context.h"
#include "compiler/support/diag.h"

namespace kpc {

/// The node context kube-proxy's nftables proxier runs with: as the iptables one, but the
/// masquerade bit and masqueradeAll come from KubeProxyConfiguration.nftables. Reports E0701
/// when the node has no address of the family, E0703 when a detector interface name cannot
/// be written into an nft rule safely.
std::optional<proxy::NodeContext> nft_node_context(const Snapshot& snap, IPFamily family, DiagSink& diags);

/// The ServiceCIDR ranges of the family, as kube-proxy hands them to its proxier.
std::vector<std::string> service_cidrs_of(const Snapshot& snap, IPFamily family);

struct NftCompileResult {
  nftables::SyncResult sync;
  std::string text;          ///< the main transaction, as knftables writes it
  std::string cleanup_text;  ///< the stale-chain deletion transaction run before it (often empty)
  bool partial = false;
  std::string full_sync_reason;
  std::set<std::string> changed_services;
  nftables::SyncState state;  ///< the proxier's state after the sync
};

struct NftOptions {
  nftables::LayoutProfile profile = nftables::LayoutProfile::V1_33;
  /// What the kernel holds at the start (e.g. read from a node); unset: no kube-proxy table
  /// (a first sync on a fresh node).
  const nftables::KernelListing* listing = nullptr;
  /// Keep the proxier's state complete in the result (what the kernel holds afterwards), for
  /// a next sync; a one-shot compile turns it off.
  bool keep_state = true;
};

/// The first sync of a kube-proxy process: a full transaction (on a node without the table,
/// unless opts.listing says what the kernel has).
std::optional<NftCompileResult> compile_nftables(const Snapshot& snap, IPFamily family, const NftOptions& opts,
                                                 DiagSink& diags);

struct NftPriorOptions {
  nftables::LayoutProfile profile = nftables::LayoutProfile::V1_33;
  bool force_full = false;       ///< a full sync (after a failure, hourly)
  int64_t since_prior_ms = 1000;  ///< time since the prior sync (stale chains older than 1 s are deleted)
};

/// The transaction kube-proxy runs when it last synced `prior` successfully (its kernel and
/// memory hold prior's program) and now syncs `next`: partial unless a full sync is forced
/// or a change kube-proxy answers with a full sync.
std::optional<NftCompileResult> compile_nftables_from_prior(const Snapshot& next, const Snapshot& prior,
                                                            IPFamily family, const NftPriorOptions& opts,
                                                            DiagSink& diags);

/// KEP-4963's fast path (compiler/fastpath): the transaction of table inet kube-proxy-fastpath
/// for `next` (full), or with `prior` the incremental one.
struct FastPathResult {
  nftables::Transaction tx;
  std::string text;
};
std::optional<FastPathResult> compile_fastpath(const Snapshot& next, const Snapshot* prior, DiagSink& diags);

}  // namespace kpc
