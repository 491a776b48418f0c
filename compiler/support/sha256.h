// SHA-256 (FIPS 180-4) and RFC 4648 base32, for kube-proxy's chain names
// (KUBE-SVC-<first 16 base32 chars of sha256(...)>). Small and dependency-free.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kpc {

/// SHA-256, with the x86 SHA extensions when the CPU has them.
std::array<uint8_t, 32> sha256(std::string_view data);
/// The portable implementation (the reference the accelerated one is tested against).
std::array<uint8_t, 32> sha256_portable(std::string_view data);
/// Whether sha256() uses the CPU's SHA extensions on this machine.
bool sha256_accelerated();
/// Standard base32 alphabet A-Z2-7, with '=' padding.
std::string base32(const uint8_t* data, size_t len);

}  // namespace kpc
