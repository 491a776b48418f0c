// The cross-back-end diff (verifier/cross, `kpc diff` across modes): the outcome mapping, each
// known difference's predicate (holds on its case, not on a near miss), the numgen tolerance
// against the real cascade, a deliberately broken nft program, and the command's exit codes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "compiler/model/loader.h"
#include "tests/support/cross_support.h"
#include "tests/support/test_util.h"
#include "verifier/cross/known_differences.h"
#include "verifier/cross/outcome.h"

namespace kpc {
namespace {

namespace cross = verifier::cross;
namespace trace = verifier::trace;
using cross::Distribution;
using cross::Fraction;
using cross::Outcome;
using cross::Verdict;

Outcome out(Verdict v, const std::string& route = "", const std::string& dnat = "", bool masq = false) {
  Outcome o;
  o.verdict = v;
  o.route = route;
  o.dnat = dnat;
  o.masquerade = masq;
  return o;
}
Distribution dist(std::initializer_list<Outcome> os) {
  Distribution d;
  Fraction share = Fraction::reciprocal(static_cast<uint32_t>(os.size()));
  for (const auto& o : os) d.add(o, share);
  return d;
}

// The predicates see (packet, iptables side, nftables side).
struct Case {
  cross::Packet packet;
  Distribution ipt, nft;
  cross::Facts ipt_facts, nft_facts;
  std::vector<std::string> ids() const {
    cross::DiffContext c{packet, ipt, nft, ipt_facts, nft_facts, "iptables", "nftables"};
    std::vector<std::string> out;
    for (const auto* k : cross::classify(c)) out.push_back(k->id);
    // Either order of the two sides gives the same answer.
    cross::DiffContext r{packet, nft, ipt, nft_facts, ipt_facts, "nftables", "iptables"};
    std::vector<std::string> rev;
    for (const auto* k : cross::classify(r)) rev.push_back(k->id);
    EXPECT_EQ(out, rev);
    return out;
  }
};
using Ids = std::vector<std::string>;

cross::Packet packet(const char* dst, uint16_t port, cross::DestKind k, uint32_t ct = 2) {
  cross::Packet p;
  p.src = *IPAddr::parse("10.244.255.250");
  p.dst = *IPAddr::parse(dst);
  p.dport = port;
  p.dest_kind = k;
  p.ctstate = ct;
  return p;
}

TEST(CrossOutcome, SpellingsOfBothModesMeetInOneForm) {
  EXPECT_EQ(cross::normalise_nft_options("reject"), "");
  EXPECT_EQ(cross::normalise_nft_options("reject with icmp type port-unreachable"), "");
  EXPECT_EQ(cross::normalise_nft_options("reject with tcp reset"), "reject tcp-reset");
  EXPECT_EQ(cross::normalise_iptables_options("reject-with tcp-reset"), "reject tcp-reset");
  EXPECT_EQ(cross::normalise_iptables_options("masquerade --random-fully"), "masquerade fully-random");
  EXPECT_EQ(cross::normalise_nft_options("masquerade fully-random"), "masquerade fully-random");
  // A reject type that is not the default stays different from the bare reject.
  EXPECT_NE(cross::normalise_iptables_options("reject-with icmp-host-prohibited"), "");
}

TEST(CrossOutcome, DistributionsMergeEqualOutcomesAndCompareExactly) {
  Distribution d;
  d.add(out(Verdict::Accept, "forward", "10.0.0.1:80"), Fraction::reciprocal(4));
  d.add(out(Verdict::Accept, "forward", "10.0.0.1:80"), Fraction::reciprocal(4));
  ASSERT_EQ(d.shares.size(), 1u);
  EXPECT_EQ(d.shares[0].probability.fraction(), "1/2");
  Distribution e;
  e.add(out(Verdict::Accept, "forward", "10.0.0.1:80"), Fraction::reciprocal(2));
  EXPECT_TRUE(cross::same(d, e));
  e.shares[0].outcome.masquerade = true;
  EXPECT_FALSE(cross::same(d, e));
  Distribution u;
  u.add(out(Verdict::Unknown), Fraction::one());
  EXPECT_FALSE(cross::same(u, u)) << "an Unknown is never equal to anything";
}

TEST(CrossKnown, NodePortAddresses) {
  Case c{packet("192.168.0.11", 30080, cross::DestKind::NodePort), dist({out(Verdict::Accept, "forward", "10.244.1.5:8080", true)}),
         dist({out(Verdict::Accept, "local")}), {}, {}};
  c.nft_facts.nodeport_addresses = std::vector<IPAddr>{*IPAddr::parse("192.168.0.10")};
  EXPECT_EQ(c.ids(), Ids{"nodeport-addresses"});
  // On an address nftables accepts NodePorts on, the same difference is a surprise.
  c.packet.dst = *IPAddr::parse("192.168.0.10");
  EXPECT_EQ(c.ids(), Ids{});
  // Without a nodeport-ips set nftables serves every local address: no excuse either.
  c.packet.dst = *IPAddr::parse("192.168.0.11");
  c.nft_facts.nodeport_addresses.reset();
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, LocalhostNodePorts) {
  Case c{packet("127.0.0.1", 30080, cross::DestKind::LocalhostNodePort),
         dist({out(Verdict::Accept, "output", "10.244.1.5:8080", true)}), dist({out(Verdict::Accept, "local")}), {}, {}};
  c.ipt_facts.localhost_nodeports = true;
  EXPECT_EQ(c.ids(), Ids{"localhost-nodeports"});
  c.ipt_facts.localhost_nodeports = false;  // iptables without route_localnet NodePorts
  EXPECT_EQ(c.ids(), Ids{});
  c.ipt_facts.localhost_nodeports = true;
  c.packet.dest_kind = cross::DestKind::NodePort;  // not a localhost packet
  EXPECT_EQ(c.ids(), Ids{});
  // A NodePort without endpoints: iptables' filter reject matches 127.0.0.1 (--dst-type LOCAL).
  c.packet.dest_kind = cross::DestKind::LocalhostNodePort;
  c.ipt_facts.localhost_nodeports = false;
  c.ipt = dist({out(Verdict::Reject)});
  EXPECT_EQ(c.ids(), Ids{"localhost-nodeports"});
  c.nft = dist({out(Verdict::Reject)});  // nftables rejecting it too would be a different change
  c.ipt = dist({out(Verdict::Drop)});
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, NoEndpointsExternalFromNode) {
  Case c{packet("1.2.3.4", 80, cross::DestKind::Service), dist({out(Verdict::Accept, "output")}),
         dist({out(Verdict::Reject)}), {}, {}};
  c.packet.source_kind = cross::SourceKind::Node;
  EXPECT_EQ(c.ids(), Ids{"no-endpoints-external-from-node"});
  c.packet.source_kind = cross::SourceKind::External;  // arriving traffic is rejected by both modes
  EXPECT_EQ(c.ids(), Ids{});
  c.packet.source_kind = cross::SourceKind::Node;
  c.ipt = dist({out(Verdict::Accept, "output", "10.244.1.5:80")});  // iptables served it: not this
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, FirewallWithoutEndpoints) {
  Case c{packet("198.51.100.2", 1, cross::DestKind::Service), dist({out(Verdict::Reject)}), dist({out(Verdict::Drop)}), {},
         {}};
  EXPECT_EQ(c.ids(), Ids{"firewall-without-endpoints"});
  std::swap(c.ipt, c.nft);  // iptables dropping where nftables rejects is another matter
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, InvalidConntrackDrop) {
  Case c{packet("10.96.0.10", 53, cross::DestKind::Service, 1), dist({out(Verdict::Drop)}),
         dist({out(Verdict::Accept, "forward")}), {}, {}};
  c.ipt_facts.drops_invalid = true;
  EXPECT_EQ(c.ids(), Ids{"invalid-ct-drop"});
  c.packet.ctstate = 2;  // a NEW packet dropped by iptables only is no workaround
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, UnallocatedClusterIP) {
  Case c{packet("10.96.255.253", 80, cross::DestKind::ServiceRange), dist({out(Verdict::Accept, "forward")}),
         dist({out(Verdict::Drop)}), {}, {}};
  c.nft_facts.service_cidrs = {*CIDR::parse("10.96.0.0/16")};
  EXPECT_EQ(c.ids(), Ids{"unallocated-clusterip"});
  c.nft_facts.service_cidrs = {*CIDR::parse("10.97.0.0/16")};  // not in the range nftables drops
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, ClusterIPOtherPort) {
  Case c{packet("10.96.0.10", 1, cross::DestKind::ServiceOtherPort), dist({out(Verdict::Accept, "forward")}),
         dist({out(Verdict::Reject)}), {}, {}};
  EXPECT_EQ(c.ids(), Ids{"clusterip-other-port"});
  c.ipt = dist({out(Verdict::Accept, "forward", "10.244.1.2:1")});  // iptables served it: not this
  EXPECT_EQ(c.ids(), Ids{});
}

// A packet arriving with the masquerade mark is masqueraded wherever it is routed: that masquerade
// is the mark's, and the difference is still clusterip-other-port; without the mark it is not.
TEST(CrossKnown, ClusterIPOtherPortWithTheMasqueradeMarkArriving) {
  Case c{packet("10.96.0.10", 1, cross::DestKind::ServiceOtherPort), dist({out(Verdict::Accept, "forward", "", true)}),
         dist({out(Verdict::Reject)}), {}, {}};
  c.ipt_facts.masquerade_mark = 0x4000;
  EXPECT_EQ(c.ids(), Ids{}) << "a masquerade of an unmarked packet is a Service's";
  c.packet.mark = 0x4000;
  EXPECT_EQ(c.ids(), Ids{"clusterip-other-port"});
  c.ipt_facts.masquerade_mark = 0;  // the program has no masquerade mark: no excuse
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, LocalnetBlock) {
  cross::Packet p = packet("127.0.0.1", 80, cross::DestKind::Unnamed);
  p.src = *IPAddr::parse("203.0.113.10");
  Case c{p, dist({out(Verdict::Drop)}), dist({out(Verdict::Accept, "local")}), {}, {}};
  EXPECT_EQ(c.ids(), Ids{}) << "only where iptables has the KUBE-FIREWALL rule";
  c.ipt_facts.blocks_localnet = true;
  EXPECT_EQ(c.ids(), Ids{"localnet-block"});
  c.packet.src = *IPAddr::parse("127.0.0.5");  // from 127.0.0.0/8: the rule does not apply
  EXPECT_EQ(c.ids(), Ids{});
  c.packet.src = *IPAddr::parse("203.0.113.10");
  c.packet.dst = *IPAddr::parse("10.1.2.3");
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, ForwardAcceptMarked) {
  cross::Packet p = packet("10.96.1.1", 80, cross::DestKind::Service);
  p.mark = 0x4000;
  Case c{p, dist({out(Verdict::Accept, "forward", "", true)}), dist({out(Verdict::Reject)}), {}, {}};
  c.ipt_facts.masquerade_mark = 0x4000;
  EXPECT_EQ(c.ids(), Ids{}) << "only where KUBE-FORWARD accepts marked packets";
  c.ipt_facts.forward_accepts_marked = true;
  EXPECT_EQ(c.ids(), Ids{"forward-accept-marked"});
  c.nft = dist({out(Verdict::Drop)});
  EXPECT_EQ(c.ids(), Ids{"forward-accept-marked"});
  c.packet.mark = 0;  // unmarked: KUBE-FORWARD's accept does not apply
  EXPECT_EQ(c.ids(), Ids{});
  c.packet.mark = 0x4000;
  c.nft = dist({out(Verdict::Accept, "forward", "10.244.1.2:80", true)});  // nftables served it
  EXPECT_EQ(c.ids(), Ids{});
  c.nft = dist({out(Verdict::Reject)});
  c.packet.origin = trace::Origin::Node;  // the node's own packet is not forwarded
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, NumgenSharesWithinTheCascadesRounding) {
  auto p = packet("10.96.30.30", 9000, cross::DestKind::Service);
  Case c{p, {}, {}, {}, {}};
  auto a = out(Verdict::Accept, "forward", "10.244.1.30:9000"), b = out(Verdict::Accept, "forward", "10.244.2.31:9000");
  // iptables: 0.5000000000 -> threshold 2^30: exactly 1/2 -- shifted by 2^-31 to make a difference.
  Fraction tiny = Fraction::from_dyadic(trace::Probability::ratio_pow2(1, 31));
  c.ipt.add(a, Fraction::reciprocal(2) + tiny);
  c.ipt.add(b, Fraction::reciprocal(2).complement());
  c.nft = dist({a, b});
  EXPECT_EQ(c.ids(), Ids{"numgen-shares"});
  // A share off by far more than the rounding is a real change.
  c.ipt = Distribution{};
  c.ipt.add(a, Fraction::reciprocal(3));
  c.ipt.add(b, Fraction::reciprocal(3).complement());
  EXPECT_EQ(c.ids(), Ids{});
  // Different endpoints are never a rounding matter.
  c.ipt = dist({a, out(Verdict::Accept, "forward", "10.244.2.32:9000")});
  EXPECT_EQ(c.ids(), Ids{});
}

TEST(CrossKnown, MasqueradeFullyRandomCombinesWithOthers) {
  auto m = out(Verdict::Accept, "forward", "10.180.0.1:80", true);
  auto mr = m;
  mr.options = "masquerade fully-random";
  Case c{packet("172.30.0.41", 80, cross::DestKind::Service), dist({m}), dist({mr}), {}, {}};
  EXPECT_EQ(c.ids(), Ids{"masquerade-fully-random"});
  c.ipt = dist({mr});  // iptables with --random-fully: equal, and a difference elsewhere is not excused
  c.nft = dist({mr, mr});
  c.nft.shares[0].outcome.dnat = "10.180.0.2:80";
  EXPECT_EQ(c.ids(), Ids{});
}

// The kernel's numgen split against iptables' statistic cascade (kube-proxy writes 1/(n-i) with
// ten decimals; the kernel keeps lround(2^31 p)): equal for n <= 3 only, and always within the
// numgen-shares tolerance n * 2^-31.
TEST(CrossKnown, KernelNumgenEqualsTheCascadeOnlyUpToThree) {
  for (uint32_t n = 1; n <= 12; ++n) {
    std::vector<Fraction> cascade;
    trace::Probability rest = trace::Probability::one();
    for (uint32_t i = 0; i + 1 < n; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%0.10f", 1.0 / (n - i));
      auto t = static_cast<uint32_t>(std::lround(std::strtod(buf, nullptr) * 2147483648.0));
      auto m = trace::Probability::statistic_match(t);
      cascade.push_back(Fraction::from_dyadic(rest * m));
      rest = rest * m.complement();
    }
    cascade.push_back(Fraction::from_dyadic(rest));
    bool equal = true;
    Fraction eps = Fraction::from_dyadic(trace::Probability::ratio_pow2(n, 31));
    for (uint32_t v = 0; v < n; ++v) {
      Fraction k = verifier::nft_trace::numgen_kernel_share(n, v), nominal = Fraction::reciprocal(n);
      equal = equal && k == cascade[v];
      EXPECT_FALSE(cascade[v] > nominal + eps || nominal > cascade[v] + eps) << n << " " << v;
      EXPECT_FALSE(cascade[v] > k + eps || k > cascade[v] + eps) << n << " " << v;
    }
    EXPECT_EQ(equal, n <= 3) << "n = " << n;
  }
}

std::optional<Snapshot> example() {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  if (!load_snapshot({test::source_path("fixtures/example")}, LoadOptions{}, sm, &snap, diags)) return std::nullopt;
  return snap;
}

TEST(CrossDiff, ExampleDiffersOnlyByKnownDifferences) {
  auto snap = example();
  ASSERT_TRUE(snap);
  auto run = test::cross_diff_snapshot(*snap, IPFamily::V4);
  ASSERT_TRUE(run->result) << run->error;
  EXPECT_EQ(run->result->surprises, 0u) << test::surprises_text(*run->result);
  EXPECT_GT(run->result->known_counts["numgen-shares"], 0u);
  EXPECT_GT(run->result->known_counts["invalid-ct-drop"], 0u);
}

TEST(CrossDiff, ABrokenNftDnatPortIsASurprise) {
  auto snap = example();
  ASSERT_TRUE(snap);
  auto run = test::cross_diff_snapshot(*snap, IPFamily::V4, [](std::string t) {
    size_t i = t.find("dnat to 10.244.1.5:8080");
    if (i != std::string::npos) t.replace(i, 23, "dnat to 10.244.1.5:8081");
    return t;
  });
  ASSERT_TRUE(run->result) << run->error;
  EXPECT_GT(run->result->surprises, 0u);
  EXPECT_GT(run->result->services["shop/web:http"].surprises, 0u);
  bool witnessed = false;
  for (const auto& c : run->result->differences)
    witnessed = witnessed || (c.known.empty() && c.b.text().find("10.244.1.5:8081") != std::string::npos &&
                              c.a.text().find("10.244.1.5:8080") != std::string::npos);
  EXPECT_TRUE(witnessed) << "a witness packet with both outcomes";
}

// The by-class engine (cross/by_class.h): every packet class of both programs.
TEST(CrossDiffByClass, ExampleDiffersOnlyByKnownDifferencesInBothFamilies) {
  auto snap = example();
  ASSERT_TRUE(snap);
  for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
    auto run = test::cross_diff_snapshot(*snap, f, {}, {}, false, test::CrossEngine::PerClass);
    ASSERT_TRUE(run->result) << run->error;
    const auto& r = *run->result;
    EXPECT_TRUE(r.per_class);
    EXPECT_GT(r.classes, 0u);
    EXPECT_EQ(r.surprises, 0u) << family_name(f) << "\n" << test::surprises_text(r);
    EXPECT_TRUE(r.self_check_failures.empty()) << r.self_check_failures.front();
    EXPECT_GT(r.known_counts.at("invalid-ct-drop"), 0u);
    EXPECT_GT(r.known_counts.at("clusterip-other-port"), 0u);
  }
}

// A source range the representative packets miss: the nft program's loadBalancerSourceRanges
// entry replaced by another CIDR (or dropped) is not a documented difference, and only the
// by-class engine sees it (the sampled external client lies in both ranges' complement or in both).
TEST(CrossDiffByClass, ALostSourceRangeIsNotKnown) {
  auto snap = example();
  ASSERT_TRUE(snap);
  for (const char* replacement : {"198.51.100.0/24", "203.0.113.0/25"}) {
    auto run = test::cross_diff_snapshot(
        *snap, IPFamily::V4,
        [&](std::string t) {
          size_t i = t.find("203.0.113.0/24 } drop");
          if (i != std::string::npos) t.replace(i, 14, replacement);
          return t;
        },
        {}, false, test::CrossEngine::PerClass);
    ASSERT_TRUE(run->result) << run->error;
    const auto& r = *run->result;
    EXPECT_GT(r.surprises, 0u) << replacement;
    EXPECT_GT(r.services.at("shop/api:https").surprises, 0u) << replacement;
    bool dropped_only_by_one = false;
    for (const auto& c : r.differences)
      if (c.known.empty() && c.service == "shop/api:https")
        dropped_only_by_one = dropped_only_by_one || (c.a.text() == "drop") != (c.b.text() == "drop");
    EXPECT_TRUE(dropped_only_by_one) << replacement << "\n" << test::surprises_text(r);
  }
}

TEST(CrossDiffByClass, CommandSaysWhichEngineAnswered) {
  std::string kpc = test::bin_path("kpc"), ex = test::source_path("fixtures/example");
  std::string dir = test::temp_dir("cross-class-cli");
  auto c1 = test::run({kpc, "compile", ex, "--backend", "iptables", "-o", dir + "/a.restore"});
  ASSERT_EQ(c1.exit_code, 0) << c1.err;
  auto c2 = test::run({kpc, "compile", ex, "--backend", "nftables", "-o", dir + "/b.nft"});
  ASSERT_EQ(c2.exit_code, 0) << c2.err;
  auto same = test::run({kpc, "diff", dir + "/a.restore", dir + "/b.nft"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("coverage: every packet class (a per-class proof), each difference classified\n"),
            std::string::npos) << same.out;
  std::string nft = test::read_file(dir + "/b.nft");
  size_t i = nft.find("ip saddr != { 203.0.113.0/24 } drop");
  ASSERT_NE(i, std::string::npos);
  nft.replace(i, 35, "ip saddr != { 198.51.100.0/24 } drop");
  test::write_file(dir + "/lost.nft", nft);
  auto lost = test::run({kpc, "diff", dir + "/a.restore", dir + "/lost.nft"});
  EXPECT_EQ(lost.exit_code, 1) << lost.out << lost.err;
  EXPECT_NE(lost.out.find("  shop/api:https: "), std::string::npos) << lost.out;
  EXPECT_NE(lost.out.find("NOT KNOWN: tcp 198.51.100.7:443"), std::string::npos) << lost.out;
  auto j = nlohmann::json::parse(test::run({kpc, "diff", dir + "/a.restore", dir + "/lost.nft", "--format", "json"}).out);
  EXPECT_EQ(j["engine"], "per-class");
  EXPECT_FALSE(j["only_known"].get<bool>());
  // A side in IPVS mode keeps the representative packets, and says so.
  auto ipvs = test::run({kpc, "diff", ex, "--from-backend", "ipvs", "--to-backend", "nftables", "--format", "json"});
  auto k = nlohmann::json::parse(ipvs.out);
  EXPECT_EQ(k["engine"], "sampled");
  EXPECT_NE(k["coverage"].get<std::string>().find("not yet a per-class proof"), std::string::npos);
}

TEST(CrossDiffCli, ExitCodesAndFormats) {
  std::string kpc = test::bin_path("kpc"), ex = test::source_path("fixtures/example");
  auto ok = test::run({kpc, "diff", ex, "--from-backend", "iptables", "--to-backend", "nftables", "--show-known"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("numgen-shares"), std::string::npos);
  EXPECT_NE(ok.out.find("source: kube-proxy"), std::string::npos);
  for (size_t b = 0, e; b < ok.out.size(); b = e + 1) {
    e = ok.out.find('\n', b);
    if (e == std::string::npos) e = ok.out.size();
    EXPECT_LE(e - b, 100u) << ok.out.substr(b, e - b);
  }

  std::string dir = test::temp_dir("cross-cli");
  std::string nft = test::read_file(ex + "/expected/nftables-ipv4.nft");
  size_t i = nft.find("dnat to 10.244.1.5:8080");
  ASSERT_NE(i, std::string::npos);
  nft.replace(i, 23, "dnat to 10.244.1.5:8081");
  test::write_file(dir + "/broken.nft", nft);
  auto bad = test::run({kpc, "diff", ex + "/expected/iptables.restore", dir + "/broken.nft", "--format", "json",
                        "--local-address", "192.168.0.10"});
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  auto j = nlohmann::json::parse(bad.out);
  EXPECT_EQ(j["schema"], "kpc.dev/diff-cross/v1");
  EXPECT_GT(j["surprises"].get<int>(), 0);

  auto md = test::run({kpc, "diff", ex + "/expected/iptables.restore", ex + "/expected/nftables-ipv4.nft", "--format",
                       "markdown", "--local-address", "192.168.0.10"});
  EXPECT_EQ(md.exit_code, 0) << md.out << md.err;
  EXPECT_NE(md.out.find("| Service |"), std::string::npos);

  test::write_file(dir + "/garbage.nft", "add table ip kube-proxy\nadd rule ip kube-proxy nosuch counter\n");
  auto err = test::run({kpc, "diff", ex + "/expected/iptables.restore", dir + "/garbage.nft"});
  EXPECT_EQ(err.exit_code, 2);
  EXPECT_TRUE(err.out.empty()) << "no partial output";
  auto one = test::run({kpc, "diff", ex});
  EXPECT_EQ(one.exit_code, 2) << "one input needs --from-backend and --to-backend";
}

// The two sides load on two threads; their reports come out as one thread would print them:
// A's first, then B's, each whole, in stderr and in the JSON document alike; a snapshot
// compiled for both sides reports its errors once.
TEST(CrossDiffCli, BothSidesReportInOrderOnce) {
  std::string kpc = test::bin_path("kpc");
  std::string dir = test::temp_dir("cross-cli-order");
  // A is slow to load (its error is after 30,000 rules) and B fails at once: B's thread finishes
  // first, so printing as each thread finishes would put B's error first.
  std::string a = "*nat\n:KUBE-SERVICES - [0:0]\n";
  for (int i = 0; i < 30000; ++i) a += "-A KUBE-SERVICES -d 10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + "/32 -j ACCEPT\n";
  test::write_file(dir + "/a.restore", a + "-A NOSUCH -j ACCEPT\nCOMMIT\n");
  test::write_file(dir + "/b.nft", "add table ip kube-proxy\nadd rule ip kube-proxy nosuch counter\n");
  for (int run = 0; run < 5; ++run) {  // the order must not depend on which thread finishes first
    auto r = test::run({kpc, "diff", dir + "/a.restore", dir + "/b.nft", "--format", "json"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    size_t a_at = r.err.find("a.restore"), b_at = r.err.find("b.nft");
    ASSERT_NE(a_at, std::string::npos) << r.err;
    ASSERT_NE(b_at, std::string::npos) << r.err;
    EXPECT_LT(a_at, b_at) << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_GE(j["diagnostics"].size(), 2u) << r.out;
    EXPECT_NE(j["diagnostics"][0].dump().find("a.restore"), std::string::npos) << r.out;
    EXPECT_NE(j["diagnostics"].back().dump().find("b.nft"), std::string::npos) << r.out;
  }
  test::write_file(dir + "/bad.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  ports: 7\n");
  auto once = test::run({kpc, "diff", dir + "/bad.yaml", "--from-backend", "iptables", "--to-backend", "nftables"});
  EXPECT_EQ(once.exit_code, 2) << once.err;
  size_t first = once.err.find("bad.yaml");
  ASSERT_NE(first, std::string::npos) << once.err;
  const std::string line = once.err.substr(first, once.err.find('\n', first) - first);
  EXPECT_EQ(once.err.find(line, first + line.size()), std::string::npos) << "reported twice:\n" << once.err;
}

}  // namespace
}  // namespace kpc
