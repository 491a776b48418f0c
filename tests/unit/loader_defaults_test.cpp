// Defaults of KubeProxyConfiguration (kube-proxy's, docs/snapshot.md) and NodeEnvironment
// when the document or some of its fields are absent.
#include <gtest/gtest.h>

#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {

using loadtest::load_yaml;

constexpr int64_t kS = 1'000'000'000;

const char* kCfg = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n";
const char* kEnv = "apiVersion: kpc.dev/v1alpha1\nkind: NodeEnvironment\n";

void expect_proxy_defaults(const ProxyConfig& c) {
  EXPECT_EQ(c.mode, ProxyMode::IPTables);
  EXPECT_EQ(c.hostname_override, "");
  EXPECT_EQ(c.bind_address, "0.0.0.0");
  EXPECT_EQ(c.healthz_bind_address, "0.0.0.0:10256");
  EXPECT_EQ(c.metrics_bind_address, "127.0.0.1:10249");
  EXPECT_TRUE(c.cluster_cidrs.empty());
  EXPECT_TRUE(c.feature_gates.empty());
  EXPECT_TRUE(c.feature("AnyGate", true));
  EXPECT_FALSE(c.feature("AnyGate", false));
  EXPECT_EQ(c.iptables.masquerade_bit, 14);
  EXPECT_FALSE(c.iptables.masquerade_all);
  EXPECT_TRUE(c.iptables.localhost_node_ports);
  EXPECT_EQ(c.iptables.sync_period.ns, 30 * kS);
  EXPECT_EQ(c.iptables.min_sync_period.ns, 1 * kS);
  EXPECT_EQ(c.nftables.masquerade_bit, 14);
  EXPECT_FALSE(c.nftables.masquerade_all);
  EXPECT_EQ(c.nftables.sync_period.ns, 30 * kS);
  EXPECT_EQ(c.nftables.min_sync_period.ns, 1 * kS);
  EXPECT_EQ(c.ipvs.sync_period.ns, 30 * kS);
  EXPECT_EQ(c.ipvs.min_sync_period.ns, 0);
  EXPECT_EQ(c.ipvs.scheduler, "");
  EXPECT_TRUE(c.ipvs.exclude_cidrs.empty());
  EXPECT_FALSE(c.ipvs.strict_arp);
  EXPECT_EQ(c.ipvs.tcp_timeout.ns, 0);
  EXPECT_TRUE(c.node_port_addresses.empty());
  EXPECT_FALSE(c.node_port_addresses_primary);
  EXPECT_EQ(c.detect_local_mode, DetectLocalMode::ClusterCIDR);
  EXPECT_EQ(c.bridge_interface, "");
  EXPECT_EQ(c.interface_name_prefix, "");
  EXPECT_FALSE(c.conntrack.max_per_core.has_value());
  EXPECT_FALSE(c.conntrack.min.has_value());
  EXPECT_EQ(c.conntrack.tcp_established_timeout.ns, 86400 * kS);
  EXPECT_EQ(c.conntrack.tcp_close_wait_timeout.ns, 3600 * kS);
  EXPECT_FALSE(c.conntrack.tcp_be_liberal);
  EXPECT_EQ(c.conntrack.udp_timeout.ns, 0);
  EXPECT_EQ(c.conntrack.udp_stream_timeout.ns, 0);
  EXPECT_EQ(c.config_sync_period.ns, 15 * 60 * kS);
  EXPECT_FALSE(c.oom_score_adj.has_value());
}

void expect_env_defaults(const NodeEnvironment& e) {
  EXPECT_EQ(e.hostname, "");
  EXPECT_TRUE(e.random_fully);
  EXPECT_TRUE(e.nfacct_counters);
  EXPECT_EQ(e.kernel_version, "6.1");
  EXPECT_FALSE(e.interfaces_set);
  EXPECT_TRUE(e.interfaces.empty());
}

TEST(Defaults, AbsentDocuments) {
  auto l = load_yaml("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_FALSE(l.snap.config.present);
  EXPECT_FALSE(l.snap.config.pos.known());
  expect_proxy_defaults(l.snap.config);
  EXPECT_FALSE(l.snap.env.present);
  expect_env_defaults(l.snap.env);
}

TEST(Defaults, EmptyDocuments) {
  auto l = load_yaml(std::string(kCfg) + "---\n" + kEnv);
  ASSERT_TRUE(l.ok) << l.rendered();
  EXPECT_TRUE(l.snap.config.present);
  EXPECT_EQ(l.snap.config.pos, (Pos{1, 1, 1}));
  expect_proxy_defaults(l.snap.config);
  EXPECT_TRUE(l.snap.env.present);
  EXPECT_EQ(l.snap.env.pos, (Pos{1, 4, 1}));
  expect_env_defaults(l.snap.env);
}

TEST(Defaults, EmptyValuesMeanTheDefault) {
  auto l = load_yaml(std::string(kCfg) +
                     "mode: \"\"\ndetectLocalMode: \"\"\nclusterCIDR: \"\"\nhostnameOverride: \"  \"\n"
                     "iptables: {}\nnftables: {}\nipvs: {scheduler: \"\"}\nconntrack: {}\nmetadata: {name: x}\n"
                     "featureGates: {}\nnodePortAddresses: []\noomScoreAdj: null\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  expect_proxy_defaults(l.snap.config);
}

TEST(Defaults, PartiallySetSectionsKeepTheOtherDefaults) {
  auto l = load_yaml(std::string(kCfg) + "iptables: {masqueradeAll: true}\nconntrack: {maxPerCore: 0}\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  const auto& c = l.snap.config;
  EXPECT_TRUE(c.iptables.masquerade_all);
  EXPECT_EQ(c.iptables.masquerade_bit, 14);
  EXPECT_TRUE(c.iptables.localhost_node_ports);
  EXPECT_EQ(c.iptables.sync_period.ns, 30 * kS);
  EXPECT_EQ(c.conntrack.max_per_core, 0);  // explicit 0 is kept (kube-proxy: "leave as-is")
  EXPECT_FALSE(c.conntrack.min.has_value());
  EXPECT_EQ(c.conntrack.tcp_established_timeout.ns, 86400 * kS);
}

TEST(Defaults, ExplicitValuesOverrideDefaults) {
  auto l = load_yaml(std::string(kCfg) +
                     "mode: nftables\nclusterCIDR: \" 10.244.0.0/16 , fd00:10:244::/56 \"\n"
                     "iptables: {masqueradeBit: 0, localhostNodePorts: false, syncPeriod: 1m0s, minSyncPeriod: 0s}\n"
                     "nodePortAddresses: [primary]\nconfigSyncPeriod: 1h\noomScoreAdj: -999\n"
                     "featureGates: {NFTablesProxyMode: true, Other: false}\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  const auto& c = l.snap.config;
  EXPECT_EQ(c.mode, ProxyMode::NFTables);
  ASSERT_EQ(c.cluster_cidrs.size(), 2u);  // entries are trimmed
  EXPECT_EQ(c.cluster_cidrs[1].str(), "fd00:10:244::/56");
  EXPECT_EQ(c.iptables.masquerade_bit, 0);
  EXPECT_FALSE(c.iptables.localhost_node_ports);
  EXPECT_EQ(c.iptables.sync_period.ns, 60 * kS);
  EXPECT_EQ(c.iptables.min_sync_period.ns, 0);
  EXPECT_TRUE(c.node_port_addresses_primary);
  EXPECT_EQ(c.config_sync_period.ns, 3600 * kS);
  EXPECT_EQ(c.oom_score_adj, -999);
  EXPECT_TRUE(c.feature("NFTablesProxyMode", false));
  EXPECT_FALSE(c.feature("Other", true));
}

TEST(Defaults, NodeEnvironmentFields) {
  auto l = load_yaml(std::string(kEnv) + "hostname: Node-A\niptables: {randomFully: false}\n"
                                         "kernel: {version: \"5.4\"}\ninterfaces: []\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  const auto& e = l.snap.env;
  EXPECT_EQ(e.hostname, "node-a");  // lower-cased like os.Hostname() handling in kube-proxy
  EXPECT_FALSE(e.random_fully);
  EXPECT_TRUE(e.nfacct_counters);  // untouched default
  EXPECT_EQ(e.kernel_version, "5.4");
  EXPECT_TRUE(e.interfaces_set);  // an explicit empty list is not "derive from the Node"
  EXPECT_TRUE(e.interfaces.empty());
}

TEST(Defaults, ServiceAndSliceFieldDefaults) {
  auto l = load_yaml("apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports: [{port: 80}]\n---\n"
                     "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1}\naddressType: IPv4\n"
                     "endpoints: [{addresses: [10.0.0.1]}]\nports: [{port: 8080}]\n");
  ASSERT_TRUE(l.ok) << l.rendered();
  const Service& s = l.snap.services.at(0);
  EXPECT_EQ(s.meta.ns, "default");
  EXPECT_FALSE(s.type.has_value());
  EXPECT_EQ(s.effective_type(), ServiceType::ClusterIP);
  EXPECT_EQ(s.ports[0].protocol, Protocol::TCP);
  EXPECT_EQ(s.ports[0].target_port, 0);
  EXPECT_EQ(s.session_affinity, SessionAffinity::None);
  EXPECT_EQ(s.affinity_timeout_seconds, 10800);
  EXPECT_FALSE(s.external_traffic_policy.has_value());
  EXPECT_FALSE(s.internal_traffic_policy.has_value());
  const EndpointSlice& sl = l.snap.slices.at(0);
  EXPECT_EQ(sl.meta.ns, "default");
  EXPECT_EQ(sl.service_name(), "");
  EXPECT_FALSE(sl.endpoints[0].ready.has_value());
  EXPECT_FALSE(sl.endpoints[0].serving.has_value());
  EXPECT_FALSE(sl.endpoints[0].terminating.has_value());
  EXPECT_FALSE(sl.ports[0].name.has_value());      // absent name is nil (kube-proxy skips it)
  EXPECT_FALSE(sl.ports[0].protocol.has_value());
  EXPECT_EQ(sl.ports[0].port, 8080);
}

}  // namespace
}  // namespace kpc
