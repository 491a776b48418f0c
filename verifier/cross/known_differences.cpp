#include "verifier/cross/known_differences.h"

#include <algorithm>
#include <set>

namespace kpc::verifier::cross {
namespace {

// The two sides by back end; false when the pair is not iptables vs nftables.
struct Sides {
  const Distribution* ipt = nullptr;
  const Distribution* nft = nullptr;
  const Facts* ipt_facts = nullptr;
  const Facts* nft_facts = nullptr;
};
bool sides(const DiffContext& c, Sides* s) {
  if (c.backend_a == "iptables" && c.backend_b == "nftables") {
    *s = {&c.a, &c.b, &c.facts_a, &c.facts_b};
    return true;
  }
  if (c.backend_a == "nftables" && c.backend_b == "iptables") {
    *s = {&c.b, &c.a, &c.facts_b, &c.facts_a};
    return true;
  }
  return false;
}

bool any_dnat(const Distribution& d) {
  return std::any_of(d.shares.begin(), d.shares.end(), [](const Share& s) { return !s.outcome.dnat.empty(); });
}
bool all(const Distribution& d, Verdict v) {
  return !d.shares.empty() &&
         std::all_of(d.shares.begin(), d.shares.end(), [v](const Share& s) { return s.outcome.verdict == v; });
}
// Passes as if no Service were there: accepted, not translated (routed on, or delivered locally).
bool untranslated_accept(const Distribution& d) {
  return all(d, Verdict::Accept) && !any_dnat(d) &&
         std::none_of(d.shares.begin(), d.shares.end(), [](const Share& s) { return s.outcome.masquerade; });
}

// untranslated_accept, for a packet that may arrive already carrying kube-proxy's masquerade mark
// (a packet class's witness may; the representative packets never do): KUBE-POSTROUTING (iptables)
// and the masquerading chain (nftables) masquerade every routed packet with that mark, Service or
// not, so a masquerade is then the mark's, not a Service's. Nothing else is allowed.
bool routed_untranslated(const Distribution& d, const DiffContext& c, const Facts& ipt_facts) {
  const uint32_t mm = ipt_facts.masquerade_mark;
  if (mm == 0 || (c.packet.mark & mm) != mm) return untranslated_accept(d);
  return all(d, Verdict::Accept) && !any_dnat(d);
}

bool nodeport_addresses(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::NodePort) return false;
  const auto& allowed = s.nft_facts->nodeport_addresses;
  if (!allowed || std::find(allowed->begin(), allowed->end(), c.packet.dst) != allowed->end()) return false;
  if (s.ipt_facts->nodeport_addresses) return false;  // iptables restricted too: not this difference
  return s.ipt->decided() && !routed_untranslated(*s.ipt, c, *s.ipt_facts) &&
         routed_untranslated(*s.nft, c, *s.ipt_facts);
}

// iptables serves NodePorts on 127.0.0.1 when localhost NodePorts are on (DNAT), and its filter
// rejects for NodePorts without endpoints match `--dst-type LOCAL`, 127.0.0.1 included, either
// way; nftables excludes 127.0.0.0/8 from both.
bool localhost_nodeports(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::LocalhostNodePort) return false;
  if (!s.ipt->decided() || !routed_untranslated(*s.nft, c, *s.ipt_facts)) return false;
  return (s.ipt_facts->localhost_nodeports && any_dnat(*s.ipt)) || all(*s.ipt, Verdict::Reject) ||
         all(*s.ipt, Verdict::Drop);
}

// A Service without endpoints reached from the node itself on an external IP, load-balancer IP
// or NodePort: nftables rejects it in filter-output (service-endpoints-check); iptables jumps to
// KUBE-EXTERNAL-SERVICES from INPUT and FORWARD only, so the packet leaves untouched.
bool no_endpoints_external_from_node(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.source_kind != SourceKind::Node) return false;
  if (c.packet.dest_kind != DestKind::Service && c.packet.dest_kind != DestKind::NodePort) return false;
  return (all(*s.nft, Verdict::Reject) || all(*s.nft, Verdict::Drop)) && routed_untranslated(*s.ipt, c, *s.ipt_facts);
}

// A load-balancer IP with loadBalancerSourceRanges, a Service without endpoints, a source outside
// the ranges: nftables' firewall-check (prerouting, before DNAT) drops it whatever the endpoints;
// iptables writes its firewall only for a Service with endpoints, so the no-endpoints REJECT answers.
bool firewall_without_endpoints(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::Service) return false;
  return all(*s.ipt, Verdict::Reject) && all(*s.nft, Verdict::Drop);
}

bool invalid_drop(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.ctstate != 1) return false;
  return s.ipt_facts->drops_invalid && all(*s.ipt, Verdict::Drop) && s.nft->decided() && !all(*s.nft, Verdict::Drop);
}

bool unallocated_clusterip(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::ServiceRange) return false;
  bool in_range = std::any_of(s.nft_facts->service_cidrs.begin(), s.nft_facts->service_cidrs.end(),
                              [&](const CIDR& r) { return r.contains(c.packet.dst); });
  return in_range && all(*s.nft, Verdict::Drop) && routed_untranslated(*s.ipt, c, *s.ipt_facts);
}

bool clusterip_other_port(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::ServiceOtherPort) return false;
  return all(*s.nft, Verdict::Reject) && routed_untranslated(*s.ipt, c, *s.ipt_facts);
}

// A routed packet that arrives already carrying the masquerade mark, to a Service that has no
// (local) endpoints for it: iptables mode's KUBE-FORWARD accepts every packet with the mark
// ("kubernetes forwarding rules") before KUBE-SERVICES / KUBE-EXTERNAL-SERVICES reject or drop it
// in FORWARD; nftables mode has no such accept, so its filter chains refuse it.
bool forward_accept_marked(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || !s.ipt_facts->forward_accepts_marked || c.packet.origin == trace::Origin::Node) return false;
  const uint32_t mm = s.ipt_facts->masquerade_mark;
  if (mm == 0 || (c.packet.mark & mm) != mm) return false;
  if (any_dnat(*s.ipt) || any_dnat(*s.nft)) return false;
  bool forwarded = all(*s.ipt, Verdict::Accept) &&
                   std::all_of(s.ipt->shares.begin(), s.ipt->shares.end(),
                               [](const Share& x) { return x.outcome.route == "forward"; });
  return forwarded && (all(*s.nft, Verdict::Drop) || all(*s.nft, Verdict::Reject));
}

// A packet to 127.0.0.0/8 from a source outside it: iptables mode drops it in KUBE-FIREWALL (the
// rule kube-proxy writes with localhost NodePorts, which set route_localnet); nftables mode writes
// no such rule (it never sets route_localnet), so its program lets the packet through.
bool localnet_block(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || !s.ipt_facts->blocks_localnet || c.packet.dst.family != IPFamily::V4) return false;
  if (c.packet.dst.bytes[0] != 127 || c.packet.src.bytes[0] == 127) return false;
  return all(*s.ipt, Verdict::Drop) && s.nft->decided() && !all(*s.nft, Verdict::Drop);
}

// Same outcomes; each probability within k * 2^-31 of the other (k: the number of shares).
// iptables writes each endpoint's share as a `--probability` with 10 decimals, and the kernel
// keeps it as a 31-bit threshold: every factor of the cascade is within 2^-32 + 10^-10/2 of the
// nominal 1/(n-i), so each branch is within n * 2^-31 of 1/n.
bool numgen_shares(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || !s.ipt->decided() || !s.nft->decided()) return false;
  if (s.ipt->shares.size() != s.nft->shares.size() || s.ipt->shares.size() < 2) return false;
  Fraction eps = Fraction::from_dyadic(trace::Probability::ratio_pow2(s.ipt->shares.size(), 31));
  for (size_t i = 0; i < s.ipt->shares.size(); ++i) {
    const Share &x = s.ipt->shares[i], &y = s.nft->shares[i];
    if (compare_keys(x.outcome, y.outcome) != 0) return false;
    if (x.probability > y.probability + eps || y.probability > x.probability + eps) return false;
  }
  return true;
}

// nftables mode always masquerades `fully-random`; iptables mode only when the node's
// iptables supports --random-fully. Removed from the nft side when iptables lacks it.
bool masquerade_fully_random(Distribution* ipt, Distribution* nft, const Facts&, const Facts&) {
  auto has = [](const Distribution& d) {
    return std::any_of(d.shares.begin(), d.shares.end(),
                       [](const Share& s) { return s.outcome.options.find("masquerade fully-random") != std::string::npos; });
  };
  if (has(*ipt) || !has(*nft)) return false;
  Distribution out;
  out.services = nft->services;
  for (auto sh : nft->shares) {
    std::string& o = sh.outcome.options;
    size_t i = o.find("masquerade fully-random");
    if (i != std::string::npos) {
      o.erase(i, std::string("masquerade fully-random").size());
      while (!o.empty() && (o.back() == ' ' || o.back() == ';')) o.pop_back();
      while (!o.empty() && (o.front() == ' ' || o.front() == ';')) o.erase(0, 1);
    }
    out.add(sh.outcome, sh.probability);
  }
  *nft = std::move(out);
  return true;
}


// --- IPVS mode against iptables or nftables mode (issue 17 §3) ---------------------------------

// The IPVS side and the other one; false when the pair is not ipvs vs iptables/nftables.
struct IpvsSides {
  const Distribution* ipvs = nullptr;
  const Distribution* other = nullptr;
};
bool ipvs_sides(const DiffContext& c, IpvsSides* s) {
  auto other_ok = [](const std::string& b) { return b == "iptables" || b == "nftables"; };
  if (c.backend_a == "ipvs" && other_ok(c.backend_b)) {
    *s = {&c.a, &c.b};
    return true;
  }
  if (c.backend_b == "ipvs" && other_ok(c.backend_a)) {
    *s = {&c.b, &c.a};
    return true;
  }
  return false;
}

std::set<std::string> dnat_targets(const Distribution& d) {
  std::set<std::string> out;
  for (const auto& sh : d.shares)
    if (!sh.outcome.dnat.empty()) out.insert(sh.outcome.dnat);
  return out;
}
bool all_translated_accept(const Distribution& d) {
  return all(d, Verdict::Accept) &&
         std::all_of(d.shares.begin(), d.shares.end(), [](const Share& s) { return !s.outcome.dnat.empty(); });
}
bool dropped_or_rejected(const Distribution& d) { return all(d, Verdict::Drop) || all(d, Verdict::Reject); }

// The destination is a ClusterIP: in the IPVS program's KUBE-CLUSTER-IP set, or in a service CIDR
// the other program names (nftables).
bool is_cluster_ip(const DiffContext& c) {
  for (const Facts* f : {&c.facts_a, &c.facts_b}) {
    if (std::binary_search(f->cluster_ips.begin(), f->cluster_ips.end(), c.packet.dst)) return true;
    for (const auto& r : f->service_cidrs)
      if (r.contains(c.packet.dst)) return true;
  }
  return false;
}

// eTP=Local / iTP=Local without a local endpoint: IPVS gives the virtual server the cluster
// endpoints (kube-proxy PR #97081); iptables and nftables drop (or reject) the packet. The drop
// is the Local policy's only from outside (eTP: a pod or the node is short-circuited to the
// cluster endpoints in those modes) or to a ClusterIP (iTP: an address of a service CIDR); a
// drop of the node's own packet to a load-balancer IP is the source-range firewall instead.
bool ipvs_local_fallback(const DiffContext& c) {
  IpvsSides s;
  if (!ipvs_sides(c, &s)) return false;
  if (c.packet.dest_kind != DestKind::Service && c.packet.dest_kind != DestKind::NodePort) return false;
  bool firewall_from_node = c.packet.source_kind == SourceKind::Node && !is_cluster_ip(c);
  return !firewall_from_node && all_translated_accept(*s.ipvs) && dropped_or_rejected(*s.other);
}

// iTP=Local (or eTP=Local) without a local endpoint where IPVS keeps the virtual server without
// real servers: the kernel answers ICMP port unreachable (ip_vs_leave), iptables and nftables
// drop ("has no local endpoints").
bool ipvs_no_real_servers(const DiffContext& c) {
  IpvsSides s;
  if (!ipvs_sides(c, &s)) return false;
  if (c.packet.dest_kind != DestKind::Service && c.packet.dest_kind != DestKind::NodePort) return false;
  return all(*s.ipvs, Verdict::Reject) && all(*s.other, Verdict::Drop);
}

// eTP=Local with a local endpoint, reached from a pod or the node at a NodePort / external IP /
// load-balancer IP (never a ClusterIP: its masquerade is the same in every mode): iptables and nftables short-circuit such in-cluster traffic to the cluster
// endpoints; IPVS has one virtual server per address, holding the local endpoints only.
bool ipvs_no_short_circuit(const DiffContext& c) {
  IpvsSides s;
  if (!ipvs_sides(c, &s)) return false;
  if (c.packet.source_kind != SourceKind::Pod && c.packet.source_kind != SourceKind::Node) return false;
  if (c.packet.dest_kind != DestKind::Service && c.packet.dest_kind != DestKind::NodePort) return false;
  if (is_cluster_ip(c)) return false;
  if (!all_translated_accept(*s.ipvs) || !all_translated_accept(*s.other)) return false;
  auto mine = dnat_targets(*s.ipvs), theirs = dnat_targets(*s.other);
  // The node's packet takes the Local path in IPVS (KUBE-LOAD-BALANCER-LOCAL /
  // KUBE-NODE-PORT-LOCAL: local endpoints, serving-terminating ones included, no masquerade
  // mark) and the cluster path, masqueraded, in the other modes (ready cluster endpoints).
  auto masq = [](const Share& x) { return x.outcome.masquerade; };
  if (c.packet.source_kind == SourceKind::Node &&
      std::none_of(s.ipvs->shares.begin(), s.ipvs->shares.end(), masq) &&
      std::all_of(s.other->shares.begin(), s.other->shares.end(), masq))
    return true;
  // A pod: the local endpoints are a part of the cluster endpoints the other modes use.
  return mine.size() < theirs.size() && std::includes(theirs.begin(), theirs.end(), mine.begin(), mine.end());
}

// A Service without endpoints, or a source outside loadBalancerSourceRanges: IPVS mode rejects
// (ip_vs_leave) or drops (KUBE-SOURCE-RANGES-FIREWALL, filter) after the nat table's
// KUBE-MARK-MASQ has marked the packet; iptables and nftables reject or drop it before any mark.
// Both refuse it; the mark never leaves the node.
bool ipvs_reject_after_mark(const DiffContext& c) {
  IpvsSides s;
  if (!ipvs_sides(c, &s)) return false;
  bool both_reject = all(*s.ipvs, Verdict::Reject) && all(*s.other, Verdict::Reject);
  bool both_drop = all(*s.ipvs, Verdict::Drop) && all(*s.other, Verdict::Drop);
  if (!both_reject && !both_drop) return false;
  if (s.ipvs->shares.size() != 1 || s.other->shares.size() != 1) return false;
  Outcome a = s.ipvs->shares[0].outcome, b = s.other->shares[0].outcome;
  a.mark = b.mark = 0;
  return compare_keys(a, b) == 0;
}

// A port no Service uses on an address bound to kube-ipvs0: KUBE-IPVS-FILTER rejects new
// connections to it (kubernetes issue 72236); iptables (and nftables for an external or
// load-balancer IP) route it like any address.
bool ipvs_filter_other_port(const DiffContext& c) {
  IpvsSides s;
  if (!ipvs_sides(c, &s) || c.packet.dest_kind != DestKind::ServiceOtherPort) return false;
  return all(*s.ipvs, Verdict::Reject) && untranslated_accept(*s.other);
}

// Removes "masquerade fully-random" from the shares of d (only those DNATed to `only_host` when
// it is not empty). True when it changed anything.
bool strip_fully_random(Distribution* d, const std::string& only_host = "");
std::string dnat_host(const std::string& dnat);
bool strip_fully_random(Distribution* d, const std::string& only_host) {
  bool changed = false;
  Distribution out;
  out.services = d->services;
  for (auto sh : d->shares) {
    std::string& o = sh.outcome.options;
    size_t i = o.find("masquerade fully-random");
    if (i != std::string::npos && (only_host.empty() || dnat_host(sh.outcome.dnat) == only_host)) {
      o.erase(i, std::string("masquerade fully-random").size());
      while (!o.empty() && (o.back() == ' ' || o.back() == ';')) o.pop_back();
      while (!o.empty() && (o.front() == ' ' || o.front() == ';')) o.erase(0, 1);
      changed = true;
    }
    out.add(sh.outcome, sh.probability);
  }
  if (changed) *d = std::move(out);
  return changed;
}
bool has_fully_random(const Distribution& d) {
  return std::any_of(d.shares.begin(), d.shares.end(), [](const Share& s) {
    return s.outcome.options.find("masquerade fully-random") != std::string::npos;
  });
}

// The host of an "ip:port" / "[v6]:port" DNAT target.
std::string dnat_host(const std::string& dnat);

// Whether IPVS masquerades the hairpin share (the one DNATed back to the source) fully-random.
bool has_fully_random_hairpin(const Packet& p, const Distribution& ipvs) {
  for (const auto& sh : ipvs.shares)
    if (dnat_host(sh.outcome.dnat) == p.src.str() && sh.outcome.options.find("masquerade fully-random") != std::string::npos)
      return true;
  return false;
}

// The hairpin share of `ipvs` takes the mark of the same share of `other`.
void copy_hairpin_mark(const Packet& p, const Distribution& other, Distribution* ipvs) {
  Distribution out;
  out.services = ipvs->services;
  for (auto sh : ipvs->shares) {
    if (dnat_host(sh.outcome.dnat) == p.src.str())
      for (const auto& o : other.shares)
        if (o.outcome.dnat == sh.outcome.dnat) sh.outcome.mark = o.outcome.mark;
    out.add(sh.outcome, sh.probability);
  }
  *ipvs = std::move(out);
}

std::string dnat_host(const std::string& dnat) {
  std::string h = dnat.substr(0, dnat.rfind(':'));
  if (h.size() > 2 && h.front() == '[') h = h.substr(1, h.size() - 2);
  return h;
}

// A hairpin packet DNATed back to its source, which IPVS does not masquerade (its endpoint is not
// in KUBE-LOOP-BACK: kube-proxy lists local endpoints only) while the other mode does: the other
// side's masquerade of those shares is removed. True when it changed anything.
bool strip_remote_hairpin_masquerade(const Packet& p, const Distribution& ipvs, Distribution* other) {
  const std::string src = p.src.str();
  for (const auto& sh : ipvs.shares)
    if (dnat_host(sh.outcome.dnat) == src && sh.outcome.masquerade) return false;  // IPVS masquerades it
  bool changed = false;
  Distribution out;
  out.services = other->services;
  for (auto sh : other->shares) {
    if (!sh.outcome.dnat.empty() && dnat_host(sh.outcome.dnat) == src && sh.outcome.masquerade) {
      sh.outcome.masquerade = false;
      Distribution one;
      one.add(sh.outcome, sh.probability);
      strip_fully_random(&one);
      sh.outcome = one.shares.front().outcome;
      changed = true;
    }
    out.add(sh.outcome, sh.probability);
  }
  if (changed) *other = std::move(out);
  return changed;
}

// IPVS's rr gives each of N real servers exactly 1/N of the new connections; iptables' statistic
// cascade is within N * 2^-31 of it (numgen_shares). Replaces the iptables side's shares by the
// IPVS ones when the outcomes are the same and every probability is within that bound.
bool rr_vs_statistic(const Distribution& ipvs, Distribution* ipt) {
  if (!ipvs.decided() || !ipt->decided() || ipvs.shares.size() != ipt->shares.size() || ipvs.shares.size() < 2)
    return false;
  Fraction eps = Fraction::from_dyadic(trace::Probability::ratio_pow2(ipvs.shares.size(), 31));
  bool differs = false;
  for (size_t i = 0; i < ipvs.shares.size(); ++i) {
    const Share &x = ipvs.shares[i], &y = ipt->shares[i];
    if (compare_keys(x.outcome, y.outcome) != 0) return false;
    if (x.probability > y.probability + eps || y.probability > x.probability + eps) return false;
    differs = differs || !(x.probability == y.probability);
  }
  if (!differs) return false;
  Distribution out = ipvs;
  out.services = ipt->services;
  *ipt = std::move(out);
  return true;
}

// A Service without endpoints, from the node to an external or load-balancer IP: IPVS answers
// (ip_vs_leave, as nftables mode rejects); iptables jumps to KUBE-EXTERNAL-SERVICES from INPUT
// and FORWARD only, so the packet leaves untouched.
bool ipvs_no_endpoints_external_from_node(const DiffContext& c) {
  IpvsSides s;
  bool ipt = (c.backend_a == "ipvs" ? c.backend_b : c.backend_a) == "iptables";
  if (!ipvs_sides(c, &s) || !ipt || c.packet.source_kind != SourceKind::Node) return false;
  if (c.packet.dest_kind != DestKind::Service && c.packet.dest_kind != DestKind::NodePort) return false;
  return all(*s.ipvs, Verdict::Reject) && untranslated_accept(*s.other);
}

// NodePorts on 127.0.0.1: iptables mode serves them (route_localnet, localhostNodePorts) or
// rejects them without endpoints; IPVS mode has no localhost NodePorts (the packet is delivered
// to whatever listens on the node).
bool ipvs_localhost_nodeports(const DiffContext& c) {
  IpvsSides s;
  if (!ipvs_sides(c, &s) || c.packet.dest_kind != DestKind::LocalhostNodePort) return false;
  return untranslated_accept(*s.ipvs) && s.other->decided() && !untranslated_accept(*s.other);
}

}  // namespace

const std::vector<KnownDifference>& ipvs_known_differences() {
  static const std::vector<KnownDifference> list = {
      {"ipvs-loopback-masquerade",
       "hairpin (an endpoint reaching itself through its Service): IPVS mode's KUBE-LOOP-BACK MASQUERADE has no "
       "--random-fully; nftables mode (and iptables mode where supported) masquerades fully-random",
       "kube-proxy: pkg/proxy/ipvs/proxier.go (ipsetWithIptablesChain: KUBE-LOOP-BACK -> MASQUERADE, no "
       "--random-fully; only KUBE-POSTROUTING's mark rule gets it); pkg/proxy/ipvs/README.md (KUBE-LOOP-BACK)",
       nullptr, nullptr},
      {"ipvs-loopback-local-endpoints",
       "hairpin of an endpoint on another node: IPVS mode masquerades a hairpin only for the node's own "
       "endpoints (KUBE-LOOP-BACK); iptables and nftables modes masquerade every endpoint reaching itself",
       "kube-proxy: pkg/proxy/ipvs/proxier.go (syncProxyRules, \"Handle traffic that loops back to the "
       "originator with SNAT\": `if !ep.IsLocal() { continue }`)",
       nullptr, nullptr},
      {"ipvs-local-fallback",
       "externalTrafficPolicy/internalTrafficPolicy Local without a local endpoint: IPVS falls back to the cluster "
       "endpoints; iptables and nftables drop the packet",
       "kube-proxy: pkg/proxy/ipvs/proxier.go (syncEndpoint: \"Allow access from local PODs even if no local "
       "endpoints exist\", kubernetes PR #97081)",
       ipvs_local_fallback},
      {"ipvs-no-real-servers",
       "a Local traffic policy without a local endpoint where IPVS keeps the virtual server without real servers: "
       "the kernel answers ICMP port unreachable (ip_vs_leave); iptables and nftables drop",
       "kube-proxy: pkg/proxy/ipvs/proxier.go (syncEndpoint keeps the virtual server, "
       "serviceNoLocalEndpointsInternal); kernel net/netfilter/ipvs/ip_vs_core.c (ip_vs_leave); "
       "pkg/proxy/nftables/proxier.go, pkg/proxy/iptables/proxier.go (\"has no local endpoints\" drop)",
       ipvs_no_real_servers},
      {"ipvs-no-short-circuit",
       "externalTrafficPolicy Local, from a pod or the node to a NodePort / external / load-balancer IP: IPVS "
       "uses the local endpoints only; iptables and nftables send in-cluster traffic to all cluster endpoints",
       "kube-proxy: pkg/proxy/ipvs/proxier.go (one virtual server per address, syncEndpoint(..., "
       "ExternalPolicyLocal(), ...)); pkg/proxy/iptables/proxier.go, pkg/proxy/nftables/proxier.go "
       "(\"short-circuit\" pod and node traffic to external destinations to the cluster chain)",
       ipvs_no_short_circuit},
      {"ipvs-filter-other-port",
       "a port no Service uses on an address bound to kube-ipvs0: IPVS mode's KUBE-IPVS-FILTER rejects new "
       "connections; iptables (and nftables outside ClusterIPs) route it like any address",
       "kube-proxy: pkg/proxy/ipvs/proxier.go (KUBE-IPVS-FILTER: ctstate NEW, KUBE-IPVS-IPS -> REJECT; "
       "kubernetes issue 72236)",
       ipvs_filter_other_port},
      {"ipvs-refused-after-mark",
       "a Service without endpoints or a source outside loadBalancerSourceRanges: IPVS mode rejects (ip_vs_leave) "
       "or drops (filter) after the nat table marked the packet for masquerade; iptables and nftables refuse it "
       "unmarked (the mark never leaves the node)",
       "kube-proxy: pkg/proxy/ipvs/proxier.go (KUBE-NODE-PORT / KUBE-LOAD-BALANCER -> KUBE-MARK-MASQ in nat, "
       "KUBE-SOURCE-RANGES-FIREWALL DROP in filter; the virtual server is kept without real servers); "
       "pkg/proxy/iptables/proxier.go (KUBE-EXTERNAL-SERVICES REJECT in filter)",
       ipvs_reject_after_mark},
      {"ipvs-no-endpoints-external-from-node",
       "a Service without endpoints, from the node to an external/LB IP: IPVS mode rejects (like nftables mode); "
       "iptables mode lets it out (KUBE-EXTERNAL-SERVICES is jumped to from INPUT and FORWARD only)",
       "kube-proxy: pkg/proxy/iptables/proxier.go (iptablesJumpChains: KUBE-EXTERNAL-SERVICES from INPUT, "
       "FORWARD); pkg/proxy/ipvs/proxier.go (the virtual server is kept without real servers; kernel ip_vs_leave)",
       ipvs_no_endpoints_external_from_node},
      {"ipvs-localhost-nodeports",
       "NodePorts on 127.0.0.1: iptables mode serves them (or rejects them without endpoints); IPVS mode never "
       "treats 127.0.0.1 as a NodePort address",
       "kube-proxy: KubeProxyConfiguration iptables.localhostNodePorts (iptables mode only); "
       "pkg/proxy/iptables/proxier.go (route_localnet); pkg/proxy/ipvs/proxier.go (KUBE-SERVICES "
       "\"-s 127.0.0.0/8 -j RETURN\")",
       ipvs_localhost_nodeports},
      {"ipvs-rr-shares",
       "endpoint shares: IPVS's rr gives each real server exactly 1/N; iptables' statistic cascade is within "
       "N*2^-31 of it",
       "kernel net/netfilter/ipvs/ip_vs_rr.c; kube-proxy pkg/proxy/iptables/proxier.go (computeProbability, "
       "%0.10f); kernel xt_statistic (31-bit threshold)",
       nullptr, nullptr},
  };
  return list;
}

namespace {

std::vector<const KnownDifference*> classify_ipvs(const DiffContext& c) {
  std::vector<const KnownDifference*> out;
  const auto& list = ipvs_known_differences();
  bool ipvs_first = c.backend_a == "ipvs";
  Distribution ipvs = ipvs_first ? c.a : c.b, other = ipvs_first ? c.b : c.a;
  auto by_id = [&](const char* id) {
    return &*std::find_if(list.begin(), list.end(), [&](const KnownDifference& k) { return k.id == id; });
  };
  // The hairpin path: a remote endpoint IPVS does not masquerade, then the masquerade without
  // --random-fully; iptables' statistic shares; then at most one predicate.
  if (c.packet.source_kind == SourceKind::Hairpin) {
    if (strip_remote_hairpin_masquerade(c.packet, ipvs, &other)) out.push_back(by_id("ipvs-loopback-local-endpoints"));
    bool loopback = !has_fully_random_hairpin(c.packet, ipvs) && strip_fully_random(&other, c.packet.src.str());
    // KUBE-LOOP-BACK's MASQUERADE comes before KUBE-POSTROUTING's mark rules: the masquerade
    // mark a load-balancer / NodePort path set is never cleared (it never leaves the node).
    if (loopback) copy_hairpin_mark(c.packet, other, &ipvs);
    if (loopback) out.push_back(by_id("ipvs-loopback-masquerade"));
    if (!out.empty() && same(ipvs, other)) return out;
  }
  const bool other_is_iptables = (ipvs_first ? c.backend_b : c.backend_a) == "iptables";
  if (other_is_iptables && rr_vs_statistic(ipvs, &other)) {
    out.push_back(by_id("ipvs-rr-shares"));
    if (same(ipvs, other)) return out;
  }
  DiffContext n{c.packet, ipvs_first ? ipvs : other, ipvs_first ? other : ipvs, c.facts_a, c.facts_b,
                c.backend_a, c.backend_b};
  for (const auto& k : list)
    if (k.holds && k.holds(n)) {
      out.push_back(&k);
      return out;
    }
  return {};
}

}  // namespace

const KnownDifference* find_known_difference(const std::string& id) {
  for (const auto* l : {&known_differences(), &ipvs_known_differences()})
    for (const auto& k : *l)
      if (k.id == id) return &k;
  return nullptr;
}

const std::vector<KnownDifference>& known_differences() {
  static const std::vector<KnownDifference> list = {
      {"nodeport-addresses",
       "NodePorts: iptables accepts them on every local address; nftables only on nodePortAddresses (its default "
       "is the node's primary IPs)",
       "kube-proxy: pkg/proxy/nftables/README.md (NodePort addresses); cmd/kube-proxy/app/server.go "
       "(nodePortAddresses default \"primary\" in nftables mode)",
       nodeport_addresses},
      {"localhost-nodeports",
       "NodePorts on 127.0.0.1: iptables serves them (route_localnet) or rejects them when they have no "
       "endpoints; nftables mode never treats 127.0.0.1 as a NodePort address",
       "kube-proxy: pkg/proxy/nftables/README.md (localhost NodePorts); iptables proxier "
       "localhostNodePorts / --iptables-localhost-nodeports",
       localhost_nodeports},
      {"no-endpoints-external-from-node",
       "a Service without endpoints, from the node itself to an external/LB IP or NodePort: nftables rejects; "
       "iptables lets it out (KUBE-EXTERNAL-SERVICES is jumped to from INPUT and FORWARD only)",
       "kube-proxy: pkg/proxy/iptables/proxier.go (iptablesJumpChains: KUBE-EXTERNAL-SERVICES from INPUT, "
       "FORWARD); pkg/proxy/nftables/proxier.go (service-endpoints-check from filter-output)",
       no_endpoints_external_from_node},
      {"firewall-without-endpoints",
       "loadBalancerSourceRanges of a Service without endpoints: nftables drops a source outside the ranges; "
       "iptables has no firewall then and rejects it (no endpoints)",
       "kube-proxy: pkg/proxy/iptables/proxier.go (usesFWChain := hasEndpoints && ...); "
       "pkg/proxy/nftables/proxier.go (firewall-ips whenever there are source ranges)",
       firewall_without_endpoints},
      {"invalid-ct-drop",
       "conntrack INVALID packets: iptables drops them (KUBE-FORWARD, the conntrack workaround); nftables does not",
       "kube-proxy: pkg/proxy/iptables/proxier.go (KUBE-FORWARD ctstate INVALID DROP, skipped with "
       "conntrack tcp_be_liberal); pkg/proxy/nftables/README.md",
       invalid_drop},
      {"unallocated-clusterip",
       "an unallocated address of the service CIDR: nftables drops it; iptables routes it like any address",
       "kube-proxy: pkg/proxy/nftables/proxier.go (\"Drop traffic to unallocated ClusterIPs\", ServiceCIDRs)",
       unallocated_clusterip},
      {"clusterip-other-port",
       "a ClusterIP on a port no Service uses: nftables rejects it; iptables routes it like any address",
       "kube-proxy: pkg/proxy/nftables/proxier.go (cluster-ips-check, \"Reject traffic to invalid ports of "
       "ClusterIPs\")",
       clusterip_other_port},
      {"localnet-block",
       "a packet to 127.0.0.0/8 from a source outside it: iptables mode drops it (KUBE-FIREWALL, kept with "
       "localhost NodePorts, which turn on route_localnet); nftables mode has no such rule (nor localhost NodePorts)",
       "kube-proxy: pkg/proxy/iptables/proxier.go (KUBE-FIREWALL \"block incoming localnet connections\", "
       "written when localhostNodePorts is on; CVE-2020-8558); pkg/proxy/nftables/README.md (no localhost NodePorts, "
       "route_localnet is not set)",
       localnet_block},
      {"forward-accept-marked",
       "a routed packet that arrives carrying the masquerade mark, to a Service without (local) endpoints: iptables "
       "mode's KUBE-FORWARD accepts it before the reject/drop; nftables mode has no such accept and refuses it",
       "kube-proxy: pkg/proxy/iptables/proxier.go (KUBE-FORWARD \"kubernetes forwarding rules\": -m mark --mark "
       "masqueradeMark -j ACCEPT); pkg/proxy/nftables/proxier.go (no forward accept rules)",
       forward_accept_marked},
      {"numgen-shares",
       "endpoint shares: nftables' numgen gives exactly 1/N; iptables' statistic cascade is within N*2^-31 of it",
       "kube-proxy: pkg/proxy/iptables/proxier.go (computeProbability, %0.10f); nft(8) numgen; "
       "kernel xt_statistic (31-bit threshold)",
       numgen_shares},
      {"masquerade-fully-random",
       "masquerading: nftables mode always uses fully-random ports; iptables only where iptables has --random-fully",
       "kube-proxy: pkg/proxy/nftables/proxier.go (\"masquerade fully-random\"); pkg/proxy/iptables/proxier.go "
       "(HasRandomFully)",
       nullptr, masquerade_fully_random},
  };
  return list;
}

std::vector<const KnownDifference*> classify(const DiffContext& c) {
  std::vector<const KnownDifference*> out;
  IpvsSides is;
  if (ipvs_sides(c, &is)) return classify_ipvs(c);
  bool ipt_first = c.backend_a == "iptables" && c.backend_b == "nftables";
  if (!ipt_first && !(c.backend_a == "nftables" && c.backend_b == "iptables")) return out;
  Distribution ipt = ipt_first ? c.a : c.b, nft = ipt_first ? c.b : c.a;
  const Facts &fi = ipt_first ? c.facts_a : c.facts_b, &fn = ipt_first ? c.facts_b : c.facts_a;
  for (const auto& k : known_differences())
    if (k.normalise && k.normalise(&ipt, &nft, fi, fn)) out.push_back(&k);
  if (!out.empty() && same(ipt, nft)) return out;
  DiffContext n{c.packet, ipt_first ? ipt : nft, ipt_first ? nft : ipt, c.facts_a, c.facts_b, c.backend_a, c.backend_b};
  for (const auto& k : known_differences())
    if (k.holds && k.holds(n)) {
      out.push_back(&k);
      return out;
    }
  return {};
}

}  // namespace kpc::verifier::cross
