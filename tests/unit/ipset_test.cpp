// The node's ipsets (verifier/ipset, issue 12 part 3): `ipset save` output as ipset 7.17
// prints it, membership as the kernel decides it (flags per dimension, nomatch by most
// specific prefix, list:set members, family and dimension checks), and the symbolic
// engine agreeing with the concrete tracer on every sampled packet of a rule set that
// uses each kind of set with several flag combinations, negated or not.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "verifier/ipset/ipset.h"
#include "verifier/state/state.h"
#include "verifier/symbolic/compare.h"
#include "verifier/symbolic/engine.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier {
namespace {

// Recorded from `ipset save` (ipset 7.17) in a network namespace.
const char* kSave = R"(create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 comment bucketsize 12 initval 0xd8301c27
add KUBE-CLUSTER-IP 10.96.0.10,udp:53
add KUBE-CLUSTER-IP 10.96.0.1,tcp:443 comment "default/kubernetes:https"
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xc03379f9
add KUBE-LOOP-BACK 10.244.1.5,tcp:8080,10.244.1.5
create NETS hash:net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xe5f41c43
add NETS 10.1.0.0/16 nomatch
add NETS 10.0.0.0/8
create LB-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x7ac0d543
add LB-CIDR 198.51.100.7,tcp:443,203.0.113.0/24
create S6 hash:ip family inet6 hashsize 1024 maxelem 65536 bucketsize 12 initval 0xd64540b9
add S6 fd00::1
create R hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x6efdfabe
add R 10.9.9.1
add R 10.9.9.3
add R 10.9.9.2
create L list:set size 8
add L NETS
add L R
create MARKS hash:ip,mark family inet
add MARKS 10.0.0.1,0x1
)";

ipset::u128 v4(const char* s) {
  auto a = *IPAddr::parse(s);
  return (ipset::u128(a.bytes[0]) << 24) | (a.bytes[1] << 16) | (a.bytes[2] << 8) | a.bytes[3];
}

ipset::PacketFields pkt(const char* src, const char* dst, uint8_t proto, uint16_t sport, uint16_t dport) {
  return ipset::PacketFields{v4(src), v4(dst), IPFamily::V4, proto, sport, dport};
}

TEST(Ipset, ReadsIpsetSaveAndDecidesMembershipAsTheKernel) {
  ipset::Table t;
  std::string err;
  ASSERT_TRUE(ipset::parse_save(kSave, &t, &err)) << err;
  EXPECT_EQ(t.sets.size(), 9u);
  std::string why;
  auto m = [&](const char* set, const char* flags, ipset::PacketFields p) { return ipset::match(t, set, flags, p, &why); };
  EXPECT_EQ(m("KUBE-CLUSTER-IP", "dst,dst", pkt("1.1.1.1", "10.96.0.1", 6, 1000, 443)), true);
  EXPECT_EQ(m("KUBE-CLUSTER-IP", "dst,dst", pkt("1.1.1.1", "10.96.0.1", 17, 1000, 443)), false);  // udp:443 absent
  EXPECT_EQ(m("KUBE-CLUSTER-IP", "dst,dst", pkt("1.1.1.1", "10.96.0.10", 17, 1000, 53)), true);
  EXPECT_EQ(m("KUBE-CLUSTER-IP", "dst", pkt("1.1.1.1", "10.96.0.1", 6, 1000, 443)), false);  // fewer flags: never
  EXPECT_EQ(m("KUBE-CLUSTER-IP", "src,dst", pkt("10.96.0.1", "9.9.9.9", 6, 1000, 443)), true);
  EXPECT_EQ(m("KUBE-NODE-PORT-TCP", "dst", pkt("1.1.1.1", "2.2.2.2", 6, 1, 30080)), true);
  EXPECT_EQ(m("KUBE-NODE-PORT-TCP", "dst", pkt("1.1.1.1", "2.2.2.2", 17, 1, 30080)), true);  // bitmap:port: any port protocol
  EXPECT_EQ(m("KUBE-LOOP-BACK", "dst,dst,src", pkt("10.244.1.5", "10.244.1.5", 6, 1, 8080)), true);
  EXPECT_EQ(m("KUBE-LOOP-BACK", "dst,dst,src", pkt("10.244.1.6", "10.244.1.5", 6, 1, 8080)), false);
  EXPECT_EQ(m("LB-CIDR", "dst,dst,src", pkt("203.0.113.99", "198.51.100.7", 6, 1, 443)), true);
  EXPECT_EQ(m("LB-CIDR", "dst,dst,src", pkt("203.0.114.1", "198.51.100.7", 6, 1, 443)), false);
  EXPECT_EQ(m("NETS", "src", pkt("10.2.3.4", "1.1.1.1", 6, 1, 1)), true);
  EXPECT_EQ(m("NETS", "src", pkt("10.1.3.4", "1.1.1.1", 6, 1, 1)), false);  // nomatch: the more specific prefix
  EXPECT_EQ(m("L", "src", pkt("10.9.9.2", "1.1.1.1", 6, 1, 1)), true);      // member R (10.9.9.2 is not in 10/8? it is: NETS)
  EXPECT_EQ(m("L", "src", pkt("10.1.3.4", "1.1.1.1", 6, 1, 1)), false);
  EXPECT_EQ(m("S6", "src", pkt("10.0.0.1", "1.1.1.1", 6, 1, 1)), false);  // another family: never
  EXPECT_EQ(m("MARKS", "src", pkt("10.0.0.1", "1.1.1.1", 6, 1, 1)), std::nullopt);
  EXPECT_NE(why.find("not modelled"), std::string::npos);
  EXPECT_EQ(m("NOPE", "src", pkt("10.0.0.1", "1.1.1.1", 6, 1, 1)), std::nullopt);
  // Text that is not ipset's is refused with its line.
  ipset::Table bad;
  EXPECT_FALSE(ipset::parse_save("create A hash:ip\nadd A 10.0.0.1,tcp:80\n", &bad, &err));
  EXPECT_EQ(err.substr(0, 2), "2:");
  EXPECT_FALSE(ipset::parse_save("add B 10.0.0.1\n", &bad, &err));
  EXPECT_FALSE(ipset::parse_save("flush\n", &bad, &err));
}

// Every kind of set, in rules with several flag combinations, negated or not: the symbolic
// distribution of every sampled packet equals the concrete tracer's.
TEST(Ipset, SymbolicEngineAgreesWithTheTracerOnSampledPackets) {
  ipset::Table t;
  std::string err;
  ASSERT_TRUE(ipset::parse_save(kSave, &t, &err)) << err;
  const char* program = R"(*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:M - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j M
-A KUBE-SERVICES -m set ! --match-set NETS src -j MARK --or-mark 0x2
-A KUBE-SERVICES -m set --match-set L src -j MARK --or-mark 0x4
-A KUBE-SERVICES -p tcp -m set --match-set KUBE-NODE-PORT-TCP dst -j MARK --or-mark 0x8
-A KUBE-SERVICES -m set --match-set LB-CIDR dst,dst,src -j MARK --or-mark 0x10
-A KUBE-SERVICES -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MARK --or-mark 0x20
-A KUBE-SERVICES -p tcp -m set --match-set KUBE-CLUSTER-IP src,dst -j DNAT --to-destination 10.244.1.5:8080
-A M -j MARK --or-mark 0x1
-A POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
COMMIT
)";
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  ASSERT_TRUE(apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe).ok()) << pe.message;
  std::vector<IPAddr> local = {*IPAddr::parse("192.168.0.2")};
  sem::Universe u = symbolic::build_universe({&st}, local, &t);
  symbolic::Engine eng(st, u);
  trace::TraceOptions to;
  to.local_addresses = local;
  to.ipsets = &t;
  trace::Tracer tracer(st, to);
  const char* addrs[] = {"10.96.0.1", "10.96.0.10", "10.96.0.2", "10.244.1.5", "10.244.1.6", "10.1.0.0",
                         "10.1.255.255", "10.2.0.0", "10.0.255.255", "9.255.255.255", "11.0.0.0", "10.9.9.2",
                         "198.51.100.7", "203.0.113.0", "203.0.113.255", "203.0.114.0", "192.168.0.2"};
  uint16_t ports[] = {53, 443, 444, 8080, 30080, 30081, 1000};
  std::mt19937 rng(12);
  size_t compared = 0;
  for (int n = 0; n < 600; ++n) {
    trace::Packet p;
    p.src = *IPAddr::parse(addrs[rng() % std::size(addrs)]);
    p.dst = *IPAddr::parse(addrs[rng() % std::size(addrs)]);
    p.proto = (uint8_t[]){6, 17, 132}[rng() % 3];
    p.sport = ports[rng() % std::size(ports)];
    p.dport = ports[rng() % std::size(ports)];
    p.origin = trace::Origin::External;
    p.in_iface = "eth0";
    p.out_iface = "eth1";
    sem::PacketClass start = sem::PacketClass::everything(u);
    auto [lo, hi] = u.atom(u.atom_of(sem::addr_value(p.dst)));
    start.dst = sem::AddrSet::range(lo, hi);
    auto leaves = eng.explore(start, sem::Origin::Arriving);
    auto point = symbolic::point_class(p, u, eng);
    auto sym = sem::distribution_at(leaves, point, p.mark, u);
    auto con = symbolic::concrete_distribution(tracer.trace(p), st);
    ASSERT_TRUE(sem::same_outcomes(sym, con))
        << p.src.str() << " -> " << p.dst.str() << ":" << p.dport << " proto " << int(p.proto) << " sport "
        << *p.sport << ": " << (sym.empty() ? "" : sem::format_share(sym[0])) << " vs "
        << (con.empty() ? "" : sem::format_share(con[0]));
    for (const auto& s : sym) ASSERT_TRUE(s.unknown.empty()) << s.unknown;
    ++compared;
  }
  EXPECT_EQ(compared, 600u);
}

}  // namespace
}  // namespace kpc::verifier

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

// --ipsets on the CLI: the same rules decided with the node's sets and undecided without;
// a file that is not `ipset save` output is a located E0802, exit 2.
TEST(IpsetCli, IpsetsDecideSetMatchesInTraceAndDiff) {
  std::string dir = temp_dir("ipsets");
  write_file(dir + "/sets.save",
             "create KUBE-CLUSTER-IP hash:ip,port family inet\nadd KUBE-CLUSTER-IP 10.96.0.1,tcp:443\n");
  const std::string rules = "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n-A PREROUTING -j KUBE-SERVICES\n"
                            "-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j MARK --or-mark 0x4000\n"
                            "COMMIT\n";
  write_file(dir + "/a.restore", rules);
  write_file(dir + "/b.restore", "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n"
                                 "-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n");
  auto t = run({bin_path("kpc"), "trace", dir + "/a.restore", "--src", "203.0.113.5", "--dst", "10.96.0.1", "--dport",
                "443", "--ipsets", dir + "/sets.save", "--format", "json"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("\"mark\": \"0x4000\""), std::string::npos) << t.out;
  auto with = run({bin_path("kpc"), "diff", "--format", "json", "--ipsets", dir + "/sets.save", dir + "/a.restore",
                   dir + "/b.restore"});
  ASSERT_EQ(with.exit_code, 1) << with.err;
  auto dw = nlohmann::json::parse(with.out);
  EXPECT_GT(dw["differing_classes"].get<int>(), 0);
  EXPECT_EQ(dw["undecided_classes"].get<int>(), 0);
  auto without = run({bin_path("kpc"), "diff", "--format", "json", dir + "/a.restore", dir + "/b.restore"});
  auto dn = nlohmann::json::parse(without.out);
  EXPECT_EQ(dn["differing_classes"].get<int>(), 0);
  EXPECT_GT(dn["undecided_classes"].get<int>(), 0);
  write_file(dir + "/bad.save", "create A hash:ip\nadd A not-an-address\n");
  auto bad = run({bin_path("kpc"), "diff", "--ipsets", dir + "/bad.save", dir + "/a.restore", dir + "/b.restore"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad.save:2: error[E0802]"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out, "");
}

}  // namespace
}  // namespace kpc::test
