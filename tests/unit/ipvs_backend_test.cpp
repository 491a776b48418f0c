// The IPVS back end (issue 17 §1): the choice of back end (--backend ipvs, mode: ipvs), the
// node plan's kernel-dependent sysctls, ipvsadm's spelling of schedulers and persistence,
// IPVS's Local-policy fallback, the example's pinned files, and bad input (exit 2, located,
// nothing written).
#include <gtest/gtest.h>

#include <filesystem>

#include "compiler/driver/backend.h"
#include "compiler/driver/compile_ipvs.h"
#include "compiler/ipvs/node_plan.h"
#include "compiler/model/loader.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

const char* kCluster = R"(apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
hostnameOverride: n1
CONFIG
---
apiVersion: kpc.dev/v1alpha1
kind: NodeEnvironment
kernel: {version: "KERNEL"}
interfaces:
- {name: lo, addresses: [127.0.0.1/8]}
- {name: eth0, addresses: [192.168.0.10/24]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  type: NodePort
  clusterIP: 10.96.0.5
  externalTrafficPolicy: Local
  sessionAffinity: ClientIP
  ports: [{name: http, port: 80, protocol: TCP, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- {addresses: [10.244.2.7], nodeName: n2}
ports: [{name: http, port: 8080, protocol: TCP}]
)";

std::string cluster(const std::string& kernel, const std::string& config = "") {
  std::string s = kCluster;
  s.replace(s.find("KERNEL"), 6, kernel);
  s.replace(s.find("CONFIG"), 6, config);
  return s;
}

std::optional<IpvsCompileResult> compile(const std::string& text, std::string* err = nullptr) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  if (!load_snapshot_text({{"c.yaml", text}}, LoadOptions{}, sm, &snap, diags)) {
    if (err) *err = diags.render(sm);
    return std::nullopt;
  }
  auto r = compile_ipvs(snap, IPFamily::V4, diags);
  if (err) *err = diags.render(sm);
  return r;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(IpvsBackend, ModeAndBackendNameChooseIpvs) {
  std::string error;
  auto t = parse_backend("ipvs", IPFamily::V6, &error);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->kind, BackendKind::IPVS);
  EXPECT_EQ(t->family, IPFamily::V6);
  EXPECT_STREQ(backend_kind_name(BackendKind::IPVS), "ipvs");
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  ASSERT_TRUE(load_snapshot_text({{"c.yaml", cluster("6.1")}}, LoadOptions{}, sm, &snap, diags));
  auto m = target_for_mode(snap, IPFamily::V4, diags);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, BackendKind::IPVS);
  EXPECT_FALSE(diags.has_errors());
}

TEST(IpvsBackend, ConnReuseModeDependsOnTheKernel) {
  struct Case {
    const char* kernel;
    bool set_zero, left_alone;
  };
  for (Case c : {Case{"4.0.9", false, false}, Case{"4.1", true, false}, Case{"4.19.0-26-amd64", true, false},
                 Case{"5.8.18", true, false}, Case{"5.9", false, true}, Case{"6.1.0-18-amd64", false, true}}) {
    SCOPED_TRACE(c.kernel);
    auto r = compile(cluster(c.kernel));
    ASSERT_TRUE(r);
    EXPECT_EQ(has(r->node_plan, "\nnet.ipv4.vs.conn_reuse_mode = 0\n"), c.set_zero) << r->node_plan;
    EXPECT_EQ(has(r->node_plan, "# net.ipv4.vs.conn_reuse_mode left as it is: kernel"), c.left_alone);
    if (!c.set_zero && !c.left_alone) EXPECT_TRUE(has(r->node_plan, "is older than 4.1"));
    // Every plan line has its reason, and the reasons cite the seed.
    EXPECT_TRUE(has(r->node_plan, "seed 004_098315146610bdd0.txt\nnet.ipv4.vs.expire_nodest_conn = 1\n"));
    EXPECT_TRUE(has(r->node_plan, "net.ipv4.vs.conntrack = 1\n"));
    EXPECT_TRUE(has(r->node_plan, "net.ipv4.vs.expire_quiescent_template = 1\n"));
    EXPECT_FALSE(has(r->node_plan, "arp_ignore"));
    EXPECT_FALSE(has(r->node_plan, "ipvsadm --set"));
  }
}

TEST(IpvsBackend, StrictArpTimeoutsAndScheduler) {
  auto r = compile(cluster("5.4", "ipvs: {strictARP: true, scheduler: mh, tcpTimeout: 900s, udpTimeout: 5m}"));
  ASSERT_TRUE(r);
  EXPECT_TRUE(has(r->node_plan, "\nnet.ipv4.conf.all.arp_ignore = 1\n"));
  EXPECT_TRUE(has(r->node_plan, "\nnet.ipv4.conf.all.arp_announce = 2\n"));
  EXPECT_TRUE(has(r->node_plan, "\nipvsadm --set 900 0 300\n"));
  // mh hashes the source port too (flag 0x10); ClientIP affinity is persistence.
  EXPECT_TRUE(has(r->ipvs_rules, "-A -t 10.96.0.5:80 -s mh -p 10800 -b mh-port\n")) << r->ipvs_rules;
}

TEST(IpvsBackend, LocalPolicyFallsBackToClusterEndpoints) {
  // eTP=Local and no local endpoint: iptables and nftables drop, IPVS uses the cluster's.
  auto r = compile(cluster("6.1"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->ipvs_rules,
            "-A -t 10.96.0.5:80 -s rr -p 10800\n"
            "-a -t 10.96.0.5:80 -r 10.244.2.7:8080 -m -w 1\n"
            "-A -t 192.168.0.10:30080 -s rr -p 10800\n"
            "-a -t 192.168.0.10:30080 -r 10.244.2.7:8080 -m -w 1\n");
  EXPECT_TRUE(has(r->ipset_rules, "add KUBE-NODE-PORT-LOCAL-TCP 30080\n"));
  EXPECT_TRUE(has(r->node_plan, "# ClusterIP of shop/web:http\nip addr add 10.96.0.5/32 dev kube-ipvs0\n"));
  EXPECT_FALSE(has(r->node_plan, "192.168.0.10/32"));  // NodePort addresses are not bound
}

TEST(IpvsBackend, KernelVersionCannotCarryText) {
  for (const char* bad : {"6.1\\nnet.ipv4.ip_forward = 0", "6", "six", "6.1 # x", "6.1;reboot", "-6.1"}) {
    SCOPED_TRACE(bad);
    std::string err;
    EXPECT_FALSE(compile(cluster(bad), &err));
    EXPECT_TRUE(has(err, "c.yaml:9:")) << err;
    EXPECT_TRUE(has(err, "error[E0500]")) << err;
  }
  EXPECT_TRUE(ipvs::valid_kernel_release("6.1.0-18-amd64"));
  EXPECT_EQ(ipvs::parse_kernel_version("5.4.0-150-generic"), (ipvs::KernelVersion{5, 4, 0}));
  EXPECT_EQ(ipvs::parse_kernel_version("4.19"), (ipvs::KernelVersion{4, 19, 0}));
  EXPECT_FALSE(ipvs::parse_kernel_version("5"));
}

TEST(IpvsBackend, CliWritesFourFilesOrNothing) {
  std::string dir = temp_dir("ipvs");
  write_file(dir + "/c.yaml", cluster("6.1"));
  auto ok = run({bin_path("kpc"), "compile", dir + "/c.yaml", "-o", dir + "/out", "--stats"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  for (const char* f : {"ipvs.rules", "ipset.rules", "iptables.rules", "node.plan"})
    EXPECT_TRUE(fs::exists(dir + "/out/" + f)) << f;
  EXPECT_TRUE(has(ok.err, "ipvs: 2 virtual servers, 2 real servers")) << ok.err;

  write_file(dir + "/bad.yaml", cluster("6.1;reboot"));
  auto bad = run({bin_path("kpc"), "compile", dir + "/bad.yaml", "-o", dir + "/bad-out"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(has(bad.err, "bad.yaml:9:")) << bad.err;
  EXPECT_FALSE(fs::exists(dir + "/bad-out"));

  auto no_dir = run({bin_path("kpc"), "compile", dir + "/c.yaml", "--backend", "ipvs"});
  EXPECT_EQ(no_dir.exit_code, 2);
  EXPECT_TRUE(has(no_dir.err, "give -o DIR")) << no_dir.err;
  EXPECT_EQ(no_dir.out, "");

  // --node is a name, never text for the plan's header.
  auto node = run({bin_path("kpc"), "compile", dir + "/c.yaml", "--node", "n1\n# x", "-o", dir + "/n"});
  EXPECT_EQ(node.exit_code, 2);
  EXPECT_FALSE(fs::exists(dir + "/n"));

  auto prior = run({bin_path("kpc"), "compile", dir + "/c.yaml", "--prior", dir + "/c.yaml", "-o", dir + "/p"});
  EXPECT_EQ(prior.exit_code, 2);
  EXPECT_FALSE(fs::exists(dir + "/p"));
}

TEST(IpvsBackend, ExampleMatchesPinnedFiles) {
  for (const char* family : {"ipv4", "ipv6"}) {
    std::string dir = temp_dir("ipvs-ex");
    auto r = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "ipvs", "--family", family,
                  "-o", dir});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* f : {"ipvs.rules", "ipset.rules", "iptables.rules", "node.plan"})
      EXPECT_EQ(read_file(dir + "/" + f),
                read_file(source_path(std::string("fixtures/example/expected/ipvs-") + family + "/" + f)))
          << family << " " << f;
  }
}

}  // namespace
}  // namespace kpc::test
