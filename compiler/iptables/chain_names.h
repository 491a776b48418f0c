// kube-proxy's chain names (pkg/proxy/iptables/proxier.go): the prefix plus the
// first 16 characters of base32(sha256(service-port name + protocol [+ endpoint])).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace kpc::iptables {

/// h(x): the 16-character hash suffix.
std::string chain_hash(std::string_view input);

/// A per-service chain name ("KUBE-SEP-" + 16 hash characters at most). Kept inline:
/// a 10,000-service sync derives ~120,000 of them, and none needs the heap.
class ChainName {
 public:
  static constexpr size_t kMaxSize = 25;  ///< "KUBE-SVC-" + 16
  ChainName() = default;
  /// prefix ("KUBE-SEP-") + chain_hash(input).
  ChainName(std::string_view prefix, std::string_view input);
  /// prefix + an already computed 16-character hash.
  static ChainName with_hash(std::string_view prefix, std::string_view hash);

  std::string_view view() const { return {buf_, len_}; }
  operator std::string_view() const { return view(); }
  std::string str() const { return std::string(view()); }
  bool empty() const { return len_ == 0; }

  friend bool operator==(const ChainName& a, std::string_view b) { return a.view() == b; }
  friend std::ostream& operator<<(std::ostream& os, const ChainName& c) { return os << c.view(); }

 private:
  char buf_[kMaxSize] = {};
  uint8_t len_ = 0;
};

struct ServiceChainNames {
  ChainName svc, svl, ext, fw;
};
/// spn "ns/name:port", proto "tcp".
ServiceChainNames service_chain_names(std::string_view spn, std::string_view proto);
/// endpoint "10.0.0.1:80" or "[fd00::1]:80".
ChainName endpoint_chain_name(std::string_view spn, std::string_view proto, std::string_view endpoint);

/// True for the per-service chain prefixes kube-proxy deletes when stale.
bool is_service_chain(std::string_view chain);

}  // namespace kpc::iptables
