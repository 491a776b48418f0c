#include "compiler/nftables/names.h"

#include "compiler/support/sha256.h"

namespace kpc::nftables {

std::string hash_and_truncate(std::string_view name) {
  auto digest = sha256(name);
  std::string out = base32(digest.data(), digest.size()).substr(0, 8);
  out += '-';
  out += name;
  if (out.size() > kChainNameBaseLengthMax) {
    out.resize(kChainNameBaseLengthMax - 3);
    out += "...";
  }
  return out;
}

std::string service_port_base(std::string_view ns, std::string_view name, std::string_view proto,
                              std::string_view port_name) {
  std::string s;
  s.reserve(ns.size() + name.size() + proto.size() + port_name.size() + 3);
  s.append(ns).append("/").append(name).append("/").append(proto).append("/").append(port_name);
  return hash_and_truncate(s);
}

std::string endpoint_base(std::string_view ns, std::string_view name, std::string_view proto,
                          std::string_view port_name, const IPAddr& ip, int32_t port) {
  std::string s;
  s.append(ns).append("/").append(name).append("/").append(proto).append("/").append(port_name).append("__");
  // Chain names may not contain ':' (nft's identifier syntax), so IPv6 addresses are written with '.'.
  for (char c : ip.str()) s += c == ':' ? '.' : c;
  s.append("/").append(std::to_string(port));
  return hash_and_truncate(s);
}

ServicePortNames service_port_names(std::string_view ns, std::string_view name, std::string_view proto,
                                    std::string_view port_name) {
  std::string base = service_port_base(ns, name, proto, port_name);
  return {"service-" + base, "local-" + base, "external-" + base, "firewall-" + base};
}

}  // namespace kpc::nftables
