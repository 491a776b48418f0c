// What kube-proxy knows about the node it runs on, for one IP family: its name,
// labels, node IP, host interface addresses, the nodePortAddresses it serves,
// the local-traffic detector and the host facts from NodeEnvironment. Shared by
// every back end (iptables now; nftables and IPVS later).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/model/objects.h"
#include "compiler/support/diag.h"

namespace kpc::proxy {

/// The local-traffic detector (pkg/proxy/util/localdetector.go) for one family.
struct LocalDetector {
  enum class Kind { None, CIDR, Bridge, InterfacePrefix } kind = Kind::None;
  CIDR cidr;          ///< Kind::CIDR
  std::string iface;  ///< Bridge: name; InterfacePrefix: prefix (the rule matches "prefix+")
  bool implemented() const { return kind != Kind::None; }
};

struct NodeContext {
  IPFamily family = IPFamily::V4;
  std::string node_name;
  std::map<std::string, std::string> node_labels;
  std::optional<IPAddr> node_ip;           ///< for the loadBalancerSourceRanges "allow from node" check
  std::vector<IPAddr> host_addresses;      ///< addresses of this family on local interfaces (incl. loopback)
  bool node_ports_match_all = true;        ///< nodePortAddresses unset / 0.0.0.0/0 / no CIDR of this family
  std::vector<CIDR> node_port_cidrs;       ///< this family's nodePortAddresses CIDRs
  bool localhost_node_ports = false;       ///< effective (IPv4, config on, loopback allowed)
  LocalDetector detector;
  bool masquerade_all = false;
  uint32_t masquerade_mark = 0x4000;
  bool random_fully = true;
  bool nfacct_counters = true;
  bool tcp_be_liberal = false;
  bool prefer_same_traffic_distribution = false;  ///< feature gate PreferSameTrafficDistribution
  const ProxyConfig* config = nullptr;

  const std::string& zone() const;
  /// Addresses the nodeport tail rules name when nodePortAddresses is not match-all.
  std::vector<IPAddr> node_port_ips() const;
};

/// The node name kube-proxy would use: hostnameOverride, else NodeEnvironment.hostname,
/// else the snapshot's only Node. Reports E0700 and returns nullopt when ambiguous.
std::optional<std::string> resolve_node_name(const Snapshot& snap, DiagSink& diags);

/// Whether two contexts are equal in every field but `config` (everything the compiler
/// reads from a context). Keep in step with the struct.
bool same_context(const NodeContext& a, const NodeContext& b);

/// Builds the context for one family. Reports E0701 if the family is impossible here.
std::optional<NodeContext> build_node_context(const Snapshot& snap, IPFamily family, DiagSink& diags);

}  // namespace kpc::proxy
