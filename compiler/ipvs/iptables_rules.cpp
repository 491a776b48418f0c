#include "compiler/ipvs/iptables_rules.h"

#include <optional>
#include <string>

#include "compiler/ipvs/ipsets.h"

namespace kpc::ipvs {

namespace {

using ir::Arg;
using ir::ArgKind;

constexpr const char* kServices = "KUBE-SERVICES";
constexpr const char* kFirewall = "KUBE-PROXY-FIREWALL";
constexpr const char* kSourceRangesFirewall = "KUBE-SOURCE-RANGES-FIREWALL";
constexpr const char* kPostrouting = "KUBE-POSTROUTING";
constexpr const char* kMarkMasq = "KUBE-MARK-MASQ";
constexpr const char* kNodePort = "KUBE-NODE-PORT";
constexpr const char* kForward = "KUBE-FORWARD";
constexpr const char* kLoadBalancerChain = "KUBE-LOAD-BALANCER";
constexpr const char* kIPVSFilter = "KUBE-IPVS-FILTER";
constexpr const char* kIPVSOutFilter = "KUBE-IPVS-OUT-FILTER";

Arg make(ArgKind kind, bool negate = false, std::string text = {}) {
  Arg a;
  a.kind = kind;
  a.neg = negate;
  a.text = std::move(text);
  return a;
}

// A rule in kube-proxy's argument order, built from typed values only.
class R {
 public:
  R& module(const char* m) { return push(make(ArgKind::Module, false, m)); }
  R& comment(const std::string& text) {
    module("comment");
    return push(make(ArgKind::Comment, false, text));
  }
  R& match_set(const std::string& set, const char* dirs) {
    module("set");
    Arg a = make(ArgKind::MatchSet);
    a.text = set;
    a.text2 = dirs;
    return push(std::move(a));
  }
  R& proto(Protocol p) { return push(make(ArgKind::Proto, false, protocol_lower(p))); }
  R& src(const CIDR& c, bool negate, bool bare) {
    Arg a = make(ArgKind::Src, negate);
    a.cidr = c;
    a.bare = bare;
    return push(std::move(a));
  }
  R& in_iface(const std::string& name, bool negate) { return push(make(ArgKind::InIface, negate, name)); }
  R& src_type(const char* t, bool negate) {
    module("addrtype");
    return push(make(ArgKind::SrcType, negate, t));
  }
  R& dst_type(const char* t) {
    module("addrtype");
    return push(make(ArgKind::DstType, false, t));
  }
  R& not_physdev_is_in() {
    module("physdev");
    Arg a = make(ArgKind::Physdev, true);
    a.text2 = "--physdev-is-in";
    return push(std::move(a));
  }
  R& mark(uint32_t m, bool negate) {
    module("mark");
    Arg a = make(ArgKind::MarkMatch, negate);
    a.value = m;
    a.value2 = m;
    return push(std::move(a));
  }
  R& ctstate(uint32_t mask) {
    module("conntrack");
    Arg a = make(ArgKind::CtState);
    a.value = mask;
    return push(std::move(a));
  }
  R& option(const char* name, std::string value) {  ///< an option the IR has no kind for (-m ipvs)
    Arg a = make(ArgKind::Unknown);
    a.text2 = name;
    a.text = std::move(value);
    return push(std::move(a));
  }
  /// The local-traffic detector's "not local" match (LocalTrafficDetector.IfNotLocal()).
  R& not_local(const proxy::LocalDetector& d) {
    using K = proxy::LocalDetector::Kind;
    if (d.kind == K::CIDR) return src(d.cidr, true, false);
    if (d.kind == K::Bridge) return in_iface(d.iface, true);
    if (d.kind == K::InterfacePrefix) return in_iface(d.iface + "+", true);
    return *this;
  }

  ir::Rule jump(const char* chain) { return finish(ir::TargetKind::Jump, chain); }
  ir::Rule accept() { return finish(ir::TargetKind::Accept); }
  ir::Rule ret() { return finish(ir::TargetKind::Return); }
  ir::Rule drop() { return finish(ir::TargetKind::Drop); }
  ir::Rule reject() { return finish(ir::TargetKind::Reject); }
  ir::Rule masquerade(bool random_fully) {
    r_.target.kind = ir::TargetKind::Masquerade;
    r_.target.random_fully = random_fully;
    return std::move(r_);
  }
  ir::Rule mark_target(ir::MarkOp op, uint32_t m) {
    r_.target.kind = ir::TargetKind::Mark;
    r_.target.mark_op = op;
    r_.target.mark_value = m;
    r_.target.mark_mask = op == ir::MarkOp::OrMark ? m : 0;
    return std::move(r_);
  }
  /// A set match's target is a chain or one of iptables' own verdicts.
  ir::Rule to(const char* target) {
    std::string_view t = target;
    if (t == "RETURN") return ret();
    if (t == "ACCEPT") return accept();
    if (t == "DROP") return drop();
    if (t == "MASQUERADE") return masquerade(false);
    return jump(target);
  }

 private:
  R& push(Arg a) {
    r_.args.push_back(std::move(a));
    return *this;
  }
  ir::Rule finish(ir::TargetKind k, const char* chain = "") {
    r_.target.kind = k;
    r_.target.chain = chain;
    return std::move(r_);
  }
  ir::Rule r_;
};

ir::TableBlock block(ir::TableId t) {
  ir::TableBlock b;
  b.table = t;
  return b;
}

struct Tables {
  ir::TableBlock nat = block(ir::TableId::Nat), filter = block(ir::TableId::Filter);
  ir::TableBlock& of(ir::TableId t) { return t == ir::TableId::Nat ? nat : filter; }
  void append(ir::TableId t, const char* chain, ir::Rule rule) {
    ir::Op op;
    op.kind = ir::OpKind::Append;
    op.chain = chain;
    op.rule = std::move(rule);
    of(t).ops.push_back(std::move(op));
  }
  void declare(ir::TableId t, const char* chain) {
    ir::Op op;
    op.kind = ir::OpKind::DeclareChain;
    op.chain = chain;
    op.arg = "-";
    of(t).ops.push_back(std::move(op));
  }
};

// ipsetWithIptablesChain: the rules one set drives, in kube-proxy's order (a NodePort's LOCAL
// set before its plain set, so that Local NodePorts RETURN before being marked).
struct SetRule {
  const char* set;
  ir::TableId table;
  const char* from;
  const char* to;
  const char* dirs;
  std::optional<Protocol> proto;
};
const SetRule kSetRules[] = {
    {kLoopBack, ir::TableId::Nat, kPostrouting, "MASQUERADE", "dst,dst,src", {}},
    {kLoadBalancer, ir::TableId::Nat, kServices, kLoadBalancerChain, "dst,dst", {}},
    {kLoadBalancerLocal, ir::TableId::Nat, kLoadBalancerChain, "RETURN", "dst,dst", {}},
    {kNodePortLocalTCP, ir::TableId::Nat, kNodePort, "RETURN", "dst", Protocol::TCP},
    {kNodePortTCP, ir::TableId::Nat, kNodePort, kMarkMasq, "dst", Protocol::TCP},
    {kNodePortLocalUDP, ir::TableId::Nat, kNodePort, "RETURN", "dst", Protocol::UDP},
    {kNodePortUDP, ir::TableId::Nat, kNodePort, kMarkMasq, "dst", Protocol::UDP},
    {kNodePortLocalSCTP, ir::TableId::Nat, kNodePort, "RETURN", "dst,dst", Protocol::SCTP},
    {kNodePortSCTP, ir::TableId::Nat, kNodePort, kMarkMasq, "dst,dst", Protocol::SCTP},
    {kLoadBalancerFW, ir::TableId::Filter, kFirewall, kSourceRangesFirewall, "dst,dst", {}},
    {kLoadBalancerSourceCIDR, ir::TableId::Filter, kSourceRangesFirewall, "RETURN", "dst,dst,src", {}},
    {kLoadBalancerSourceIP, ir::TableId::Filter, kSourceRangesFirewall, "RETURN", "dst,dst,src", {}},
};

}  // namespace

const std::vector<KubeJump>& kube_jumps() {
  static const std::vector<KubeJump> jumps = {
      {ir::TableId::Nat, "OUTPUT", "kubernetes service portals", kServices},
      {ir::TableId::Nat, "PREROUTING", "kubernetes service portals", kServices},
      {ir::TableId::Nat, "POSTROUTING", "kubernetes postrouting rules", kPostrouting},
      {ir::TableId::Filter, "FORWARD", "kubernetes forwarding rules", kForward},
      {ir::TableId::Filter, "INPUT", "kubernetes health check rules", kNodePort},
      {ir::TableId::Filter, "INPUT", "kube-proxy firewall rules", kFirewall},
      {ir::TableId::Filter, "FORWARD", "kube-proxy firewall rules", kFirewall},
      {ir::TableId::Filter, "INPUT", "kubernetes ipvs access filter", kIPVSFilter},
      {ir::TableId::Filter, "OUTPUT", "kubernetes ipvs access filter", kIPVSOutFilter},
  };
  return jumps;
}

ir::Program companion_iptables(const Program& prog, const proxy::NodeContext& node,
                               const std::vector<NoNodeAccess>& lb_no_node_access) {
  using ir::TableId;
  Tables t;
  // createAndLinkKubeChain: the chains, flushed by their declaration.
  for (const char* c : {kServices, kPostrouting, kNodePort, kLoadBalancerChain, kMarkMasq}) t.declare(TableId::Nat, c);
  for (const char* c : {kForward, kNodePort, kFirewall, kSourceRangesFirewall, kIPVSFilter, kIPVSOutFilter})
    t.declare(TableId::Filter, c);

  auto set = [&](const char* base) -> const IpSet& { return *prog.set(base); };
  auto empty = [&](const char* base) { return set(base).entries.empty(); };
  const uint32_t mark = node.masquerade_mark;

  // Connections to localhost leave KUBE-SERVICES at once.
  auto lo = node.family == IPFamily::V4 ? *CIDR::parse("127.0.0.0/8") : *CIDR::parse("::1/128");
  t.append(TableId::Nat, kServices, R().src(lo, false, false).ret());

  for (const auto& sr : kSetRules) {
    if (empty(sr.set)) continue;
    R r;
    if (sr.proto) r.proto(*sr.proto);
    r.comment(set(sr.set).comment).match_set(set(sr.set).name, sr.dirs);
    t.append(sr.table, sr.from, r.to(sr.to));
  }

  if (!empty(kClusterIP)) {
    const IpSet& s = set(kClusterIP);
    if (node.masquerade_all) {
      t.append(TableId::Nat, kServices, R().comment(s.comment).match_set(s.name, "dst,dst").jump(kMarkMasq));
    } else if (node.detector.implemented()) {
      // Off-cluster traffic to a service VIP (a static route to any node) is masqueraded.
      t.append(TableId::Nat, kServices,
               R().comment(s.comment).match_set(s.name, "dst,dst").not_local(node.detector).jump(kMarkMasq));
    } else {
      // No detector: masquerade what the node sends from a VIP (kube-ipvs0 holds them all).
      t.append(TableId::Nat, kServices, R().comment(s.comment).match_set(s.name, "src,dst").jump(kMarkMasq));
    }
  }

  // externalIPRules: from off the machine (not a bridge port, not a local source) or to a
  // local address, traffic to an external IP is accepted.
  auto external_ip_rules = [&](const IpSet& s) {
    t.append(TableId::Nat, kServices,
             R().comment(s.comment).match_set(s.name, "dst,dst").not_physdev_is_in().src_type("LOCAL", true).accept());
    t.append(TableId::Nat, kServices, R().comment(s.comment).match_set(s.name, "dst,dst").dst_type("LOCAL").accept());
  };
  if (!empty(kExternalIP)) {
    const IpSet& s = set(kExternalIP);
    t.append(TableId::Nat, kServices, R().comment(s.comment).match_set(s.name, "dst,dst").jump(kMarkMasq));
    external_ip_rules(s);
  }
  if (!empty(kExternalIPLocal)) external_ip_rules(set(kExternalIPLocal));

  t.append(TableId::Nat, kServices, R().dst_type("LOCAL").jump(kNodePort));
  t.append(TableId::Nat, kLoadBalancerChain, R().jump(kMarkMasq));
  t.append(TableId::Filter, kSourceRangesFirewall, R().drop());

  // The node may not reach a load-balancer IP whose source ranges leave it out (#119656).
  for (const auto& [ip, pp] : lb_no_node_access)
    t.append(TableId::Filter, kIPVSOutFilter,
             R().src(CIDR::host(ip), false, true)
                 .module("ipvs")
                 .option("--vaddr", ip.str())
                 .option("--vproto", protocol_lower(pp.first))
                 .option("--vport", std::to_string(pp.second))
                 .drop());

  // acceptIPVSTraffic: what IPVS serves is accepted at the end of KUBE-SERVICES.
  for (const char* base : {kClusterIP, kLoadBalancer})
    if (!empty(base)) t.append(TableId::Nat, kServices, R().match_set(set(base).name, "dst,dst").accept());

  t.append(TableId::Filter, kForward, R().comment("kubernetes forwarding rules").mark(mark, false).accept());
  t.append(TableId::Filter, kForward,
           R().comment("kubernetes forwarding conntrack rule").ctstate(ir::kCtRelated | ir::kCtEstablished).accept());
  t.append(TableId::Filter, kNodePort,
           R().comment(set(kHealthCheckNodePort).comment).match_set(set(kHealthCheckNodePort).name, "dst").accept());

  // KUBE-IPVS-FILTER: no access to the host's other ports through a VIP (#72236).
  for (const char* base : {kLoadBalancer, kClusterIP, kExternalIP, kExternalIPLocal})
    t.append(TableId::Filter, kIPVSFilter, R().match_set(set(base).name, "dst,dst").ret());
  t.append(TableId::Filter, kIPVSFilter, R().match_set(set(kHealthCheckNodePort).name, "dst").ret());
  t.append(TableId::Filter, kIPVSFilter, R().ctstate(ir::kCtNew).match_set(set(kIPVSIPs).name, "dst").reject());

  t.append(TableId::Nat, kPostrouting, R().mark(mark, true).ret());
  t.append(TableId::Nat, kPostrouting, R().mark_target(ir::MarkOp::XorMark, mark));
  t.append(TableId::Nat, kPostrouting,
           R().comment("kubernetes service traffic requiring SNAT").masquerade(node.random_fully));
  t.append(TableId::Nat, kMarkMasq, R().mark_target(ir::MarkOp::OrMark, mark));

  ir::Program out;
  out.family = node.family;
  out.tables.push_back(std::move(t.nat));
  out.tables.push_back(std::move(t.filter));
  return out;
}

}  // namespace kpc::ipvs
