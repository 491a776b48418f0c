// IP addresses and CIDRs as kube-proxy reads and prints them. Parsing is strict
// by default (what the API server accepts); "sloppy" mode additionally reads
// IPv4 parts with leading zeros as decimal, as kube-proxy's ParseIPSloppy does
// for legacy objects. Printing is Go's canonical form (IPv6 per RFC 5952).
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kpc {

enum class IPFamily : uint8_t { V4, V6 };

inline const char* family_name(IPFamily f) { return f == IPFamily::V4 ? "IPv4" : "IPv6"; }

struct IPAddr {
  IPFamily family = IPFamily::V4;
  std::array<uint8_t, 16> bytes{};  ///< IPv4 uses bytes[0..3]

  struct ParseInfo {
    bool leading_zero = false;  ///< an IPv4 part like "041" was read as decimal
  };
  /// Parses a bare address. With sloppy, leading zeros in IPv4 parts are accepted.
  /// IPv4-mapped IPv6 and zoned addresses are rejected.
  static std::optional<IPAddr> parse(std::string_view s, bool sloppy = false, ParseInfo* info = nullptr);
  static IPAddr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);

  size_t bit_length() const { return family == IPFamily::V4 ? 32 : 128; }
  bool bit(size_t i) const { return (bytes[i / 8] >> (7 - i % 8)) & 1; }
  bool is_loopback() const;
  bool is_unspecified() const;
  std::string str() const;
  /// The longest text str() can produce ("ffff:...:ffff", 39 characters).
  static constexpr size_t kMaxText = 39;
  /// Writes str()'s text to out (at least kMaxText bytes, no NUL) and returns its length.
  /// The compiler prints ~200k addresses per sync; this spares a string per address.
  size_t format(char* out) const;
  void append_to(std::string& out) const;
  friend auto operator<=>(const IPAddr&, const IPAddr&) = default;
  friend bool operator==(const IPAddr&, const IPAddr&) = default;
};

struct CIDR {
  IPAddr addr;     ///< as written (may have host bits set); use masked() for the network
  uint8_t len = 0;

  /// Parses "a.b.c.d/n" or "x::/n". A bare address is rejected unless allow_bare (then /32 or /128).
  static std::optional<CIDR> parse(std::string_view s, bool sloppy = false, IPAddr::ParseInfo* info = nullptr,
                                   bool allow_bare = false);
  static CIDR host(const IPAddr& a) { return CIDR{a, static_cast<uint8_t>(a.bit_length())}; }
  IPFamily family() const { return addr.family; }
  CIDR masked() const;
  bool contains(const IPAddr& a) const;
  bool is_host() const { return len == addr.bit_length(); }
  /// "10.0.0.0/8" (masked network, as kube-proxy prints CIDRs).
  std::string str() const;
  void append_to(std::string& out) const;  ///< appends str()
  friend auto operator<=>(const CIDR&, const CIDR&) = default;
  friend bool operator==(const CIDR&, const CIDR&) = default;
};

/// Why the API server refuses an IP as an endpoint or external IP (ValidateNonSpecialIP):
/// unspecified, loopback, link-local unicast or link-local multicast; nullopt if acceptable.
std::optional<std::string> special_ip_reason(const IPAddr& ip);

}  // namespace kpc
