// syncProxyRules, step by step. Section numbers refer to
// ../shared/docs/kubeproxy-iptables.md (kept in docs/compatibility.md).
#include "compiler/iptables/lower.h"

#include <algorithm>

#include "compiler/iptables/chain_names.h"
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

const std::string kServices = "KUBE-SERVICES";
const std::string kExternalServices = "KUBE-EXTERNAL-SERVICES";
const std::string kForward = "KUBE-FORWARD";
const std::string kNodePorts = "KUBE-NODEPORTS";
const std::string kProxyFirewall = "KUBE-PROXY-FIREWALL";
const std::string kFirewall = "KUBE-FIREWALL";
const std::string kPostrouting = "KUBE-POSTROUTING";
const std::string kMarkMasq = "KUBE-MARK-MASQ";

// One of kube-proxy's four output buffers. Each op is printed the moment it is
// emitted (the restore text is the product, and printing as we go keeps memory
// flat at 10k services); the IR ops are kept too when the caller asks for them.
// A discarding buffer (unchanged services in a partial sync) only counts lines.
class OpBuffer {
 public:
  OpBuffer(bool keep_ir, bool discard) : keep_ir_(keep_ir), discard_(discard) {}

  void declare(const std::string& chain) {
    ++lines_;
    ++chains_;
    if (discard_) return;
    text_ += ':';
    text_ += chain;
    text_ += " - [0:0]\n";
    if (keep_ir_) ops_.push_back(Op{OpKind::DeclareChain, chain, "-"});
  }
  // Consumes the rule: printed now; moved into the program only when the IR is kept
  // (so the builder's scratch storage survives for the next rule otherwise).
  void append(const std::string& chain, Rule&& rule) {
    ++lines_;
    ++rules_;
    if (discard_) return;
    ir::print_rule_restore(text_, chain, rule);
    text_ += '\n';
    if (keep_ir_) {
      Op op{OpKind::Append, chain};
      op.rule = std::move(rule);
      ops_.push_back(std::move(op));
    }
  }
  void delete_chain(const std::string& chain) {
    ++lines_;
    if (discard_) return;
    text_ += "-X ";
    text_ += chain;
    text_ += '\n';
    if (keep_ir_) ops_.push_back(Op{OpKind::DeleteChain, chain});
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

struct Buffers {
  explicit Buffers(bool keep_ir, bool discard = false)
      : filter_chains(keep_ir, discard), filter_rules(keep_ir, discard), nat_chains(keep_ir, discard),
        nat_rules(keep_ir, discard) {}
  OpBuffer filter_chains, filter_rules, nat_chains, nat_rules;
};

void declare(OpBuffer& buf, const std::string& chain) { buf.declare(chain); }
void append(OpBuffer& buf, const std::string& chain, Rule&& rule) { buf.append(chain, std::move(rule)); }

class Lowering {
 public:
  Lowering(const NodeContext& node, const SyncOptions& opts, SyncResult& result)
      : node_(node), opts_(opts), result_(result), mark_(node.masquerade_mark), b_(opts.keep_ir, opts.chains_only),
        discard_(false, true) {}

  void run(const std::vector<ServicePortInfo>& ports) {
    for (const auto& sp : ports)
      result_.total_endpoints += sp.endpoints.size();
    result_.large_cluster = result_.total_endpoints > kLargeClusterEndpointsThreshold;
    collect_chains_ = opts_.collect_active_chains || !opts_.existing_nat_chains.empty();
    if (collect_chains_) result_.active_nat_chains.reserve(result_.total_endpoints + 4 * ports.size());
    reserve_text(ports.size(), result_.total_endpoints);
    top_level_head();
    for (const auto& sp : ports) service_port(sp);
    stale_chains();
    node_ports_tail();
    forward_rules();
    assemble();
  }

 private:
  // Section 6 items 1-3: fixed chains, KUBE-POSTROUTING, KUBE-MARK-MASQ, KUBE-FIREWALL.
  void top_level_head() {
    for (const auto* c : {&kServices, &kExternalServices, &kForward, &kNodePorts, &kProxyFirewall})
      declare(b_.filter_chains, *c);
    for (const auto* c : {&kServices, &kNodePorts, &kPostrouting, &kMarkMasq}) declare(b_.nat_chains, *c);
    append(b_.nat_rules, kPostrouting, RuleBuilder().mark(mark_, mark_, true).ret());
    append(b_.nat_rules, kPostrouting, RuleBuilder().mark_xor(mark_));
    append(b_.nat_rules, kPostrouting,
           RuleBuilder().comment("kubernetes service traffic requiring SNAT").masquerade(node_.random_fully));
    append(b_.nat_rules, kMarkMasq, RuleBuilder().mark_or(mark_));
    if (node_.localhost_node_ports) {
      declare(b_.filter_chains, kFirewall);
      append(b_.filter_rules, kFirewall,
             RuleBuilder()
                 .comment("block incoming localnet connections")
                 .dst(*CIDR::parse("127.0.0.0/8"))
                 .src(*CIDR::parse("127.0.0.0/8"), true)
                 .ctstate(ir::kCtRelated | ir::kCtEstablished | ir::kCtDnat, true)
                 .drop());
    }
  }

  void active(const std::string& chain) {
    if (collect_chains_) result_.active_nat_chains.insert(chain);
  }

  // Rough sizes (bytes per line x lines) so the text buffers grow once, not log(n) times.
  void reserve_text(size_t ports, size_t endpoints) {
    b_.filter_rules.reserve(ports * 40);
    b_.nat_chains.reserve(ports * 100 + endpoints * 32);
    b_.nat_rules.reserve(ports * 900 + endpoints * 330);
  }

  // Comments on endpoint rules are dropped in large-cluster mode (appendServiceCommentLocked).
  std::string ep_comment(std::string text) const { return result_.large_cluster ? "" : text; }

  void endpoint_rules(const ServicePortInfo& sp, const std::string& chain,
                      const std::vector<const EndpointInfo*>& eps, const std::vector<std::string>& seps,
                      OpBuffer& rules) {
    if (sp.affinity_client_ip)
      for (const EndpointInfo* e : eps) {
        const std::string& sep = seps[static_cast<size_t>(e - sp.endpoints.data())];
        append(rules, chain, RuleBuilder().comment(ep_comment(sp.spn + " -> " + e->str)).recent_check(sep, sp.affinity_seconds).jump(sep));
      }
    for (size_t i = 0; i < eps.size(); ++i) {
      const std::string& sep = seps[static_cast<size_t>(eps[i] - sp.endpoints.data())];
      RuleBuilder r;
      r.comment(ep_comment(sp.spn + " -> " + eps[i]->str));
      if (i + 1 < eps.size()) r.probability(1.0 / static_cast<double>(eps.size() - i));
      append(rules, chain, r.jump(sep));
    }
  }

  void service_port(const ServicePortInfo& sp) {
    auto cat = proxy::categorize_endpoints(sp, node_);
    const char* proto = protocol_lower(sp.protocol);
    ServiceChainNames names = service_chain_names(sp.spn, proto);
    // SEP chain names, hashed once per reachable endpoint (indexed like sp.endpoints).
    std::vector<std::string> seps(sp.endpoints.size());
    for (const EndpointInfo* e : cat.all_reachable) {
      std::string& sep = seps[static_cast<size_t>(e - sp.endpoints.data())];
      sep = endpoint_chain_name(sp.spn, proto, e->str);
      active(sep);
    }

    bool uses_cluster_chain = !cat.cluster.empty() && sp.uses_cluster_endpoints();
    bool uses_local_chain = !cat.local.empty() && sp.uses_local_endpoints();
    bool has_endpoints = cat.has_any;
    std::string internal_chain = names.svc;
    bool has_internal = has_endpoints;
    if (sp.internal_policy_local) {
      internal_chain = names.svl;
      if (cat.local.empty()) has_internal = false;
    }
    std::string external_policy_chain = names.svc;
    bool has_external = has_endpoints;
    if (sp.external_policy_local) {
      external_policy_chain = names.svl;
      if (cat.local.empty()) has_external = false;
    }
    bool uses_ext_chain = has_endpoints && sp.externally_accessible();
    bool uses_fw_chain = has_endpoints && !sp.lb_vips.empty() && !sp.source_ranges.empty();
    const std::string& lb_chain = uses_fw_chain ? names.fw : names.ext;

    const char* internal_target = "REJECT";
    const char* external_target = "REJECT";
    std::string internal_comment = sp.spn + " has no endpoints";
    std::string external_comment = internal_comment;
    if (has_endpoints) {
      internal_target = external_target = "DROP";
      internal_comment = external_comment = sp.spn + " has no local endpoints";
      if (!has_internal) ++result_.no_local_endpoints_internal;
      if (!has_external) ++result_.no_local_endpoints_external;
    }
    auto filter_verdict = [](RuleBuilder& r, const char* target) -> Rule&& {
      return std::string(target) == "REJECT" ? r.reject() : r.drop();
    };

    // Step 1: cluster IP.
    if (has_internal) {
      append(b_.nat_rules, kServices,
             RuleBuilder().comment(sp.spn + " cluster IP").proto(sp.protocol).dst(sp.cluster_ip).dport(sp.port).jump(internal_chain));
    } else {
      RuleBuilder r;
      r.comment(internal_comment).proto(sp.protocol).dst(sp.cluster_ip).dport(sp.port);
      append(b_.filter_rules, kServices, filter_verdict(r, internal_target));
    }
    // Step 2: external IPs.
    for (const auto& ip : sp.external_ips) {
      if (has_endpoints)
        append(b_.nat_rules, kServices,
               RuleBuilder().comment(sp.spn + " external IP").proto(sp.protocol).dst(ip).dport(sp.port).jump(names.ext));
      if (!has_external) {
        RuleBuilder r;
        r.comment(external_comment).proto(sp.protocol).dst(ip).dport(sp.port);
        append(b_.filter_rules, kExternalServices, filter_verdict(r, external_target));
      }
    }
    // Step 3: load-balancer IPs.
    for (const auto& ip : sp.lb_vips) {
      if (has_endpoints)
        append(b_.nat_rules, kServices,
               RuleBuilder().comment(sp.spn + " loadbalancer IP").proto(sp.protocol).dst(ip).dport(sp.port).jump(lb_chain));
      if (uses_fw_chain)
        append(b_.filter_rules, kProxyFirewall,
               RuleBuilder().comment(sp.spn + " traffic not accepted by " + names.fw).proto(sp.protocol).dst(ip).dport(sp.port).drop());
    }
    // Step 4: LB IPs without usable external endpoints.
    if (!has_external)
      for (const auto& ip : sp.lb_vips) {
        RuleBuilder r;
        r.comment(external_comment).proto(sp.protocol).dst(ip).dport(sp.port);
        append(b_.filter_rules, kExternalServices, filter_verdict(r, external_target));
      }
    // Step 5: NodePort.
    if (sp.node_port != 0) {
      if (has_endpoints) {
        if (node_.localhost_node_ports && node_.nfacct_counters)
          append(b_.nat_rules, kNodePorts,
                 RuleBuilder().comment(sp.spn).proto(sp.protocol).dst(*CIDR::parse("127.0.0.0/8")).dport(sp.node_port)
                     .nfacct("localhost_nps_accepted_pkts").jump(names.ext));
        append(b_.nat_rules, kNodePorts, RuleBuilder().comment(sp.spn).proto(sp.protocol).dport(sp.node_port).jump(names.ext));
      }
      if (!has_external) {
        RuleBuilder r;
        r.comment(external_comment).dst_type("LOCAL").proto(sp.protocol).dport(sp.node_port);
        append(b_.filter_rules, kExternalServices, filter_verdict(r, external_target));
      }
    }
    // Step 6: health-check node port (always TCP).
    if (sp.health_check_node_port != 0)
      append(b_.filter_rules, kNodePorts,
             RuleBuilder().comment(sp.spn + " health check node port").proto(Protocol::TCP).dport(sp.health_check_node_port).accept());

    // Steps 7-12 go to a discarded buffer in a partial sync of an unchanged service.
    bool skip = opts_.partial && !opts_.changed_services.count(sp.ns + "/" + sp.name);
    OpBuffer& nat_chains = skip ? discard_.nat_chains : b_.nat_chains;
    OpBuffer& nat_rules = skip ? discard_.nat_rules : b_.nat_rules;
    size_t skipped_before = discard_.nat_rules.lines();

    // Step 7: masquerade off-cluster traffic to the cluster IP.
    if (has_internal) {
      RuleBuilder r;
      r.comment(sp.spn + " cluster IP").proto(sp.protocol).dst(sp.cluster_ip).dport(sp.port);
      if (node_.masquerade_all) append(nat_rules, internal_chain, r.jump(kMarkMasq));
      else if (node_.detector.implemented()) append(nat_rules, internal_chain, r.local(node_.detector, false).jump(kMarkMasq));
    }
    // Step 8: external destinations.
    if (uses_ext_chain) {
      declare(nat_chains, names.ext);
      active(names.ext);
      if (!sp.external_policy_local) {
        append(nat_rules, names.ext, RuleBuilder().comment("masquerade traffic for " + sp.spn + " external destinations").jump(kMarkMasq));
      } else {
        if (node_.detector.implemented())
          append(nat_rules, names.ext,
                 RuleBuilder().comment("pod traffic for " + sp.spn + " external destinations").local(node_.detector, true).jump(names.svc));
        append(nat_rules, names.ext,
               RuleBuilder().comment("masquerade LOCAL traffic for " + sp.spn + " external destinations").src_type("LOCAL").jump(kMarkMasq));
        append(nat_rules, names.ext,
               RuleBuilder().comment("route LOCAL traffic for " + sp.spn + " external destinations").src_type("LOCAL").jump(names.svc));
      }
      if (has_external) append(nat_rules, names.ext, RuleBuilder().jump(external_policy_chain));
    }
    // Step 9: loadBalancerSourceRanges firewall.
    if (uses_fw_chain) {
      declare(nat_chains, names.fw);
      active(names.fw);
      bool allow_from_node = false;
      for (const auto& range : sp.source_ranges) {
        append(nat_rules, names.fw, RuleBuilder().comment(sp.spn + " loadbalancer IP").src(range).jump(names.ext));
        if (node_.node_ip && range.contains(*node_.node_ip)) allow_from_node = true;
      }
      if (allow_from_node)
        for (const auto& ip : sp.lb_vips)
          append(nat_rules, names.fw, RuleBuilder().comment(sp.spn + " loadbalancer IP").src(ip).jump(names.ext));
      append(nat_rules, names.fw,
             RuleBuilder().comment("other traffic to " + sp.spn + " will be dropped by KUBE-PROXY-FIREWALL").no_target());
    }
    // Steps 10-11: policy chains.
    if (uses_cluster_chain) {
      declare(nat_chains, names.svc);
      active(names.svc);
      endpoint_rules(sp, names.svc, cat.cluster, seps, nat_rules);
    }
    if (uses_local_chain) {
      declare(nat_chains, names.svl);
      active(names.svl);
      endpoint_rules(sp, names.svl, cat.local, seps, nat_rules);
    }
    // Step 12: one chain per reachable endpoint.
    for (const EndpointInfo* e : cat.all_reachable) {
      const std::string& sep = seps[static_cast<size_t>(e - sp.endpoints.data())];
      declare(nat_chains, sep);
      append(nat_rules, sep, RuleBuilder().comment(ep_comment(sp.spn)).src(e->ip).jump(kMarkMasq));
      RuleBuilder r;
      r.comment(ep_comment(sp.spn));
      if (sp.affinity_client_ip) r.recent_set(sep);
      append(nat_rules, sep, r.proto(sp.protocol).dnat(e->ip, e->port));
    }
    result_.nat_rules_skipped += discard_.nat_rules.lines() - skipped_before;
  }

  // Section 9 step 5: per-service chains present in the kernel but not in the new state.
  void stale_chains() {
    if (opts_.skip_stale_cleanup) return;
    std::vector<std::string> stale;
    for (const auto& c : opts_.existing_nat_chains)
      if (is_service_chain(c) && !result_.active_nat_chains.count(c)) stale.push_back(c);
    std::sort(stale.begin(), stale.end());
    stale.erase(std::unique(stale.begin(), stale.end()), stale.end());
    for (const auto& c : stale) {
      declare(b_.nat_chains, c);
      b_.nat_rules.delete_chain(c);
    }
    result_.deleted_chains = stale.size();
  }

  // Section 8.4: the last rule(s) of nat KUBE-SERVICES.
  void node_ports_tail() {
    const std::string comment = "kubernetes service nodeports; NOTE: this must be the last rule in this chain";
    if (node_.node_ports_match_all) {
      RuleBuilder r;
      r.comment(comment).dst_type("LOCAL");
      if (node_.family == IPFamily::V6) r.dst(*CIDR::parse("::1/128"), true);
      else if (!node_.localhost_node_ports) r.dst(*CIDR::parse("127.0.0.0/8"), true);
      append(b_.nat_rules, kServices, r.jump(kNodePorts));
      return;
    }
    for (const auto& ip : node_.node_port_ips())
      append(b_.nat_rules, kServices, RuleBuilder().comment(comment).dst(ip).jump(kNodePorts));
  }

  // Section 8.5.
  void forward_rules() {
    if (!node_.tcp_be_liberal) {
      RuleBuilder r;
      r.ctstate(ir::kCtInvalid);
      if (node_.nfacct_counters) r.nfacct("ct_state_invalid_dropped_pkts");
      append(b_.filter_rules, kForward, r.drop());
    }
    append(b_.filter_rules, kForward, RuleBuilder().comment("kubernetes forwarding rules").mark(mark_, mark_).accept());
    append(b_.filter_rules, kForward,
           RuleBuilder().comment("kubernetes forwarding conntrack rule").ctstate(ir::kCtRelated | ir::kCtEstablished).accept());
  }

  void assemble() {
    // The nat rules are ~90% of the text: keep their buffer as the result and put the
    // (small) head in front of it in place, instead of copying 40 MB into a new string.
    std::string head = "*filter\n";
    head += b_.filter_chains.text();
    head += b_.filter_rules.text();
    head += "COMMIT\n*nat\n";
    head += b_.nat_chains.text();
    std::string& t = result_.text;
    t = b_.nat_rules.take_text();
    t.reserve(t.size() + head.size() + 8);
    t.insert(0, head);
    t += "COMMIT\n";
    result_.filter_rules = b_.filter_rules.lines();
    result_.nat_rules_written = b_.nat_rules.lines();
    result_.chains_written = b_.filter_chains.chains() + b_.nat_chains.chains();
    result_.rules_written = b_.filter_rules.rules() + b_.nat_rules.rules();
    if (!opts_.keep_ir) return;
    ir::Program& p = result_.program;
    p.family = node_.family;
    ir::TableBlock filter{ir::TableId::Filter};
    filter.ops = std::move(b_.filter_chains.ops());
    std::move(b_.filter_rules.ops().begin(), b_.filter_rules.ops().end(), std::back_inserter(filter.ops));
    ir::TableBlock nat{ir::TableId::Nat};
    nat.ops = std::move(b_.nat_chains.ops());
    std::move(b_.nat_rules.ops().begin(), b_.nat_rules.ops().end(), std::back_inserter(nat.ops));
    p.tables.push_back(std::move(filter));
    p.tables.push_back(std::move(nat));
  }

  const NodeContext& node_;
  const SyncOptions& opts_;
  SyncResult& result_;
  uint32_t mark_;
  Buffers b_;
  Buffers discard_;  ///< steps 7-12 of unchanged services in a partial sync: counted, not written
  bool collect_chains_ = false;
};

}  // namespace

SyncResult lower_iptables(const std::vector<ServicePortInfo>& ports, const NodeContext& node, const SyncOptions& opts) {
  SyncResult result;
  Lowering(node, opts, result).run(ports);
  return result;
}

}  // namespace kpc::iptables
