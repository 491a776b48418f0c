// The node's IPVS table as ipvsadm shows it (issue 17 §2): an independent reader of
//   - `ipvsadm -S -n` (the save format, what `ipvsadm -R` loads): `-A -t|-u|--sctp-service
//     ADDR:PORT -s SCHED [-p [TIMEOUT]] [-b FLAGS]` and `-a ... -r ADDR:PORT -g|-i|-m -w W`;
//   - change scripts for `ipvsadm -R` (-A -E -D -a -e -d -C), applied with ipvsadm's
//     semantics: -E and -e reset every option not given to ipvsadm's default (scheduler wlc,
//     no persistence, weight 1, gatewaying), adding what exists or changing what does not is
//     an error (the kernel's EEXIST / ENOENT);
//   - `ipvsadm -Ln` (numeric listing): the ActiveConn and InActConn columns, the connection
//     counts kube-proxy's graceful termination reads (ActiveConn + InActConn == 0: deletable).
// Depends on std and kpc::support only: it is the oracle the compiler's sync is checked against.
// Fwmark services (-f) are not modelled: kube-proxy makes none, and they are refused.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/net.h"

namespace kpc::verifier::ipvs {

enum class Proto : uint8_t { TCP, UDP, SCTP };
const char* proto_name(Proto p);  ///< "TCP", "UDP", "SCTP"

struct HostPort {
  IPAddr address;
  uint16_t port = 0;
  friend auto operator<=>(const HostPort&, const HostPort&) = default;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

enum class Forward : uint8_t { Gate, Ipip, Masq };  ///< -g (ipvsadm's default), -i, -m

struct RealServer {
  HostPort dest;
  Forward forward = Forward::Gate;
  uint32_t weight = 1;
  std::optional<uint64_t> active, inactive;  ///< from `ipvsadm -Ln`; unset: not read
  /// ActiveConn + InActConn, or nullopt when the counts were not read.
  std::optional<uint64_t> connections() const;
};

struct ServiceKey {
  Proto proto = Proto::TCP;
  HostPort vip;
  friend auto operator<=>(const ServiceKey&, const ServiceKey&) = default;
  friend bool operator==(const ServiceKey&, const ServiceKey&) = default;
};

struct VirtualServer {
  ServiceKey key;
  std::string scheduler = "wlc";
  bool persistent = false;
  uint32_t timeout = 0;        ///< seconds, when persistent
  std::string flags;           ///< -b's argument as given ("mh-port"), "" without
  std::vector<RealServer> real_servers;  ///< in the order added
  RealServer* find(const HostPort& d);
  const RealServer* find(const HostPort& d) const;
};

struct Table {
  std::map<ServiceKey, VirtualServer> services;
  size_t real_server_count() const;
};

/// Reads `ipvsadm -S -n` output into *out (emptied first): only -A and -a lines (and blank
/// lines). False with *error = "LINE: message" on anything else.
bool parse_save(std::string_view text, Table* out, std::string* error);

/// Applies an `ipvsadm -R` script to *t, line by line, with ipvsadm's and the kernel's
/// semantics (above). False with *error = "LINE: message" at the first line that ipvsadm
/// would refuse or the kernel would fail; *t then holds the lines before it.
bool apply_script(std::string_view text, Table* t, std::string* error);

/// Reads `ipvsadm -Ln` output (the three header lines optional) and sets the counts of the
/// real servers of *t it lists. A service or real server that *t does not have, a line that
/// is not ipvsadm's, a count that is not a number: false with *error = "LINE: message".
bool read_counts(std::string_view text, Table* t, std::string* error);

/// Parses "10.0.0.1:80" / "[fd00::1]:80" as ipvsadm -n prints an address and port.
std::optional<HostPort> parse_host_port(std::string_view s);

}  // namespace kpc::verifier::ipvs
