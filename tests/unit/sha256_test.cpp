// SHA-256 (portable and SHA-NI) against FIPS 180-4 vectors and each other, and the
// chain-name hashing against names kube-proxy's own tests expect.
#include <gtest/gtest.h>

#include <random>

#include "compiler/iptables/chain_names.h"
#include "compiler/support/sha256.h"

namespace kpc {
namespace {

std::string hex(const std::array<uint8_t, 32>& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) s += digits[b >> 4], s += digits[b & 15];
  return s;
}

TEST(Sha256, FipsVectors) {
  for (auto fn : {&sha256, &sha256_portable}) {
    EXPECT_EQ(hex(fn("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(hex(fn("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(hex(fn("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(hex(fn(std::string(1000000, 'a'))), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
}

TEST(Sha256, AcceleratedAgreesWithPortableOnRandomInputs) {
  std::mt19937 rng(20261121);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 300, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    ASSERT_EQ(sha256(s), sha256_portable(s)) << "length " << s.size();
  }
  std::printf("sha256 accelerated on this machine: %s\n", sha256_accelerated() ? "yes" : "no");
}

TEST(ChainNames, MatchKubeProxy) {
  // From kube-proxy's proxier_test.go expectations.
  EXPECT_EQ(iptables::service_chain_names("ns1/svc1:p80", "tcp").svc, "KUBE-SVC-XPGD46QRK7WJZT7O");
  EXPECT_EQ(iptables::service_chain_names("ns1/svc1:p80", "tcp").ext, "KUBE-EXT-XPGD46QRK7WJZT7O");
  EXPECT_EQ(iptables::endpoint_chain_name("ns1/svc1:p80", "tcp", "10.180.0.1:80"), "KUBE-SEP-SXIVWICOYRO3J4NJ");
  EXPECT_EQ(iptables::service_chain_names("ns5/svc5:p80", "tcp").fw, "KUBE-FW-NUKIZ6OKUXPJNT4C");
}

}  // namespace
}  // namespace kpc
