// Random *valid* cluster snapshots for property tests (loader today, compiler later).
//
//   RC_GTEST_PROP(Suite, Name, ()) {
//     const auto c = *kpc::testgen::gen_cluster();
//     load c.to_yaml() or c.to_json_list() ...
//   }
//
// Valid by construction: unique object names, unique cluster IPs, unique nodePorts
// (and healthCheckNodePorts), per-Service unique port names and port/protocol pairs,
// every field within the API server's rules. Everything is plain data: tests may edit
// a GeneratedCluster (e.g. to make it invalid on purpose) before rendering it.
// Deterministic: the same rapidcheck seed (or sample_cluster(seed)) gives the same text.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/model/objects.h"

namespace kpc::testgen {

struct GenServicePort {
  std::string name;              ///< "" only when the Service has exactly one port
  std::string protocol;          ///< "TCP", "UDP", "SCTP"; "" = omitted (the model defaults to TCP)
  int port = 0;                  ///< 1-65535
  int target_port = 0;           ///< numeric targetPort; 0 = named or omitted
  std::string target_port_name;  ///< IANA service name; "" = numeric or omitted
  int node_port = 0;             ///< 0 = omitted
  std::string app_protocol;      ///< "" = omitted
};

struct GenService {
  std::string ns, name;
  std::string type;                      ///< "" (omitted), "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"
  bool headless = false;                 ///< clusterIP: None
  std::vector<std::string> cluster_ips;  ///< canonical text (what IPAddr::str() prints), primary first
  bool write_cluster_ips = true;         ///< also write spec.clusterIPs (else spec.clusterIP only; single-stack)
  std::vector<std::string> ip_families;  ///< "IPv4"/"IPv6", parallel to cluster_ips; empty = omitted
  std::string ip_family_policy;          ///< "" = omitted
  std::vector<GenServicePort> ports;
  std::vector<std::string> external_ips;
  std::string external_traffic_policy;   ///< "" = omitted, "Cluster", "Local"
  std::string internal_traffic_policy;   ///< "" = omitted, "Cluster", "Local"
  int health_check_node_port = 0;        ///< LoadBalancer + Local only
  bool client_ip_affinity = false;
  int affinity_timeout = 0;              ///< 0 = omitted (model default 10800)
  std::vector<std::string> lb_source_ranges;  ///< canonical CIDRs; LoadBalancer only
  std::vector<std::string> lb_ingress_ips;    ///< status.loadBalancer.ingress[].ip
  std::string external_name;             ///< ExternalName only
  std::map<std::string, std::string> labels;

  std::string key() const { return ns + "/" + name; }
  bool is_type(const char* t) const { return type == t || (type.empty() && std::string(t) == "ClusterIP"); }
};

struct GenEndpoint {
  std::vector<std::string> addresses;  ///< canonical text, family of the slice
  std::optional<bool> ready, serving, terminating;
  std::string node_name;  ///< "" = omitted
  std::string zone;       ///< "" = omitted
};

struct GenSlicePort {
  std::string name;      ///< matches a Service port name ("" for the unnamed port)
  std::string protocol;  ///< "TCP", "UDP", "SCTP"
  int port = 0;
};

struct GenSlice {
  std::string ns, name;
  std::string service_name;  ///< label kubernetes.io/service-name
  std::string address_type;  ///< "IPv4" or "IPv6"
  std::vector<GenEndpoint> endpoints;
  std::vector<GenSlicePort> ports;
  std::string key() const { return ns + "/" + name; }
};

struct GenNode {
  std::string name;
  std::string zone;                     ///< label topology.kubernetes.io/zone; "" = omitted
  std::vector<std::string> pod_cidrs;   ///< canonical CIDRs, one per family
  std::vector<std::string> internal_ips;
};

struct GenProxyConfig {
  std::string mode;               ///< "" (omitted), "iptables", "ipvs", "nftables"
  std::string hostname_override;  ///< "" = omitted; otherwise a generated Node's name
  std::vector<std::string> cluster_cidrs;  ///< canonical; 0-2, one per family
  int masquerade_bit = 14;
  bool write_masquerade_bit = false;
  std::optional<bool> masquerade_all;
  std::optional<bool> localhost_node_ports;
  std::string sync_period;        ///< Go duration; "" = omitted
  int64_t sync_period_ns = 0;     ///< what sync_period means (when set)
  std::string min_sync_period;
  int64_t min_sync_period_ns = 0;
  std::string detect_local_mode;  ///< "" (omitted), "ClusterCIDR", "NodeCIDR"
  std::optional<int> conntrack_max_per_core;
  std::optional<bool> tcp_be_liberal;
  std::map<std::string, bool> feature_gates;
};

/// A generated cluster. Objects are in generation order (not the loader's sorted order).
struct GeneratedCluster {
  std::vector<GenService> services;
  std::vector<GenSlice> slices;
  std::vector<GenNode> nodes;
  std::optional<GenProxyConfig> config;

  size_t object_count() const { return services.size() + slices.size() + nodes.size() + (config ? 1 : 0); }

  /// One YAML document per object (block style, no "---"), in order services, slices, nodes, config.
  std::vector<std::string> yaml_documents() const;
  /// All documents in one multi-document YAML stream ("---" separated).
  std::string to_yaml() const;
  /// One compact JSON object per object, same order as yaml_documents().
  std::vector<std::string> json_objects() const;
  /// One JSON `kind: List` holding every object.
  std::string to_json_list() const;
  /// A YAML `kind: List` holding every object.
  std::string to_yaml_list() const;
};

struct GenOptions {
  size_t max_services = 8;
  size_t max_nodes = 4;
  size_t max_slices_per_service = 2;
  size_t max_endpoints_per_slice = 4;
  bool allow_ipv6 = true;        ///< IPv6 single-stack and dual-stack Services
  bool allow_config = true;      ///< sometimes add a KubeProxyConfiguration
};

/// Generator of valid clusters.
rc::Gen<GeneratedCluster> gen_cluster(GenOptions opts = {});

/// One cluster from a fixed seed, for deterministic non-property tests.
GeneratedCluster sample_cluster(uint64_t seed, int size = rc::kNominalSize, GenOptions opts = {});

/// Compares a loaded model with the cluster it was generated from, field by field (every
/// field the generator sets). Returns "" when they match, else the first difference.
std::string mismatch(const GeneratedCluster& expected, const Snapshot& loaded);

/// A canonical, position-free description of a loaded model (one line per fact), so two
/// loads can be compared with ==. Excludes positions and the document count.
std::string dump_model(const Snapshot& s);

/// Lets RC_GTEST_PROP print a counterexample as the YAML it renders to (found by ADL).
inline void showValue(const GeneratedCluster& c, std::ostream& os) { os << "\n" << c.to_yaml(); }

}  // namespace kpc::testgen
