// The nftables back end (issue 14): kube-proxy's names, knftables' text, and the sync
// behaviours kube-proxy's proxier has that a whole-table comparison does not show: empty
// transactions when nothing changed, element updates as delete + add, stale chains flushed
// now and deleted a second later, first-sync reuse of endpoint chains, affinity sets.
#include <gtest/gtest.h>

#include "compiler/driver/compile_nftables.h"
#include "compiler/nftables/names.h"
#include "compiler/proxy/service_ports.h"
#include "tests/support/cluster_env.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

using namespace kpc::nftables;

TEST(NftNames, HashAndTruncateMatchesKubeProxy) {
  // Values from kube-proxy's tests and its README.
  EXPECT_EQ(service_port_base("testing", "service", "tcp", "http"), "P4ZYZVCF-testing/service/tcp/http");
  EXPECT_EQ(service_port_base("ns1", "svc1", "tcp", "p80"), "ULMVA6XW-ns1/svc1/tcp/p80");
  EXPECT_EQ(endpoint_base("ns1", "svc1", "tcp", "p80", *IPAddr::parse("10.180.0.1"), 80),
            "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80");
  std::string v6 = endpoint_base("ns", "s", "tcp", "", *IPAddr::parse("fd00::1"), 80);
  EXPECT_NE(v6.find("ns/s/tcp/__fd00..1/80"), std::string::npos) << v6;
  std::string longname(300, 'a');
  std::string cut = hash_and_truncate(longname);
  EXPECT_EQ(cut.size(), kChainNameBaseLengthMax);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_TRUE(is_service_chain("service-X-ns/a/tcp/"));
  EXPECT_FALSE(is_service_chain("mark-for-masquerade"));
}

TEST(NftTransaction, PrintsAsKnftablesWritesIt) {
  Transaction tx;
  tx.add_table(std::string("rules for kube-proxy"));
  tx.add_chain("nat-output", BaseChainSpec{"nat", "output", -100});
  tx.add_chain("reject-chain", std::nullopt, std::string("helper"));
  tx.flush_chain("x");
  tx.add_rule("c", "ip daddr @s reject", std::string("say \"hi\"\\"));
  tx.add_set(false, "aff", "ipv4_addr", "dynamic,timeout", 10800);
  tx.add_set(true, "m", "inet_proto . inet_service : verdict", {}, std::nullopt, std::string("NodePort traffic"));
  tx.add_element(true, "m", "tcp . 80", "goto x", std::string("ns/s:p"));
  tx.add_element(false, "s", "10.0.0.1");
  tx.delete_element(true, "m", "tcp . 80");
  tx.delete_set(false, "aff");
  EXPECT_EQ(print_transaction(tx),
            "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n"
            "add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }\n"
            "add chain ip kube-proxy reject-chain { comment \"helper\" ; }\n"
            "flush chain ip kube-proxy x\n"
            "add rule ip kube-proxy c ip daddr @s reject comment \"say \\\"hi\\\"\\\\\"\n"
            "add set ip kube-proxy aff { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }\n"
            "add map ip kube-proxy m { type inet_proto . inet_service : verdict ; comment \"NodePort traffic\" ; }\n"
            "add element ip kube-proxy m { tcp . 80 comment \"ns/s:p\" : goto x }\n"
            "add element ip kube-proxy s { 10.0.0.1 }\n"
            "delete element ip kube-proxy m { tcp . 80 }\n"
            "delete set ip kube-proxy aff\n");
  EXPECT_EQ(tx.num_operations(), 11u);
}

const char* kTwoServices = R"(apiVersion: v1
kind: Node
metadata: {name: node-0}
status: {addresses: [{type: InternalIP, address: 192.168.0.10}]}
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: node-0
clusterCIDR: 10.0.0.0/8
---
apiVersion: v1
kind: Service
metadata: {name: a, namespace: ns}
spec:
  clusterIP: 172.30.0.1
  ports: [{name: p, port: 80, protocol: TCP}]
  sessionAffinity: ClientIP
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: ns}
spec:
  clusterIP: 172.30.0.2
  type: NodePort
  ports: [{name: p, port: 80, protocol: TCP, nodePort: 30080}]
)";

std::string slice(const char* svc, const std::vector<std::string>& ips) {
  std::string s = std::string("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ") + svc +
                  "-1, namespace: ns, labels: {kubernetes.io/service-name: " + svc +
                  "}}\naddressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\nendpoints:\n";
  for (const auto& ip : ips) s += "- addresses: [" + ip + "]\n";
  return s;
}

Snapshot load(const std::vector<std::string>& a_ips, const std::vector<std::string>& b_ips) {
  std::string text = kTwoServices;
  if (!a_ips.empty()) text += "---\n" + slice("a", a_ips);
  if (!b_ips.empty()) text += "---\n" + slice("b", b_ips);
  auto snap = load_with_environment({{"cluster.yaml", text}});
  EXPECT_TRUE(snap.has_value());
  return snap.value_or(Snapshot{});
}

struct Proxier {
  SyncState state;
  int64_t now = 0;
  SyncResult sync(const Snapshot& snap, bool full, std::set<std::string> changed = {}) {
    DiagSink diags;
    auto node = nft_node_context(snap, IPFamily::V4, diags);
    EXPECT_TRUE(node.has_value());
    auto ports = proxy::build_service_ports(snap, *node);
    SyncOptions o;
    o.full = full;
    o.changed_services = std::move(changed);
    o.now_ms = now;
    return sync_nftables(ports, *node, o, state);
  }
};

TEST(NftSync, NothingChangedIsAnEmptyTransactionEvenInAFullResync) {
  Snapshot s = load({"10.1.0.1"}, {"10.1.0.2"});
  Proxier p;
  auto first = p.sync(s, true);
  EXPECT_GT(first.tx.num_operations(), 50u);
  auto partial = p.sync(s, false);
  EXPECT_EQ(partial.tx.num_operations(), 0u);  // kube-proxy's tests assert 0 operations here
  // A later full sync rewrites the fixed chains and every service's chains, but elements the
  // kernel already has are not written again (readOrReset + ensureElem).
  auto full = p.sync(s, true);
  std::string text = print_transaction(full.tx);
  EXPECT_EQ(text.find("add element"), std::string::npos) << text;
  EXPECT_EQ(text.find("delete chain"), std::string::npos) << "base chains are recreated only once per process";
}

TEST(NftSync, ChangedValueIsDeleteThenAddAndLeftoversAreDeleted) {
  Proxier p;
  p.sync(load({"10.1.0.1"}, {"10.1.0.2"}), true);
  // b loses its endpoints: its service-ips/service-nodeports elements go, no-endpoint ones come.
  auto r = p.sync(load({"10.1.0.1"}, {}), false, {"ns/b"});
  std::string t = print_transaction(r.tx);
  EXPECT_NE(t.find("add element ip kube-proxy no-endpoint-services { 172.30.0.2 . tcp . 80 comment \"ns/b:p\" : "
                   "goto reject-chain }"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("delete element ip kube-proxy service-ips { 172.30.0.2 . tcp . 80 }"), std::string::npos) << t;
  EXPECT_NE(t.find("delete element ip kube-proxy service-nodeports { tcp . 30080 }"), std::string::npos) << t;
  // Its chains are stale: flushed now, not deleted.
  EXPECT_EQ(r.stale_chains_flushed.size(), 3u);  // service-, external-, endpoint-
  EXPECT_TRUE(r.cleanup.empty());
  EXPECT_EQ(t.find("delete chain"), std::string::npos);

  // Within a second they are flushed again (and their clock restarted); later, deleted first.
  p.now = 500;
  auto again = p.sync(load({"10.1.0.1"}, {}), false);
  EXPECT_TRUE(again.cleanup.empty());
  EXPECT_EQ(again.tx.num_operations(), 3u);
  p.now = 1600;
  auto later = p.sync(load({"10.1.0.1"}, {}), false);
  EXPECT_EQ(later.cleanup.num_operations(), 3u);
  EXPECT_EQ(print_transaction(later.cleanup).rfind("delete chain ip kube-proxy ", 0), 0u);
  EXPECT_TRUE(later.tx.empty());
}

TEST(NftSync, AffinitySetsFollowTheServiceAndGoAtOnce) {
  Proxier p;
  auto first = p.sync(load({"10.1.0.1", "10.1.0.3"}, {"10.1.0.2"}), true);
  std::string t = print_transaction(first.tx);
  EXPECT_NE(t.find("add set ip kube-proxy affinity-"), std::string::npos);
  EXPECT_NE(t.find("flags dynamic,timeout ; timeout 10800s ; }"), std::string::npos) << t;
  EXPECT_NE(t.find("update @affinity-"), std::string::npos);
  // One endpoint of a goes: its affinity set is deleted in the same transaction.
  auto r = p.sync(load({"10.1.0.1"}, {"10.1.0.2"}), false, {"ns/a"});
  std::string u = print_transaction(r.tx);
  EXPECT_NE(u.find("delete set ip kube-proxy affinity-"), std::string::npos) << u;
  EXPECT_NE(u.find("__10.1.0.3/8080"), std::string::npos);
}

TEST(NftSync, FirstSyncKeepsEndpointChainsTheKernelHas) {
  Snapshot s = load({"10.1.0.1"}, {"10.1.0.2"});
  Proxier before;
  before.sync(s, true);
  // A restarted kube-proxy (fresh memory) finds the table as the old process left it.
  Proxier restarted;
  KernelListing listing;
  listing.chains = before.state.kernel_chains;
  listing.sets = before.state.kernel_sets;
  listing.elements = before.state.elements;
  restarted.state.table_exists = true;
  DiagSink diags;
  auto node = nft_node_context(s, IPFamily::V4, diags);
  auto ports = proxy::build_service_ports(s, *node);
  SyncOptions o;
  auto r = sync_nftables(ports, *node, o, restarted.state, &listing);
  std::string t = print_transaction(r.tx);
  EXPECT_EQ(t.find("add chain ip kube-proxy endpoint-"), std::string::npos) << t;
  EXPECT_EQ(t.find("dnat to"), std::string::npos) << t;
  EXPECT_NE(t.find("add chain ip kube-proxy service-"), std::string::npos);
  EXPECT_EQ(t.find("add element"), std::string::npos) << "elements the kernel has are kept";
}

TEST(NftSync, MasqueradeSettingsComeFromTheNftablesSection) {
  std::string text = std::string(kTwoServices) +
                     "---\n" + slice("a", {"10.1.0.1"});
  text.replace(text.find("clusterCIDR: 10.0.0.0/8"), 23,
               "clusterCIDR: 10.0.0.0/8\niptables: {masqueradeBit: 3}\nnftables: {masqueradeBit: 5, masqueradeAll: true}");
  auto snap = load_with_environment({{"c.yaml", text}});
  ASSERT_TRUE(snap);
  DiagSink diags;
  auto r = compile_nftables(*snap, IPFamily::V4, {}, diags);
  ASSERT_TRUE(r);
  EXPECT_NE(r->text.find("mark set mark or 0x00000020"), std::string::npos);
  EXPECT_NE(r->text.find("ip daddr 172.30.0.1 jump mark-for-masquerade"), std::string::npos) << r->text;
}

TEST(NftSync, ServiceCIDRsGiveTheUnallocatedDropRule) {
  std::string text = std::string(kTwoServices) +
                     "---\napiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\n"
                     "spec: {cidrs: [172.30.0.0/16, 'fd00:10:96::/112']}\n"
                     "---\napiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra}\n"
                     "spec: {cidrs: [10.96.0.0/12]}\n";
  auto snap = load_with_environment({{"c.yaml", text}});
  ASSERT_TRUE(snap);
  DiagSink diags;
  auto r = compile_nftables(*snap, IPFamily::V4, {}, diags);
  ASSERT_TRUE(r);
  EXPECT_NE(r->text.find("add rule ip kube-proxy cluster-ips-check ip daddr { 10.96.0.0/12,172.30.0.0/16 } drop "
                         "comment \"Drop traffic to unallocated ClusterIPs\""),
            std::string::npos)
      << r->text;
  auto r6 = compile_nftables(*snap, IPFamily::V6, {}, diags);
  ASSERT_TRUE(r6.has_value());
  EXPECT_NE(r6->text.find("ip6 daddr { fd00:10:96::/112 } drop"), std::string::npos) << r6->text;
}

TEST(NftSync, UnsafeDetectorInterfaceIsALocatedError) {
  std::string text = kTwoServices;
  text.replace(text.find("clusterCIDR: 10.0.0.0/8"), 23,
               "detectLocalMode: BridgeInterface\ndetectLocal: {bridgeInterface: 'br;0'}");
  auto snap = load_with_environment({{"c.yaml", text}});
  if (!snap) GTEST_SKIP() << "the loader already refuses the name";
  DiagSink diags;
  EXPECT_FALSE(compile_nftables(*snap, IPFamily::V4, {}, diags).has_value());
  ASSERT_FALSE(diags.all().empty());
  EXPECT_EQ(diags.all()[0].code, DiagCode::InvalidConfig);
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

TEST(NftLayout, KubeProxyVersionsMapToProfiles) {
  std::string why;
  for (const char* v : {"1.33", "v1.34.2", "1.35.0-rc.1", "1.35+k3s"})
    EXPECT_EQ(nftables::layout_for_version(v, &why), nftables::LayoutProfile::V1_33) << v << " " << why;
  for (const char* v : {"1.32", "1.36", "2.0", "banana", "1.", "v1.3x", ""}) {
    why.clear();
    EXPECT_FALSE(nftables::layout_for_version(v, &why)) << v;
    EXPECT_FALSE(why.empty()) << v;
  }
  auto r = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "nftables",
                "--kube-proxy-version", "1.36"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no profile yet"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace kpc::test
