// kube-proxy's chain names (pkg/proxy/iptables/proxier.go): the prefix plus the
// first 16 characters of base32(sha256(service-port name + protocol [+ endpoint])).
#pragma once

#include <string>
#include <string_view>

namespace kpc::iptables {

/// h(x): the 16-character hash suffix.
std::string chain_hash(std::string_view input);

struct ServiceChainNames {
  std::string svc, svl, ext, fw;
};
/// spn "ns/name:port", proto "tcp".
ServiceChainNames service_chain_names(std::string_view spn, std::string_view proto);
/// endpoint "10.0.0.1:80" or "[fd00::1]:80".
std::string endpoint_chain_name(std::string_view spn, std::string_view proto, std::string_view endpoint);

/// True for the per-service chain prefixes kube-proxy deletes when stale.
bool is_service_chain(std::string_view chain);

}  // namespace kpc::iptables
