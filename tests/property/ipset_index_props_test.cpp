// The ipset model's index (verifier/ipset: entries by their first address, built by parse_save
// for sets like IPVS mode's KUBE-CLUSTER-IP, one entry per Service) answers every match exactly
// as the scan of all entries does: the same true/false, the same "unknown" with the same reason,
// for random sets of every indexed type (hash:ip, hash:ip,port, hash:ip,port,ip, hash:ip,port,net,
// with nomatch entries and repeated addresses) and random packets and flag combinations.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "verifier/ipset/ipset.h"

namespace kpc::verifier::ipset {
namespace {

std::string addr(int i) { return "10.96.0." + std::to_string(i); }

u128 value(const std::string& a) {
  IPAddr x = *IPAddr::parse(a);
  return (u128(x.bytes[0]) << 24) | (u128(x.bytes[1]) << 16) | (u128(x.bytes[2]) << 8) | x.bytes[3];
}

RC_GTEST_PROP(IpsetIndexProps, IndexedMatchEqualsTheScan, ()) {
  const char* types[] = {"hash:ip", "hash:ip,port", "hash:ip,port,ip", "hash:ip,port,net"};
  const int type = *rc::gen::inRange(0, 4);
  const int n = *rc::gen::inRange(16, 60);  // the index starts at 16 entries
  std::string save = std::string("create S ") + types[type] + " family inet hashsize 1024 maxelem 65536\n";
  const char* protos[] = {"tcp", "udp", "sctp"};
  for (int i = 0; i < n; ++i) {
    std::string e = addr(*rc::gen::inRange(1, 12));  // few addresses: entries share them
    if (type >= 1) e += std::string(",") + protos[*rc::gen::inRange(0, 3)] + ":" + std::to_string(*rc::gen::inRange(79, 83));
    if (type == 2) e += "," + addr(*rc::gen::inRange(1, 4));
    if (type == 3) e += ",10.244." + std::to_string(*rc::gen::inRange(0, 3)) + ".0/" + std::to_string(*rc::gen::element(16, 24, 32));
    save += "add S " + e + "\n";
  }
  Table indexed;
  std::string err;
  RC_ASSERT(parse_save(save, &indexed, &err));
  RC_ASSERT(indexed.sets.at("S").indexed_entries > 0);
  Table scanned = indexed;
  scanned.sets.at("S").indexed_entries = 0;  // the scan, the reference
  const char* flagsets[] = {"dst", "src", "dst,dst", "dst,src", "src,dst", "dst,dst,src", "dst,dst,dst", "src,src,src"};
  for (int k = 0; k < 40; ++k) {
    PacketFields p;
    p.family = IPFamily::V4;
    p.src = value(*rc::gen::element<std::string>("10.96.0.1", "10.96.0.2", "10.244.1.7", "10.244.0.1", "10.0.0.9"));
    p.dst = value(addr(*rc::gen::inRange(0, 14)));
    p.proto = *rc::gen::element<uint8_t>(6, 17, 132, 1);
    p.dport = static_cast<uint16_t>(*rc::gen::inRange(78, 84));
    if (*rc::gen::arbitrary<bool>()) p.sport = static_cast<uint16_t>(*rc::gen::inRange(79, 83));
    const char* flags = flagsets[*rc::gen::inRange(0, 8)];
    std::string why_a, why_b;
    auto a = match(indexed, "S", flags, p, &why_a);
    auto b = match(scanned, "S", flags, p, &why_b);
    RC_ASSERT(a.has_value() == b.has_value());
    if (a) RC_ASSERT(*a == *b);
    else RC_ASSERT(why_a == why_b);
  }
}

TEST(IpsetIndex, BuiltOnlyWhenEveryFirstDimensionIsOneAddress) {
  std::string save = "create N hash:net family inet hashsize 1024 maxelem 65536\n";
  for (int i = 0; i < 20; ++i) save += "add N 10.0." + std::to_string(i) + ".0/24\n";
  save += "create I hash:ip family inet hashsize 1024 maxelem 65536\n";
  for (int i = 0; i < 20; ++i) save += "add I 10.0.0." + std::to_string(i) + "\n";
  Table t;
  std::string err;
  ASSERT_TRUE(parse_save(save, &t, &err)) << err;
  EXPECT_EQ(t.sets.at("N").indexed_entries, 0u);
  EXPECT_EQ(t.sets.at("I").indexed_entries, 20u);
  PacketFields p;
  p.dst = value("10.0.0.7");
  p.proto = 6;
  std::string why;
  EXPECT_EQ(match(t, "I", "dst", p, &why), std::optional<bool>(true));
  p.dst = value("10.0.0.77");
  EXPECT_EQ(match(t, "I", "dst", p, &why), std::optional<bool>(false));
}

}  // namespace
}  // namespace kpc::verifier::ipset
