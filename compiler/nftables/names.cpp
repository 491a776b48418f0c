#include "compiler/nftables/names.h"

#include <cctype>
#include <cstdio>

#include "compiler/support/sha256.h"

namespace kpc::nftables {

std::string hash_and_truncate(std::string_view name) {
  auto digest = sha256(name);
  // Eight base32 characters are exactly the first five bytes of the digest.
  std::string out;
  out.reserve(9 + name.size());
  out = base32(digest.data(), 5);
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

void append_endpoint_base(std::string& out, std::string_view ns, std::string_view name, std::string_view proto,
                          std::string_view port_name, const IPAddr& ip, int32_t port) {
  thread_local std::string readable;
  readable.clear();
  readable.append(ns).append("/").append(name).append("/").append(proto).append("/").append(port_name).append("__");
  size_t ip_at = readable.size();
  ip.append_to(readable);
  for (size_t i = ip_at; i < readable.size(); ++i)
    if (readable[i] == ':') readable[i] = '.';
  readable += '/';
  char digits[16];
  int n = std::snprintf(digits, sizeof digits, "%d", port);
  readable.append(digits, static_cast<size_t>(n));
  auto digest = sha256(readable);
  size_t start = out.size();
  out += base32(digest.data(), 5);
  out += '-';
  out += readable;
  if (out.size() - start > kChainNameBaseLengthMax) {
    out.resize(start + kChainNameBaseLengthMax - 3);
    out += "...";
  }
}

bool is_nft_word(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

ServicePortNames service_port_names(std::string_view ns, std::string_view name, std::string_view proto,
                                    std::string_view port_name) {
  std::string base = service_port_base(ns, name, proto, port_name);
  return {"service-" + base, "local-" + base, "external-" + base, "firewall-" + base};
}

}  // namespace kpc::nftables
