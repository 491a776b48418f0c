// KEP-4963's fast path (compiler/fastpath): which Services and ports are offloaded, the
// located errors, the full and incremental transactions, and the CLI.
#include <gtest/gtest.h>

#include "compiler/driver/compile_nftables.h"
#include "compiler/fastpath/fastpath.h"
#include "compiler/model/loader.h"
#include "tests/support/cluster_env.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::test {
namespace {

const char* kBase = R"(apiVersion: v1
kind: Node
metadata: {name: node-0}
status: {addresses: [{type: InternalIP, address: 192.168.0.10}]}
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: node-0
---
apiVersion: v1
kind: Service
metadata: {name: stream, namespace: media}
spec:
  type: LoadBalancer
  trafficHint: LongLived
  clusterIPs: [10.96.0.5, "fd00:10:96::5"]
  externalIPs: [192.0.2.7]
  ports:
  - {name: rtmp, port: 1935, protocol: TCP, nodePort: 31935}
  - {name: rtp, port: 5004, protocol: UDP}
  - {name: ctl, port: 9000, protocol: SCTP}
status:
  loadBalancer:
    ingress: [{ip: 203.0.113.9}, {ip: 203.0.113.10, ipMode: Proxy}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.0.6
  ports: [{port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: headless, namespace: media}
spec:
  clusterIP: None
  trafficHint: LongLived
  ports: [{port: 80, protocol: TCP}]
)";

std::optional<Snapshot> load(const std::string& text) { return load_with_environment({{"c.yaml", text}}); }

TEST(FastPath, LongLivedServicesTcpAndUdpEveryAddressWithOrWithoutEndpoints) {
  auto snap = load(kBase);
  ASSERT_TRUE(snap);
  DiagSink diags;
  auto d = fastpath::desired_state(*snap, diags);
  ASSERT_TRUE(d) << diags.render(SourceManager{});
  EXPECT_EQ(d->devices, std::vector<std::string>{"eth0"});
  EXPECT_EQ(d->nodeports, (std::set<std::string>{"tcp . 31935"}));
  EXPECT_EQ(d->ip4_ports, (std::set<std::string>{"tcp . 10.96.0.5 . 1935", "udp . 10.96.0.5 . 5004",
                                                 "tcp . 192.0.2.7 . 1935", "udp . 192.0.2.7 . 5004",
                                                 "tcp . 203.0.113.9 . 1935", "udp . 203.0.113.9 . 5004"}));
  EXPECT_EQ(d->ip6_ports, (std::set<std::string>{"tcp . fd00:10:96::5 . 1935", "udp . fd00:10:96::5 . 5004"}));
}

TEST(FastPath, FullTransactionMarksBeforeDnatAndOffloadsInForward) {
  auto snap = load(kBase);
  DiagSink diags;
  auto r = compile_fastpath(*snap, nullptr, diags);
  ASSERT_TRUE(r);
  const std::string& t = r->text;
  EXPECT_EQ(t.rfind("add table inet kube-proxy-fastpath\n", 0), 0u) << t;
  EXPECT_NE(t.find("add flowtable inet kube-proxy-fastpath fastpath { hook ingress priority filter ; devices = { eth0 } ; }"),
            std::string::npos);
  EXPECT_NE(t.find("add chain inet kube-proxy-fastpath fastpath-mark { type filter hook prerouting priority -110 ; }"),
            std::string::npos);
  EXPECT_NE(t.find("add chain inet kube-proxy-fastpath fastpath { type filter hook forward priority 0 ; }"),
            std::string::npos);
  EXPECT_NE(t.find("meta mark & 0x00008000 == 0x00008000 flow add @fastpath"), std::string::npos);
  EXPECT_NE(t.find("meta mark set meta mark & 0xffff7fff"), std::string::npos);
  EXPECT_NE(t.find("add element inet kube-proxy-fastpath service-nodeports { tcp . 31935 }"), std::string::npos);
}

TEST(FastPath, IncrementalTransactionChangesOnlyWhatChanged) {
  auto before = load(kBase);
  std::string text = kBase;
  text.replace(text.find("externalIPs: [192.0.2.7]"), 24, "externalIPs: [192.0.2.8]");
  auto after = load(text);
  ASSERT_TRUE(before && after);
  DiagSink diags;
  auto same = compile_fastpath(*before, &*before, diags);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->text, "");
  auto r = compile_fastpath(*after, &*before, diags);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->text,
            "delete element inet kube-proxy-fastpath service-ip4-ports { tcp . 192.0.2.7 . 1935 }\n"
            "delete element inet kube-proxy-fastpath service-ip4-ports { udp . 192.0.2.7 . 5004 }\n"
            "add element inet kube-proxy-fastpath service-ip4-ports { tcp . 192.0.2.8 . 1935 }\n"
            "add element inet kube-proxy-fastpath service-ip4-ports { udp . 192.0.2.8 . 5004 }\n");
  // New devices: the flowtable is recreated, with the rule that refers to it.
  fastpath::Desired a = *fastpath::desired_state(*before, diags), b = a;
  b.devices.push_back("eth1");
  std::string dev = nftables::print_transaction(fastpath::fastpath_transaction(b, &a));
  EXPECT_EQ(dev.rfind("flush chain inet kube-proxy-fastpath fastpath\ndelete flowtable inet kube-proxy-fastpath fastpath\n"
                      "add flowtable inet kube-proxy-fastpath fastpath { hook ingress priority filter ; devices = { eth0, "
                      "eth1 } ; }\n",
                      0),
            0u)
      << dev;
}

TEST(FastPath, MasqueradeBitOfTheModeMustNotBeTheFastPathBit) {
  std::string text = kBase;
  text.replace(text.find("hostnameOverride: node-0"), 24, "hostnameOverride: node-0\nnftables: {masqueradeBit: 15}");
  auto snap = load(text);
  ASSERT_TRUE(snap);
  DiagSink diags;
  EXPECT_FALSE(fastpath::desired_state(*snap, diags));
  ASSERT_FALSE(diags.all().empty());
  EXPECT_EQ(diags.all()[0].code, DiagCode::InvalidConfig);
  EXPECT_EQ(diags.all()[0].path, "nftables.masqueradeBit");
  EXPECT_TRUE(diags.all()[0].pos.known());
  // The iptables section's bit does not matter to an nftables node.
  std::string ipt = kBase;
  ipt.replace(ipt.find("hostnameOverride: node-0"), 24, "hostnameOverride: node-0\niptables: {masqueradeBit: 15}");
  DiagSink d2;
  EXPECT_TRUE(fastpath::desired_state(*load(ipt), d2));
}

TEST(FastPath, CliUnknownTrafficHintIsALocatedErrorAndFamilyIsRefused) {
  std::string dir = temp_dir("fastpath");
  std::string text = kBase;
  text.replace(text.find("trafficHint: LongLived"), 22, "trafficHint: Bulk");
  write_file(dir + "/c.yaml", text);
  auto r = run({bin_path("kpc"), "compile", dir + "/c.yaml", "--backend", "fastpath"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("c.yaml:16:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("spec.trafficHint"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  auto fam = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "fastpath", "--family", "ipv6"});
  EXPECT_EQ(fam.exit_code, 2);
  EXPECT_NE(fam.err.find("one inet table for both families"), std::string::npos);
  auto ex = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "fastpath"});
  EXPECT_EQ(ex.exit_code, 0) << ex.err;
  EXPECT_EQ(ex.out, read_file(source_path("fixtures/example/expected/fastpath.nft")));
}

}  // namespace
}  // namespace kpc::test

namespace kpc::test {
namespace {

// This kernel cannot load a flowtable; kpc's nft model checks the whole table instead: it
// accepts the transaction (flowtable, `flow add` referring to it) and lists it as nft would.
TEST(FastPath, TheWholeTableIsValidForTheNftModel) {
  namespace vn = verifier::nft;
  vn::NftState state;
  std::string text = read_file(source_path("fixtures/example/expected/fastpath.nft"));
  auto r = vn::apply_script(state, text, "fastpath.nft");
  ASSERT_TRUE(r.ok) << r.error->render();
  std::string listed = vn::print_ruleset(state);
  EXPECT_NE(listed.find("flowtable fastpath {"), std::string::npos) << listed;
  EXPECT_NE(listed.find("devices = { eth0 }"), std::string::npos) << listed;
  EXPECT_NE(listed.find("flow add @fastpath"), std::string::npos) << listed;
  // A flow add to a flowtable that does not exist is refused, as nft refuses it.
  vn::NftState empty;
  auto bad = vn::apply_script(empty, "add table inet t\nadd chain inet t c { type filter hook forward priority 0 ; }\n"
                                     "add rule inet t c flow add @nope\n", "bad.nft");
  EXPECT_FALSE(bad.ok);
}

}  // namespace
}  // namespace kpc::test
