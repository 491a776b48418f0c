#include "verifier/ipvs_trace/cross_frontend.h"

#include <algorithm>
#include <mutex>

#include "verifier/ipvs_trace/tracer.h"

namespace kpc::verifier::ipvs_trace {
namespace {

uint8_t proto_number(ipvs::Proto p) {
  return p == ipvs::Proto::TCP ? trace::kProtoTCP : p == ipvs::Proto::UDP ? trace::kProtoUDP : trace::kProtoSCTP;
}

// The cluster CIDR the companion masquerade rule names (KUBE-SERVICES ... ! -s CIDR -j KUBE-MARK-MASQ).
std::vector<CIDR> pod_cidrs_of(const ProgramSet& set) {
  std::vector<CIDR> out;
  const Chain* c = set.iptables.find(ir::TableId::Nat, "KUBE-SERVICES");
  if (!c) return out;
  for (uint32_t id : c->rules) {
    std::string_view t = set.iptables.store->text(id);
    size_t i = t.find("! -s ");
    if (i == std::string_view::npos || t.find("KUBE-MARK-MASQ") == std::string_view::npos) continue;
    std::string_view rest = t.substr(i + 5);
    auto cidr = CIDR::parse(rest.substr(0, rest.find(' ')), false, nullptr, true);
    if (cidr && std::find(out.begin(), out.end(), *cidr) == out.end()) out.push_back(*cidr);
  }
  return out;
}

class IpvsFrontend : public cross::ConcreteFrontend {
 public:
  IpvsFrontend(const ProgramSet& set, std::vector<IPAddr> local)
      : set_(set), tracer_(set, options(std::move(local))) {}

  std::string backend() const override { return "ipvs"; }

  void cut_points(cross::PacketSpace& space) const override {
    const auto& bound = set_.plan.bound;
    for (const auto& [key, vs] : set_.ipvs.services) {
      uint8_t proto = proto_number(key.proto);
      bool on_ipvs0 = std::find(bound.begin(), bound.end(), key.vip.address) != bound.end();
      // A virtual server on a node address that node.plan does not bind is a NodePort.
      if (!on_ipvs0 && tracer_.is_local(key.vip.address))
        space.add_nodeport(proto, key.vip.port);
      else
        space.add_service(key.vip.address, proto, key.vip.port);
      for (const auto& rs : vs.real_servers) space.add_endpoint(rs.dest.address, proto, rs.dest.port);
    }
    for (const auto& c : pod_cidrs_of(set_)) space.pod_cidrs.push_back(c);
    // A later packet of a connection is forwarded by IPVS's connection entry, which no program
    // holds: the tracer would answer Unknown, so the comparison asks about first packets only.
    space.first_packets_only = true;
  }

  // The ClusterIPs (KUBE-CLUSTER-IP's first dimension): the known differences tell a ClusterIP
  // (internalTrafficPolicy) from an external or load-balancer IP (externalTrafficPolicy) by it.
  cross::Facts facts() const override {
    cross::Facts f;
    const ipset::Set* s = set_.sets.find("KUBE-CLUSTER-IP");
    if (!s) return f;
    for (const auto& e : s->entries) {
      if (e.dims.empty()) continue;
      IPAddr a;
      a.family = set_.family;
      size_t n = set_.family == IPFamily::V4 ? 4 : 16;
      for (size_t b = 0; b < n; ++b) a.bytes[n - 1 - b] = static_cast<uint8_t>(e.dims[0].lo >> (8 * b));
      f.cluster_ips.push_back(a);
    }
    std::sort(f.cluster_ips.begin(), f.cluster_ips.end());  // sorted, unique (Facts::cluster_ips)
    f.cluster_ips.erase(std::unique(f.cluster_ips.begin(), f.cluster_ips.end()), f.cluster_ips.end());
    return f;
  }

  cross::Distribution trace(const cross::Packet& p) const override {
    trace::Packet t;
    t.src = p.src;
    t.dst = p.dst;
    t.proto = p.proto;
    t.sport = p.sport;
    t.dport = p.dport;
    t.origin = p.origin;
    if (!p.in_iface.empty()) t.in_iface = p.in_iface;
    t.in_bridge_port = "";  // routed, as the other front ends take it
    t.ctstate = p.ctstate;
    if (p.ctstate != ir::kCtNew) t.ctmark = 0;
    Client client;
    if (!p.remembered_endpoint.empty()) {
      if (auto h = ipvs::parse_host_port(p.remembered_endpoint)) client.remembered = *h;
    }
    TraceResult r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      r = tracer_.trace(t, client);
    }
    cross::Distribution d;
    for (const auto& o : r.outcomes) {
      cross::Outcome x;
      x.verdict = o.verdict;
      x.route = o.route == "ipvs-nat" ? (p.origin == trace::Origin::Node ? "output" : "forward") : o.route;
      if (o.dnat) x.dnat = o.dnat_text;
      x.masquerade = o.masquerade;
      x.snat = o.snat_text;
      x.mark = o.final_mark;
      // A persistence template is made only when a real server is scheduled (ip_vs_sched_persist):
      // a rejected or dropped packet leaves no client remembered.
      x.affinity = !o.affinity.empty() && o.verdict == trace::Verdict::Accept;
      std::string opts = o.options;
      const std::string leave = "icmp-port-unreachable (ip_vs_leave)";  // = a bare reject
      if (size_t i = opts.find(leave); i != std::string::npos) {
        opts.erase(i, leave.size());
        while (!opts.empty() && (opts.back() == ' ' || opts.back() == ';')) opts.pop_back();
        while (!opts.empty() && (opts.front() == ' ' || opts.front() == ';')) opts.erase(0, 1);
      }
      x.options = cross::normalise_iptables_options(opts);
      x.unknown_reason = o.unknown_reason;
      d.add(x, o.probability);
    }
    return d;
  }

 private:
  static TraceOptions options(std::vector<IPAddr> local) {
    TraceOptions o;
    o.local_addresses = std::move(local);
    return o;
  }
  const ProgramSet& set_;
  mutable std::mutex mu_;
  mutable Tracer tracer_;
};

}  // namespace

std::unique_ptr<cross::ConcreteFrontend> make_ipvs_frontend(const ProgramSet& set, std::vector<IPAddr> local) {
  return std::make_unique<IpvsFrontend>(set, std::move(local));
}

}  // namespace kpc::verifier::ipvs_trace
