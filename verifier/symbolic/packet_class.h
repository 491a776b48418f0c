// A packet class: a set of first packets of connections, as a product of one
// set per field kube-proxy's rules test (a "cube"). The symbolic engine splits
// classes at every rule whose matches cut them, so that every packet of a leaf
// class takes the same path and meets the same fate.
//
// Fields and their domains:
//   src, dst        address intervals of the family (dst is the original destination)
//   proto           IP protocol numbers 0-255
//   sport, dport    0-65535
//   ct              conntrack state of the packet: one of INVALID, NEW, ESTABLISHED,
//                   RELATED, UNTRACKED combined with the virtual SNAT/DNAT bits of its
//                   connection (NEW packets carry none: their NAT is decided here)
//   mark            the mark the packet arrives with: bits known (mask) and their values
//   in_iface        interface atoms (Universe::ifaces) it arrives on (arriving packets)
//   out_iface       interface atoms routing sends it out of
//   bridge_in       bridge-port atoms (Universe::bridge_ports) it entered through; atom 0 =
//                   not through a bridge port (no bridge information: trace/physdev.h)
//   bridge_out      bridge-port atoms it is bridged to in FORWARD/POSTROUTING; atom 0 = routed
//   client          session-affinity state: a new client (id 0), or a client that one
//                   `recent` list remembers (ids of Universe::affinity_keys)
//   preds           truth values of tests the model cannot evaluate but that are fixed
//                   functions of the packet where they stand (an ipset lookup, TCP flags,
//                   a bridge port ...): bits known (pred_known) and their values; each bit
//                   is one such test at one point of the traversal (Universe::preds), so
//                   both rule sets meeting the same test at the same point share it and
//                   identical unknowns compare equal (issue 12)
//   age             for a remembered client, how long ago it was last seen: buckets
//                   [0, c1), [c1, c2), ... [ck, inf) cut at every `recent --seconds` value
//                   (Universe::age_cuts), so `--seconds S` decides whole buckets
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/ipset/ipset.h"
#include "verifier/symbolic/range_set.h"

namespace kpc::verifier::symbolic {

/// Conntrack combinations: base state x {plain, SNAT, DNAT, SNAT+DNAT}.
constexpr unsigned kCtBases = 5;  ///< INVALID, NEW, ESTABLISHED, RELATED, UNTRACKED
constexpr unsigned kCtCombos = kCtBases * 4;
uint32_t ct_combo_bits(unsigned combo);  ///< ir::CtStateBits of a combination
SmallSet ct_all_initial();                ///< NEW without NAT bits, every other base with any
SmallSet ct_new_only();                   ///< the NEW combinations

struct ProtoSet {
  uint64_t w[4] = {0, 0, 0, 0};
  static ProtoSet all() { return ProtoSet{{~0ull, ~0ull, ~0ull, ~0ull}}; }
  static ProtoSet of(unsigned p) {
    ProtoSet s;
    s.w[p / 64] = 1ull << (p % 64);
    return s;
  }
  bool has(unsigned p) const { return (w[p / 64] >> (p % 64)) & 1; }
  bool empty() const { return !(w[0] | w[1] | w[2] | w[3]); }
  bool full() const { return (w[0] & w[1] & w[2] & w[3]) == ~0ull; }
  ProtoSet operator&(const ProtoSet& o) const { return {{w[0] & o.w[0], w[1] & o.w[1], w[2] & o.w[2], w[3] & o.w[3]}}; }
  ProtoSet minus(const ProtoSet& o) const { return {{w[0] & ~o.w[0], w[1] & ~o.w[1], w[2] & ~o.w[2], w[3] & ~o.w[3]}}; }
  unsigned first() const;
  friend bool operator==(const ProtoSet&, const ProtoSet&) = default;
};

/// Affinity-client set: id 0 = a new client; others = remembered by that key.
struct ClientSet {
  bool complement = true;    ///< true: every id except `ids`
  std::vector<uint32_t> ids;  ///< sorted
  static ClientSet all() { return ClientSet{}; }
  static ClientSet only(uint32_t id) { return ClientSet{false, {id}}; }
  bool has(uint32_t id) const;
  bool empty(uint32_t universe) const;  ///< universe = number of ids
  ClientSet with_only(uint32_t id) const;   ///< this ∩ {id}
  ClientSet without(uint32_t id) const;     ///< this \ {id}
  ClientSet intersect(const ClientSet& o) const;
  ClientSet subtract(const ClientSet& o) const;
  uint32_t first(uint32_t universe) const;  ///< prefers 0 (a new client)
  friend bool operator==(const ClientSet&, const ClientSet&) = default;
};

/// What both rule sets of a comparison share: the family, the node's local
/// addresses, the atoms the start classes are cut along and the symbol tables.
struct Universe {
  IPFamily family = IPFamily::V4;
  u128 addr_max = 0xffffffffu;
  AddrSet local;                     ///< addrtype LOCAL (node addresses + loopback)
  std::vector<std::string> ifaces;   ///< interface atoms (a representative name each)
  /// Bridge-port atoms of -m physdev: [0] = "" (no port), then a representative name each.
  std::vector<std::string> bridge_ports = {""};
  std::vector<std::string> affinity_keys = {"(new client)"};  ///< id -> canonical key
  std::vector<u128> dst_cuts;        ///< sorted starts of the destination atoms (first is 0)
  std::unordered_map<std::string, uint32_t> affinity_index;  ///< key -> id (ids 1...)
  std::vector<uint32_t> age_cuts;    ///< sorted distinct `recent --seconds` values (at most 63)
  const ipset::Table* ipsets = nullptr;  ///< the node's ipsets (`--ipsets`): -m set is modelled
  /// Unknown-but-deterministic tests (PacketClass::pred_*), at most 64: what each says.
  std::vector<std::string> preds;
  std::unordered_map<std::string, uint32_t> pred_index;  ///< test + where it stands -> bit
  /// Services named by rule comments ("ns/name:port"), id 0 = none: the leaves' attribution.
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

struct PacketClass {
  AddrSet src, dst;
  ProtoSet proto = ProtoSet::all();
  PortSet sport = PortSet::range(0, 65535), dport = PortSet::range(0, 65535);
  SmallSet ct;
  uint32_t mark_known = 0, mark_value = 0;
  SmallSet in_iface, out_iface;
  SmallSet bridge_in, bridge_out;
  ClientSet client;
  SmallSet age;
  uint64_t pred_known = 0, pred_value = 0;

  static PacketClass everything(const Universe& u);
  bool empty(const Universe& u) const;
  PacketClass intersect(const PacketClass& o) const;  ///< may be empty
  /// this \ o as disjoint classes (none if this ⊆ o).
  std::vector<PacketClass> subtract(const PacketClass& o, const Universe& u) const;
  bool overlaps(const PacketClass& o, const Universe& u) const { return !intersect(o).empty(u); }
  friend bool operator==(const PacketClass&, const PacketClass&) = default;
  /// Canonical bytes (for hashing / sorting leaves).
  std::string key() const;
};

/// One concrete packet of a class, chosen to read naturally (tcp before udp, a
/// new client, conntrack NEW, mark bits 0 where free, ...).
struct Witness {
  IPAddr src, dst;
  uint8_t proto = 6;
  uint16_t sport = 0, dport = 0;
  unsigned ct_combo = 1;
  uint32_t mark = 0;
  int in_iface = -1, out_iface = -1;  ///< atom index, -1 if not constrained
  unsigned bridge_in = 0, bridge_out = 0;  ///< bridge-port atoms (0: none / routed)
  uint32_t client = 0;
  unsigned age_bucket = 0;  ///< a remembered client's age bucket (Universe::age_cuts)
  uint64_t preds = 0;       ///< values of the predicates (those the class leaves open: false)
};
Witness pick_witness(const PacketClass& c, const Universe& u);

/// "tcp dport 80, src not in 10.0.0.1/32, ct NEW" — the fields that are not full.
std::string describe(const PacketClass& c, const Universe& u);

}  // namespace kpc::verifier::symbolic
