// One small interface between the cross-mode comparison and a mode's concrete tracer
// (issue 16 §4). A front end wraps one program of one kind (an iptables state, an nft state,
// later an IPVS table) and answers three questions: which packets does the program name
// (cut_points), what happens to one packet (trace: an exact mode-neutral Distribution, see
// outcome.h), and what does the program say about the node (facts: used by the known
// differences). The comparison (compare.h) never looks inside a program.
//
// This is an exhaustive check over representative packets (packet_space.h), not a per-class
// proof: the symbolic front ends (verifier/nft_sym) are to replace the enumeration.
//
// To add a front end (e.g. IPVS): derive from ConcreteFrontend, fill PacketSpace with every
// destination your program names in cut_points (use the add_* helpers), translate a Packet
// into your tracer's packet (remembered_endpoint: the "ip:port" of the endpoint the client
// is remembered for, resolve it to your affinity keys), and map your tracer's outcomes onto
// cross::Outcome with the spelling rules of outcome.h. Set Facts where your mode has them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/support/net.h"
#include "verifier/cross/outcome.h"

namespace kpc::verifier::ipset {
class Table;
}
namespace kpc::verifier::nft {
class NftState;
}
namespace kpc::verifier {
struct RulesetState;
}

namespace kpc::verifier::cross {

/// What kind of destination a packet of the space is (why it is in the space).
enum class DestKind : uint8_t {
  Service,          ///< a ClusterIP / external IP / load-balancer IP with a port a program names
  ServiceOtherPort, ///< such an address with a port no program names for it
  NodePort,         ///< a NodePort on one of the node's addresses
  LocalhostNodePort,///< a NodePort on 127.0.0.1 (IPv4)
  Endpoint,         ///< an endpoint a program DNATs to, addressed directly
  ServiceRange,     ///< an unallocated address inside a service CIDR a program names
  Unnamed,          ///< an address and port no program names
};
const char* dest_kind_name(DestKind k);

/// Where the packet comes from.
enum class SourceKind : uint8_t { Pod, External, Node, Hairpin, Localhost };
const char* source_kind_name(SourceKind k);

/// One mode-neutral packet (the first packet of a connection unless ctstate says otherwise).
struct Packet {
  IPAddr src, dst;
  uint8_t proto = trace::kProtoTCP;
  uint16_t sport = 40000;
  uint16_t dport = 0;
  trace::Origin origin = trace::Origin::External;
  std::string in_iface;     ///< "" for node-originated packets
  uint32_t ctstate = 2;     ///< ir::CtStateBits: NEW 2, ESTABLISHED 4, INVALID 1
  /// Session affinity: "" a new client; else the "ip:port" of the endpoint the client is
  /// remembered for (each front end resolves it to its own affinity lists / sets).
  std::string remembered_endpoint;
  uint32_t remembered_age = 0;  ///< seconds since the remembered client was last seen
  uint32_t mark = 0;            ///< the mark the packet arrives with
  std::string out_iface;        ///< the interface routing sends it out of ("" not given)
  DestKind dest_kind = DestKind::Unnamed;
  SourceKind source_kind = SourceKind::External;
  std::string label;        ///< the service a program names for this destination ("" none)
  /// "tcp 10.96.0.10:53 from pod 10.244.0.250, new, new client".
  std::string text() const;
};

/// What a program says about the node, for the known differences (known_differences.h).
struct Facts {
  /// Addresses that accept NodePorts when the program restricts them (nft: the nodeport-ips
  /// set; iptables: KUBE-NODEPORTS jumps with -d); nullopt = every local address.
  std::optional<std::vector<IPAddr>> nodeport_addresses;
  bool localhost_nodeports = false;  ///< iptables: route_localnet NodePorts on 127.0.0.0/8
  std::vector<CIDR> service_cidrs;   ///< nft: "Drop traffic to unallocated ClusterIPs"
  bool drops_invalid = false;        ///< iptables: KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
  std::vector<IPAddr> cluster_ips;   ///< ipvs: the addresses of the KUBE-CLUSTER-IP set (ClusterIPs), sorted, unique
  /// iptables: KUBE-FIREWALL's "block incoming localnet connections" DROP (-d 127.0.0.0/8 ! -s 127.0.0.0/8).
  bool blocks_localnet = false;
  /// iptables: the bits KUBE-MARK-MASQ ors into the mark (kube-proxy's masquerade mark), 0 if none.
  uint32_t masquerade_mark = 0;
  /// iptables: KUBE-FORWARD accepts packets carrying the masquerade mark ("kubernetes forwarding rules").
  bool forward_accepts_marked = false;
};

using Dest = std::tuple<IPAddr, uint8_t, uint16_t>;  ///< address, protocol, port

/// Every destination the programs of a comparison name (filled by each front end's
/// cut_points); packet_space.h turns it into packets.
struct PacketSpace {
  IPFamily family = IPFamily::V4;
  std::vector<IPAddr> local_addresses;  ///< the node's addresses (given by the caller)
  std::set<Dest> services;
  std::set<std::pair<uint8_t, uint16_t>> nodeports;
  std::set<Dest> endpoints;
  std::vector<CIDR> pod_cidrs;      ///< the cluster CIDR (the masquerade rules' ! -s / saddr !=)
  std::vector<CIDR> service_cidrs;
  std::map<Dest, std::string> labels;  ///< service named for a destination
  /// Only first packets of connections (no ESTABLISHED / INVALID ones): set by a front end whose
  /// later packets depend on state its program does not hold (IPVS: its connection table, which
  /// ip_vs_conn_in_get consults before any virtual server). The report says so (coverage).
  bool first_packets_only = false;

  void add_service(const IPAddr& a, uint8_t proto, uint16_t port, const std::string& label = "");
  void add_nodeport(uint8_t proto, uint16_t port, const std::string& label = "");
  void add_endpoint(const IPAddr& a, uint8_t proto, uint16_t port);
};

class ConcreteFrontend {
 public:
  virtual ~ConcreteFrontend() = default;
  /// "iptables", "nftables", "ipvs".
  virtual std::string backend() const = 0;
  /// Adds every destination the program names.
  virtual void cut_points(PacketSpace& space) const = 0;
  /// The packet's exact outcome distribution.
  virtual Distribution trace(const Packet& packet) const = 0;
  /// What the program says about the node.
  virtual Facts facts() const { return {}; }
  /// The service a destination belongs to when no outcome names one ("" if none).
  virtual std::string service_of(const Packet& packet) const { return packet.label; }
};

/// iptables: a state with kube-proxy's jumps in place (trace::add_kube_proxy_jumps), ipsets optional.
std::unique_ptr<ConcreteFrontend> make_iptables_frontend(const RulesetState& state,
                                                         std::vector<IPAddr> local_addresses,
                                                         const ipset::Table* ipsets = nullptr);
/// nftables: numgen shares nominal 1/N (kernel_numgen false) or the kernel's split.
std::unique_ptr<ConcreteFrontend> make_nft_frontend(const nft::NftState& state, IPFamily family,
                                                    std::vector<IPAddr> local_addresses,
                                                    bool kernel_numgen = false);

}  // namespace kpc::verifier::cross
