// syncProxyRules, step by step. Section numbers refer to
// ../shared/docs/kubeproxy-iptables.md (kept in docs/compatibility.md).
#include "compiler/iptables/lower.h"

#include <algorithm>
#include <iterator>

#include "compiler/iptables/rule_builder.h"
#include "compiler/ir/printer.h"

namespace kpc::iptables {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Rule;
using proxy::EndpointInfo;
using proxy::NodeContext;
using proxy::ServicePortInfo;

constexpr std::string_view kServices = "KUBE-SERVICES";
constexpr std::string_view kExternalServices = "KUBE-EXTERNAL-SERVICES";
constexpr std::string_view kForward = "KUBE-FORWARD";
constexpr std::string_view kNodePorts = "KUBE-NODEPORTS";
constexpr std::string_view kProxyFirewall = "KUBE-PROXY-FIREWALL";
constexpr std::string_view kFirewall = "KUBE-FIREWALL";
constexpr std::string_view kPostrouting = "KUBE-POSTROUTING";
constexpr std::string_view kMarkMasq = "KUBE-MARK-MASQ";

// One of kube-proxy's four output buffers. Each op is printed the moment it is
// emitted (the restore text is the product, and printing as we go keeps memory
// flat at 10k services); the IR ops are kept too when the caller asks for them.
// A discarding buffer (unchanged services in a partial sync) only counts lines.
class OpBuffer {
 public:
  explicit OpBuffer(bool keep_ir = false, bool discard = false) : keep_ir_(keep_ir), discard_(discard) {}

  void declare(std::string_view chain) {
    ++lines_;
    ++chains_;
    if (discard_) return;
    text_ += ':';
    text_ += chain;
    text_ += " - [0:0]\n";
    if (keep_ir_) ops_.push_back(Op{OpKind::DeclareChain, std::string(chain), "-"});
  }
  // Consumes the rule: printed now; moved into the program only when the IR is kept
  // (so the builder's scratch storage survives for the next rule otherwise).
  void append(std::string_view chain, Rule&& rule) {
    ++lines_;
    ++rules_;
    if (discard_) return;
    ir::print_rule_restore(text_, chain, rule);
    text_ += '\n';
    if (keep_ir_) {
      Op op{OpKind::Append, std::string(chain)};
      op.rule = std::move(rule);
      ops_.push_back(std::move(op));
    }
  }
  void delete_chain(std::string_view chain) {
    ++lines_;
    if (discard_) return;
    text_ += "-X ";
    text_ += chain;
    text_ += '\n';
    if (keep_ir_) ops_.push_back(Op{OpKind::DeleteChain, std::string(chain)});
  }
  // Lines lowered earlier (a kept fragment): `chains` declarations or `rules` rules.
  void splice(std::string_view text, size_t chains, size_t rules) {
    lines_ += chains + rules;
    chains_ += chains;
    rules_ += rules;
    if (!discard_) text_ += text;
  }
  void reserve(size_t bytes) {
    if (!discard_) text_.reserve(bytes);
  }
  size_t lines() const { return lines_; }
  size_t chains() const { return chains_; }
  size_t rules() const { return rules_; }
  const std::string& text() const { return text_; }
  std::string take_text() { return std::move(text_); }
  std::vector<Op>& ops() { return ops_; }

 private:
  bool keep_ir_, discard_;
  std::string text_;
  std::vector<Op> ops_;
  size_t lines_ = 0, chains_ = 0, rules_ = 0;
};

void append(OpBuffer& buf, std::string_view chain, Rule&& rule) { buf.append(chain, std::move(rule)); }

// Where one service port's lines go: into the program's buffers as they are written
// (batch), or into the port's own fragments (incremental).
struct PortSink {
  OpBuffer& filter_rules;
  OpBuffer& nat_top_rules;    ///< nat KUBE-SERVICES / KUBE-NODEPORTS rules
  OpBuffer& nat_chains;       ///< declarations of the port's own chains
  OpBuffer& nat_chain_rules;  ///< rules of the port's own chains
  std::vector<ChainName>* chains = nullptr;  ///< collects the port's own chains, when wanted
  bool no_local_endpoints_internal = false;
  bool no_local_endpoints_external = false;
};

// Section 8: the loop body of syncProxyRules for one service port.
void lower_port(const ServicePortInfo& sp, const NodeContext& node, bool large_cluster, PortSink& out) {
  auto cat = proxy::categorize_endpoints(sp, node);
  const char* proto = protocol_lower(sp.protocol);
  const ServiceChainNames names = service_chain_names(sp.spn, proto);
  auto index = [&](const EndpointInfo* e) { return static_cast<size_t>(e - sp.endpoints.data()); };
  // SEP chain names, hashed once per reachable endpoint (indexed like sp.endpoints).
  std::vector<ChainName> seps(sp.endpoints.size());
  for (const EndpointInfo* e : cat.all_reachable) seps[index(e)] = endpoint_chain_name(sp.spn, proto, e->str());
  auto declare = [&](const ChainName& chain) {
    out.nat_chains.declare(chain);
    if (out.chains) out.chains->push_back(chain);
  };
  // Comments on endpoint rules are dropped in large-cluster mode (appendServiceCommentLocked).
  auto endpoint_comment = [&](RuleBuilder& r, std::initializer_list<std::string_view> parts) -> RuleBuilder& {
    return large_cluster ? r : r.comment(parts);
  };

  bool uses_cluster_chain = !cat.cluster.empty() && sp.uses_cluster_endpoints();
  bool uses_local_chain = !cat.local.empty() && sp.uses_local_endpoints();
  bool has_endpoints = cat.has_any;
  const ChainName* internal_chain = &names.svc;
  bool has_internal = has_endpoints;
  if (sp.internal_policy_local) {
    internal_chain = &names.svl;
    if (cat.local.empty()) has_internal = false;
  }
  const ChainName* external_policy_chain = &names.svc;
  bool has_external = has_endpoints;
  if (sp.external_policy_local) {
    external_policy_chain = &names.svl;
    if (cat.local.empty()) has_external = false;
  }
  bool uses_ext_chain = has_endpoints && sp.externally_accessible();
  bool uses_fw_chain = has_endpoints && !sp.lb_vips.empty() && !sp.source_ranges.empty();
  const ChainName& lb_chain = uses_fw_chain ? names.fw : names.ext;

  // Traffic that cannot be served: REJECT without any endpoints, DROP without local ones.
  const bool reject = !has_endpoints;
  const std::string_view no_endpoints = has_endpoints ? " has no local endpoints" : " has no endpoints";
  if (has_endpoints) {
    out.no_local_endpoints_internal = !has_internal;
    out.no_local_endpoints_external = !has_external;
  }
  auto filter_verdict = [reject](RuleBuilder& r) -> Rule&& { return reject ? r.reject() : r.drop(); };

  // Step 1: cluster IP.
  if (has_internal) {
    append(out.nat_top_rules, kServices,
           RuleBuilder().comment({sp.spn, " cluster IP"}).proto(sp.protocol).dst(sp.cluster_ip).dport(sp.port).jump(*internal_chain));
  } else {
    RuleBuilder r;
    r.comment({sp.spn, no_endpoints}).proto(sp.protocol).dst(sp.cluster_ip).dport(sp.port);
    append(out.filter_rules, kServices, filter_verdict(r));
  }
  // Step 2: external IPs.
  for (const auto& ip : sp.external_ips) {
    if (has_endpoints)
      append(out.nat_top_rules, kServices,
             RuleBuilder().comment({sp.spn, " external IP"}).proto(sp.protocol).dst(ip).dport(sp.port).jump(names.ext));
    if (!has_external) {
      RuleBuilder r;
      r.comment({sp.spn, no_endpoints}).proto(sp.protocol).dst(ip).dport(sp.port);
      append(out.filter_rules, kExternalServices, filter_verdict(r));
    }
  }
  // Step 3: load-balancer IPs.
  for (const auto& ip : sp.lb_vips) {
    if (has_endpoints)
      append(out.nat_top_rules, kServices,
             RuleBuilder().comment({sp.spn, " loadbalancer IP"}).proto(sp.protocol).dst(ip).dport(sp.port).jump(lb_chain));
    if (uses_fw_chain)
      append(out.filter_rules, kProxyFirewall,
             RuleBuilder().comment({sp.spn, " traffic not accepted by ", names.fw}).proto(sp.protocol).dst(ip).dport(sp.port).drop());
  }
  // Step 4: LB IPs without usable external endpoints.
  if (!has_external)
    for (const auto& ip : sp.lb_vips) {
      RuleBuilder r;
      r.comment({sp.spn, no_endpoints}).proto(sp.protocol).dst(ip).dport(sp.port);
      append(out.filter_rules, kExternalServices, filter_verdict(r));
    }
  // Step 5: NodePort.
  if (sp.node_port != 0) {
    if (has_endpoints) {
      if (node.localhost_node_ports && node.nfacct_counters)
        append(out.nat_top_rules, kNodePorts,
               RuleBuilder().comment(sp.spn).proto(sp.protocol).dst(*CIDR::parse("127.0.0.0/8")).dport(sp.node_port)
                   .nfacct("localhost_nps_accepted_pkts").jump(names.ext));
      append(out.nat_top_rules, kNodePorts, RuleBuilder().comment(sp.spn).proto(sp.protocol).dport(sp.node_port).jump(names.ext));
    }
    if (!has_external) {
      RuleBuilder r;
      r.comment({sp.spn, no_endpoints}).dst_type("LOCAL").proto(sp.protocol).dport(sp.node_port);
      append(out.filter_rules, kExternalServices, filter_verdict(r));
    }
  }
  // Step 6: health-check node port (always TCP).
  if (sp.health_check_node_port != 0)
    append(out.filter_rules, kNodePorts,
           RuleBuilder().comment({sp.spn, " health check node port"}).proto(Protocol::TCP).dport(sp.health_check_node_port).accept());

  // Steps 7-12: the port's own chains (not written for an unchanged service in a partial sync).
  OpBuffer& rules = out.nat_chain_rules;
  // Step 7: masquerade off-cluster traffic to the cluster IP.
  if (has_internal) {
    RuleBuilder r;
    r.comment({sp.spn, " cluster IP"}).proto(sp.protocol).dst(sp.cluster_ip).dport(sp.port);
    if (node.masquerade_all) append(rules, *internal_chain, r.jump(kMarkMasq));
    else if (node.detector.implemented()) append(rules, *internal_chain, r.local(node.detector, false).jump(kMarkMasq));
  }
  // Step 8: external destinations.
  if (uses_ext_chain) {
    declare(names.ext);
    if (!sp.external_policy_local) {
      append(rules, names.ext, RuleBuilder().comment({"masquerade traffic for ", sp.spn, " external destinations"}).jump(kMarkMasq));
    } else {
      if (node.detector.implemented())
        append(rules, names.ext,
               RuleBuilder().comment({"pod traffic for ", sp.spn, " external destinations"}).local(node.detector, true).jump(names.svc));
      append(rules, names.ext,
             RuleBuilder().comment({"masquerade LOCAL traffic for ", sp.spn, " external destinations"}).src_type("LOCAL").jump(kMarkMasq));
      append(rules, names.ext,
             RuleBuilder().comment({"route LOCAL traffic for ", sp.spn, " external destinations"}).src_type("LOCAL").jump(names.svc));
    }
    if (has_external) append(rules, names.ext, RuleBuilder().jump(*external_policy_chain));
  }
  // Step 9: loadBalancerSourceRanges firewall.
  if (uses_fw_chain) {
    declare(names.fw);
    bool allow_from_node = false;
    for (const auto& range : sp.source_ranges) {
      append(rules, names.fw, RuleBuilder().comment({sp.spn, " loadbalancer IP"}).src(range).jump(names.ext));
      if (node.node_ip && range.contains(*node.node_ip)) allow_from_node = true;
    }
    if (allow_from_node)
      for (const auto& ip : sp.lb_vips)
        append(rules, names.fw, RuleBuilder().comment({sp.spn, " loadbalancer IP"}).src(ip).jump(names.ext));
    append(rules, names.fw,
           RuleBuilder().comment({"other traffic to ", sp.spn, " will be dropped by KUBE-PROXY-FIREWALL"}).no_target());
  }
  // Steps 10-11: policy chains.
  auto endpoint_rules = [&](const ChainName& chain, const std::vector<const EndpointInfo*>& eps) {
    if (sp.affinity_client_ip)
      for (const EndpointInfo* e : eps) {
        const ChainName& sep = seps[index(e)];
        RuleBuilder r;
        append(rules, chain, endpoint_comment(r, {sp.spn, " -> ", e->str()}).recent_check(sep, sp.affinity_seconds).jump(sep));
      }
    for (size_t i = 0; i < eps.size(); ++i) {
      RuleBuilder r;
      endpoint_comment(r, {sp.spn, " -> ", eps[i]->str()});
      if (i + 1 < eps.size()) r.probability(1.0 / static_cast<double>(eps.size() - i));
      append(rules, chain, r.jump(seps[index(eps[i])]));
    }
  };
  if (uses_cluster_chain) {
    declare(names.svc);
    endpoint_rules(names.svc, cat.cluster);
  }
  if (uses_local_chain) {
    declare(names.svl);
    endpoint_rules(names.svl, cat.local);
  }
  // Step 12: one chain per reachable endpoint.
  for (const EndpointInfo* e : cat.all_reachable) {
    const ChainName& sep = seps[index(e)];
    declare(sep);
    {
      RuleBuilder r;
      append(rules, sep, endpoint_comment(r, {sp.spn}).src(e->ip).jump(kMarkMasq));
    }
    RuleBuilder r;
    endpoint_comment(r, {sp.spn});
    if (sp.affinity_client_ip) r.recent_set(sep);
    append(rules, sep, r.proto(sp.protocol).dnat(e->ip, e->port));
  }
}

// kube-proxy's four buffers and the parts of syncProxyRules outside the loop over
// service ports, shared by the batch path and the assembly from fragments.
class ProgramBuffers {
 public:
  ProgramBuffers(const NodeContext& node, SyncResult& result, bool keep_ir = false, bool chains_only = false)
      : filter_chains(keep_ir, chains_only), filter_rules(keep_ir, chains_only), nat_chains(keep_ir, chains_only),
        nat_rules(keep_ir, chains_only), node_(node), result_(result), keep_ir_(keep_ir) {}

  // Section 6 items 1-3: fixed chains, KUBE-POSTROUTING, KUBE-MARK-MASQ, KUBE-FIREWALL.
  void head() {
    const uint32_t mark = node_.masquerade_mark;
    for (auto c : {kServices, kExternalServices, kForward, kNodePorts, kProxyFirewall}) filter_chains.declare(c);
    for (auto c : {kServices, kNodePorts, kPostrouting, kMarkMasq}) nat_chains.declare(c);
    append(nat_rules, kPostrouting, RuleBuilder().mark(mark, mark, true).ret());
    append(nat_rules, kPostrouting, RuleBuilder().mark_xor(mark));
    append(nat_rules, kPostrouting,
           RuleBuilder().comment("kubernetes service traffic requiring SNAT").masquerade(node_.random_fully));
    append(nat_rules, kMarkMasq, RuleBuilder().mark_or(mark));
    if (node_.localhost_node_ports) {
      filter_chains.declare(kFirewall);
      append(filter_rules, kFirewall,
             RuleBuilder()
                 .comment("block incoming localnet connections")
                 .dst(*CIDR::parse("127.0.0.0/8"))
                 .src(*CIDR::parse("127.0.0.0/8"), true)
                 .ctstate(ir::kCtRelated | ir::kCtEstablished | ir::kCtDnat, true)
                 .drop());
    }
  }

  // Section 9 step 5: flush and delete per-service chains the kernel has but the new
  // state does not use (`stale`: sorted, unique).
  void delete_stale_chains(const std::vector<std::string>& stale) {
    for (const auto& c : stale) {
      nat_chains.declare(c);
      nat_rules.delete_chain(c);
    }
    result_.deleted_chains = stale.size();
  }

  // Section 8.4 (the last rule(s) of nat KUBE-SERVICES) and 8.5 (KUBE-FORWARD).
  void tail() {
    const std::string_view comment = "kubernetes service nodeports; NOTE: this must be the last rule in this chain";
    if (node_.node_ports_match_all) {
      RuleBuilder r;
      r.comment(comment).dst_type("LOCAL");
      if (node_.family == IPFamily::V6) r.dst(*CIDR::parse("::1/128"), true);
      else if (!node_.localhost_node_ports) r.dst(*CIDR::parse("127.0.0.0/8"), true);
      append(nat_rules, kServices, r.jump(kNodePorts));
    } else {
      for (const auto& ip : node_.node_port_ips())
        append(nat_rules, kServices, RuleBuilder().comment(comment).dst(ip).jump(kNodePorts));
    }
    const uint32_t mark = node_.masquerade_mark;
    if (!node_.tcp_be_liberal) {
      RuleBuilder r;
      r.ctstate(ir::kCtInvalid);
      if (node_.nfacct_counters) r.nfacct("ct_state_invalid_dropped_pkts");
      append(filter_rules, kForward, r.drop());
    }
    append(filter_rules, kForward, RuleBuilder().comment("kubernetes forwarding rules").mark(mark, mark).accept());
    append(filter_rules, kForward,
           RuleBuilder().comment("kubernetes forwarding conntrack rule").ctstate(ir::kCtRelated | ir::kCtEstablished).accept());
  }

  void finish() {
    // The nat rules are ~90% of the text: keep their buffer as the result and put the
    // (small) head in front of it in place, instead of copying 40 MB into a new string.
    std::string head = "*filter\n";
    head += filter_chains.text();
    head += filter_rules.text();
    head += "COMMIT\n*nat\n";
    head += nat_chains.text();
    std::string& t = result_.text;
    t = nat_rules.take_text();
    t.reserve(t.size() + head.size() + 8);
    t.insert(0, head);
    t += "COMMIT\n";
    result_.filter_rules = filter_rules.lines();
    result_.nat_rules_written = nat_rules.lines();
    result_.chains_written = filter_chains.chains() + nat_chains.chains();
    result_.rules_written = filter_rules.rules() + nat_rules.rules();
    if (!keep_ir_) return;
    ir::Program& p = result_.program;
    p.family = node_.family;
    ir::TableBlock filter{ir::TableId::Filter};
    filter.ops = std::move(filter_chains.ops());
    std::move(filter_rules.ops().begin(), filter_rules.ops().end(), std::back_inserter(filter.ops));
    ir::TableBlock nat{ir::TableId::Nat};
    nat.ops = std::move(nat_chains.ops());
    std::move(nat_rules.ops().begin(), nat_rules.ops().end(), std::back_inserter(nat.ops));
    p.tables.push_back(std::move(filter));
    p.tables.push_back(std::move(nat));
  }

  OpBuffer filter_chains, filter_rules, nat_chains, nat_rules;

 private:
  const NodeContext& node_;
  SyncResult& result_;
  bool keep_ir_;
};

}  // namespace

SyncResult lower_iptables(const std::vector<ServicePortInfo>& ports, const NodeContext& node, const SyncOptions& opts) {
  SyncResult result;
  for (const auto& sp : ports) result.total_endpoints += sp.endpoints.size();
  result.large_cluster = result.total_endpoints > kLargeClusterEndpointsThreshold;
  const bool collect_chains = opts.collect_active_chains || !opts.existing_nat_chains.empty();
  if (collect_chains) result.active_nat_chains.reserve(result.total_endpoints + 4 * ports.size());

  ProgramBuffers b(node, result, opts.keep_ir, opts.chains_only);
  // Rough sizes (bytes per line x lines) so the text buffers grow once, not log(n) times.
  b.filter_rules.reserve(ports.size() * 40);
  b.nat_chains.reserve(ports.size() * 100 + result.total_endpoints * 32);
  b.nat_rules.reserve(ports.size() * 900 + result.total_endpoints * 330);
  // Chains of unchanged services in a partial sync: counted, not written.
  OpBuffer skipped_chains(false, true), skipped_rules(false, true);

  b.head();
  std::vector<ChainName> chains;
  std::string key;
  for (const auto& sp : ports) {
    bool write_chains = true;
    if (opts.partial) {
      key.assign(sp.ns).append("/").append(sp.name);
      write_chains = opts.changed_services.count(key) > 0;
    }
    PortSink sink{b.filter_rules, b.nat_rules, write_chains ? b.nat_chains : skipped_chains,
                  write_chains ? b.nat_rules : skipped_rules, collect_chains ? &chains : nullptr};
    chains.clear();
    lower_port(sp, node, result.large_cluster, sink);
    result.no_local_endpoints_internal += sink.no_local_endpoints_internal;
    result.no_local_endpoints_external += sink.no_local_endpoints_external;
    for (const auto& c : chains) result.active_nat_chains.emplace(c.view());
  }
  result.nat_rules_skipped = skipped_rules.lines();

  if (!opts.skip_stale_cleanup) {
    std::vector<std::string> stale;
    for (const auto& c : opts.existing_nat_chains)
      if (is_service_chain(c) && !result.active_nat_chains.count(c)) stale.push_back(c);
    std::sort(stale.begin(), stale.end());
    stale.erase(std::unique(stale.begin(), stale.end()), stale.end());
    b.delete_stale_chains(stale);
  }
  b.tail();
  b.finish();
  return result;
}

PortFragments lower_service_port(const ServicePortInfo& sp, const NodeContext& node, bool large_cluster) {
  PortFragments f;
  OpBuffer filter_rules, nat_top_rules, nat_chains, nat_chain_rules;
  PortSink sink{filter_rules, nat_top_rules, nat_chains, nat_chain_rules, &f.chains};
  lower_port(sp, node, large_cluster, sink);
  f.filter_rules = filter_rules.take_text();
  f.nat_top_rules = nat_top_rules.take_text();
  f.nat_chains = nat_chains.take_text();
  f.nat_chain_rules = nat_chain_rules.take_text();
  f.filter_rule_lines = filter_rules.lines();
  f.nat_top_rule_lines = nat_top_rules.lines();
  f.nat_chain_rule_lines = nat_chain_rules.lines();
  f.no_local_endpoints_internal = sink.no_local_endpoints_internal;
  f.no_local_endpoints_external = sink.no_local_endpoints_external;
  return f;
}

SyncResult assemble_iptables(std::span<const PortRef> ports, const NodeContext& node, const AssemblyOptions& opts) {
  SyncResult result;
  result.total_endpoints = opts.total_endpoints;
  result.large_cluster = opts.large_cluster;
  ProgramBuffers b(node, result);
  // Exact sizes of the kept parts (plus room for the fixed chains and rules).
  size_t filter_bytes = 4096, nat_chain_bytes = 4096 + 48 * opts.stale_chains.size(),
         nat_rule_bytes = 4096 + 40 * opts.stale_chains.size();
  for (const PortRef& p : ports) {
    filter_bytes += p.fragments->filter_rules.size();
    nat_rule_bytes += p.fragments->nat_top_rules.size();
    if (p.write_chains) {
      nat_chain_bytes += p.fragments->nat_chains.size();
      nat_rule_bytes += p.fragments->nat_chain_rules.size();
    }
  }
  b.filter_rules.reserve(filter_bytes);
  b.nat_chains.reserve(nat_chain_bytes);
  b.nat_rules.reserve(nat_rule_bytes + filter_bytes + nat_chain_bytes);  // finish() puts the head in front

  b.head();
  for (const PortRef& p : ports) {
    const PortFragments& f = *p.fragments;
    b.filter_rules.splice(f.filter_rules, 0, f.filter_rule_lines);
    b.nat_rules.splice(f.nat_top_rules, 0, f.nat_top_rule_lines);
    if (p.write_chains) {
      b.nat_chains.splice(f.nat_chains, f.chains.size(), 0);
      b.nat_rules.splice(f.nat_chain_rules, 0, f.nat_chain_rule_lines);
    } else {
      result.nat_rules_skipped += f.nat_chain_rule_lines;
    }
    result.no_local_endpoints_internal += f.no_local_endpoints_internal;
    result.no_local_endpoints_external += f.no_local_endpoints_external;
  }
  b.delete_stale_chains(opts.stale_chains);
  b.tail();
  b.finish();
  return result;
}

}  // namespace kpc::iptables
