#include "compiler/driver/compile_nftables.h"

#include <algorithm>
#include <cctype>

#include "compiler/driver/compile.h"
#include "compiler/nftables/names.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/service_ports.h"

namespace kpc {

std::optional<proxy::NodeContext> nft_node_context(const Snapshot& snap, IPFamily family, DiagSink& diags) {
  auto node = proxy::build_node_context(snap, family, diags);
  if (!node || !has_family_address(snap, *node, diags)) return std::nullopt;
  node->masquerade_all = snap.config.nftables.masquerade_all;
  node->masquerade_mark = 1u << snap.config.nftables.masquerade_bit;
  using K = proxy::LocalDetector::Kind;
  if ((node->detector.kind == K::Bridge || node->detector.kind == K::InterfacePrefix) &&
      !nftables::is_nft_word(node->detector.iface)) {  // `iifname != cbr0`: written unquoted
    const char* field = node->detector.kind == K::Bridge ? "detectLocal.bridgeInterface" : "detectLocal.interfaceNamePrefix";
    Pos at = snap.config.fields.at(field);
    diags.report(DiagCode::InvalidConfig, at.known() ? at : snap.config.pos,
                 "KubeProxyConfiguration", field,
                 "\"" + node->detector.iface +
                     "\": kube-proxy writes this name unquoted into nft rules; only letters, digits, '-', '_' and '.' "
                     "can be written there safely");
    return std::nullopt;
  }
  return node;
}

std::vector<std::string> service_cidrs_of(const Snapshot& snap, IPFamily family) {
  std::vector<std::string> out;
  for (const auto& sc : snap.service_cidrs)
    for (const auto& c : sc.cidrs)
      if (c.family() == family) out.push_back(c.str());
  // kube-proxy receives a Go set's UnsortedList(); kpc's order is sorted and unique.
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<NftCompileResult> compile_nftables(const Snapshot& snap, IPFamily family, const NftOptions& opts,
                                                 DiagSink& diags) {
  auto node = nft_node_context(snap, family, diags);
  if (!node) return std::nullopt;
  auto ports = proxy::build_service_ports(snap, *node);
  NftCompileResult r;
  nftables::SyncOptions so;
  so.profile = opts.profile;
  so.full = true;
  so.service_cidrs = service_cidrs_of(snap, family);
  so.track_kernel = opts.keep_state;
  if (opts.listing) r.state.table_exists = true;
  r.sync = nftables::sync_nftables(ports, *node, so, r.state, opts.listing);
  r.text = nftables::print_transaction(r.sync.tx);
  r.cleanup_text = nftables::print_transaction(r.sync.cleanup);
  return r;
}

std::optional<NftCompileResult> compile_nftables_from_prior(const Snapshot& next, const Snapshot& prior,
                                                            IPFamily family, const NftPriorOptions& opts,
                                                            DiagSink& diags) {
  auto prior_node = nft_node_context(prior, family, diags);
  auto next_node = nft_node_context(next, family, diags);
  if (!prior_node || !next_node) return std::nullopt;
  auto prior_ports = proxy::build_service_ports(prior, *prior_node);
  auto next_ports = proxy::build_service_ports(next, *next_node);

  // The prior sync: kube-proxy's memory and the kernel after it synced `prior`.
  nftables::SyncState state;
  nftables::SyncOptions po;
  po.profile = opts.profile;
  po.service_cidrs = service_cidrs_of(prior, family);
  po.now_ms = 0;
  (void)nftables::sync_nftables(prior_ports, *prior_node, po, state);

  auto changes = proxy::compute_changes(prior, prior_ports, *prior_node, next, next_ports, *next_node);
  nftables::SyncOptions so;
  so.profile = opts.profile;
  so.full = opts.force_full || changes.full_sync;
  so.changed_services = changes.services;
  so.service_cidrs = service_cidrs_of(next, family);
  so.now_ms = opts.since_prior_ms;
  NftCompileResult r;
  r.sync = nftables::sync_nftables(next_ports, *next_node, so, state);
  r.text = nftables::print_transaction(r.sync.tx);
  r.cleanup_text = nftables::print_transaction(r.sync.cleanup);
  r.partial = !so.full;
  r.full_sync_reason = opts.force_full ? "a full sync was requested" : changes.full_sync_reason;
  r.changed_services = std::move(changes.services);
  r.state = std::move(state);
  return r;
}

std::optional<FastPathResult> compile_fastpath(const Snapshot& next, const Snapshot* prior, DiagSink& diags) {
  auto want = fastpath::desired_state(next, diags);
  std::optional<fastpath::Desired> had;
  if (prior) had = fastpath::desired_state(*prior, diags);
  if (!want || (prior && !had)) return std::nullopt;
  FastPathResult r;
  r.tx = fastpath::fastpath_transaction(*want, prior ? &*had : nullptr);
  r.text = nftables::print_transaction(r.tx);
  return r;
}

}  // namespace kpc
