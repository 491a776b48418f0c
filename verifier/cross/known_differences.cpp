#include "verifier/cross/known_differences.h"

#include <algorithm>

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

bool nodeport_addresses(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::NodePort) return false;
  const auto& allowed = s.nft_facts->nodeport_addresses;
  if (!allowed || std::find(allowed->begin(), allowed->end(), c.packet.dst) != allowed->end()) return false;
  if (s.ipt_facts->nodeport_addresses) return false;  // iptables restricted too: not this difference
  return s.ipt->decided() && !untranslated_accept(*s.ipt) && untranslated_accept(*s.nft);
}

// iptables serves NodePorts on 127.0.0.1 when localhost NodePorts are on (DNAT), and its filter
// rejects for NodePorts without endpoints match `--dst-type LOCAL`, 127.0.0.1 included, either
// way; nftables excludes 127.0.0.0/8 from both.
bool localhost_nodeports(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::LocalhostNodePort) return false;
  if (!s.ipt->decided() || !untranslated_accept(*s.nft)) return false;
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
  return (all(*s.nft, Verdict::Reject) || all(*s.nft, Verdict::Drop)) && untranslated_accept(*s.ipt);
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
  return in_range && all(*s.nft, Verdict::Drop) && untranslated_accept(*s.ipt);
}

bool clusterip_other_port(const DiffContext& c) {
  Sides s;
  if (!sides(c, &s) || c.packet.dest_kind != DestKind::ServiceOtherPort) return false;
  return all(*s.nft, Verdict::Reject) && untranslated_accept(*s.ipt);
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
    if (x.outcome.key() != y.outcome.key()) return false;
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

}  // namespace

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
