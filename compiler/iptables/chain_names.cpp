#include "compiler/iptables/chain_names.h"

#include "compiler/support/sha256.h"

namespace kpc::iptables {

std::string chain_hash(std::string_view input) {
  // The first 16 base32 characters encode exactly the first 10 digest bytes.
  auto digest = sha256(input);
  return base32(digest.data(), 10);
}

ServiceChainNames service_chain_names(std::string_view spn, std::string_view proto) {
  std::string key(spn);
  key += proto;
  std::string h = chain_hash(key);
  return {"KUBE-SVC-" + h, "KUBE-SVL-" + h, "KUBE-EXT-" + h, "KUBE-FW-" + h};
}

std::string endpoint_chain_name(std::string_view spn, std::string_view proto, std::string_view endpoint) {
  std::string key(spn);
  key += proto;
  key += endpoint;
  return "KUBE-SEP-" + chain_hash(key);
}

bool is_service_chain(std::string_view c) {
  for (std::string_view p : {"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"})
    if (c.substr(0, p.size()) == p) return true;
  return false;
}

}  // namespace kpc::iptables
