// IPVS mode's known differences against iptables and nftables mode (verifier/cross,
// ipvs_known_differences, issue 17 §3): each holds on its case and not on a near miss, in
// either order of the two sides, against both other modes where it applies.
#include <gtest/gtest.h>

#include "verifier/cross/known_differences.h"
#include "verifier/cross/outcome.h"
#include "verifier/trace/rational.h"

namespace kpc {
namespace {

namespace cross = verifier::cross;
using cross::Distribution;
using cross::Fraction;
using cross::Outcome;
using cross::Verdict;
using Ids = std::vector<std::string>;

Outcome out(Verdict v, const std::string& route = "", const std::string& dnat = "", bool masq = false,
            const std::string& options = "", uint32_t mark = 0) {
  Outcome o;
  o.verdict = v;
  o.route = route;
  o.dnat = dnat;
  o.masquerade = masq;
  o.options = options;
  o.mark = mark;
  return o;
}
Distribution dist(std::initializer_list<Outcome> os) {
  Distribution d;
  Fraction share = Fraction::reciprocal(static_cast<uint32_t>(os.size()));
  for (const auto& o : os) d.add(o, share);
  return d;
}
const char* const kFR = "masquerade fully-random";

cross::Packet packet(const char* src, cross::SourceKind sk, const char* dst, uint16_t port, cross::DestKind dk) {
  cross::Packet p;
  p.src = *IPAddr::parse(src);
  p.dst = *IPAddr::parse(dst);
  p.dport = port;
  p.source_kind = sk;
  p.dest_kind = dk;
  return p;
}

// (packet, IPVS side, the other side) against `other_backend`, in both orders.
struct Case {
  cross::Packet packet;
  Distribution ipvs, other;
  cross::Facts other_facts;
  std::string other_backend = "nftables";
  Ids ids() const {
    cross::Facts none;
    cross::DiffContext c{packet, ipvs, other, none, other_facts, "ipvs", other_backend};
    Ids a;
    for (const auto* k : cross::classify(c)) a.push_back(k->id);
    cross::DiffContext r{packet, other, ipvs, other_facts, none, other_backend, "ipvs"};
    Ids b;
    for (const auto* k : cross::classify(r)) b.push_back(k->id);
    EXPECT_EQ(a, b);
    return a;
  }
};

TEST(CrossIpvsKnown, EveryIdIsListedWithASource) {
  for (const auto& k : cross::ipvs_known_differences()) {
    EXPECT_FALSE(k.explanation.empty()) << k.id;
    EXPECT_NE(k.source.find("kube-proxy"), std::string::npos) << k.id;
    EXPECT_EQ(cross::find_known_difference(k.id), &k);
  }
  // The iptables/nftables predicates never excuse an IPVS pair.
  Case c{packet("10.244.255.250", cross::SourceKind::Pod, "10.96.0.99", 80, cross::DestKind::ServiceRange),
         dist({out(Verdict::Accept, "forward")}), dist({out(Verdict::Drop)})};
  c.other_facts.service_cidrs = {*CIDR::parse("10.96.0.0/16", false, nullptr, true)};
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, LoopbackMasqueradeWithoutFullyRandom) {
  Case c{packet("10.244.1.5", cross::SourceKind::Hairpin, "10.96.10.10", 80, cross::DestKind::Service),
         dist({out(Verdict::Accept, "forward", "10.244.1.5:8080", true), out(Verdict::Accept, "forward", "10.244.2.6:8080")}),
         dist({out(Verdict::Accept, "forward", "10.244.1.5:8080", true, kFR),
               out(Verdict::Accept, "forward", "10.244.2.6:8080")})};
  EXPECT_EQ(c.ids(), Ids{"ipvs-loopback-masquerade"});
  c.other_backend = "iptables";
  EXPECT_EQ(c.ids(), Ids{"ipvs-loopback-masquerade"});
  // Near miss: not a hairpin (a pod's masquerade is KUBE-POSTROUTING's, which has --random-fully).
  c.packet.source_kind = cross::SourceKind::Pod;
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, LoopbackOnlyForLocalEndpoints) {
  Case c{packet("10.244.2.6", cross::SourceKind::Hairpin, "10.96.10.10", 80, cross::DestKind::Service),
         dist({out(Verdict::Accept, "forward", "10.244.1.5:8080"), out(Verdict::Accept, "forward", "10.244.2.6:8080")}),
         dist({out(Verdict::Accept, "forward", "10.244.1.5:8080"),
               out(Verdict::Accept, "forward", "10.244.2.6:8080", true, kFR)})};
  EXPECT_EQ(c.ids(), Ids{"ipvs-loopback-local-endpoints"});
  // Near miss: the other mode masquerades a share that is not the hairpin one.
  c.other = dist({out(Verdict::Accept, "forward", "10.244.1.5:8080", true, kFR),
                  out(Verdict::Accept, "forward", "10.244.2.6:8080")});
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, LocalPolicyFallbackToClusterEndpoints) {
  Case c{packet("203.0.113.77", cross::SourceKind::External, "1.2.3.4", 80, cross::DestKind::Service),
         dist({out(Verdict::Accept, "forward", "10.180.0.1:80"), out(Verdict::Accept, "forward", "10.180.1.1:80")}),
         dist({out(Verdict::Drop)})};
  EXPECT_EQ(c.ids(), Ids{"ipvs-local-fallback"});
  c.other_backend = "iptables";
  EXPECT_EQ(c.ids(), Ids{"ipvs-local-fallback"});
  // Near miss: from the node to a load-balancer IP the other modes short-circuit to the cluster
  // endpoints, so their drop is the source-range firewall, not the Local policy.
  c.packet = packet("192.168.0.10", cross::SourceKind::Node, "1.2.3.4", 80, cross::DestKind::Service);
  EXPECT_EQ(c.ids(), Ids{});
  // ...but to a ClusterIP (iTP=Local) it is the fallback.
  c.packet.dst = *IPAddr::parse("10.96.5.5");
  c.other_backend = "nftables";
  c.other_facts.service_cidrs = {*CIDR::parse("10.96.0.0/16", false, nullptr, true)};
  EXPECT_EQ(c.ids(), Ids{"ipvs-local-fallback"});
  // Near miss: IPVS does not translate the packet.
  c.ipvs = dist({out(Verdict::Accept, "local")});
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, NoRealServersRejectsWhereOthersDrop) {
  Case c{packet("10.244.255.250", cross::SourceKind::Pod, "172.20.1.1", 80, cross::DestKind::Service),
         dist({out(Verdict::Reject)}), dist({out(Verdict::Drop)})};
  EXPECT_EQ(c.ids(), Ids{"ipvs-no-real-servers"});
  // Near miss: the other mode accepts.
  c.other = dist({out(Verdict::Accept, "forward", "10.0.1.1:80")});
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, NoShortCircuitToClusterEndpoints) {
  Case c{packet("10.244.255.250", cross::SourceKind::Pod, "192.168.0.10", 30443, cross::DestKind::NodePort),
         dist({out(Verdict::Accept, "forward", "10.244.1.20:8443")}),
         dist({out(Verdict::Accept, "forward", "10.244.1.20:8443"), out(Verdict::Accept, "forward", "10.244.2.21:8443")})};
  EXPECT_EQ(c.ids(), Ids{"ipvs-no-short-circuit"});
  // From the node: IPVS's Local path does not masquerade, the others' cluster path does.
  c.packet = packet("192.168.0.10", cross::SourceKind::Node, "192.168.0.10", 30443, cross::DestKind::NodePort);
  c.ipvs = dist({out(Verdict::Accept, "output", "10.244.1.20:8443")});
  c.other = dist({out(Verdict::Accept, "output", "10.244.1.20:8443", true, kFR),
                  out(Verdict::Accept, "output", "10.244.2.21:8443", true, kFR)});
  EXPECT_EQ(c.ids(), Ids{"ipvs-no-short-circuit"});
  // Near miss: the node to a ClusterIP (KUBE-CLUSTER-IP): masqueraded alike in every mode, so an
  // unmasqueraded IPVS packet is a real difference.
  cross::Packet to_cluster_ip = packet("192.168.0.10", cross::SourceKind::Node, "10.96.20.20", 443, cross::DestKind::Service);
  {
    cross::Facts ipvs_facts;
    ipvs_facts.cluster_ips = {*IPAddr::parse("10.96.20.20")};
    cross::DiffContext ctx{to_cluster_ip, c.ipvs, c.other, ipvs_facts, {}, "ipvs", "iptables"};
    EXPECT_TRUE(cross::classify(ctx).empty());
    cross::Facts none;
    cross::DiffContext ext{to_cluster_ip, c.ipvs, c.other, none, none, "ipvs", "iptables"};
    EXPECT_FALSE(cross::classify(ext).empty());  // an external IP (not a ClusterIP): the Local path
  }
  // Near miss: from outside (the Local policy applies in every mode).
  c.packet = packet("203.0.113.77", cross::SourceKind::External, "192.168.0.10", 30443, cross::DestKind::NodePort);
  c.ipvs = dist({out(Verdict::Accept, "forward", "10.244.1.20:8443")});
  c.other = dist({out(Verdict::Accept, "forward", "10.244.1.20:8443"), out(Verdict::Accept, "forward", "10.244.2.21:8443")});
  EXPECT_EQ(c.ids(), Ids{});
  // Near miss: a pod, IPVS goes to an endpoint the other mode does not use.
  c.packet.source_kind = cross::SourceKind::Pod;
  c.ipvs = dist({out(Verdict::Accept, "forward", "10.244.9.9:8443")});
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, IpvsFilterRejectsOtherPorts) {
  Case c{packet("10.244.255.250", cross::SourceKind::Pod, "198.51.100.7", 1, cross::DestKind::ServiceOtherPort),
         dist({out(Verdict::Reject)}), dist({out(Verdict::Accept, "forward")})};
  EXPECT_EQ(c.ids(), Ids{"ipvs-filter-other-port"});
  // Near miss: a port a Service uses.
  c.packet.dest_kind = cross::DestKind::Service;
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, RefusedAfterTheMasqueradeMark) {
  Case c{packet("203.0.113.77", cross::SourceKind::External, "1.2.3.4", 80, cross::DestKind::Service),
         dist({out(Verdict::Drop, "", "", false, "", 0x4000)}), dist({out(Verdict::Drop)})};
  EXPECT_EQ(c.ids(), Ids{"ipvs-refused-after-mark"});
  c.ipvs = dist({out(Verdict::Reject, "", "", false, "", 0x4000)});
  c.other = dist({out(Verdict::Reject)});
  EXPECT_EQ(c.ids(), Ids{"ipvs-refused-after-mark"});
  // Near miss: accepted with another mark is a real difference.
  c.ipvs = dist({out(Verdict::Accept, "forward", "10.0.1.1:80", false, "", 0x4000)});
  c.other = dist({out(Verdict::Accept, "forward", "10.0.1.1:80")});
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, NoEndpointsExternalFromNodeAgainstIptablesOnly) {
  Case c{packet("192.168.0.10", cross::SourceKind::Node, "50.60.70.81", 80, cross::DestKind::Service),
         dist({out(Verdict::Reject, "", "", false, "", 0x4000)}), dist({out(Verdict::Accept, "output")}), {}, "iptables"};
  EXPECT_EQ(c.ids(), Ids{"ipvs-no-endpoints-external-from-node"});
  // Near miss: nftables mode rejects too, so accepting there would be a surprise.
  c.other_backend = "nftables";
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, LocalhostNodePorts) {
  Case c{packet("127.0.0.1", cross::SourceKind::Localhost, "127.0.0.1", 30080, cross::DestKind::LocalhostNodePort),
         dist({out(Verdict::Accept, "local")}),
         dist({out(Verdict::Accept, "output", "10.244.1.5:8080", true, kFR)}), {}, "iptables"};
  EXPECT_EQ(c.ids(), Ids{"ipvs-localhost-nodeports"});
  // Near miss: a NodePort on a node address.
  c.packet.dest_kind = cross::DestKind::NodePort;
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossIpvsKnown, RoundRobinAgainstTheStatisticCascade) {
  auto a = out(Verdict::Accept, "forward", "10.0.1.1:80"), b = out(Verdict::Accept, "forward", "10.0.1.2:80"),
       d = out(Verdict::Accept, "forward", "10.0.1.3:80");
  Distribution ipt;
  // The cascade's first branch: round(2^31/3)/2^31; the rest split the remainder.
  using verifier::trace::Probability;
  Probability first = Probability::ratio_pow2(715827883, 31);
  Probability rest = first.complement() * Probability::ratio_pow2(1, 1);
  ipt.add(a, Fraction::from_dyadic(first));
  ipt.add(b, Fraction::from_dyadic(rest));
  ipt.add(d, Fraction::from_dyadic(rest));
  Case c{packet("10.244.255.250", cross::SourceKind::Pod, "10.96.30.30", 9000, cross::DestKind::Service), dist({a, b, d}),
         ipt, {}, "iptables"};
  EXPECT_EQ(c.ids(), Ids{"ipvs-rr-shares"});
  // Near miss: nftables' numgen is exactly 1/N, and a share off by more than N*2^-31 is a difference.
  c.other_backend = "nftables";
  EXPECT_EQ(c.ids(), Ids{});
  c.other_backend = "iptables";
  Distribution skew;
  skew.add(a, Fraction::reciprocal(2));
  skew.add(b, Fraction::reciprocal(4));
  skew.add(d, Fraction::reciprocal(4));
  c.other = skew;
  EXPECT_EQ(c.ids(), Ids{});
}

}  // namespace
}  // namespace kpc
