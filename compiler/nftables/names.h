// kube-proxy's nftables object names (pkg/proxy/nftables/proxier.go): per-service-port
// and per-endpoint chains and affinity sets are "<prefix><8 base32 chars of sha256>-<name>",
// the readable name kept after the hash so that `nft list` is legible.
#pragma once

#include <string>
#include <string_view>

#include "compiler/model/objects.h"

namespace kpc::nftables {

/// knftables' NameLengthMax (256) minus the longest prefix kube-proxy uses (16).
constexpr size_t kChainNameBaseLengthMax = 240;

/// hashAndTruncate: base32(sha256(name))[:8] + "-" + name, cut to 237 characters + "..."
/// when longer than kChainNameBaseLengthMax.
std::string hash_and_truncate(std::string_view name);

/// "HASH-ns/name/proto/portname" (portname may be empty).
std::string service_port_base(std::string_view ns, std::string_view name, std::string_view proto,
                              std::string_view port_name);
/// "HASH-ns/name/proto/portname__ip/port", IPv6 colons replaced by dots.
std::string endpoint_base(std::string_view ns, std::string_view name, std::string_view proto,
                          std::string_view port_name, const IPAddr& ip, int32_t port);

/// endpoint_base, appended to out without temporaries (the hot path: one per endpoint).
void append_endpoint_base(std::string& out, std::string_view ns, std::string_view name, std::string_view proto,
                          std::string_view port_name, const IPAddr& ip, int32_t port);

/// The per-service names kube-proxy derives once per service port.
struct ServicePortNames {
  std::string cluster_policy;  ///< "service-" + base
  std::string local_policy;    ///< "local-" + base
  std::string external;        ///< "external-" + base
  std::string firewall;        ///< "firewall-" + base
};
ServicePortNames service_port_names(std::string_view ns, std::string_view name, std::string_view proto,
                                    std::string_view port_name);

/// Text kube-proxy writes unquoted into nft commands (interface names after `iifname`,
/// flowtable devices) is safe only when nft reads it as one word: letters, digits, '-', '_', '.'.
bool is_nft_word(std::string_view s);

/// kube-proxy recognises the chains it may flush and delete as stale by a "/" in the name:
/// every per-service chain has one, no fixed chain does.
inline bool is_service_chain(std::string_view chain) { return chain.find('/') != std::string_view::npos; }
/// Per-endpoint affinity sets, deleted at once when unused.
inline bool is_affinity_set(std::string_view set) { return set.starts_with("affinity-"); }

}  // namespace kpc::nftables
