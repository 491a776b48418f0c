// The universe of a comparison: what the front ends of both sides share, whatever their
// modes (issue 16 §1) — the family and its address range, the node's local addresses, the
// destination atoms start classes are cut along, and the symbol tables leaves refer to
// (interfaces, bridge ports, affinity keys, predicates, Services).
//
// node_universe gives the part no program contributes (loopback and the node's addresses);
// each front end then adds the cut points and names of its programs (symbolic::build_universe
// for iptables states, nft_sym::add_to_universe for nft ones), so that two programs of a
// comparison, of one mode or two, explore the same atoms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/ipset/ipset.h"
#include "verifier/sem/range_set.h"

namespace kpc::verifier::sem {

/// What both sides of a comparison share: the family, the node's local addresses, the
/// atoms the start classes are cut along and the symbol tables.
struct Universe {
  IPFamily family = IPFamily::V4;
  u128 addr_max = 0xffffffffu;
  AddrSet local;                     ///< addrtype LOCAL / fib daddr type local (node addresses + loopback)
  std::vector<std::string> ifaces;   ///< interface atoms (a representative name each)
  /// Bridge-port atoms of -m physdev: [0] = "" (no port), then a representative name each.
  std::vector<std::string> bridge_ports = {""};
  std::vector<std::string> affinity_keys = {"(new client)"};  ///< id -> canonical key
  std::vector<u128> dst_cuts;        ///< sorted starts of the destination atoms (first is 0)
  std::unordered_map<std::string, uint32_t> affinity_index;  ///< key -> id (ids 1...)
  /// Keys that name one client record of another key (affinity_id interns the other): two
  /// programs of different modes remember the same client ("this client keeps going to
  /// ns/svc:port's endpoint ip:port") in records each names its own way. Set before any
  /// front end interns its keys.
  std::unordered_map<std::string, std::string> affinity_alias;
  std::vector<uint32_t> age_cuts;    ///< sorted distinct affinity timeouts in seconds (at most 63)
  const ipset::Table* ipsets = nullptr;  ///< the node's ipsets (`--ipsets`): -m set is modelled
  /// Unknown-but-deterministic tests (PacketClass::pred_*), at most 64: what each says.
  std::vector<std::string> preds;
  std::unordered_map<std::string, uint32_t> pred_index;  ///< test + where it stands -> bit
  /// Services named on the leaves' paths ("ns/name:port"), id 0 = none: the leaves' attribution.
  std::vector<std::string> services = {""};
  std::unordered_map<std::string, uint32_t> service_index;

  size_t atom_count() const { return dst_cuts.size(); }
  std::pair<u128, u128> atom(size_t i) const {
    return {dst_cuts[i], i + 1 < dst_cuts.size() ? dst_cuts[i + 1] - 1 : addr_max};
  }
  size_t atom_of(u128 a) const;  ///< the atom holding address a
  uint32_t affinity_id(const std::string& key);  ///< interns
  uint32_t service_id(const std::string& name);  ///< interns ("" -> 0)
  /// The bit of a predicate (interned); nullopt beyond 64.
  std::optional<unsigned> pred_bit(const std::string& key, const std::string& description);
  uint64_t all_preds() const { return preds.size() >= 64 ? ~uint64_t(0) : (uint64_t(1) << preds.size()) - 1; }
  unsigned age_buckets() const { return static_cast<unsigned>(age_cuts.size()) + 1; }
  /// The buckets whose ages are all below `seconds` (every bucket for 0); nullopt if
  /// `seconds` is not a cut (more distinct values than the engine tracks).
  std::optional<SmallSet> ages_below(uint32_t seconds) const;
  unsigned age_bucket_of(uint32_t age) const;
  uint32_t age_bucket_start(unsigned bucket) const { return bucket == 0 ? 0 : age_cuts[bucket - 1]; }
};

u128 addr_value(const IPAddr& a);
IPAddr addr_from_value(u128 v, IPFamily f);
std::pair<u128, u128> cidr_range(const CIDR& c);

/// A universe of the family with no program's contribution yet: its address range, loopback
/// and the node's addresses of the family as local, each a destination atom of its own (cut
/// at its first and past its last address), no interface or bridge-port atom.
Universe node_universe(IPFamily family, const std::vector<IPAddr>& local_addresses);

}  // namespace kpc::verifier::sem
