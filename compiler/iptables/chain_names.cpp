#include "compiler/iptables/chain_names.h"

#include <cstring>

#include "compiler/support/sha256.h"

namespace kpc::iptables {
namespace {

constexpr size_t kHashChars = 16;

// The first 16 base32 characters encode exactly the first 10 digest bytes (80 bits),
// so no padding is involved: two 40-bit groups of eight 5-bit characters each.
void hash_chars(std::string_view input, char* out) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  auto digest = sha256(input);
  for (int group = 0; group < 2; ++group) {
    uint64_t bits = 0;
    for (int i = 0; i < 5; ++i) bits = bits << 8 | digest[static_cast<size_t>(group * 5 + i)];
    for (int i = 0; i < 8; ++i) *out++ = kAlphabet[(bits >> (35 - 5 * i)) & 31];
  }
}

// The hash input (service-port name + protocol + endpoint) is short; build it on the stack.
class HashKey {
 public:
  HashKey(std::string_view a, std::string_view b, std::string_view c = {}) {
    if (a.size() + b.size() + c.size() > sizeof small_) {
      big_.append(a).append(b).append(c);
      key_ = big_;
      return;
    }
    char* p = small_;
    for (std::string_view s : {a, b, c}) {
      if (s.empty()) continue;  // an empty view may have no data pointer at all
      std::memcpy(p, s.data(), s.size());
      p += s.size();
    }
    key_ = std::string_view(small_, static_cast<size_t>(p - small_));
  }
  std::string_view view() const { return key_; }

 private:
  char small_[256];
  std::string big_;
  std::string_view key_;
};

}  // namespace

std::string chain_hash(std::string_view input) {
  std::string out(kHashChars, '\0');
  hash_chars(input, out.data());
  return out;
}

ChainName::ChainName(std::string_view prefix, std::string_view input) {
  // Prefixes are kube-proxy's ("KUBE-SVC-" ... "KUBE-FW-"), at most 9 characters.
  std::memcpy(buf_, prefix.data(), prefix.size());
  hash_chars(input, buf_ + prefix.size());
  len_ = static_cast<uint8_t>(prefix.size() + kHashChars);
}

ChainName ChainName::with_hash(std::string_view prefix, std::string_view hash) {
  ChainName c;
  std::memcpy(c.buf_, prefix.data(), prefix.size());
  std::memcpy(c.buf_ + prefix.size(), hash.data(), hash.size());
  c.len_ = static_cast<uint8_t>(prefix.size() + hash.size());
  return c;
}

ServiceChainNames service_chain_names(std::string_view spn, std::string_view proto) {
  // The four names share one hash: compute it once, then swap the prefix.
  ServiceChainNames names;
  names.svc = ChainName("KUBE-SVC-", HashKey(spn, proto).view());
  std::string_view hash = names.svc.view().substr(std::string_view("KUBE-SVC-").size());
  names.svl = ChainName::with_hash("KUBE-SVL-", hash);
  names.ext = ChainName::with_hash("KUBE-EXT-", hash);
  names.fw = ChainName::with_hash("KUBE-FW-", hash);
  return names;
}

ChainName endpoint_chain_name(std::string_view spn, std::string_view proto, std::string_view endpoint) {
  return ChainName("KUBE-SEP-", HashKey(spn, proto, endpoint).view());
}

bool is_service_chain(std::string_view c) {
  for (std::string_view p : {"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"})
    if (c.substr(0, p.size()) == p) return true;
  return false;
}

}  // namespace kpc::iptables
