#include "compiler/driver/compile.h"

#include "compiler/ir/printer.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/node_context.h"
#include "compiler/proxy/service_ports.h"

namespace kpc {

std::optional<Backend> backend_from_name(std::string_view name) {
  if (name == "iptables") return Backend::IPTables;
  if (name == "ip6tables") return Backend::IP6Tables;
  return std::nullopt;
}

bool has_family_address(const Snapshot& snap, const proxy::NodeContext& node, DiagSink& diags) {
  bool has = node.node_ip.has_value();
  for (const auto& ip : node.host_addresses) has |= !ip.is_loopback();
  if (!has)
    diags.report(DiagCode::FamilyUnavailable, snap.config.pos, "", "",
                 std::string("node \"") + node.node_name + "\" has no " + family_name(node.family) +
                     " address (Node status.addresses or NodeEnvironment.interfaces): kube-proxy would run no " +
                     family_name(node.family) + " proxier");
  return has;
}

std::optional<proxy::NodeContext> node_context_for(const Snapshot& snap, Backend backend, DiagSink& diags) {
  auto node = proxy::build_node_context(snap, backend_family(backend), diags);
  if (!node || !has_family_address(snap, *node, diags)) return std::nullopt;
  return node;
}

namespace {

// The per-service chains the prior sync left in the kernel (what a stale-chain scan,
// iptables-save -t nat, would find), as far as the cleanup of this sync can tell: with
// the same node context, a service the trackers saw no change in uses the same chains in
// both states, so only the changed services' prior chains can be stale, and only they are
// derived. Otherwise (a restart) the whole prior is.
std::vector<std::string> prior_chains(const std::vector<proxy::ServicePortInfo>& prior_ports,
                                      const proxy::NodeContext& prior_node, const proxy::NodeContext& next_node,
                                      const std::set<std::string>& changed) {
  iptables::SyncOptions o;
  o.collect_active_chains = true;
  o.chains_only = true;
  iptables::SyncResult prior;
  if (proxy::same_context(prior_node, next_node)) {
    std::vector<proxy::ServicePortInfo> ports;
    std::string id;
    for (const auto& p : prior_ports)
      if (changed.count(id.assign(p.ns).append("/").append(p.name))) ports.push_back(p);
    prior = iptables::lower_iptables(ports, prior_node, o);
  } else {
    prior = iptables::lower_iptables(prior_ports, prior_node, o);
  }
  return {prior.active_nat_chains.begin(), prior.active_nat_chains.end()};
}

}  // namespace

std::optional<CompileResult> compile_iptables(const Snapshot& snap, Backend backend, const iptables::SyncOptions& opts,
                                              DiagSink& diags) {
  auto node = node_context_for(snap, backend, diags);
  if (!node) return std::nullopt;
  auto ports = proxy::build_service_ports(snap, *node);
  CompileResult r;
  r.sync = iptables::lower_iptables(ports, *node, opts);
  r.text = std::move(r.sync.text);
  r.partial = opts.partial;
  return r;
}

std::optional<CompileResult> compile_iptables_from_prior(const Snapshot& next, const Snapshot& prior, Backend backend,
                                                         const PriorOptions& popts, DiagSink& diags) {
  bool force_full = popts.force_full;
  auto prior_node = node_context_for(prior, backend, diags);
  auto next_node = node_context_for(next, backend, diags);
  if (!prior_node || !next_node) return std::nullopt;
  auto prior_ports = proxy::build_service_ports(prior, *prior_node);
  auto next_ports = proxy::build_service_ports(next, *next_node);
  auto changes = proxy::compute_changes(prior, prior_ports, *prior_node, next, next_ports, *next_node);
  iptables::SyncOptions opts;
  opts.partial = !force_full && !changes.full_sync;
  opts.changed_services = changes.services;
  if (popts.existing_nat_chains)
    opts.existing_nat_chains = *popts.existing_nat_chains;
  else
    opts.existing_nat_chains = prior_chains(prior_ports, *prior_node, *next_node, changes.services);
  opts.keep_ir = popts.keep_ir;
  size_t endpoints = 0;
  for (const auto& p : next_ports) endpoints += p.endpoints.size();
  bool large = endpoints > iptables::kLargeClusterEndpointsThreshold;
  opts.skip_stale_cleanup =
      large && popts.since_last_cleanup && popts.since_last_cleanup->ns <= next.config.iptables.sync_period.ns;
  CompileResult r;
  r.sync = iptables::lower_iptables(next_ports, *next_node, opts);
  r.text = std::move(r.sync.text);
  r.partial = opts.partial;
  r.full_sync_reason = force_full ? "a full sync was requested" : changes.full_sync_reason;
  r.changed_services = std::move(changes.services);
  return r;
}

std::optional<Backend> backend_for_mode(const Snapshot& snap, IPFamily family, DiagSink& diags) {
  switch (snap.config.mode) {
    case ProxyMode::IPTables:
      return family == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables;
    case ProxyMode::NFTables:
    case ProxyMode::IPVS: {
      const char* mode = snap.config.mode == ProxyMode::NFTables ? "nftables" : "ipvs";
      diags.report(DiagCode::ModeNotCompiled, snap.config.fields.at("mode"), "KubeProxyConfiguration", "mode",
                   std::string("mode is \"") + mode + "\": this command reads iptables programs only (" + mode +
                       (snap.config.mode == ProxyMode::NFTables ? ": `kpc compile` and `kpc simulate` so far" : ": `kpc compile -o DIR` so far") +
                       "), and iptables rules are not what this node runs; pass --backend iptables to use them anyway");
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace kpc
