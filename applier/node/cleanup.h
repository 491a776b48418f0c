// `kpc-applier --cleanup` (KEP-2448: the only clean-up there is; never at start): removes what
// kube-proxy's iptables and nftables modes create, and nothing else.
//  iptables (both families, legacy and nft flavours, every table): kube-proxy's chains -- every
//    KUBE-* chain except kubelet's (KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) -- flushed and deleted, and the rules in the built-in chains that jump to
//    them. A kube-proxy chain that a foreign (non-KUBE) user chain still jumps to is kept (with
//    what it jumps to) and reported: deleting it would need touching the foreign rule.
//  nftables: tables `ip kube-proxy`, `ip6 kube-proxy`, `inet kube-proxy-fastpath`.
// IPVS (ipsets, kube-ipvs0) is not handled yet (this kernel has no IPVS; issue 17).
#pragma once

#include <string>
#include <vector>

namespace kpc::applier {

/// Is this one of the chains --cleanup removes?
bool is_kube_proxy_chain(std::string_view chain);

struct IptablesCleanupPlan {
  std::string program;                ///< iptables-restore --noflush input ("" = nothing to do)
  std::vector<std::string> removes;   ///< "nat: rule -A PREROUTING ...", "nat: chain KUBE-SERVICES"
  std::vector<std::string> kept;      ///< kube-proxy chains kept because foreign rules use them
};
/// The plan for one `iptables-save` dump.
IptablesCleanupPlan plan_iptables_cleanup(const std::string& save_text);

/// The nft tables --cleanup deletes, from `nft list tables` output ("ip kube-proxy", ...).
std::vector<std::string> plan_nft_cleanup(const std::string& list_tables);

struct CleanupOptions {
  bool dry_run = false;
  std::string nft = "nft";
  bool wait = true;
};
struct CleanupResult {
  bool ok = true;
  std::vector<std::string> lines;   ///< what was (or would be) removed, one per line, tool first
  std::vector<std::string> errors;
};
/// Runs the clean-up on this node (or, dry run, only prints it).
CleanupResult run_cleanup(const CleanupOptions& opts);

}  // namespace kpc::applier
