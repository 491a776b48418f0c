// The typed snapshot model: the Kubernetes objects (and kpc's own host-facts
// document) that kube-proxy reads, as plain C++ values. Only fields kube-proxy
// consumes are kept. Every object remembers where it came from: its own Pos and
// a FieldPositions table (object path -> Pos) for any field the decoder read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/net.h"
#include "compiler/support/source.h"

namespace kpc {

/// Where each decoded field of one object came from ("spec.ports[1].port" -> Pos).
class FieldPositions {
 public:
  void set(std::string path, Pos pos) { table_.emplace_back(std::move(path), pos); }
  /// The position of a field, or of its nearest recorded parent ("spec.ports[1]"), or unknown.
  Pos at(std::string_view path) const;
  size_t size() const { return table_.size(); }

 private:
  std::vector<std::pair<std::string, Pos>> table_;
};

struct ObjectMeta {
  std::string name;
  std::string ns;  ///< empty for cluster-scoped kinds
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  Pos pos;                ///< the object's first line
  FieldPositions fields;  ///< every field the decoder read
  /// "default/web" or "node-1".
  std::string key() const { return ns.empty() ? name : ns + "/" + name; }
};

enum class Protocol : uint8_t { TCP, UDP, SCTP };
const char* protocol_name(Protocol p);        ///< "TCP"
const char* protocol_lower(Protocol p);       ///< "tcp"

// ---------------------------------------------------------------- Service
enum class ServiceType : uint8_t { ClusterIP, NodePort, LoadBalancer, ExternalName };
enum class TrafficPolicy : uint8_t { Cluster, Local };
enum class IPFamilyPolicy : uint8_t { SingleStack, PreferDualStack, RequireDualStack };
enum class SessionAffinity : uint8_t { None, ClientIP };
enum class LoadBalancerIPMode : uint8_t { VIP, Proxy };

struct ServicePort {
  std::string name;
  Protocol protocol = Protocol::TCP;
  int32_t port = 0;
  int32_t target_port = 0;         ///< numeric targetPort (0 when named or absent)
  std::string target_port_name;    ///< named targetPort
  int32_t node_port = 0;           ///< 0 = none
  std::string app_protocol;
  Pos pos;
};

struct LoadBalancerIngress {
  std::optional<IPAddr> ip;
  std::string hostname;
  std::optional<LoadBalancerIPMode> ip_mode;
  Pos pos;
};

struct Service {
  ObjectMeta meta;
  std::optional<ServiceType> type;  ///< absent: the API defaults to ClusterIP; kube-proxy treats absent as "none"
  bool headless = false;            ///< clusterIP "None"
  std::vector<IPAddr> cluster_ips;  ///< clusterIPs (or clusterIP alone), primary first
  std::vector<IPFamily> ip_families;
  std::optional<IPFamilyPolicy> ip_family_policy;
  std::vector<ServicePort> ports;
  std::vector<IPAddr> external_ips;
  std::optional<IPAddr> load_balancer_ip;     ///< deprecated spec.loadBalancerIP (kube-proxy does not use it)
  std::vector<CIDR> load_balancer_source_ranges;
  std::vector<LoadBalancerIngress> load_balancer_ingress;
  std::optional<TrafficPolicy> external_traffic_policy;
  std::optional<TrafficPolicy> internal_traffic_policy;
  int32_t health_check_node_port = 0;
  SessionAffinity session_affinity = SessionAffinity::None;
  int32_t affinity_timeout_seconds = 10800;  ///< API default
  std::string traffic_distribution;
  /// spec.trafficHint (KEP-4963): "LongLived" opts the Service into the flowtable fast path.
  bool traffic_hint_long_lived = false;
  std::string external_name;

  ServiceType effective_type() const { return type.value_or(ServiceType::ClusterIP); }
  /// Label service.kubernetes.io/service-proxy-name (empty when absent).
  std::string proxy_name() const;
};

// ---------------------------------------------------------------- EndpointSlice
enum class AddressType : uint8_t { IPv4, IPv6, FQDN };

struct Endpoint {
  std::vector<IPAddr> addresses;          ///< IPv4/IPv6 slices
  std::vector<std::string> fqdn_addresses;  ///< FQDN slices (kube-proxy ignores them)
  std::optional<bool> ready, serving, terminating;
  std::optional<std::string> node_name;
  std::optional<std::string> zone;
  std::vector<std::string> hint_zones;   ///< hints.forZones[].name
  std::vector<std::string> hint_nodes;   ///< hints.forNodes[].name
  bool has_zone_hints = false;           ///< hints.forZones present (even if empty)
  bool has_node_hints = false;
  Pos pos;
};

struct EndpointPort {
  std::optional<std::string> name;  ///< kube-proxy ignores ports whose name is absent (nil)
  std::optional<Protocol> protocol;
  std::optional<int32_t> port;
  std::string app_protocol;
  Pos pos;
};

struct EndpointSlice {
  ObjectMeta meta;
  AddressType address_type = AddressType::IPv4;
  std::vector<Endpoint> endpoints;
  std::vector<EndpointPort> ports;
  /// Label kubernetes.io/service-name (empty when absent: kube-proxy ignores the slice).
  const std::string& service_name() const;
};

// ---------------------------------------------------------------- Node
struct NodeAddress {
  std::string type;  ///< InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS
  std::string address;
};

struct Node {
  ObjectMeta meta;
  std::vector<NodeAddress> addresses;
  std::vector<CIDR> pod_cidrs;  ///< spec.podCIDRs (or spec.podCIDR)
  /// First InternalIP of the family, else first ExternalIP of the family.
  std::optional<IPAddr> node_ip(IPFamily f) const;
};

// ---------------------------------------------------------------- ServiceCIDR
/// networking.k8s.io/v1 ServiceCIDR (cluster-scoped): the ranges ClusterIPs are allocated
/// from. kube-proxy's nftables mode drops traffic to unallocated addresses in them
/// (OnServiceCIDRsChanged); the other modes ignore them.
struct ServiceCIDR {
  ObjectMeta meta;
  std::vector<CIDR> cidrs;  ///< spec.cidrs: at most one per family
};

// ---------------------------------------------------------------- KubeProxyConfiguration
enum class ProxyMode : uint8_t { IPTables, IPVS, NFTables };
enum class DetectLocalMode : uint8_t { ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix };

/// Go time.Duration, in nanoseconds.
struct Duration {
  int64_t ns = 0;
  static Duration seconds(int64_t s) { return Duration{s * 1'000'000'000}; }
  friend bool operator==(const Duration&, const Duration&) = default;
};

struct ProxyConfig {
  bool present = false;  ///< a KubeProxyConfiguration document was given
  Pos pos;
  FieldPositions fields;
  ProxyMode mode = ProxyMode::IPTables;  ///< "" means iptables on Linux
  std::string hostname_override;
  std::string bind_address = "0.0.0.0";
  std::string healthz_bind_address = "0.0.0.0:10256";
  std::string metrics_bind_address = "127.0.0.1:10249";
  std::vector<CIDR> cluster_cidrs;  ///< clusterCIDR, comma-separated, at most one per family
  std::map<std::string, bool> feature_gates;
  struct {
    int32_t masquerade_bit = 14;
    bool masquerade_all = false;
    bool localhost_node_ports = true;
    Duration sync_period = Duration::seconds(30);
    Duration min_sync_period = Duration::seconds(1);
  } iptables;
  struct {
    int32_t masquerade_bit = 14;
    bool masquerade_all = false;
    Duration sync_period = Duration::seconds(30);
    Duration min_sync_period = Duration::seconds(1);
  } nftables;
  struct {
    Duration sync_period = Duration::seconds(30);
    Duration min_sync_period = Duration::seconds(0);
    std::string scheduler;  ///< "" = rr
    std::vector<CIDR> exclude_cidrs;
    bool strict_arp = false;
    Duration tcp_timeout, tcp_fin_timeout, udp_timeout;  ///< 0 = leave the kernel's value
  } ipvs;
  std::vector<CIDR> node_port_addresses;   ///< CIDRs
  bool node_port_addresses_primary = false;  ///< the keyword "primary"
  DetectLocalMode detect_local_mode = DetectLocalMode::ClusterCIDR;
  std::string bridge_interface;
  std::string interface_name_prefix;
  struct {
    std::optional<int32_t> max_per_core;  ///< default 32768
    std::optional<int32_t> min;           ///< default 131072
    Duration tcp_established_timeout = Duration::seconds(86400);
    Duration tcp_close_wait_timeout = Duration::seconds(3600);
    bool tcp_be_liberal = false;
    Duration udp_timeout, udp_stream_timeout;
  } conntrack;
  Duration config_sync_period = Duration::seconds(15 * 60);
  std::optional<int32_t> oom_score_adj;

  bool feature(std::string_view gate, bool default_value) const;
};

// ---------------------------------------------------------------- NodeEnvironment (kpc.dev/v1alpha1)
struct HostInterface {
  std::string name;
  std::vector<CIDR> addresses;  ///< address/prefix as configured on the interface
};

/// Host facts kube-proxy probes at run time. Defaults describe a current Debian/Ubuntu node
/// (iptables 1.8.x, kernel 6.1); see docs/snapshot.md.
struct NodeEnvironment {
  bool present = false;
  Pos pos;
  FieldPositions fields;
  std::string hostname;         ///< os.Hostname(), used when hostnameOverride is empty
  bool random_fully = true;     ///< iptables >= 1.6.2
  bool nfacct_counters = true;  ///< kube-proxy could create its nfacct objects
  std::string kernel_version = "6.1";
  bool interfaces_set = false;  ///< false: interfaces are derived from the Node (plus lo)
  std::vector<HostInterface> interfaces;
};

// ---------------------------------------------------------------- Snapshot
struct Snapshot {
  std::vector<Service> services;        ///< sorted by namespace/name
  std::vector<EndpointSlice> slices;    ///< sorted by namespace/name
  std::vector<Node> nodes;              ///< sorted by name
  std::vector<ServiceCIDR> service_cidrs;  ///< sorted by name
  ProxyConfig config;
  NodeEnvironment env;
  std::map<std::string, size_t> skipped_kinds;  ///< kinds kpc does not read, counted
  size_t documents = 0;

  const Node* find_node(std::string_view name) const;
};

}  // namespace kpc
