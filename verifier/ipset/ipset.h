// ipsets as `ipset save` prints them (issue 12, part 3): what `-m set --match-set NAME
// FLAGS` means for a packet on an IPVS-mode or Calico node.
//
// A set is a list of entries over its type's dimensions: addresses (hash:ip, hash:net,
// bitmap:ip; the ip/net parts of the combined types), protocol:port (hash:*,port*),
// or a port alone (bitmap:port). A match takes dimension k from the packet's source or
// destination as the k-th flag says. hash:net's `nomatch` entries are honoured the
// kernel's way: the most specific matching prefix decides. list:set matches when a
// member set matches (in order, with the same flags). Types and options beyond these
// (marks, interfaces, MACs, nomatch in multi-dimensional types, timeouts that expired,
// counters) are reported as not modelled, and the match stays unknown.
//
// Sets are read as the node has them: `ipset save` output of the same moment as the
// iptables-save dump they go with.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/support/net.h"

namespace kpc::verifier::ipset {

using u128 = unsigned __int128;

enum class DimKind : uint8_t { Addr, ProtoPort, Port };

struct Range {
  u128 lo = 0, hi = 0;
};

struct Entry {
  std::vector<Range> dims;  ///< per dimension: address interval, or port interval (ProtoPort: protocol in proto)
  uint8_t proto = 0;        ///< ProtoPort: the protocol number (6, 17, 132, ...)
  bool nomatch = false;
  uint8_t prefix = 0;       ///< hash:net: the prefix length (nomatch ordering)
};

struct Set {
  std::string name, type;
  IPFamily family = IPFamily::V4;
  bool any_family = false;  ///< bitmap:port, list:set: no family (NFPROTO_UNSPEC), both match
  std::vector<DimKind> dims;
  std::vector<Entry> entries;
  std::vector<std::string> members;  ///< list:set
  std::string unmodelled;            ///< non-empty: why a match on this set stays unknown
  /// When every entry's first dimension is one address (hash:ip, hash:ip,port, ... — IPVS mode's
  /// KUBE-CLUSTER-IP holds one per Service): the entries by that address, positions ascending,
  /// so a match reads only the entries that can hold the packet (parse_save builds it; a match
  /// falls back to the scan when the entries changed since).
  struct U128Hash {
    size_t operator()(u128 v) const { return std::hash<uint64_t>()(uint64_t(v) ^ uint64_t(v >> 64) * 0x9E3779B97F4A7C15ull); }
  };
  std::unordered_map<u128, std::vector<uint32_t>, U128Hash> by_first_address;
  size_t indexed_entries = 0;  ///< entries.size() when by_first_address was built; 0: no index
};

struct Table {
  std::map<std::string, Set> sets;
  const Set* find(std::string_view name) const;
};

/// Reads `ipset save` output. False with *error ("LINE: message") on text that is not
/// ipset's (unknown command, a set added to before it was created, bad element).
bool parse_save(std::string_view text, Table* out, std::string* error);

/// The packet fields a match reads.
struct PacketFields {
  u128 src = 0, dst = 0;
  IPFamily family = IPFamily::V4;
  uint8_t proto = 0;
  std::optional<uint16_t> sport;
  uint16_t dport = 0;
};

/// Whether the packet is in set `name` with flags ("src,dst"): true/false, or nullopt
/// with *why when the model cannot say (set unknown or not modelled, family mismatch,
/// a source port needed but not given).
std::optional<bool> match(const Table& t, std::string_view name, std::string_view flags, const PacketFields& p,
                          std::string* why);

/// The flags of a match as booleans: true = src, per dimension (at most 6).
std::vector<bool> parse_flags(std::string_view flags);

/// The sets a match reaches (the set, and list:set members, recursively), for callers
/// that need every entry (the symbolic engine's atoms). Unknown names are skipped.
std::vector<const Set*> reached(const Table& t, std::string_view name);

}  // namespace kpc::verifier::ipset
