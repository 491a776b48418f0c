#include "compiler/support/net.h"

#include <algorithm>
#include <charconv>
#include <iterator>

namespace kpc {
namespace {

// Reads a run of decimal digits at s[*i] (at least one) as Go 1.16's dtoi does: any
// number of digits, the value saturating at `cap` + 1. Sets *leading_zero for "0"-prefixed
// runs longer than one digit.
bool read_decimal(std::string_view s, size_t* i, unsigned cap, unsigned* value, bool* leading_zero) {
  size_t start = *i;
  unsigned v = 0;
  while (*i < s.size() && s[*i] >= '0' && s[*i] <= '9') {
    v = v * 10 + static_cast<unsigned>(s[(*i)++] - '0');
    if (v > cap) v = cap + 1;  // saturate: too big whatever follows
  }
  if (*i == start) return false;
  *leading_zero = *i - start > 1 && s[start] == '0';
  *value = v;
  return true;
}

// Parses dotted-quad IPv4 into out[0..3]. Strict: 1-3 digits, no leading zeros. Sloppy
// (kube-proxy's ParseIPSloppy, Go 1.16 parseIPv4 + dtoi): any number of digits per part,
// read as decimal, as long as the value is at most 255 ("10.0.0.0010" is 10.0.0.10).
bool parse_v4(std::string_view s, bool sloppy, uint8_t* out, bool* leading_zero) {
  int part = 0;
  size_t i = 0;
  while (part < 4) {
    unsigned v = 0;
    bool lz = false;
    if (!read_decimal(s, &i, 255, &v, &lz) || v > 255) return false;
    if (lz) {
      if (!sloppy) return false;
      *leading_zero = true;
    }
    out[part++] = static_cast<uint8_t>(v);
    if (part < 4) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
  }
  return i == s.size();
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_v6(std::string_view s, uint8_t* out) {
  uint16_t groups[8] = {};
  int n = 0, gap = -1;
  size_t i = 0;
  if (s.substr(0, 2) == "::") {
    gap = 0;
    i = 2;
    if (i == s.size()) goto done;
  } else if (!s.empty() && s[0] == ':') {
    return false;
  }
  for (;;) {
    if (n == 8) return false;
    size_t start = i;
    unsigned v = 0;
    while (i < s.size() && hexval(s[i]) >= 0 && i - start < 5) v = v * 16 + static_cast<unsigned>(hexval(s[i++]));
    if (i == start || i - start > 4) return false;
    if (i < s.size() && s[i] == '.') return false;  // embedded IPv4 (mapped/compat): rejected
    groups[n++] = static_cast<uint16_t>(v);
    if (i == s.size()) break;
    if (s[i] != ':') return false;
    ++i;
    if (i < s.size() && s[i] == ':') {
      if (gap >= 0) return false;
      gap = n;
      ++i;
      if (i == s.size()) break;
    } else if (i == s.size()) {
      return false;
    }
  }
done:
  if (gap < 0 && n != 8) return false;
  if (gap >= 0 && n == 8) return false;
  {
    uint16_t full[8] = {};
    if (gap < 0) {
      for (int k = 0; k < 8; ++k) full[k] = groups[k];
    } else {
      for (int k = 0; k < gap; ++k) full[k] = groups[k];
      int tail = n - gap;
      for (int k = 0; k < tail; ++k) full[8 - tail + k] = groups[gap + k];
    }
    for (int k = 0; k < 8; ++k) {
      out[2 * k] = static_cast<uint8_t>(full[k] >> 8);
      out[2 * k + 1] = static_cast<uint8_t>(full[k] & 0xFF);
    }
  }
  return true;
}

}  // namespace

std::optional<IPAddr> IPAddr::parse(std::string_view s, bool sloppy, ParseInfo* info) {
  IPAddr a;
  if (s.find(':') != std::string_view::npos) {
    a.family = IPFamily::V6;
    if (!parse_v6(s, a.bytes.data())) return std::nullopt;
    // IPv4-mapped (::ffff:0:0/96), however spelled ("::ffff:a00:1" too): Go's To4() is
    // non-nil for these, so Kubernetes treats them as IPv4, never as IPv6 addresses.
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    if (std::equal(std::begin(kMapped), std::end(kMapped), a.bytes.begin())) return std::nullopt;
    return a;
  }
  bool lz = false;
  if (!parse_v4(s, sloppy, a.bytes.data(), &lz)) return std::nullopt;
  if (info) info->leading_zero = lz;
  return a;
}

IPAddr IPAddr::v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  IPAddr ip;
  ip.bytes[0] = a, ip.bytes[1] = b, ip.bytes[2] = c, ip.bytes[3] = d;
  return ip;
}

bool IPAddr::is_loopback() const {
  if (family == IPFamily::V4) return bytes[0] == 127;
  for (int i = 0; i < 15; ++i)
    if (bytes[i]) return false;
  return bytes[15] == 1;
}

bool IPAddr::is_unspecified() const {
  for (size_t i = 0; i < bit_length() / 8; ++i)
    if (bytes[i]) return false;
  return true;
}

size_t IPAddr::format(char* out) const {
  char* p = out;
  if (family == IPFamily::V4) {
    for (int i = 0; i < 4; ++i) {
      unsigned v = bytes[i];
      if (v >= 100) *p++ = static_cast<char>('0' + v / 100);
      if (v >= 10) *p++ = static_cast<char>('0' + v / 10 % 10);
      *p++ = static_cast<char>('0' + v % 10);
      if (i < 3) *p++ = '.';
    }
    return static_cast<size_t>(p - out);
  }
  uint16_t g[8];
  for (int k = 0; k < 8; ++k) g[k] = static_cast<uint16_t>(bytes[2 * k] << 8 | bytes[2 * k + 1]);
  // Longest run of >= 2 zero groups becomes "::" (first one on ties), as Go and RFC 5952 do.
  int best = -1, best_len = 1;
  for (int k = 0; k < 8;) {
    if (g[k] != 0) {
      ++k;
      continue;
    }
    int e = k;
    while (e < 8 && g[e] == 0) ++e;
    if (e - k > best_len) best = k, best_len = e - k;
    k = e;
  }
  static const char kHex[] = "0123456789abcdef";
  for (int k = 0; k < 8; ++k) {
    if (k == best) {
      *p++ = ':';
      *p++ = ':';
      k += best_len - 1;
      continue;
    }
    if (p != out && p[-1] != ':') *p++ = ':';
    // Lower-case hex without leading zeros ("%x").
    bool started = false;
    for (int shift = 12; shift >= 0; shift -= 4) {
      unsigned nibble = (g[k] >> shift) & 0xF;
      if (nibble || started || shift == 0) {
        *p++ = kHex[nibble];
        started = true;
      }
    }
  }
  return static_cast<size_t>(p - out);
}

std::string IPAddr::str() const {
  char buf[kMaxText];
  return std::string(buf, format(buf));
}

void IPAddr::append_to(std::string& out) const {
  char buf[kMaxText];
  out.append(buf, format(buf));
}

std::optional<CIDR> CIDR::parse(std::string_view s, bool sloppy, IPAddr::ParseInfo* info, bool allow_bare) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) {
    if (!allow_bare) return std::nullopt;
    auto a = IPAddr::parse(s, sloppy, info);
    if (!a) return std::nullopt;
    return CIDR::host(*a);
  }
  auto a = IPAddr::parse(s.substr(0, slash), sloppy, info);
  if (!a) return std::nullopt;
  // The prefix length, like the IPv4 parts: sloppy mode (Go 1.16 ParseCIDR, dtoi) reads any
  // number of digits with leading zeros as decimal.
  std::string_view len = s.substr(slash + 1);
  size_t i = 0;
  unsigned v = 0;
  bool lz = false;
  if (!read_decimal(len, &i, 128, &v, &lz) || i != len.size()) return std::nullopt;
  if (lz) {
    if (!sloppy) return std::nullopt;
    if (info) info->leading_zero = true;
  }
  if (v > a->bit_length()) return std::nullopt;
  return CIDR{*a, static_cast<uint8_t>(v)};
}

CIDR CIDR::masked() const {
  CIDR c = *this;
  for (size_t i = 0; i < 16; ++i) {
    size_t bit0 = i * 8;
    if (bit0 >= len) c.addr.bytes[i] = 0;
    else if (bit0 + 8 > len) c.addr.bytes[i] &= static_cast<uint8_t>(0xFF << (8 - (len - bit0)));
  }
  return c;
}

bool CIDR::contains(const IPAddr& a) const {
  if (a.family != addr.family) return false;
  for (size_t i = 0; i < len; ++i)
    if (a.bit(i) != addr.bit(i)) return false;
  return true;
}

std::optional<std::string> special_ip_reason(const IPAddr& ip) {
  const uint8_t* b = ip.bytes.data();
  if (ip.is_unspecified()) return "may not be unspecified";
  if (ip.is_loopback()) return "may not be in the loopback range (127.0.0.0/8, ::1/128)";
  bool link_local = ip.family == IPFamily::V4 ? (b[0] == 169 && b[1] == 254) : (b[0] == 0xfe && (b[1] & 0xc0) == 0x80);
  if (link_local) return "may not be in the link-local range (169.254.0.0/16, fe80::/10)";
  bool ll_multicast = ip.family == IPFamily::V4 ? (b[0] == 224 && b[1] == 0 && b[2] == 0)
                                                : (b[0] == 0xff && (b[1] & 0x0f) == 0x02);
  if (ll_multicast) return "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)";
  return std::nullopt;
}

std::string CIDR::str() const {
  std::string out;
  append_to(out);
  return out;
}

void CIDR::append_to(std::string& out) const {
  char buf[IPAddr::kMaxText + 4];
  size_t n = masked().addr.format(buf);
  buf[n++] = '/';
  auto r = std::to_chars(buf + n, buf + sizeof buf, static_cast<unsigned>(len));
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

}  // namespace kpc
