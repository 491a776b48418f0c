// The one place that decides which back end compiles a snapshot: what the user asked
// (--backend, --family) or, when nothing was asked, the snapshot's
// KubeProxyConfiguration.mode, as kube-proxy picks its proxier on a node.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "compiler/model/objects.h"
#include "compiler/support/diag.h"

namespace kpc {

enum class BackendKind { IPTables, NFTables, FastPath, IPVS };
const char* backend_kind_name(BackendKind k);  ///< "iptables", "nftables", "fastpath", "ipvs"

struct Target {
  BackendKind kind = BackendKind::IPTables;
  IPFamily family = IPFamily::V4;
  friend bool operator==(const Target&, const Target&) = default;
};

/// The names --backend accepts, for help texts and did-you-mean.
constexpr const char* kBackendNames[] = {"iptables", "ip6tables", "nftables", "fastpath", "ipvs"};

/// --backend NAME [--family F]: "ip6tables" is iptables for IPv6 (and contradicts --family ipv4).
/// Unknown names and contradictions return nullopt with *error set.
std::optional<Target> parse_backend(std::string_view name, std::optional<IPFamily> family, std::string* error);
/// "ipv4" / "ipv6".
std::optional<IPFamily> parse_family(std::string_view name);

/// The back end the node runs for `family` when none is named: KubeProxyConfiguration.mode
/// (iptables when unset); ipvs is the IPVS back end (ipvsadm, ipset and iptables programs).
std::optional<Target> target_for_mode(const Snapshot& snap, IPFamily family, DiagSink& diags);

}  // namespace kpc
