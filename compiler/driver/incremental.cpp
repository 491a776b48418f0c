#include "compiler/driver/incremental.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "compiler/iptables/chain_names.h"
#include "compiler/iptables/lower.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/service_ports.h"

namespace kpc {
namespace {

using Key = std::pair<std::string, std::string>;  ///< (namespace, name)

// Chain names are looked up by string_view (fragments keep them as ChainName).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

}  // namespace

struct IncrementalCompiler::State {
  // One Service, and what the last computation made of it.
  struct ServiceEntry {
    std::shared_ptr<const Service> object;      ///< current; null once deleted (the entry goes at the next sync)
    std::shared_ptr<const Service> ports_from;  ///< the object `ports` point to (ServicePortInfo::service)
    std::vector<proxy::ServicePortInfo> ports;  ///< by port name, protocol
    std::vector<iptables::PortFragments> fragments;  ///< one per port
    bool changed = false;                       ///< among this sync's changed services
    /// nftables: this Service's operations in a fresh full transaction, printed (full_nft_program)
    std::string nft_fragment;
    bool nft_fragment_ok = false;  ///< nft_fragment is of the current ports and node
    uint64_t nft_part_id = 0, nft_part_version = 0;  ///< full_nft_program_parts (0: none yet)
  };

  explicit State(Target t)
      : target(t),
        backend(t.family == IPFamily::V4 ? Backend::IPTables : Backend::IP6Tables),
        address_type(t.family == IPFamily::V4 ? AddressType::IPv4 : AddressType::IPv6) {}

  Target target;
  Backend backend;           ///< the iptables back end of the family (iptables targets)
  AddressType address_type;  ///< the slices this proxier reads

  // ---- the objects
  std::map<Key, ServiceEntry> services;  ///< in kpc's order of service ports
  std::map<Key, std::shared_ptr<const EndpointSlice>> slices;
  /// (namespace, service-name label) -> slice name -> slice: each Service's slices, in order.
  std::map<Key, std::map<std::string, const EndpointSlice*>> slices_of;
  Snapshot host;  ///< nodes (sorted by name), configuration and host facts: the node context's inputs

  // ---- changes since the last successful sync
  std::set<Key> dirty;  ///< Services whose object or slices were touched
  /// Every slice touched, as it was at the last sync (null: it did not exist).
  std::map<Key, std::shared_ptr<const EndpointSlice>> synced_slices;
  bool host_dirty = true;

  // ---- as of the last successful sync
  bool synced = false;
  std::optional<proxy::NodeContext> node;
  bool large_cluster = false;  ///< the mode the fragments were lowered in
  size_t total_endpoints = 0;
  /// The active nat chains: every chain some port's fragments declare, with how many ports do.
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> chain_refs;
  /// Stale chains that a throttled cleanup left in the kernel (sorted).
  std::vector<std::string> leftover_chains;
  std::vector<std::string> deleted_chains;  ///< the stale chains the last program deleted
  bool restore_failed = false;              ///< the last program was not applied: sync fully
  // ---- nftables: kube-proxy's memory and the kernel's table as the last syncs left them
  nftables::SyncState nft;
  int64_t nft_now = 0;
  // ---- full_nft_program_parts: ids and versions from one counter; the setup part's text
  uint64_t nft_part_counter = 1;  // (1 itself is the setup part's id)
  std::string nft_setup_text, nft_whole_text;
  uint64_t nft_setup_version = 0;

  void set_service(const Key& k, std::shared_ptr<const Service> next) {
    auto it = services.find(k);
    if (it == services.end()) {
      if (!next) return;
      it = services.emplace(k, ServiceEntry{}).first;
    }
    it->second.object = std::move(next);
    dirty.insert(k);
  }

  void set_slice(const Key& k, std::shared_ptr<const EndpointSlice> next) {
    auto it = slices.find(k);
    std::shared_ptr<const EndpointSlice> prior = it == slices.end() ? nullptr : it->second;
    synced_slices.try_emplace(k, prior);  // the first touch since the sync keeps the synced version
    if (prior) unindex(*prior);
    if (next) {
      index(*next);
      slices[k] = std::move(next);
    } else if (it != slices.end()) {
      slices.erase(it);
    }
  }

  // The slice feeds the Service its label names (both are marked for recomputation).
  void index(const EndpointSlice& s) {
    const std::string& service = s.service_name();
    if (service.empty()) return;
    slices_of[{s.meta.ns, service}][s.meta.name] = &s;
    dirty.insert({s.meta.ns, service});
  }
  void unindex(const EndpointSlice& s) {
    const std::string& service = s.service_name();
    if (service.empty()) return;
    auto it = slices_of.find({s.meta.ns, service});
    if (it != slices_of.end()) {
      it->second.erase(s.meta.name);
      if (it->second.empty()) slices_of.erase(it);
    }
    dirty.insert({s.meta.ns, service});
  }

  const EndpointSlice* of_family(const EndpointSlice* s) const {
    return s && s->address_type == address_type ? s : nullptr;
  }

  /// Steps 1-2 of a sync, shared by the back ends: the node context, the recomputed ports of
  /// the touched Services, and the change trackers' verdicts.
  struct Prepared {
    std::optional<proxy::NodeContext> next_node;
    bool rebuild_all = false;
    std::string restart;
    std::set<std::string> changed;
    std::vector<ServiceEntry*> recomputed;
    std::vector<ServiceEntry*> flagged;
    std::set<std::string> visited;  ///< "ns/name" of the recomputed Services
  };
  bool prepare(Prepared& p, DiagSink& diags);
  /// Step 6: this sync is now the prior of the next one.
  void finish(Prepared& p);

  std::optional<CompileResult> sync(const IncrementalSyncOptions& opts, DiagSink& diags);
  std::optional<NftCompileResult> sync_nft(const IncrementalSyncOptions& opts, DiagSink& diags);
};

bool IncrementalCompiler::State::prepare(Prepared& p, DiagSink& diags) {
  // 1. The node context: rebuilt after a Node, configuration or host change. Any
  // difference invalidates every port (endpoints' locality, topology, the rules' shape);
  // the differences kube-proxy only picks up by restarting make the sync full.
  std::optional<proxy::NodeContext>& next_node = p.next_node;
  next_node = node;
  if (host_dirty || !node) {
    next_node = target.kind == BackendKind::NFTables ? nft_node_context(host, target.family, diags)
                                                     : node_context_for(host, backend, diags);
    if (!next_node) return false;  // nothing changed: the next sync retries from the same prior
  }
  p.rebuild_all = !node || !proxy::same_context(*node, *next_node);
  p.restart = synced ? proxy::full_sync_reason(*node, *next_node) : "";
  const bool rebuild_all = p.rebuild_all;

  // 2. The ports of the Services touched since the last sync (all of them after a node
  // change), and the service tracker's verdict on each.
  std::set<std::string>& changed = p.changed;
  std::vector<ServiceEntry*>& recomputed = p.recomputed;
  auto recompute = [&](const Key& k, ServiceEntry& e) {
    p.visited.insert(k.first + "/" + k.second);
    std::vector<proxy::ServicePortInfo> ports;
    if (e.object) {
      std::vector<const EndpointSlice*> feeding;
      if (auto it = slices_of.find(k); it != slices_of.end())
        for (const auto& [name, slice] : it->second) feeding.push_back(slice);
      proxy::append_service_ports(*e.object, feeding, *next_node, ports);
    }
    if (synced && proxy::service_ports_changed(e.ports, ports)) changed.insert(k.first + "/" + k.second);
    for (const auto& p : e.ports) total_endpoints -= p.endpoints.size();
    for (const auto& p : ports) total_endpoints += p.endpoints.size();
    e.ports = std::move(ports);
    e.ports_from = e.object;
    recomputed.push_back(&e);
  };
  if (rebuild_all) {
    for (auto& [k, e] : services) recompute(k, e);
  } else {
    for (const Key& k : dirty)
      if (auto it = services.find(k); it != services.end()) recompute(k, it->second);
  }
  // The endpoints tracker's verdicts, slice by slice (each touched slice's Services were
  // marked dirty, so they are among the recomputed ones).
  if (synced)
    for (const auto& [k, prior] : synced_slices) {
      auto it = slices.find(k);
      proxy::mark_slice_change(of_family(prior.get()), of_family(it == slices.end() ? nullptr : it->second.get()),
                               changed);
    }
  for (const std::string& id : changed) {
    size_t slash = id.find('/');  // namespaces have no '/'
    auto it = services.find({id.substr(0, slash), id.substr(slash + 1)});
    if (it == services.end()) continue;
    it->second.changed = true;
    p.flagged.push_back(&it->second);
  }
  return true;
}

void IncrementalCompiler::State::finish(Prepared& p) {
  for (ServiceEntry* e : p.flagged) e->changed = false;
  std::erase_if(services, [](const auto& kv) { return !kv.second.object && kv.second.ports.empty(); });
  restore_failed = false;
  node = std::move(p.next_node);
  synced = true;
  host_dirty = false;
  dirty.clear();
  synced_slices.clear();
}

std::optional<CompileResult> IncrementalCompiler::State::sync(const IncrementalSyncOptions& opts, DiagSink& diags) {
  Prepared p;
  if (!prepare(p, diags)) return std::nullopt;
  const std::optional<proxy::NodeContext>& next_node = p.next_node;
  const bool rebuild_all = p.rebuild_all;
  const std::string& restart = p.restart;
  std::set<std::string>& changed = p.changed;
  std::vector<ServiceEntry*>& recomputed = p.recomputed;

  // 3. Fragments: re-lower the recomputed ports -- or every port when large-cluster mode
  // flips (endpoint comments come or go) -- and keep the active chains counted.
  const bool large = total_endpoints > iptables::kLargeClusterEndpointsThreshold;
  std::vector<std::string> released;  ///< chains of replaced fragments: stale unless still active
  auto lower = [&](ServiceEntry& e) {
    for (const auto& p : e.ports) {
      e.fragments.push_back(iptables::lower_service_port(p, *next_node, large));
      for (const auto& c : e.fragments.back().chains) ++chain_refs[c.str()];
    }
  };
  if (rebuild_all || large != large_cluster) {
    released.reserve(chain_refs.size());
    for (auto& [chain, refs] : chain_refs) released.push_back(chain);
    chain_refs.clear();
    for (auto& [k, e] : services) e.fragments.clear();
    for (auto& [k, e] : services) lower(e);
  } else {
    for (ServiceEntry* e : recomputed) {
      for (const auto& f : e->fragments)
        for (const auto& c : f.chains) {
          auto it = chain_refs.find(c.view());
          if (--it->second == 0) chain_refs.erase(it);
          released.emplace_back(c.view());
        }
      e->fragments.clear();
    }
    for (ServiceEntry* e : recomputed) lower(*e);
  }

  // 4. Stale chains: per-service chains the kernel has that no port uses any more.
  auto active = [&](std::string_view c) { return chain_refs.find(c) != chain_refs.end(); };
  std::vector<std::string> stale;
  if (opts.existing_nat_chains) {
    for (const auto& c : *opts.existing_nat_chains)
      if (iptables::is_service_chain(c) && !active(c)) stale.push_back(c);
  } else {
    for (auto* list : {&released, &leftover_chains})
      for (auto& c : *list)
        if (!active(c)) stale.push_back(std::move(c));
  }
  std::sort(stale.begin(), stale.end());
  stale.erase(std::unique(stale.begin(), stale.end()), stale.end());
  const bool skip_cleanup = large && opts.since_last_cleanup &&
                            opts.since_last_cleanup->ns <= host.config.iptables.sync_period.ns;

  // 5. The program: every port's kept fragments in order; the chains only of changed
  // services in a partial sync.
  const bool partial = synced && !opts.force_full && !restore_failed && restart.empty();
  std::vector<iptables::PortRef> refs;
  refs.reserve(services.size() + services.size() / 4);
  for (const auto& [k, e] : services)
    for (const auto& f : e.fragments) refs.push_back({&f, !partial || e.changed});
  iptables::AssemblyOptions assembly;
  assembly.partial = partial;
  assembly.large_cluster = large;
  assembly.total_endpoints = total_endpoints;
  if (!skip_cleanup) assembly.stale_chains = stale;
  CompileResult r;
  r.sync = iptables::assemble_iptables(refs, *next_node, assembly);
  r.text = std::move(r.sync.text);
  r.partial = partial;
  if (synced) {
    r.full_sync_reason = opts.force_full ? "a full sync was requested"
                         : restore_failed ? "the last restore failed"
                                          : restart;
    r.changed_services = std::move(changed);
  }

  // 6. This sync is now the prior of the next one. (Deleted Services go only now: the
  // pointers in `flagged` and `recomputed` may name them.)
  if (skip_cleanup) {
    leftover_chains = std::move(stale);
    deleted_chains.clear();
  } else {
    leftover_chains.clear();
    deleted_chains = std::move(stale);
  }
  large_cluster = large;
  finish(p);
  return r;
}

std::optional<NftCompileResult> IncrementalCompiler::State::sync_nft(const IncrementalSyncOptions& opts,
                                                                     DiagSink& diags) {
  Prepared p;
  const bool host_changed = host_dirty;
  if (!prepare(p, diags)) return std::nullopt;
  // Kept fragments of the full transaction follow the ports they were lowered from.
  if (host_changed)
    for (auto& [k, e] : services) e.nft_fragment_ok = false;
  for (ServiceEntry* e : p.recomputed) e->nft_fragment_ok = false;
  const bool full = !synced || opts.force_full || restore_failed || !p.restart.empty();
  nftables::SyncOptions so;
  so.full = full;
  so.changed_services = p.changed;
  so.service_cidrs = service_cidrs_of(host, target.family);
  nft_now = opts.now_ms ? *opts.now_ms : (synced ? nft_now + 1001 : 0);
  so.now_ms = nft_now;

  // A partial sync visits only the recomputed Services when their element keys are their own;
  // otherwise (and for full syncs) every port, in kpc's order.
  std::vector<proxy::ServicePortInfo> ports;
  if (!full && nftables::subset_sync_possible(nft, {}, p.visited)) {
    for (const auto& [k, e] : services)
      if (p.visited.count(k.first + "/" + k.second)) ports.insert(ports.end(), e.ports.begin(), e.ports.end());
    if (nftables::subset_sync_possible(nft, ports, p.visited)) so.only = &p.visited;
  }
  if (!so.only) {
    ports.clear();
    for (const auto& [k, e] : services) ports.insert(ports.end(), e.ports.begin(), e.ports.end());
  }
  NftCompileResult r;
  const nftables::KernelListing* listing = full ? opts.nft_listing : nullptr;
  if (listing) nft.table_exists = true;
  r.sync = nftables::sync_nftables(ports, *p.next_node, so, nft, listing);
  r.text = nftables::print_transaction(r.sync.tx);
  r.cleanup_text = nftables::print_transaction(r.sync.cleanup);
  r.partial = !full;
  if (synced) {
    r.full_sync_reason = opts.force_full ? "a full sync was requested"
                         : restore_failed ? "the last transaction failed"
                                          : p.restart;
    r.changed_services = p.changed;
  }
  finish(p);
  return r;
}

IncrementalCompiler::IncrementalCompiler(Backend backend)
    : s_(std::make_unique<State>(Target{BackendKind::IPTables, backend_family(backend)})) {}
IncrementalCompiler::IncrementalCompiler(Target target) : s_(std::make_unique<State>(target)) {}
IncrementalCompiler::~IncrementalCompiler() = default;

void IncrementalCompiler::update_service(Service svc) {
  Key k{svc.meta.ns, svc.meta.name};
  s_->set_service(k, std::make_shared<const Service>(std::move(svc)));
}

void IncrementalCompiler::delete_service(std::string_view ns, std::string_view name) {
  s_->set_service({std::string(ns), std::string(name)}, nullptr);
}

void IncrementalCompiler::update_slice(EndpointSlice slice) {
  Key k{slice.meta.ns, slice.meta.name};
  s_->set_slice(k, std::make_shared<const EndpointSlice>(std::move(slice)));
}

void IncrementalCompiler::delete_slice(std::string_view ns, std::string_view name) {
  Key k{std::string(ns), std::string(name)};
  if (s_->slices.count(k)) s_->set_slice(k, nullptr);
}

void IncrementalCompiler::update_node(Node node) {
  auto& nodes = s_->host.nodes;
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node.meta.name,
                             [](const Node& n, const std::string& name) { return n.meta.name < name; });
  if (it != nodes.end() && it->meta.name == node.meta.name) *it = std::move(node);
  else nodes.insert(it, std::move(node));
  s_->host_dirty = true;
}

void IncrementalCompiler::delete_node(std::string_view name) {
  auto& nodes = s_->host.nodes;
  std::erase_if(nodes, [&](const Node& n) { return n.meta.name == name; });
  s_->host_dirty = true;
}

void IncrementalCompiler::update_config(ProxyConfig config) {
  s_->host.config = std::move(config);
  s_->host_dirty = true;
}

void IncrementalCompiler::update_environment(NodeEnvironment env) {
  s_->host.env = std::move(env);
  s_->host_dirty = true;
}

void IncrementalCompiler::update_service_cidr(ServiceCIDR cidr) {
  auto& all = s_->host.service_cidrs;
  std::erase_if(all, [&](const ServiceCIDR& c) { return c.meta.name == cidr.meta.name; });
  all.push_back(std::move(cidr));
  std::sort(all.begin(), all.end(), [](const ServiceCIDR& a, const ServiceCIDR& b) { return a.meta.name < b.meta.name; });
}

void IncrementalCompiler::delete_service_cidr(std::string_view name) {
  std::erase_if(s_->host.service_cidrs, [&](const ServiceCIDR& c) { return c.meta.name == name; });
}

void IncrementalCompiler::replace_all(const Snapshot& snapshot) {
  std::set<Key> keep;
  for (const auto& svc : snapshot.services) {
    keep.insert({svc.meta.ns, svc.meta.name});
    update_service(svc);
  }
  for (const auto& [k, e] : s_->services)
    if (e.object && !keep.count(k)) s_->set_service(k, nullptr);
  keep.clear();
  for (const auto& slice : snapshot.slices) {
    keep.insert({slice.meta.ns, slice.meta.name});
    update_slice(slice);
  }
  std::vector<Key> gone;
  for (const auto& [k, slice] : s_->slices)
    if (!keep.count(k)) gone.push_back(k);
  for (const Key& k : gone) s_->set_slice(k, nullptr);
  s_->host.nodes = snapshot.nodes;
  std::sort(s_->host.nodes.begin(), s_->host.nodes.end(),
            [](const Node& a, const Node& b) { return a.meta.name < b.meta.name; });
  s_->host.config = snapshot.config;
  s_->host.env = snapshot.env;
  s_->host.service_cidrs = snapshot.service_cidrs;
  s_->host_dirty = true;
}

std::optional<CompileResult> IncrementalCompiler::sync(const IncrementalSyncOptions& opts, DiagSink& diags) {
  return s_->sync(opts, diags);
}

std::optional<NftCompileResult> IncrementalCompiler::sync_nft(const IncrementalSyncOptions& opts, DiagSink& diags) {
  return s_->sync_nft(opts, diags);
}

std::optional<std::string> IncrementalCompiler::full_program(const std::vector<std::string_view>& existing_nat_chains) const {
  const State& s = *s_;
  if (!s.synced || !s.node || s.target.kind != BackendKind::IPTables) return std::nullopt;
  std::vector<iptables::PortRef> refs;
  refs.reserve(s.services.size() + s.services.size() / 4);
  for (const auto& [k, e] : s.services)
    for (const auto& f : e.fragments) refs.push_back({&f, true});
  iptables::AssemblyOptions assembly;
  assembly.partial = false;
  assembly.large_cluster = s.large_cluster;
  assembly.total_endpoints = s.total_endpoints;
  for (const auto& c : existing_nat_chains)
    if (iptables::is_service_chain(c) && s.chain_refs.find(c) == s.chain_refs.end())
      assembly.stale_chains.emplace_back(c);
  std::sort(assembly.stale_chains.begin(), assembly.stale_chains.end());
  assembly.stale_chains.erase(std::unique(assembly.stale_chains.begin(), assembly.stale_chains.end()),
                              assembly.stale_chains.end());
  return iptables::assemble_iptables(refs, *s.node, assembly).text;
}

std::optional<std::string> IncrementalCompiler::full_nft_program() {
  auto parts = full_nft_program_parts();
  if (!parts) return std::nullopt;
  size_t size = 0;
  for (const auto& p : *parts) size += p.text.size();
  std::string text;
  text.reserve(size);
  for (const auto& p : *parts) text += p.text;
  return text;
}

std::optional<std::vector<IncrementalCompiler::NftPart>> IncrementalCompiler::full_nft_program_parts() {
  State& s = *s_;
  if (!s.synced || !s.node || s.target.kind != BackendKind::NFTables) return std::nullopt;
  nftables::SyncOptions so;
  so.full = true;
  so.service_cidrs = service_cidrs_of(s.host, s.target.family);
  so.track_kernel = false;
  std::vector<NftPart> parts;
  if (s.nft.shared_keys != 0 || !s.nft.synced_once) {
    // A key two Services ensure: the second one's element operations depend on the first's,
    // so every port is lowered together (one part, "changed" always).
    std::vector<proxy::ServicePortInfo> ports;
    for (const auto& [k, e] : s.services) ports.insert(ports.end(), e.ports.begin(), e.ports.end());
    nftables::SyncState fresh;
    s.nft_whole_text = nftables::print_transaction(nftables::sync_nftables(ports, *s.node, so, fresh).tx);
    parts.push_back({++s.nft_part_counter, 0, s.nft_whole_text});
    return parts;
  }
  nftables::SyncState fresh;
  std::string setup = nftables::print_transaction(nftables::sync_nftables({}, *s.node, so, fresh).tx);
  if (s.nft_setup_version == 0 || setup != s.nft_setup_text) {
    s.nft_setup_text = std::move(setup);
    s.nft_setup_version = ++s.nft_part_counter;
  }
  // (the setup part's id is fixed: the counter starts above it)
  parts.push_back({1, s.nft_setup_version, s.nft_setup_text});
  nftables::SyncOptions fo = so;
  fo.ports_only = true;
  for (auto& [k, e] : s.services) {
    if (!e.nft_fragment_ok) {
      nftables::SyncState empty;
      std::string text = e.ports.empty() ? std::string()
                                         : nftables::print_transaction(nftables::sync_nftables(e.ports, *s.node, fo, empty).tx);
      if (text != e.nft_fragment) e.nft_fragment = std::move(text), e.nft_part_version = 0;
      e.nft_fragment_ok = true;
    }
    if (e.nft_part_id == 0) e.nft_part_id = ++s.nft_part_counter;
    if (e.nft_part_version == 0) e.nft_part_version = ++s.nft_part_counter;
    if (!e.nft_fragment.empty()) parts.push_back({e.nft_part_id, e.nft_part_version, e.nft_fragment});
  }
  return parts;
}

void IncrementalCompiler::restore_failed() {
  State& s = *s_;
  s.restore_failed = true;
  nftables::sync_failed(s.nft);
  // The kernel kept what the failed program would have deleted.
  s.leftover_chains.insert(s.leftover_chains.end(), s.deleted_chains.begin(), s.deleted_chains.end());
  std::sort(s.leftover_chains.begin(), s.leftover_chains.end());
  s.leftover_chains.erase(std::unique(s.leftover_chains.begin(), s.leftover_chains.end()), s.leftover_chains.end());
  s.deleted_chains.clear();
}

bool IncrementalCompiler::has_synced() const { return s_->synced; }

}  // namespace kpc
