// The ipset model (verifier/ipset) against the real ipset (7.17) in network namespaces:
// random sets of the types kube-proxy's IPVS mode and common CNIs use (hash:ip,
// hash:net with nomatch, hash:ip,port, hash:ip,port,ip, hash:ip,port,net, bitmap:port,
// list:set; IPv4 and IPv6) are loaded with `ipset restore`; their `ipset save` must read,
// and for random elements `ipset test SET ELEMENT` (the kernel's membership) must agree
// with the model's answer for the packet carrying that element's fields. (`ipset test` on
// a list:set tests a member *name*, so list:set's packet semantics are covered by the
// unit tests only.)
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "tests/support/netns.h"
#include "verifier/ipset/ipset.h"

namespace kpc::test {
namespace {

using verifier::ipset::u128;

std::string v4(std::mt19937& r) { return "10." + std::to_string(r() % 3) + "." + std::to_string(r() % 4) + "." + std::to_string(r() % 8); }
std::string v6(std::mt19937& r) { return "fd00:" + std::to_string(r() % 3) + "::" + std::to_string(r() % 8); }

u128 value(const std::string& s) {
  auto a = *IPAddr::parse(s);
  u128 v = 0;
  for (size_t i = 0; i < (a.family == IPFamily::V4 ? 4u : 16u); ++i) v = (v << 8) | a.bytes[i];
  return v;
}

struct Probe {
  std::string set, element, flags;
  verifier::ipset::PacketFields fields;
};

TEST(IpsetKernel, MembershipAgreesWithIpsetTest) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root for network namespaces";
  std::mt19937 rng(2026);
  size_t probes = 0, members = 0;
  for (int round = 0; round < 6; ++round) {
    bool six = round % 2 == 1;
    auto ip = [&] { return six ? v6(rng) : v4(rng); };
    std::string fam = six ? "inet6" : "inet";
    std::ostringstream restore;
    restore << "create IP hash:ip family " << fam << "\n";
    restore << "create NET hash:net family " << fam << "\n";
    restore << "create IPP hash:ip,port family " << fam << "\n";
    restore << "create IPPIP hash:ip,port,ip family " << fam << "\n";
    restore << "create IPPNET hash:ip,port,net family " << fam << "\n";
    restore << "create PORTS bitmap:port range 0-65535\n";
    restore << "create LIST list:set\n";
    const char* protos[] = {"tcp", "udp", "sctp"};
    for (int k = 0; k < 12; ++k) {
      restore << "add -exist IP " << ip() << "\n";
      std::string net = six ? "fd00:" + std::to_string(rng() % 3) + "::/" + std::to_string(32 + rng() % 3 * 16)
                            : "10." + std::to_string(rng() % 3) + ".0.0/" + std::to_string(8 + rng() % 3 * 8);
      restore << "add -exist NET " << net << (rng() % 3 == 0 ? " nomatch" : "") << "\n";
      std::string pp = std::string(protos[rng() % 3]) + ":" + std::to_string(80 + rng() % 3);
      restore << "add -exist IPP " << ip() << "," << pp << "\n";
      restore << "add -exist IPPIP " << ip() << "," << pp << "," << ip() << "\n";
      restore << "add -exist IPPNET " << ip() << "," << pp << "," << net << "\n";
      restore << "add -exist PORTS " << 80 + rng() % 3 << "\n";
    }
    restore << "add LIST NET\nadd LIST IP\n";
    Netns ns;
    ASSERT_TRUE(ns.ok());
    auto loaded = ns.exec({"ipset", "restore"}, restore.str());
    ASSERT_EQ(loaded.exit_code, 0) << loaded.err << restore.str();
    std::string save = ns.exec({"ipset", "save"}).out;
    verifier::ipset::Table t;
    std::string err;
    ASSERT_TRUE(verifier::ipset::parse_save(save, &t, &err)) << err << "\n" << save;
    IPFamily f = six ? IPFamily::V6 : IPFamily::V4;
    auto bracket = [&](const std::string& a) { return a; };
    for (int k = 0; k < 60; ++k) {
      std::string a = ip(), b = ip();
      uint8_t proto_n = (uint8_t[]){6, 17, 132}[rng() % 3];
      std::string proto = proto_n == 6 ? "tcp" : proto_n == 17 ? "udp" : "sctp";
      uint16_t port = static_cast<uint16_t>(80 + rng() % 3);
      std::vector<Probe> ps = {
          {"IP", bracket(a), "src", {value(a), 0, f, 6, 1, 1}},
          {"NET", bracket(a), "src", {value(a), 0, f, 6, 1, 1}},
          {"IPP", a + "," + proto + ":" + std::to_string(port), "src,src", {value(a), 0, f, proto_n, port, 1}},
          {"IPPIP", a + "," + proto + ":" + std::to_string(port) + "," + b, "src,src,dst",
           {value(a), value(b), f, proto_n, port, 1}},
          {"IPPNET", a + "," + proto + ":" + std::to_string(port) + "," + b, "src,src,dst",
           {value(a), value(b), f, proto_n, port, 1}},
          {"PORTS", std::to_string(port), "src", {0, 0, f, 6, port, 1}},
      };
      for (const auto& p : ps) {
        auto real = ns.exec({"ipset", "test", p.set, p.element});
        std::string why;
        auto model = verifier::ipset::match(t, p.set, p.flags, p.fields, &why);
        ASSERT_TRUE(model.has_value()) << p.set << " " << p.element << ": " << why;
        bool in = real.exit_code == 0;
        EXPECT_EQ(*model, in) << "ipset test " << p.set << " " << p.element << " -> " << real.err << "\n" << save;
        ++probes;
        members += in;
      }
    }
  }
  std::fprintf(stderr, "[ ipset ] %zu elements tested against the kernel, %zu members, 0 disagreements expected\n",
               probes, members);
}

}  // namespace
}  // namespace kpc::test
