// The nft front end of the symbolic engine (verifier/nft_sym) against the concrete nft
// tracer (verifier/nft_trace, with the kernel's numgen shares, as the explorer uses them):
// on every nft golden program (kube-proxy's expected nftables dumps of fixtures/kp-nft-*,
// kpc's example outputs), for sampled packets, the outcome distribution read from the
// symbolic leaves must equal the tracer's exactly, and the leaves holding a packet must add
// up to probability 1. An Unknown on the concrete side must be Unknown symbolically too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "tests/support/nft_compare.h"
#include "tests/support/test_util.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/explorer.h"
#include "verifier/nft_trace/tracer.h"
#include "verifier/trace/effects.h"

namespace kpc::verifier::nft_sym {
namespace {
namespace fs = std::filesystem;
using namespace sem;

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<OutcomeShare> concrete(const nft_trace::TraceResult& r) {
  std::vector<OutcomeShare> out;
  for (const auto& o : r.outcomes) {
    OutcomeShare s;
    s.verdict = o.verdict;
    s.route = o.route;
    s.dnat = o.dnat_text;
    s.masquerade = o.masquerade;
    s.snat = o.snat_text;
    s.mark = o.final_mark;
    s.options = o.options;
    for (const auto& a : o.affinity) trace::append_effect(&s.affinity, a);
    int k = o.probability.denominator_log2();
    uint64_t n = 0;
    EXPECT_TRUE(k >= 0 && o.probability.numerator().to_u64(&n)) << "not dyadic: " << o.probability.fraction();
    s.probability = Probability::ratio_pow2(n, static_cast<uint32_t>(std::max(k, 0)));
    auto it = std::find_if(out.begin(), out.end(), [&](const OutcomeShare& x) {
      return x.verdict == s.verdict && x.route == s.route && x.dnat == s.dnat && x.masquerade == s.masquerade &&
             x.snat == s.snat && x.mark == s.mark && x.options == s.options && x.affinity == s.affinity;
    });
    if (it != out.end()) it->probability = it->probability + s.probability;
    else out.push_back(std::move(s));
  }
  return out;
}

// Returns the number of packets compared (decided on both sides).
size_t check_state(const std::string& label, const nft::NftState& st, IPFamily family, size_t samples) {
  bool v4 = family == IPFamily::V4;
  std::vector<IPAddr> local = {*IPAddr::parse(v4 ? "192.168.0.2" : "2001:db8::1"),
                               *IPAddr::parse(v4 ? "10.0.0.1" : "fd00::1")};
  Universe u = build_universe({&st}, family, local);
  Explorer ex(st, u);
  nft_trace::TraceOptions to;
  to.local_addresses = local;
  to.kernel_numgen = true;
  nft_trace::Tracer tracer(st, to);

  std::vector<u128> dsts, srcs;
  for (size_t i = 0; i < u.atom_count(); ++i) {
    auto [lo, hi] = u.atom(i);
    dsts.push_back(lo);
    dsts.push_back(hi);
  }
  for (const char* s : v4 ? std::vector<const char*>{"10.0.0.5", "10.180.0.1", "203.0.113.9", "192.168.0.2", "127.0.0.1",
                                                      "1.2.3.4", "10.1.2.3"}
                          : std::vector<const char*>{"fd00:10::5", "fd00:10:180::1", "2001:db8:ffff::9", "2001:db8::1",
                                                     "::1", "2001:db8::7"})
    srcs.push_back(addr_value(*IPAddr::parse(s)));
  for (u128 d : dsts) srcs.push_back(d);
  std::vector<uint16_t> ports = {0, 53, 80, 443, 3001, 8080, 30000, 32767, 65535};
  std::string listing = nft::print_ruleset(st);
  for (size_t p = listing.find(':'); p != std::string::npos; p = listing.find(':', p + 1)) {
    unsigned v = 0;
    size_t k = p + 1;
    while (k < listing.size() && isdigit(static_cast<unsigned char>(listing[k])) && v < 100000)
      v = v * 10 + unsigned(listing[k++] - '0');
    if (k > p + 1 && v <= 65535) ports.push_back(static_cast<uint16_t>(v));
  }
  for (size_t p = listing.find(". "); p != std::string::npos; p = listing.find(". ", p + 1)) {
    unsigned v = 0;
    size_t k = p + 2;
    while (k < listing.size() && isdigit(static_cast<unsigned char>(listing[k])) && v < 100000)
      v = v * 10 + unsigned(listing[k++] - '0');
    if (k > p + 2 && v <= 65535) ports.push_back(static_cast<uint16_t>(v));
  }
  std::vector<std::string> sets;
  for (uint32_t id = 1; id < u.affinity_keys.size(); ++id)
    for (auto& l : ex.sets_for(id)) sets.push_back(l);

  std::mt19937_64 rng{20261127};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::map<std::pair<size_t, int>, std::vector<Leaf>> cache;
  size_t compared = 0;
  for (size_t n = 0; n < samples; ++n) {
    nft_trace::Packet p;
    p.src = addr_from_value(srcs[pick(srcs.size())], family);
    p.dst = addr_from_value(dsts[pick(dsts.size())], family);
    static const uint8_t protos[] = {6, 6, 6, 17, 17, 132, 1};
    p.proto = protos[pick(7)];
    p.sport = ports[pick(ports.size())];
    p.dport = ports[pick(ports.size())];
    Origin origin = pick(3) == 0 ? Origin::Node : Origin::Arriving;
    p.origin = origin == Origin::Node ? trace::Origin::Node : trace::Origin::External;
    p.in_iface = u.ifaces[pick(u.ifaces.size())];
    p.out_iface = u.ifaces[pick(u.ifaces.size())];
    static const uint32_t marks[] = {0, 0, 0x4000, 0x4001, 0x8000};
    p.mark = marks[pick(5)];
    static const uint32_t cts[] = {ir::kCtNew, ir::kCtNew, ir::kCtNew, ir::kCtEstablished,
                                   ir::kCtRelated | ir::kCtDnat, ir::kCtInvalid, ir::kCtEstablished | ir::kCtDnat};
    p.ctstate = cts[pick(7)];
    uint32_t client = 0;
    if (!sets.empty() && pick(3) == 0) {
      p.remembered = {sets[pick(sets.size())]};
      client = ex.client_id(p.remembered[0]);
      std::vector<uint32_t> ages = {0};
      for (uint32_t c : u.age_cuts) ages.insert(ages.end(), {c - 1, c, c + 1});
      p.remembered_age = ages[pick(ages.size())];
    }
    size_t atom = u.atom_of(addr_value(p.dst));
    auto key = std::make_pair(atom, static_cast<int>(origin));
    auto it = cache.find(key);
    if (it == cache.end()) {
      PacketClass start = PacketClass::everything(u);
      auto [lo, hi] = u.atom(atom);
      start.dst = AddrSet::range(lo, hi);
      it = cache.emplace(key, ex.explore(start, origin)).first;
    }
    // The packet's class (as symbolic::point_class, with this front end's client ids).
    PacketClass pt = PacketClass::everything(u);
    pt.src = AddrSet::point(addr_value(p.src));
    pt.dst = AddrSet::point(addr_value(p.dst));
    pt.proto = ProtoSet::of(p.proto);
    pt.sport = PortSet::point(*p.sport);
    pt.dport = PortSet::point(p.dport);
    pt.mark_known = ~0u;
    pt.mark_value = p.mark;
    pt.ct = SmallSet{};
    for (unsigned i = 0; i < kCtCombos; ++i)
      if (ct_combo_bits(i) == p.ctstate) pt.ct = SmallSet::of(i);
    for (unsigned i = 0; i < u.ifaces.size(); ++i) {
      if (u.ifaces[i] == *p.in_iface) pt.in_iface = SmallSet::of(i);
      if (u.ifaces[i] == *p.out_iface) pt.out_iface = SmallSet::of(i);
    }
    pt.client = ClientSet::only(client);
    pt.age = SmallSet::of(u.age_bucket_of(p.remembered_age));
    auto sym = distribution_at(it->second, pt, p.mark, u);
    auto con = concrete(tracer.trace(p));
    Probability total = Probability::zero();
    for (const auto& x : sym) total = total + x.probability;
    std::string sa, ca;
    for (const auto& x : sym) sa += format_share(x) + "; ";
    for (const auto& x : con) ca += format_share(x) + "; ";
    std::string what = label + "\npacket " + std::string(trace::proto_name(p.proto)) + " " + p.src.str() + ":" +
                       std::to_string(*p.sport) + " -> " + p.dst.str() + ":" + std::to_string(p.dport) + " origin " +
                       origin_name(origin) + " in " + *p.in_iface + " out " + *p.out_iface + " mark " +
                       std::to_string(p.mark) + " ct " + std::to_string(p.ctstate) +
                       (p.remembered.empty() ? "" : " remembered " + p.remembered[0] + " age " +
                                                        std::to_string(p.remembered_age)) +
                       "\nsymbolic: " + sa + "\nconcrete: " + ca;
    EXPECT_TRUE(total.is_one()) << "leaves hold " << total.fraction() << ": " << what;
    bool con_unknown = false, sym_unknown = false;
    for (const auto& x : con) con_unknown |= x.verdict == trace::Verdict::Unknown;
    for (const auto& x : sym) sym_unknown |= x.verdict == trace::Verdict::Unknown;
    if (con_unknown || sym_unknown) {
      EXPECT_TRUE(sym_unknown) << what;  // the symbolic side may know less, never more
      continue;
    }
    ++compared;
    EXPECT_TRUE(same_outcomes(sym, con)) << what;
    if (::testing::Test::HasFailure()) return compared;
  }
  return compared;
}

std::vector<std::pair<std::string, std::string>> golden_programs() {
  std::vector<std::pair<std::string, std::string>> out;  // label, script
  for (const char* f : {"fixtures/example/expected/nftables-ipv4.nft", "fixtures/example/expected/nftables-ipv6.nft"})
    out.push_back({f, slurp(test::source_path(f))});
  std::vector<fs::path> dumps;
  for (const auto& e : fs::recursive_directory_iterator(test::source_path("fixtures")))
    if (e.path().filename() == "nftables.dump" && e.path().string().find("kp-nft-") != std::string::npos)
      dumps.push_back(e.path());
  std::sort(dumps.begin(), dumps.end());
  for (const auto& d : dumps) out.push_back({d.string(), kpc::test::nftables_dump_order(slurp(d.string()))});
  return out;
}

TEST(NftSymbolicVsConcrete, EveryGoldenProgramAgrees) {
  size_t programs = 0, compared = 0;
  for (const auto& [label, text] : golden_programs()) {
    nft::NftState st;
    auto r = nft::apply_script(st, text, label);
    ASSERT_TRUE(r.ok) << label << ": " << (r.error ? r.error->render() : "");
    ++programs;
    for (IPFamily f : families(st, st)) {
      size_t c = check_state(label, st, f, 1500);
      EXPECT_GT(c, 300u) << label;
      compared += c;
      if (HasFailure()) return;
    }
  }
  EXPECT_GE(programs, 17u);
  std::printf("[ nft symbolic ] %zu programs, %zu sampled packets agree with the concrete nft tracer\n", programs,
              compared);
}

// Affinity, numgen, marks and the fields kube-proxy's programs do not test (iif names,
// fib saddr, ct status, masquerade fully-random, goto/return) on one hand-written program.
TEST(NftSymbolicVsConcrete, HandWrittenCorners) {
  const std::string prog = R"(add table ip t
add set ip t aff { type ipv4_addr ; flags dynamic,timeout ; timeout 3h ; }
add map ip t m { type ipv4_addr . inet_proto . inet_service : verdict ; }
add chain ip t pre { type nat hook prerouting priority -100 ; }
add chain ip t post { type nat hook postrouting priority 100 ; }
add chain ip t forward-chain { type filter hook forward priority 0 ; policy drop ; }
add chain ip t svc
add chain ip t ep1
add chain ip t ep2
add chain ip t sub
add rule ip t pre iifname "eth*" meta mark set meta mark or 0x10
add rule ip t pre ip daddr . meta l4proto . th dport vmap @m
add rule ip t svc ip saddr @aff goto ep1
add rule ip t ep1 update @aff { ip saddr }
add rule ip t ep1 meta mark set meta mark xor 0x4000
add rule ip t ep1 meta l4proto { tcp, udp } dnat to 10.1.0.1:8080
add rule ip t ep2 meta mark set meta mark and 0xffff00ff
add rule ip t ep2 dnat to 10.1.0.2
add rule ip t forward-chain jump sub
add rule ip t forward-chain ct state established,related accept
add rule ip t forward-chain fib saddr type local reject
add rule ip t forward-chain tcp dport 8080 accept
add rule ip t sub meta mark & 0x4000 == 0x4000 return
add element ip t m { 10.96.0.1 . tcp . 80 : goto svc, 10.96.0.10 . udp . 53 : goto svc }
)";
  nft::NftState st;
  auto r = nft::apply_script(st, prog, "corners.nft");
  ASSERT_TRUE(r.ok) << (r.error ? r.error->render() : "");
  // Forms the nft model does not read (ranges, `ct status`: it refuses them) and the tracers do,
  // put last in their chains as nft lists them.
  nft::Table& t = st.tables[0];
  auto put = [&](const char* chain, const char* text, std::vector<std::string> jumps = {}) {
    auto body = std::make_shared<nft::RuleBody>();
    body->text = body->canonical = text;
    body->refs.chains = std::move(jumps);
    t.find_chain(chain)->rules.push_back(nft::Rule{++t.next_handle, body});
    st.reindex();
  };
  put("svc", "numgen random mod 3 vmap { 0 : goto ep1, 1-2 : goto ep2 }", {"ep1", "ep2"});
  put("post", "ct status dnat masquerade fully-random");
  put("forward-chain", "ip saddr { 10.0.0.0/8, 1.2.3.0-1.2.3.9 } accept");
  put("sub", "oifname \"eth0\" udp dport 1-100 drop");
  size_t c = check_state("corners.nft", st, IPFamily::V4, 3000);
  EXPECT_GT(c, 1000u);
}

}  // namespace
}  // namespace kpc::verifier::nft_sym
