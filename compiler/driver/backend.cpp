#include "compiler/driver/backend.h"

namespace kpc {

const char* backend_kind_name(BackendKind k) {
  switch (k) {
    case BackendKind::IPTables: return "iptables";
    case BackendKind::NFTables: return "nftables";
    case BackendKind::FastPath: return "fastpath";
    case BackendKind::IPVS: return "ipvs";
  }
  return "?";
}

std::optional<IPFamily> parse_family(std::string_view name) {
  if (name == "ipv4") return IPFamily::V4;
  if (name == "ipv6") return IPFamily::V6;
  return std::nullopt;
}

std::optional<Target> parse_backend(std::string_view name, std::optional<IPFamily> family, std::string* error) {
  Target t;
  t.family = family.value_or(IPFamily::V4);
  if (name == "iptables") {
    t.kind = BackendKind::IPTables;
  } else if (name == "ip6tables") {
    if (family && *family != IPFamily::V6) {
      *error = "--backend ip6tables is IPv6: it contradicts --family ipv4";
      return std::nullopt;
    }
    t = {BackendKind::IPTables, IPFamily::V6};
  } else if (name == "nftables") {
    t.kind = BackendKind::NFTables;
  } else if (name == "fastpath") {
    t.kind = BackendKind::FastPath;
  } else if (name == "ipvs") {
    t.kind = BackendKind::IPVS;
  } else {
    *error = "unknown back end \"" + std::string(name) + "\" (iptables, ip6tables, nftables, fastpath, ipvs)";
    return std::nullopt;
  }
  return t;
}

std::optional<Target> target_for_mode(const Snapshot& snap, IPFamily family, DiagSink& /*diags*/) {
  switch (snap.config.mode) {
    case ProxyMode::IPTables: return Target{BackendKind::IPTables, family};
    case ProxyMode::NFTables: return Target{BackendKind::NFTables, family};
    case ProxyMode::IPVS: return Target{BackendKind::IPVS, family};
  }
  return std::nullopt;
}

}  // namespace kpc
