#include "compiler/nftables/lower.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <unordered_set>

#include "compiler/nftables/names.h"

namespace kpc::nftables {

const char* container_name(Container c) {
  switch (c) {
    case Container::ClusterIPs: return "cluster-ips";
    case Container::ServiceIPs: return "service-ips";
    case Container::FirewallIPs: return "firewall-ips";
    case Container::NoEndpointServices: return "no-endpoint-services";
    case Container::NoEndpointNodePorts: return "no-endpoint-nodeports";
    case Container::ServiceNodePorts: return "service-nodeports";
  }
  return "?";
}

bool container_is_map(Container c) { return c != Container::ClusterIPs; }

std::optional<LayoutProfile> layout_for_version(std::string_view version, std::string* why) {
  std::string_view v = version;
  if (!v.empty() && v[0] == 'v') v.remove_prefix(1);
  int major = 0, minor = 0;
  size_t i = 0;
  auto number = [&](int* out) {
    size_t start = i;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) *out = *out * 10 + (v[i++] - '0');
    return i > start && i - start < 5;
  };
  bool ok = number(&major) && i < v.size() && v[i++] == '.' && number(&minor);
  if (ok && i < v.size()) ok = v[i] == '.' || v[i] == '-' || v[i] == '+';  // patch, pre-release, build
  if (!ok) {
    *why = "\"" + std::string(version) + "\" is not a Kubernetes version (1.34, v1.35.2)";
    return std::nullopt;
  }
  if (major == 1 && minor >= 33 && minor <= 35) return LayoutProfile::V1_33;
  *why = "kpc has the nftables layout of kube-proxy v1.33-v1.35; v" + std::to_string(major) + "." +
         std::to_string(minor) + (major == 1 && minor < 33 ? " wrote other chains (v1.29-v1.32)" : " inlines the masquerade marks") +
         " and has no profile yet";
  return std::nullopt;
}

namespace {

// Fixed names of the v1.33 layout.
constexpr const char* kFilterPreroutingPreDnat = "filter-prerouting-pre-dnat";
constexpr const char* kFilterOutputPreDnat = "filter-output-pre-dnat";
constexpr const char* kFilterInput = "filter-input";
constexpr const char* kFilterForward = "filter-forward";
constexpr const char* kFilterOutput = "filter-output";
constexpr const char* kNatPrerouting = "nat-prerouting";
constexpr const char* kNatOutput = "nat-output";
constexpr const char* kNatPostrouting = "nat-postrouting";
constexpr const char* kServices = "services";
constexpr const char* kNodePortIPs = "nodeport-ips";
constexpr const char* kServiceEndpointsCheck = "service-endpoints-check";
constexpr const char* kNodePortEndpointsCheck = "nodeport-endpoints-check";
constexpr const char* kRejectChain = "reject-chain";
constexpr const char* kClusterIPsCheck = "cluster-ips-check";
constexpr const char* kFirewallCheck = "firewall-check";
constexpr const char* kMarkMasq = "mark-for-masquerade";
constexpr const char* kMasquerading = "masquerading";

struct BaseChainDef {
  const char* name;
  const char* type;
  const char* hook;
  int priority;  // knftables writes named priorities as numbers: dstnat -100, filter 0, srcnat 100
};
constexpr BaseChainDef kBaseChains[] = {
    {kFilterPreroutingPreDnat, "filter", "prerouting", -110},
    {kFilterOutputPreDnat, "filter", "output", -110},
    {kFilterInput, "filter", "input", 0},
    {kFilterForward, "filter", "forward", 0},
    {kFilterOutput, "filter", "output", 0},
    {kNatPrerouting, "nat", "prerouting", -100},
    {kNatOutput, "nat", "output", -100},
    {kNatPostrouting, "nat", "postrouting", 100},
};

struct JumpDef {
  const char* dst;
  const char* src;
  const char* extra;
};
constexpr JumpDef kJumpChains[] = {
    {kNodePortEndpointsCheck, kFilterInput, "ct state new"},
    {kServiceEndpointsCheck, kFilterInput, "ct state new"},
    {kServiceEndpointsCheck, kFilterForward, "ct state new"},
    {kServiceEndpointsCheck, kFilterOutput, "ct state new"},
    {kFirewallCheck, kFilterPreroutingPreDnat, "ct state new"},
    {kFirewallCheck, kFilterOutputPreDnat, "ct state new"},
    {kServices, kNatOutput, ""},
    {kServices, kNatPrerouting, ""},
    {kMasquerading, kNatPostrouting, ""},
    {kClusterIPsCheck, kFilterForward, "ct state new"},
    {kClusterIPsCheck, kFilterOutput, "ct state new"},
};

// Go's fmt.Sprintf("%#08x", v): "0x" and at least 8 hex digits.
std::string mark_text(uint32_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

/// The local-traffic detector's nft words (pkg/proxy/util/localdetector.go).
std::string if_local(const proxy::NodeContext& node, const char* ipx, bool negate) {
  const auto& d = node.detector;
  std::string s;
  switch (d.kind) {
    case proxy::LocalDetector::Kind::CIDR:
      s = std::string(ipx) + " saddr " + (negate ? "!= " : "") + d.cidr.str();
      break;
    case proxy::LocalDetector::Kind::Bridge:
      s = std::string("iifname ") + (negate ? "!= " : "") + d.iface;
      break;
    case proxy::LocalDetector::Kind::InterfacePrefix:
      s = std::string("iifname ") + (negate ? "!= " : "") + d.iface + "*";
      break;
    case proxy::LocalDetector::Kind::None: break;
  }
  return s;
}

/// One sync's mutable context: the transaction, the chains made so far, the storages.
class Syncer {
 public:
  Syncer(const proxy::NodeContext& node, const SyncOptions& opts, SyncState& state, SyncResult& out)
      : node_(node), opts_(opts), state_(state), out_(out), tx_(out.tx) {
    v6_ = node.family == IPFamily::V6;
    ipx_ = v6_ ? "ip6" : "ip";
    addr_type_ = v6_ ? "ipv6_addr" : "ipv4_addr";
    mark_ = mark_text(node.masquerade_mark);
    track_ = opts.track_kernel;
  }

  void run(const std::vector<proxy::ServicePortInfo>& ports, const KernelListing* listing) {
    int64_t start = opts_.now_ms;
    state_.undo = {};
    cleanup_stale_chains(start);
    if (opts_.full && !opts_.ports_only) setup(listing);

    // kube-proxy lists the kernel's chains and sets after the cleanup transaction ran.
    if (listing && listing->chains) state_.kernel_chains = *listing->chains;
    if (listing && listing->sets) state_.kernel_sets = *listing->sets;
    const auto& existing_chains = state_.kernel_chains;
    existing_chains_ = &existing_chains;
    // The kernel's affinity sets; a subset sync needs only the visited Services' (below).
    if (!(opts_.only && !opts_.full))
      for (const auto& s : state_.kernel_sets)
        if (is_affinity_set(s)) existing_affinity_sets_.insert(s);
    // Room for a full sync's operations (per port: ~12 for its chains, rules and elements;
    // per endpoint: add + flush of its chain and 2-3 rules), so the vector never moves.
    size_t estimate = 0, chains = 0, elements = 0;
    for (const auto& sp : ports) {
      estimate += 16 + 6 * sp.endpoints.size();
      chains += 4 + sp.endpoints.size();
      elements += 2 + sp.external_ips.size() + 2 * sp.lb_vips.size() + (sp.node_port ? 1 : 0);
    }
    if (opts_.full) {
      tx_.ops.reserve(tx_.ops.size() + estimate);
      active_chains_.reserve(chains);
      for (auto& e : state_.elements) e.reserve(elements);
    }

    for (const auto& sp : ports) out_.total_endpoints += sp.endpoints.size();
    out_.ports_visited = ports.size();
    const bool subset = opts_.only && !opts_.full;
    if (subset) begin_subset();

    std::string id;
    for (const auto& sp : ports) {
      id.assign(sp.ns).append("/").append(sp.name);
      if (track_ && id != fp_id_) {
        fp_id_ = id;
        fp_ = &new_footprints_[id];
      }
      if (track_) fp_->endpoints += sp.endpoints.size();
      bool skip = !opts_.full && !opts_.changed_services.count(id);
      service_port(sp, skip);
    }

    // Stale per-service chains: flushed now, deleted by a later sync (kernels before 6.2
    // need the map elements that referenced them gone for a while first). Sorted: kube-proxy
    // walks a Go set. A subset sync looks only where unused chains can be: the visited
    // Services' former chains and chains already stale.
    std::vector<const std::string*> stale;
    auto consider = [&](const std::string& chain) {
      if (!is_service_chain(chain)) return;
      if (!active_chains_.count(chain)) stale.push_back(&chain);
      else if (!state_.stale_chains.empty()) state_.stale_chains.erase(chain);
    };
    if (subset) {
      for (const std::string& c : subset_chain_candidates_)
        if (auto it = existing_chains.find(c); it != existing_chains.end()) consider(*it);
    } else {
      for (const auto& chain : existing_chains) consider(chain);
    }
    std::sort(stale.begin(), stale.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
    stale.erase(std::unique(stale.begin(), stale.end(), [](const std::string* a, const std::string* b) { return *a == *b; }),
                stale.end());
    for (const std::string* chain : stale) {
      tx_.flush_chain(*chain);
      state_.stale_chains[*chain] = start;
      out_.stale_chains_flushed.insert(*chain);
    }
    // Stale affinity sets can go at once (a subset sync: of the visited Services only).
    if (subset) {
      for (const auto& sid : *opts_.only)
        if (auto it = state_.footprints.find(sid); it != state_.footprints.end())
          for (const auto& a : it->second.affinity_sets)
            if (state_.kernel_sets.count(a)) existing_affinity_sets_.insert(a);
    }
    for (const auto& set : existing_affinity_sets_)
      if (!active_affinity_sets_.count(set)) {
        tx_.delete_set(false, set);
        if (opts_.track_kernel && state_.kernel_sets.erase(set)) state_.undo.deleted_sets.push_back(set);
      }

    for (size_t c = 0; c < kContainers; ++c) cleanup_leftovers(static_cast<Container>(c));

    if (opts_.track_kernel) commit_kernel_view();
    if (track_) commit_footprints(subset);
    state_.synced_once = true;
  }

 private:
  // ------------------------------------------------------------ stale chains
  void cleanup_stale_chains(int64_t start) {
    out_.cleanup.family = tx_.family;
    out_.cleanup.table = tx_.table;
    std::vector<std::string> done;
    for (const auto& [chain, modtime] : state_.stale_chains)
      if (modtime < start - opts_.stale_chain_delay_ms) done.push_back(chain);
    for (const auto& chain : done) {
      out_.cleanup.delete_chain(chain);
      state_.stale_chains.erase(chain);
      state_.kernel_chains.erase(chain);
    }
  }

  // ------------------------------------------------------------ setupNFTables
  template <typename Set>
  void ensure_chain(std::string_view chain, Set& created, bool skip_creation) {
    if (!created.insert(typename Set::value_type(chain)).second) return;
    if (track_ && is_service_chain(chain)) fp_->chains.emplace_back(chain);
    if (skip_creation) return;
    tx_.add_chain(chain);
    tx_.flush_chain(chain);
  }

  void setup(const KernelListing* listing) {
    tx_.add_table(std::string("rules for kube-proxy"));
    if (!state_.flushed) {
      // Once per process: recreate the base chains, so that a changed hook or priority of a
      // chain an older kube-proxy made cannot fail the transaction.
      for (const auto& bc : kBaseChains) {
        tx_.add_chain(bc.name);
        tx_.delete_chain(bc.name);
      }
      state_.flushed = true;
    }
    for (const auto& bc : kBaseChains) {
      tx_.add_chain(bc.name, BaseChainSpec{bc.type, bc.hook, bc.priority});
      tx_.flush_chain(bc.name);
    }
    std::unordered_set<std::string> created;
    for (const auto& j : kJumpChains) {
      ensure_chain(j.dst, created, false);
      std::string rule = j.extra;
      if (!rule.empty()) rule += ' ';
      rule += "jump ";
      rule += j.dst;
      tx_.add_rule(j.src, std::move(rule));
    }
    for (const char* c : {kServices, kClusterIPsCheck, kMasquerading, kMarkMasq}) ensure_chain(c, created, false);

    tx_.add_rule(kMarkMasq, "mark set mark or " + mark_);
    tx_.add_rule(kMasquerading, "mark and " + mark_ + " == 0 return");
    tx_.add_rule(kMasquerading, "mark set mark xor " + mark_);
    tx_.add_rule(kMasquerading, "masquerade fully-random");

    tx_.add_set(false, "cluster-ips", addr_type_, {}, std::nullopt, std::string("Active ClusterIPs"));
    tx_.add_rule(kClusterIPsCheck, ipx_ + " daddr @cluster-ips reject",
                 std::string("Reject traffic to invalid ports of ClusterIPs"));
    if (!opts_.service_cidrs.empty()) {
      std::string joined;
      for (const auto& c : opts_.service_cidrs) {
        if (!joined.empty()) joined += ',';
        joined += c;
      }
      tx_.add_rule(kClusterIPsCheck, ipx_ + " daddr { " + joined + " } drop",
                   std::string("Drop traffic to unallocated ClusterIPs"));
    }

    // nodeport-ips exists only when nodePortAddresses limits NodePorts ("add" then "delete"
    // when it should not exist: a bare delete fails on a missing set).
    tx_.add_set(false, kNodePortIPs, addr_type_, {}, std::nullopt, std::string("IPs that accept NodePort traffic"));
    if (node_.node_ports_match_all) {
      tx_.delete_set(false, kNodePortIPs);
    } else {
      tx_.flush_set(false, kNodePortIPs);
      for (const auto& ip : node_.node_port_ips()) {
        if (ip.is_loopback()) continue;  // localhost NodePorts do not exist in nftables mode
        tx_.add_element(false, kNodePortIPs, ip.str());
      }
    }

    std::string vmap_type = addr_type_ + " . inet_proto . inet_service : verdict";
    tx_.add_set(true, "no-endpoint-services", vmap_type, {}, std::nullopt,
                std::string("vmap to drop or reject packets to services with no endpoints"));
    tx_.add_set(true, "no-endpoint-nodeports", "inet_proto . inet_service : verdict", {}, std::nullopt,
                std::string("vmap to drop or reject packets to service nodeports with no endpoints"));
    tx_.add_chain(kRejectChain, std::nullopt, std::string("helper for @no-endpoint-services / @no-endpoint-nodeports"));
    tx_.flush_chain(kRejectChain);
    tx_.add_rule(kRejectChain, "reject");
    tx_.add_rule(kServiceEndpointsCheck, ipx_ + " daddr . meta l4proto . th dport vmap @no-endpoint-services");
    std::string no_localhost = v6_ ? "ip6 daddr != ::1" : "ip daddr != 127.0.0.0/8";
    if (node_.node_ports_match_all)
      tx_.add_rule(kNodePortEndpointsCheck, no_localhost + " meta l4proto . th dport vmap @no-endpoint-nodeports");
    else
      tx_.add_rule(kNodePortEndpointsCheck,
                   ipx_ + " daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports");

    tx_.add_set(true, "firewall-ips", vmap_type, {}, std::nullopt,
                std::string("destinations that are subject to LoadBalancerSourceRanges"));
    ensure_chain(kFirewallCheck, created, false);
    tx_.add_rule(kFirewallCheck, ipx_ + " daddr . meta l4proto . th dport vmap @firewall-ips");

    tx_.add_set(true, "service-ips", vmap_type, {}, std::nullopt,
                std::string("ClusterIP, ExternalIP and LoadBalancer IP traffic"));
    tx_.add_set(true, "service-nodeports", "inet_proto . inet_service : verdict", {}, std::nullopt,
                std::string("NodePort traffic"));
    tx_.add_rule(kServices, ipx_ + " daddr . meta l4proto . th dport vmap @service-ips");
    if (node_.node_ports_match_all)
      tx_.add_rule(kServices, "fib daddr type local " + no_localhost + " meta l4proto . th dport vmap @service-nodeports");
    else
      tx_.add_rule(kServices, ipx_ + " daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports");

    // readOrReset: the mirror becomes what the kernel lists (nothing when the table is new).
    for (size_t c = 0; c < kContainers; ++c) {
      if (listing && listing->elements) state_.elements[c] = (*listing->elements)[c];
      else if (!state_.table_exists) state_.elements[c].clear();
      leftovers_[c].clear();
      leftovers_[c].reserve(state_.elements[c].size());
      for (const auto& [k, v] : state_.elements[c]) leftovers_[c].insert(k);
    }
    leftovers_ready_ = true;
  }

  // ------------------------------------------------------------ subset syncs and footprints
  // A subset sync's leftover candidates are the visited Services' former keys (every other
  // key is ensured again, unchanged, by a Service the sync does not visit).
  void begin_subset() {
    for (auto& l : leftovers_) l.clear();
    for (const auto& sid : *opts_.only) {
      auto it = state_.footprints.find(sid);
      if (it == state_.footprints.end()) continue;
      for (const auto& [c, key] : it->second.elements)
        if (state_.of(c).count(key)) leftovers_[static_cast<size_t>(c)].insert(key);
      for (const auto& ch : it->second.chains) subset_chain_candidates_.push_back(ch);
    }
    for (const auto& [chain, t] : state_.stale_chains) subset_chain_candidates_.push_back(chain);
    leftovers_ready_ = true;
  }

  void commit_footprints(bool subset) {
    if (!subset) {
      state_.footprints = std::move(new_footprints_);
      state_.key_owner.clear();
      state_.shared_keys = 0;
      for (const auto& [sid, fp] : state_.footprints) own_keys(sid, fp);
    } else {
      for (const auto& sid : *opts_.only) {
        auto it = state_.footprints.find(sid);
        if (it == state_.footprints.end()) continue;
        for (const auto& [c, key] : it->second.elements)
          if (auto o = state_.key_owner.find(key); o != state_.key_owner.end() && o->second == sid)
            state_.key_owner.erase(o);
        state_.footprints.erase(it);
      }
      for (auto& [sid, fp] : new_footprints_) {
        own_keys(sid, fp);
        state_.footprints[sid] = std::move(fp);
      }
    }
    // The metrics of the whole state.
    out_.total_endpoints = 0;
    out_.no_local_endpoints_internal = out_.no_local_endpoints_external = 0;
    for (const auto& [sid, fp] : state_.footprints) {
      out_.total_endpoints += fp.endpoints;
      out_.no_local_endpoints_internal += fp.no_local_internal;
      out_.no_local_endpoints_external += fp.no_local_external;
    }
  }

  void own_keys(const std::string& sid, const Footprint& fp) {
    for (const auto& [c, key] : fp.elements) {
      auto [it, fresh] = state_.key_owner.try_emplace(key, sid);
      if (!fresh && it->second != sid) ++state_.shared_keys;
    }
  }

  // ------------------------------------------------------------ elements
  void ensure_leftovers() {
    if (leftovers_ready_) return;
    // A partial sync starts from the leftover keys the last sync's cleanup reset: every key.
    for (size_t c = 0; c < kContainers; ++c) {
      leftovers_[c].clear();
      leftovers_[c].reserve(state_.elements[c].size());
      for (const auto& [k, v] : state_.elements[c]) leftovers_[c].insert(k);
    }
    leftovers_ready_ = true;
  }

  void ensure_elem(Container c, std::string key, std::string value, const std::string* comment) {
    ensure_leftovers();
    if (track_) fp_->elements.emplace_back(c, key);
    auto& store = state_.of(c);
    bool is_map = container_is_map(c);
    auto it = store.find(key);
    if (it != store.end()) {
      if (it->second != value) {
        state_.undo.elements.emplace_back(c, key, it->second);
        tx_.delete_element(is_map, container_name(c), key);
        tx_.add_element(is_map, container_name(c), key, value,
                        comment ? std::optional<std::string_view>(*comment) : std::nullopt);
        it->second = std::move(value);
      }
      leftovers_[static_cast<size_t>(c)].erase(key);
    } else {
      tx_.add_element(is_map, container_name(c), key, value,
                      comment ? std::optional<std::string_view>(*comment) : std::nullopt);
      if (track_) state_.undo.elements.emplace_back(c, key, std::nullopt);
      store.emplace(std::move(key), std::move(value));
    }
  }

  void cleanup_leftovers(Container c) {
    ensure_leftovers();
    auto& left = leftovers_[static_cast<size_t>(c)];
    std::vector<std::string> keys(left.begin(), left.end());
    std::sort(keys.begin(), keys.end());
    auto& store = state_.of(c);
    for (auto& k : keys) {
      tx_.delete_element(container_is_map(c), container_name(c), k);
      if (auto it = store.find(k); it != store.end()) {
        if (track_) state_.undo.elements.emplace_back(c, k, it->second);
        store.erase(it);
      }
    }
    left.clear();
  }

  // ------------------------------------------------------------ one service port
  bool ep_chain_skip_update(const proxy::ServicePortInfo& sp, std::string_view chain, std::string_view aff) const {
    if (state_.synced_once || existing_chains_->empty()) return false;  // only the first sync trusts the kernel
    bool want_affinity = sp.affinity_client_ip;
    return existing_chains_->count(chain) && want_affinity == (existing_affinity_sets_.count(std::string(aff)) > 0);
  }

  struct Ep {
    const proxy::EndpointInfo* ep;
    std::string_view chain, affinity;  ///< in the transaction's text
  };
  struct Names {
    std::string_view cluster_policy, local_policy, external, firewall;  ///< in the transaction's text
  };

  void service_port(const proxy::ServicePortInfo& sp, bool skip) {
    const char* proto = protocol_lower(sp.protocol);
    Names names;
    {
      ServicePortNames n = service_port_names(sp.ns, sp.name, proto, sp.port_name);
      names = {tx_.intern(n.cluster_policy), tx_.intern(n.local_policy), tx_.intern(n.external), tx_.intern(n.firewall)};
    }
    proxy::Categorized cat = proxy::categorize_endpoints(sp, node_);

    std::vector<Ep>& reachable = reachable_;
    reachable.clear();
    std::string& name = name_buf_;
    for (const auto* ep : cat.all_reachable) {
      Ep& e = reachable.emplace_back();
      e.ep = ep;
      name.assign("endpoint-");
      append_endpoint_base(name, sp.ns, sp.name, proto, sp.port_name, ep->ip, ep->port);
      e.chain = tx_.intern(name);
      // The affinity set is only named where the service has ClientIP affinity (and where
      // the first sync asks whether the kernel has it).
      if (sp.affinity_client_ip || (!state_.synced_once && !existing_chains_->empty()))
        e.affinity = tx_.intern(std::string("affinity-").append(e.chain.substr(9)));
    }
    auto find_ep = [&](const proxy::EndpointInfo* ep) -> const Ep& {
      for (const auto& e : reachable)
        if (e.ep == ep) return e;
      return reachable.front();  // unreachable: cluster/local endpoints are a subset
    };

    for (const auto& e : reachable) {
      ensure_chain(e.chain, active_chains_, skip || ep_chain_skip_update(sp, e.chain, e.affinity));
      if (sp.affinity_client_ip) {
        active_affinity_sets_.emplace(e.affinity);
        if (track_) fp_->affinity_sets.emplace_back(e.affinity);
      }
    }

    bool uses_cluster = !cat.cluster.empty() && sp.uses_cluster_endpoints();
    if (uses_cluster) ensure_chain(names.cluster_policy, active_chains_, skip);
    bool uses_local = !cat.local.empty() && sp.uses_local_endpoints();
    if (uses_local) ensure_chain(names.local_policy, active_chains_, skip);

    const std::string_view* internal_chain = &names.cluster_policy;
    bool has_internal = cat.has_any;
    if (sp.internal_policy_local) {
      internal_chain = &names.local_policy;
      if (cat.local.empty()) has_internal = false;
    }
    const std::string_view* external_policy = &names.cluster_policy;
    bool has_external = cat.has_any;
    if (sp.external_policy_local) {
      external_policy = &names.local_policy;
      if (cat.local.empty()) has_external = false;
    }
    bool uses_external = cat.has_any && sp.externally_accessible();
    if (uses_external) ensure_chain(names.external, active_chains_, skip);

    std::string internal_verdict, external_verdict;
    if (!cat.has_any) {
      internal_verdict = external_verdict = std::string("goto ") + kRejectChain;
    } else {
      if (!has_internal) {
        internal_verdict = "drop";
        ++out_.no_local_endpoints_internal;
        if (track_) ++fp_->no_local_internal;
      }
      if (!has_external) {
        external_verdict = "drop";
        ++out_.no_local_endpoints_external;
        if (track_) ++fp_->no_local_external;
      }
    }

    std::string port = std::to_string(sp.port);
    auto key3 = [&](const IPAddr& ip) { return ip.str() + " . " + proto + " . " + port; };
    const std::string& comment = sp.spn;

    ensure_elem(Container::ClusterIPs, sp.cluster_ip.str(), "", nullptr);
    if (has_internal)
      ensure_elem(Container::ServiceIPs, key3(sp.cluster_ip), "goto " + std::string(*internal_chain), nullptr);
    else
      ensure_elem(Container::NoEndpointServices, key3(sp.cluster_ip), internal_verdict, &comment);

    for (const auto& ext : sp.external_ips) {
      if (cat.has_any) ensure_elem(Container::ServiceIPs, key3(ext), "goto " + std::string(names.external), nullptr);
      if (!has_external) ensure_elem(Container::NoEndpointServices, key3(ext), external_verdict, &comment);
    }

    bool uses_fw = !sp.lb_vips.empty() && !sp.source_ranges.empty();
    if (uses_fw) ensure_chain(names.firewall, active_chains_, skip);
    for (const auto& vip : sp.lb_vips) {
      if (cat.has_any) ensure_elem(Container::ServiceIPs, key3(vip), "goto " + std::string(names.external), nullptr);
      if (uses_fw) ensure_elem(Container::FirewallIPs, key3(vip), "goto " + std::string(names.firewall), nullptr);
    }
    if (!has_external)
      for (const auto& vip : sp.lb_vips)
        ensure_elem(Container::NoEndpointServices, key3(vip), external_verdict, &comment);

    if (sp.node_port != 0) {
      std::string key = std::string(proto) + " . " + std::to_string(sp.node_port);
      if (cat.has_any) ensure_elem(Container::ServiceNodePorts, key, "goto " + std::string(names.external), nullptr);
      if (!has_external) ensure_elem(Container::NoEndpointNodePorts, key, external_verdict, &comment);
    }

    if (skip) return;
    ++out_.services_written;

    if (has_internal) {
      if (node_.masquerade_all)
        tx_.add_rule(*internal_chain, ipx_ + " daddr " + sp.cluster_ip.str() + " jump " + kMarkMasq);
      else if (node_.detector.implemented())
        tx_.add_rule(*internal_chain,
                     ipx_ + " daddr " + sp.cluster_ip.str() + " " + if_local(node_, ipx_.c_str(), true) + " jump " + kMarkMasq);
    }

    if (uses_external) {
      if (!sp.external_policy_local) {
        tx_.add_rule(names.external, std::string("jump ") + kMarkMasq);
      } else {
        if (node_.detector.implemented())
          tx_.add_rule(names.external, if_local(node_, ipx_.c_str(), false) + " goto " + std::string(names.cluster_policy),
                       std::string("short-circuit pod traffic"));
        tx_.add_rule(names.external, std::string("fib saddr type local jump ") + kMarkMasq,
                     std::string("masquerade local traffic"));
        tx_.add_rule(names.external, "fib saddr type local goto " + std::string(names.cluster_policy),
                     std::string("short-circuit local traffic"));
      }
      if (has_external) tx_.add_rule(names.external, "goto " + std::string(*external_policy));
    }

    if (uses_fw) {
      std::string sources;
      bool allow_from_node = false;
      for (const auto& cidr : sp.source_ranges) {
        if (!sources.empty()) sources += " , ";
        sources += cidr.str();
        if (node_.node_ip && cidr.contains(*node_.node_ip)) allow_from_node = true;
      }
      if (allow_from_node)
        for (const auto& vip : sp.lb_vips) sources += " , " + vip.str();
      tx_.add_rule(names.firewall, ipx_ + " saddr != { " + sources + " } drop");
    }

    if (sp.affinity_client_ip)
      for (const auto& e : reachable)
        tx_.add_set(false, e.affinity, addr_type_, "dynamic,timeout", sp.affinity_seconds);

    auto write_lb = [&](std::string_view chain, const std::vector<const proxy::EndpointInfo*>& eps) {
      if (sp.affinity_client_ip)
        for (const auto* ep : eps) {
          const Ep& e = find_ep(ep);
          tx_.add_rule(chain, ipx_ + " saddr @" + std::string(e.affinity) + " goto " + std::string(e.chain));
        }
      std::string rule = "numgen random mod " + std::to_string(eps.size()) + " vmap {";
      for (size_t i = 0; i < eps.size(); ++i) {
        rule += ' ';
        rule += std::to_string(i);
        rule += " : goto ";
        rule += find_ep(eps[i]).chain;
        if (i + 1 != eps.size()) rule += " ,";
      }
      rule += " }";
      tx_.add_rule(chain, std::move(rule));
    };
    if (uses_cluster) write_lb(names.cluster_policy, cat.cluster);
    if (uses_local) write_lb(names.local_policy, cat.local);

    std::string& rule = scratch_;
    for (const auto& e : reachable) {
      if (ep_chain_skip_update(sp, e.chain, e.affinity)) continue;
      rule.assign(ipx_).append(" saddr ");
      e.ep->ip.append_to(rule);
      rule.append(" jump ").append(kMarkMasq);
      tx_.add_rule(e.chain, rule);
      if (sp.affinity_client_ip) {
        rule.assign("update @").append(e.affinity).append(" { ").append(ipx_).append(" saddr }");
        tx_.add_rule(e.chain, rule);
      }
      rule.assign("meta l4proto ").append(proto).append(" dnat to ").append(e.ep->str());
      tx_.add_rule(e.chain, rule);
    }
  }

  // ------------------------------------------------------------ the kernel afterwards
  // What the kernel lists after this transaction (assuming it succeeds): every chain it
  // had (stale ones stay, flushed), the chains this sync uses, the fixed ones; sets likewise.
  void commit_kernel_view() {
    auto& chains = state_.kernel_chains;
    auto& undo = state_.undo;
    chains.reserve(chains.size() + active_chains_.size());
    for (std::string_view c : active_chains_)
      if (chains.emplace(c).second) undo.added_chains.emplace_back(c);
    for (const auto& op : tx_.ops) {
      if (op.kind == ObjectKind::Table && op.verb == Verb::Add && !state_.table_exists)
        state_.table_exists = undo.created_table = true;
      // Per-service chains are all in active_chains_; only the fixed ones are added here.
      if (op.kind == ObjectKind::Chain && op.verb == Verb::Add && !is_service_chain(op.name))
        if (chains.emplace(op.name).second) undo.added_chains.emplace_back(op.name);
      if (op.kind == ObjectKind::Set || op.kind == ObjectKind::Map) {
        if (op.verb == Verb::Add) {
          if (state_.kernel_sets.emplace(op.name).second) undo.added_sets.emplace_back(op.name);
        } else if (op.verb == Verb::Delete) {
          if (state_.kernel_sets.erase(std::string(op.name))) undo.deleted_sets.emplace_back(op.name);
        }
      }
    }
  }

  const proxy::NodeContext& node_;
  const SyncOptions& opts_;
  SyncState& state_;
  SyncResult& out_;
  Transaction& tx_;
  bool v6_ = false;
  std::string ipx_, addr_type_, mark_;
  const NameSet* existing_chains_ = nullptr;
  std::set<std::string> existing_affinity_sets_;
  std::unordered_set<std::string_view> active_chains_;  ///< views into the transaction's text
  std::vector<Ep> reachable_;
  // Footprints (with track_kernel): the Service being visited and what this sync records.
  bool track_ = false;
  std::string fp_id_;
  Footprint* fp_ = nullptr;
  std::map<std::string, Footprint, std::less<>> new_footprints_;
  std::vector<std::string> subset_chain_candidates_;  ///< copies: the stale-chain map changes meanwhile
  std::set<std::string> active_affinity_sets_;
  std::array<std::unordered_set<std::string>, kContainers> leftovers_;
  std::string scratch_;  ///< rule text being built (reused: no allocation per rule)
  std::string name_buf_;
  bool leftovers_ready_ = false;
};

}  // namespace

SyncResult sync_nftables(const std::vector<proxy::ServicePortInfo>& ports, const proxy::NodeContext& node,
                         const SyncOptions& opts, SyncState& state, const KernelListing* listing) {
  SyncResult out;
  out.tx.family = table_family_of(node.family);
  Syncer s(node, opts, state, out);
  s.run(ports, listing);
  return out;
}

bool subset_sync_possible(const SyncState& state, const std::vector<proxy::ServicePortInfo>& ports,
                          const std::set<std::string>& services) {
  if (!state.synced_once || state.shared_keys != 0) return false;
  // Every key a visited port could ensure, whatever its endpoints: it must not be another
  // Service's (that Service's element operations would then depend on this one's).
  std::string id, key;
  auto foreign = [&](const std::string& k) {
    auto it = state.key_owner.find(k);
    return it != state.key_owner.end() && !services.count(it->second);
  };
  for (const auto& sp : ports) {
    id.assign(sp.ns).append("/").append(sp.name);
    const char* proto = protocol_lower(sp.protocol);
    std::string tail = std::string(" . ") + proto + " . " + std::to_string(sp.port);
    if (foreign(sp.cluster_ip.str()) || foreign(sp.cluster_ip.str() + tail)) return false;
    for (const auto& ip : sp.external_ips)
      if (foreign(ip.str() + tail)) return false;
    for (const auto& ip : sp.lb_vips)
      if (foreign(ip.str() + tail)) return false;
    if (sp.node_port && foreign(std::string(proto) + " . " + std::to_string(sp.node_port))) return false;
  }
  return true;
}

void sync_failed(SyncState& state) {
  // kube-proxy forgets its stale-chain records (they were not flushed after all) ...
  state.stale_chains.clear();
  // ... and its next sync is full and re-reads the kernel, which rolled the transaction back:
  // the kernel view goes back to before it.
  auto& u = state.undo;
  for (auto it = u.elements.rbegin(); it != u.elements.rend(); ++it) {
    auto& [c, key, old] = *it;
    if (old) state.of(c)[key] = *old;
    else state.of(c).erase(key);
  }
  for (const auto& c : u.added_chains) state.kernel_chains.erase(c);
  for (const auto& s : u.added_sets) state.kernel_sets.erase(s);
  for (const auto& s : u.deleted_sets) state.kernel_sets.insert(s);
  if (u.created_table) {
    state.table_exists = false;
    for (auto& e : state.elements) e.clear();
  }
  // `flushed` stays set, as in kube-proxy (it is set when the transaction is built).
  u = {};
}

}  // namespace kpc::nftables
