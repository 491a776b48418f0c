// SHA-256 (FIPS 180-4) and RFC 4648 base32, for kube-proxy's chain names
// (KUBE-SVC-<first 16 base32 chars of sha256(...)>). Small and dependency-free.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kpc {

std::array<uint8_t, 32> sha256(std::string_view data);
/// Standard base32 alphabet A-Z2-7, with '=' padding.
std::string base32(const uint8_t* data, size_t len);

}  // namespace kpc
