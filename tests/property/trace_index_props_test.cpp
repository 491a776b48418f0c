// The iptables tracer's chain index (verifier/trace/tracer.h, TraceOptions::index_chains) changes
// no trace: on random rule sets -- rules with exact and masked destinations, negations, port
// ranges, multiport, -m set, -m recent, statistic splits, marks, interfaces, DNAT, jumps and
// rules with no destination match at all -- every packet's full trace (outcomes, probabilities,
// paths, notes) through the indexed walk equals the plain walk's, rule by rule. Also: the tracers
// without paths (the cross-mode diff's) and the affinity indexes give what the full forms give.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>
#include <vector>

#include "tests/support/test_util.h"
#include "verifier/cross/compare.h"
#include "verifier/cross/frontend.h"
#include "verifier/ipset/ipset.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/state/state.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {
namespace {

// Few values, so that rules and packets collide often.
const char* const kAddrs[] = {"10.96.0.1", "10.96.0.2", "10.96.0.3", "10.96.1.7", "10.244.1.5", "192.168.0.2"};
const char* const kNets[] = {"10.96.0.0/24", "10.96.0.0/16", "10.244.0.0/16", "0.0.0.0/0"};
const uint16_t kPorts[] = {53, 80, 443, 8080, 30080};
const char* const kProtos[] = {"tcp", "udp", "sctp"};

const char* kIpsets = R"(create SVC hash:ip,port family inet hashsize 1024 maxelem 65536
add SVC 10.96.0.1,tcp:80
add SVC 10.96.0.2,udp:53
create NETS hash:net family inet hashsize 1024 maxelem 65536
add NETS 10.96.0.0/24
create PORTS bitmap:port range 0-65535
add PORTS 443
add PORTS 30080
)";

template <typename T, size_t N>
const T& pick(const T (&a)[N]) {
  return a[*rc::gen::inRange<size_t>(0, N)];
}

// One rule's matches (iptables-save order: -s/-d, -i, -p, then modules).
std::string gen_matches(bool nat, bool* with_proto) {
  std::string m;
  int d = *rc::gen::inRange(0, 10);
  bool neg_d = *rc::gen::inRange(0, 6) == 0;
  if (*rc::gen::inRange(0, 5) == 0) m += std::string(" ! -s ") + pick(kNets);
  if (d <= 5) m += std::string(neg_d ? " ! -d " : " -d ") + pick(kAddrs) + "/32";
  else if (d <= 7) m += std::string(neg_d ? " ! -d " : " -d ") + pick(kNets);
  // else: no destination match at all
  if (*rc::gen::inRange(0, 8) == 0) m += nat ? " -i eth0" : " -i cbr0";
  int p = *rc::gen::inRange(0, 10);
  std::string proto;
  if (p <= 6) {
    proto = pick(kProtos);
    m += std::string(p == 0 ? " ! -p " : " -p ") + proto;
  }
  *with_proto = !proto.empty() && p != 0;
  if (*with_proto) {
    int k = *rc::gen::inRange(0, 8);
    std::string port = std::to_string(pick(kPorts));
    if (k <= 3) m += " -m " + proto + " --dport " + port;
    else if (k == 4) m += " -m " + proto + " ! --dport " + port;
    else if (k == 5) m += " -m " + proto + " --dport 50:" + port;
    else if (k == 6) m += " -m multiport --dports " + port + "," + std::to_string(pick(kPorts));
    if (*rc::gen::inRange(0, 10) == 0) m += " -m " + proto + " --sport 40000";
  }
  switch (*rc::gen::inRange(0, 14)) {
    case 0: m += " -m set --match-set SVC dst,dst"; break;
    case 1: m += " -m set ! --match-set NETS dst"; break;
    case 2: m += " -m set --match-set PORTS dst"; break;
    case 3: m += " -m recent --set --name R1 --mask 255.255.255.255 --rsource"; break;
    case 4: m += " -m recent --rcheck --seconds 10800 --reap --name R1 --mask 255.255.255.255 --rsource"; break;
    case 5: m += " -m statistic --mode random --probability 0.50000000000"; break;
    case 6: m += " -m mark --mark 0x4000/0x4000"; break;
    case 7: m += " -m addrtype --dst-type LOCAL"; break;
    case 8: m += " -m conntrack --ctstate NEW"; break;
    default: break;
  }
  if (*rc::gen::inRange(0, 10) == 0) m += " -m recent --set --name R2 --mask 255.255.255.255 --rsource";
  m += " -m comment --comment \"ns/svc" + std::to_string(*rc::gen::inRange(0, 4)) + ":p\"";
  return m;
}

std::string gen_target(bool nat, int chains, int self, bool with_proto) {
  int k = *rc::gen::inRange(0, 10);
  if (k <= 2 && self + 1 < chains) return " -j C" + std::to_string(*rc::gen::inRange(self + 1, chains));
  if (k == 3) return " -j MARK --set-xmark 0x4000/0x4000";
  if (k == 4) return " -j RETURN";
  // A DNAT port needs -p (iptables refuses it otherwise).
  if (k == 5) return nat ? " -j DNAT --to-destination " + std::string(pick(kAddrs)) + (with_proto ? ":8080" : "") : " -j DROP";
  if (k == 6) return nat ? " -j MARK --or-mark 0x1" : " -j REJECT";
  if (k == 7) return " -j ACCEPT";
  return "";  // no target: counts, continues
}

// A program: nat and filter, each with a long chain C0 (the one the index serves) and short
// sub-chains C1..C3 it jumps to, called from the built-in chains.
std::string gen_program() {
  std::string out;
  for (bool nat : {true, false}) {
    const int chains = 4;
    out += nat ? "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
               : "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n";
    for (int c = 0; c < chains; ++c) out += ":C" + std::to_string(c) + " - [0:0]\n";
    for (const char* b : nat ? std::vector<const char*>{"PREROUTING", "OUTPUT"}
                             : std::vector<const char*>{"INPUT", "FORWARD", "OUTPUT"})
      out += std::string("-A ") + b + " -j C0\n";
    for (int c = 0; c < chains; ++c) {
      int n = c == 0 ? *rc::gen::inRange(1, 60) : *rc::gen::inRange(0, 6);
      for (int i = 0; i < n; ++i) {
        bool with_proto = false;
        std::string m = gen_matches(nat, &with_proto);
        out += "-A C" + std::to_string(c) + m + gen_target(nat, chains, c, with_proto) + "\n";
      }
    }
    if (nat) out += "-A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE\n";
    out += "COMMIT\n";
  }
  return out;
}

Packet gen_packet() {
  Packet p;
  int o = *rc::gen::inRange(0, 3);
  p.origin = o == 0 ? Origin::Pod : o == 1 ? Origin::External : Origin::Node;
  p.src = *IPAddr::parse(o == 0 ? "10.244.1.5" : o == 1 ? "203.0.113.7" : "192.168.0.2");
  p.dst = *IPAddr::parse(pick(kAddrs));
  if (*rc::gen::inRange(0, 6) == 0) p.dst = *IPAddr::parse("10.96.0.77");
  p.proto = *rc::gen::element(kProtoTCP, kProtoUDP, kProtoSCTP);
  p.dport = *rc::gen::inRange(0, 8) == 0 ? 51 : pick(kPorts);
  if (*rc::gen::inRange(0, 4) != 0) p.sport = 40000;
  if (p.origin != Origin::Node && *rc::gen::inRange(0, 5) != 0) p.in_iface = o == 0 ? "cbr0" : "eth0";
  if (*rc::gen::inRange(0, 3) == 0) p.out_iface = "eth0";
  p.in_bridge_port = "";
  if (*rc::gen::inRange(0, 5) == 0) p.ctstate = ir::kCtEstablished;
  if (*rc::gen::inRange(0, 4) == 0) p.remembered = {"R1"};
  return p;
}

std::string show(const TraceResult& r, bool paths = true) {
  std::string s;
  for (const auto& n : r.notes) s += "note " + n + "\n";
  for (const auto& o : r.outcomes) {
    s += o.probability.fraction() + " " + verdict_name(o.verdict) + " " + o.route + " " + o.dnat_text + " m" +
         std::to_string(o.masquerade) + " " + o.snat_text + " mark" + std::to_string(o.final_mark) + " [" + o.options +
         "] {" + affinity_text(o.affinity, [](const std::string& l) { return l; }) + "} " + o.unknown_reason + "\n";
    for (const auto& st : paths ? o.path : std::vector<Step>{})
      s += "  " + std::to_string(st.kind) + " " + ir::table_name(st.table) + " " + st.chain + " #" +
           std::to_string(st.rule_no) + " " + st.text + " (" + st.note + ") " + st.comment + "\n";
    for (const auto& v : o.services) s += "  service " + v + "\n";
  }
  return s;
}

RC_GTEST_PROP(TraceIndexProps, IndexedWalkEqualsThePlainWalk, ()) {
  const std::string program = gen_program();
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  auto applied = apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe);
  if (!applied.ok()) RC_FAIL("program refused: " + pe.message + "\n" + program);
  ipset::Table sets;
  std::string err;
  RC_ASSERT(ipset::parse_save(kIpsets, &sets, &err));
  TraceOptions plain;
  plain.local_addresses = {*IPAddr::parse("192.168.0.2")};
  if (*rc::gen::arbitrary<bool>()) plain.ipsets = &sets;  // without: -m set is Unknown
  plain.index_chains = false;
  TraceOptions indexed = plain;
  indexed.index_chains = true;
  indexed.index_min_rules = 1;  // every chain, the short ones too
  // And without paths (the cross-mode diff's tracers): the same outcomes and services.
  TraceOptions lean = indexed;
  lean.record_paths = false;
  Tracer a(st, plain), b(st, indexed), c(st, lean);
  for (int n = 0; n < 12; ++n) {
    Packet p = gen_packet();
    TraceResult ra = a.trace(p);
    std::string want = show(ra), got = show(b.trace(p));
    if (want != got)
      RC_FAIL(program + "\npacket to " + host_port(p.dst, p.dport) + " proto " + proto_name(p.proto) +
              "\nplain:\n" + want + "indexed:\n" + got);
    TraceResult rc = c.trace(p);
    for (const auto& o : rc.outcomes) RC_ASSERT(o.path.empty());
    want = show(ra, false), got = show(rc, false);
    if (want != got)
      RC_FAIL(program + "\npacket to " + host_port(p.dst, p.dport) + "\nwith paths:\n" + want + "without:\n" + got);
  }
}

// A kube-proxy-shaped long chain (one rule per service address and port, a protocol-and-port
// rule, a rule with no destination match last): both walks find the same rules, by position.
TEST(TraceIndex, KubeProxyShapedChainBothWalks) {
  std::string program = "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
                        ":KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\n";
  for (int i = 0; i < 2000; ++i)
    program += "-A KUBE-SERVICES -d 10.96." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
               "/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.244.0.1:" + std::to_string(1000 + i) + "\n";
  program += "-A KUBE-SERVICES -p udp -m udp --dport 53 -j DNAT --to-destination 10.244.0.2:53\n";
  program += "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j MARK --or-mark 0x1\nCOMMIT\n";
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  ASSERT_TRUE(apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe).ok()) << pe.message;
  TraceOptions o;
  o.local_addresses = {*IPAddr::parse("192.168.0.2")};
  for (bool index : {false, true}) {
    o.index_chains = index;
    Tracer t(st, o);
    Packet p;
    p.src = *IPAddr::parse("203.0.113.7");
    p.dst = *IPAddr::parse("10.96.7.249");
    p.dport = 80;
    p.in_iface = "eth0";
    auto r = t.trace(p);
    ASSERT_EQ(r.outcomes.size(), 1u);
    EXPECT_EQ(r.outcomes[0].dnat_text, "10.244.0.1:2999");
    ASSERT_FALSE(r.outcomes[0].path.empty());
    EXPECT_EQ(r.outcomes[0].path.back().rule_no, 2000u);
    p.proto = kProtoUDP;
    p.dport = 53;
    r = t.trace(p);
    ASSERT_EQ(r.outcomes.size(), 1u);
    EXPECT_EQ(r.outcomes[0].dnat_text, "10.244.0.2:53");
    EXPECT_EQ(r.outcomes[0].path.back().rule_no, 2001u);
  }
}

// The nft tracer without paths (TraceOptions::record_paths = false, as the cross-mode diff runs
// it) gives the outcomes and services it gives with paths: every packet of the cross diff's
// space of the example's program, new and remembered clients.
TEST(NftTraceLean, SameOutcomesAndServicesWithoutPaths) {
  namespace nt = nft_trace;
  nft::NftState state;
  ASSERT_TRUE(nft::apply_script(state, test::read_file(test::source_path("fixtures/example/expected/nftables-ipv4.nft")),
                                "nftables-ipv4.nft")
                  .ok);
  std::vector<IPAddr> local = {*IPAddr::parse("192.168.0.10")};
  auto fe = cross::make_nft_frontend(state, IPFamily::V4, local);
  cross::PacketSpace space;
  space.local_addresses = local;
  fe->cut_points(space);
  nt::TraceOptions with;
  with.local_addresses = local;
  nt::TraceOptions without = with;
  without.record_paths = false;
  nt::Tracer a(state, with), b(state, without);
  auto show_nft = [](const nt::TraceResult& r) {
    std::string s;
    for (const auto& n : r.notes) s += "note " + n + "\n";
    for (const auto& o : r.outcomes) {
      s += o.probability.fraction() + " " + verdict_name(o.verdict) + " " + o.route + " " + o.dnat_text + " m" +
           std::to_string(o.masquerade) + " " + o.snat_text + " mark" + std::to_string(o.final_mark) + " [" +
           o.options + "] " + o.unknown_reason + "\n";
      for (const auto& x : o.affinity) s += "  affinity " + x + "\n";
      for (const auto& v : o.services) s += "  service " + v + "\n";
    }
    return s;
  };
  size_t traced = 0, with_services = 0;
  for (const auto& cp : cross::packets(space)) {
    nt::Packet p;
    p.src = cp.src;
    p.dst = cp.dst;
    p.proto = cp.proto;
    p.sport = cp.sport;
    p.dport = cp.dport;
    p.origin = cp.origin;
    if (!cp.in_iface.empty()) p.in_iface = cp.in_iface;
    p.ctstate = cp.ctstate;
    for (int remembered = 0; remembered < 2; ++remembered) {
      if (remembered) {
        for (const auto& tb : state.tables)
          for (const auto& set : tb.sets)
            if (set.name.rfind("affinity-", 0) == 0) p.remembered.push_back(set.name);
      }
      nt::TraceResult ra = a.trace(p), rb = b.trace(p);
      for (const auto& o : rb.outcomes) EXPECT_TRUE(o.path.empty());
      ASSERT_EQ(show_nft(ra), show_nft(rb)) << cp.text();
      ++traced;
      with_services += !ra.outcomes.empty() && !ra.outcomes[0].services.empty();
    }
  }
  EXPECT_GT(traced, 50u);
  EXPECT_GT(with_services, 20u) << "the services of a path are compared";
}

// The affinity indexes (one pass per program) give what resolve_affinity gives, for every DNAT
// destination of the example's programs (ClientIP affinity Services among them) and a miss.
TEST(AffinityIndex, EqualsResolveAffinity) {
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  ASSERT_TRUE(apply_text(st, test::read_file(test::source_path("fixtures/example/expected/iptables.restore")),
                         ApplyOptions{true, Flavor::Legacy}, &pe)
                  .ok())
      << pe.message;
  auto ipt = affinity_index(st);
  size_t with_lists = 0;
  for (const auto& [endpoint, lists] : ipt) {
    EXPECT_EQ(lists, resolve_affinity(st, endpoint)) << endpoint;
    with_lists += !lists.empty();
  }
  EXPECT_GE(with_lists, 3u);
  EXPECT_TRUE(resolve_affinity(st, "10.1.2.3:4").empty());
  EXPECT_EQ(ipt.count("10.1.2.3:4"), 0u);

  nft::NftState ns;
  ASSERT_TRUE(nft::apply_script(ns, test::read_file(test::source_path("fixtures/example/expected/nftables-ipv4.nft")),
                                "nftables-ipv4.nft")
                  .ok);
  auto nfi = nft_trace::affinity_index(ns);
  size_t with_sets = 0;
  for (const auto& [endpoint, sets] : nfi) {
    EXPECT_EQ(sets, nft_trace::resolve_affinity(ns, endpoint)) << endpoint;
    with_sets += !sets.empty();
  }
  EXPECT_GE(with_sets, 3u);  // the example: shop/cart, three endpoints
  EXPECT_TRUE(nft_trace::resolve_affinity(ns, "10.1.2.3:4").empty());
  EXPECT_EQ(nfi.count("10.1.2.3:4"), 0u);
}

}  // namespace
}  // namespace kpc::verifier::trace
