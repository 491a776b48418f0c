// A packet class: a set of first packets of connections, as a product of one
// set per field kube-proxy's rules test (a "cube"). Each mode's explorer (the
// iptables engine, verifier/symbolic; the nft one, verifier/nft_sym) splits classes
// at every rule whose matches cut them, so that every packet of a leaf class takes
// the same path and meets the same fate. The fields are the packet's, not a rule
// language's: the classes of both modes are one kind (issue 16 §1).
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
#include <string>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/sem/range_set.h"
#include "verifier/sem/universe.h"

namespace kpc::verifier::sem {

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
  /// !intersect(o).empty(universe), without building the intersection.
  bool overlaps(const ClientSet& o, uint32_t universe) const;
  ClientSet subtract(const ClientSet& o) const;
  uint32_t first(uint32_t universe) const;  ///< prefers 0 (a new client)
  friend bool operator==(const ClientSet&, const ClientSet&) = default;
};

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
  /// !intersect(o).empty(u), field by field without building the intersection (the
  /// comparison asks it of every leaf for every witness: no allocation, cheapest fields first).
  bool overlaps(const PacketClass& o, const Universe& u) const;
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

}  // namespace kpc::verifier::sem
