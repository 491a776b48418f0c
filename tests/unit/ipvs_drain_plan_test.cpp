// `kpc ipvs drain-plan`'s library (compiler/ipvs/drain_plan.h): what the sync from the node's
// state drains or deletes (taken from sync_from_prior's own record) and the warnings of seed
// 004_098315146610bdd0.txt for each kernel and sysctl combination it describes: conn_reuse_mode
// 0 (reused port to the draining server, termination never finishes), 1 on kernels < 5.9 with
// conntrack (first SYN dropped, 1 s), expire_nodest_conn and deleted servers.
#include <gtest/gtest.h>

#include <algorithm>

#include "compiler/ipvs/drain_plan.h"
#include "tools/kpc/ipvs_state.h"

namespace kpc::test {
namespace {

IPAddr ip(const char* s) { return *IPAddr::parse(s); }

// The wanted program: one TCP and one UDP virtual server, each with one endpoint left.
ipvs::Program program() {
  ipvs::Program p;
  for (Protocol proto : {Protocol::TCP, Protocol::UDP}) {
    ipvs::VirtualServer v;
    v.protocol = proto;
    v.address = ip("10.96.0.10");
    v.port = 53;
    v.real_servers.push_back({ip("10.244.1.2"), 53, 1});
    v.service_port = proto == Protocol::TCP ? "kube-system/kube-dns:dns-tcp" : "kube-system/kube-dns:dns";
    p.virtual_servers.push_back(v);
  }
  return p;
}

// The node: both virtual servers with a second real server 10.244.9.9 the program no longer has.
const std::string kSave =
    "-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
    "-a -t 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n"
    "-A -u 10.96.0.10:53 -s rr\n-a -u 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
    "-a -u 10.96.0.10:53 -r 10.244.9.9:53 -m -w 1\n";

std::vector<ipvs::RemovedRealServer> removed(const std::string& save, const std::string& stats) {
  ipvs::PriorState prior;
  std::string e;
  EXPECT_TRUE(cli::ipvs_prior_from_text(save, stats, true, &prior, &e)) << e;
  auto r = ipvs::sync_from_prior(program(), prior);
  EXPECT_TRUE(r.error.empty()) << r.error;
  return r.removed;
}

ipvs::DrainPlan plan_for(const std::string& kernel, std::vector<std::string> sysctls, const std::string& stats,
                         const std::string& save = kSave) {
  auto k = *ipvs::parse_kernel_version(kernel);
  ipvs::PlanInput pi;
  pi.kernel_release = kernel;
  auto s = ipvs::sysctls_from_plan(ipvs::node_plan(program(), pi), k);
  std::string e;
  for (const auto& a : sysctls) EXPECT_TRUE(ipvs::apply_sysctl(a, &s, &e)) << e;
  return ipvs::drain_plan(program(), removed(save, stats), k, kernel, s);
}

const ipvs::DrainService* service(const ipvs::DrainPlan& p, Protocol proto) {
  for (const auto& s : p.services)
    if (s.protocol == proto) return &s;
  return nullptr;
}

std::vector<std::string> kinds(const ipvs::DrainService* s) {
  std::vector<std::string> out;
  if (s)
    for (const auto& w : s->warnings) out.push_back(w.kind);
  return out;
}

const std::string kLive = "TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 2 3\n"
                          "UDP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 0 0\n";

TEST(IpvsDrainPlan, SysctlsFollowTheNodePlanForTheKernel) {
  auto at = [](const char* r) {
    ipvs::PlanInput pi;
    pi.kernel_release = r;
    return ipvs::sysctls_from_plan(ipvs::node_plan(program(), pi), *ipvs::parse_kernel_version(r));
  };
  EXPECT_EQ(at("4.19.0-25-amd64").conn_reuse_mode, 0);  // kube-proxy sets 0 on [4.1, 5.9)
  EXPECT_EQ(at("5.10").conn_reuse_mode, 1);             // left at the kernel's default
  EXPECT_EQ(at("6.1").conn_reuse_mode, 1);
  EXPECT_FALSE(at("3.10").conn_reuse_mode.has_value());  // no such sysctl
  EXPECT_EQ(at("6.1").expire_nodest_conn, 1);
  EXPECT_EQ(at("6.1").conntrack, 1);
  ipvs::IpvsSysctls s;
  std::string e;
  EXPECT_TRUE(ipvs::apply_sysctl("conn_reuse_mode=2", &s, &e));
  EXPECT_EQ(s.conn_reuse_mode, 2);
  for (const char* bad : {"net.ipv4.vs.conn_reuse_mode", "net.ipv4.vs.conn_reuse_mode=", "conntrack=-1",
                          "conntrack=1x", "net.ipv4.ip_forward=1", "=1"})
    EXPECT_FALSE(ipvs::apply_sysctl(bad, &s, &e)) << bad;
}

// TCP with live connections is drained (weight 0), UDP is deleted at once: both from the sync.
TEST(IpvsDrainPlan, FatesComeFromTheSync) {
  auto p = plan_for("6.1", {}, kLive);
  ASSERT_EQ(p.services.size(), 2u);
  auto* tcp = service(p, Protocol::TCP);
  ASSERT_TRUE(tcp && tcp->servers.size() == 1);
  EXPECT_EQ(tcp->service, "kube-system/kube-dns:dns-tcp");
  EXPECT_EQ(tcp->servers[0].fate, ipvs::RsFate::Draining);
  EXPECT_EQ(tcp->servers[0].active, 2u);
  EXPECT_EQ(tcp->servers[0].inactive, 3u);
  auto* udp = service(p, Protocol::UDP);
  ASSERT_TRUE(udp && udp->servers.size() == 1);
  EXPECT_EQ(udp->servers[0].fate, ipvs::RsFate::DeletedAtOnce);
  EXPECT_TRUE(p.draining);
  // Kernel 6.1 and kube-proxy's sysctls: a reused port is rescheduled without a drop.
  EXPECT_TRUE(kinds(tcp).empty());
  EXPECT_TRUE(kinds(udp).empty());  // 0 connections: nothing is cut
}

TEST(IpvsDrainPlan, ConnReuseMode0SendsReusedPortsToTheDrainingServer) {
  for (auto [kernel, sysctls] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"4.19.0-25-amd64", {}},  // kube-proxy's own choice on this kernel
           {"5.10", {"net.ipv4.vs.conn_reuse_mode=0"}},
           {"6.1", {"net.ipv4.vs.conn_reuse_mode=0"}},
           {"3.10", {}}}) {  // no sysctl: the kernel never reschedules
    auto p = plan_for(kernel, sysctls, kLive);
    EXPECT_EQ(kinds(service(p, Protocol::TCP)), std::vector<std::string>{"reused_port_to_draining_server"}) << kernel;
    EXPECT_NE(service(p, Protocol::TCP)->warnings[0].message.find("10.244.9.9:53 (2 active, 3 inactive)"),
              std::string::npos);
    EXPECT_NE(service(p, Protocol::TCP)->warnings[0].seed.find("004_098315146610bdd0.txt"), std::string::npos);
  }
}

TEST(IpvsDrainPlan, ConnReuseMode1DropsTheFirstSynBefore59) {
  auto p = plan_for("4.19.0-25-amd64", {"net.ipv4.vs.conn_reuse_mode=1"}, kLive);
  EXPECT_EQ(kinds(service(p, Protocol::TCP)), std::vector<std::string>{"syn_dropped_1s"});
  p = plan_for("5.10", {"net.ipv4.vs.conn_reuse_mode=1"}, kLive);  // fixed in 5.9
  EXPECT_TRUE(kinds(service(p, Protocol::TCP)).empty());
  p = plan_for("4.19", {"net.ipv4.vs.conn_reuse_mode=1", "net.ipv4.vs.conntrack=0"}, kLive);
  EXPECT_TRUE(kinds(service(p, Protocol::TCP)).empty());  // the seed's kernel-side remedy
  p = plan_for("6.1", {"net.ipv4.vs.expire_nodest_conn=0"}, kLive);
  EXPECT_EQ(kinds(service(p, Protocol::TCP)), std::vector<std::string>{"reused_port_not_rescheduled"});
}

TEST(IpvsDrainPlan, DeletedServersWithConnections) {
  const std::string stats = "TCP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 0 0\n"
                            "UDP  10.96.0.10:53 rr\n  -> 10.244.9.9:53 Masq 1 0 7\n";
  auto p = plan_for("6.1", {}, stats);
  EXPECT_FALSE(p.draining);  // TCP idle: deleted; UDP: deleted at once
  EXPECT_EQ(service(p, Protocol::TCP)->servers[0].fate, ipvs::RsFate::DeletedIdle);
  EXPECT_TRUE(kinds(service(p, Protocol::TCP)).empty());
  EXPECT_EQ(kinds(service(p, Protocol::UDP)), std::vector<std::string>{"connections_expire_on_deleted_server"});
  p = plan_for("6.1", {"net.ipv4.vs.expire_nodest_conn=0"}, stats);
  EXPECT_EQ(kinds(service(p, Protocol::UDP)), std::vector<std::string>{"deleted_server_blackholes"});
}

TEST(IpvsDrainPlan, BackWhileDrainingAndDeletedVirtualServers) {
  // 10.244.1.2 is at weight 0 with connections and wanted again: deleted and re-added; a stale
  // virtual server goes with its real servers.
  std::string save = kSave;
  save.replace(save.find("10.244.1.2:53 -m -w 1"), 21, "10.244.1.2:53 -m -w 0");
  save += "-A -t 10.96.99.99:80 -s rr\n-a -t 10.96.99.99:80 -r 10.244.7.7:80 -m -w 1\n";
  auto p = plan_for("6.1", {}, "TCP  10.96.0.10:53 rr\n  -> 10.244.1.2:53 Masq 0 1 0\n", save);
  auto* tcp = service(p, Protocol::TCP);
  ASSERT_TRUE(tcp);
  auto readded = std::find_if(tcp->servers.begin(), tcp->servers.end(),
                              [](const auto& s) { return s.fate == ipvs::RsFate::Readded; });
  ASSERT_NE(readded, tcp->servers.end());
  EXPECT_EQ(readded->address, ip("10.244.1.2"));
  EXPECT_EQ(kinds(tcp), std::vector<std::string>{"connections_expire_on_deleted_server"});
  auto gone = std::find_if(p.services.begin(), p.services.end(), [](const auto& s) { return s.port == 80; });
  ASSERT_NE(gone, p.services.end());
  EXPECT_EQ(gone->service, "");
  EXPECT_EQ(gone->servers[0].fate, ipvs::RsFate::DeletedWithVirtualServer);
}

TEST(IpvsDrainPlan, NothingRemovedIsAnEmptyPlan) {
  const std::string save = "-A -t 10.96.0.10:53 -s rr\n-a -t 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n"
                           "-A -u 10.96.0.10:53 -s rr\n-a -u 10.96.0.10:53 -r 10.244.1.2:53 -m -w 1\n";
  auto p = plan_for("4.19", {}, "", save);
  EXPECT_TRUE(p.services.empty());
  EXPECT_FALSE(p.draining);
  EXPECT_EQ(p.warnings, 0u);
}

}  // namespace
}  // namespace kpc::test
