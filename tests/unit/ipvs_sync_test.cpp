// kube-proxy's IPVS sync from the node's state (issue 17 §2, compiler/ipvs/sync.h), with the
// graceful-termination cases of seed 004_098315146610bdd0.txt: each case's prior state is
// read as the tool reads it (verifier/ipvs readers -> tools/kpc/ipvs_prior.cpp), and the
// change script is applied to that prior with ipvsadm's semantics (verifier/ipvs) to check
// the state it leaves, not only its text.
#include <gtest/gtest.h>

#include "compiler/ipvs/print.h"
#include "compiler/ipvs/sync.h"
#include "tools/kpc/ipvs_state.h"
#include "verifier/ipvs/ipvsadm.h"

namespace kpc::test {
namespace {

namespace vi = verifier::ipvs;

IPAddr ip(const char* s) { return *IPAddr::parse(s); }

ipvs::VirtualServer vs(Protocol p, const char* addr, uint16_t port, std::vector<const char*> servers,
                       uint16_t rs_port = 8080) {
  ipvs::VirtualServer v;
  v.protocol = p;
  v.address = ip(addr);
  v.port = port;
  for (const char* s : servers) v.real_servers.push_back({ip(s), rs_port, 1});
  return v;
}

ipvs::Program program(std::vector<ipvs::VirtualServer> v) {
  ipvs::Program p;
  p.virtual_servers = std::move(v);
  std::sort(p.virtual_servers.begin(), p.virtual_servers.end(), ipvs::ipvsadm_less);
  return p;
}

struct Synced {
  ipvs::SyncResult r;
  vi::Table after;  ///< the prior with the change script applied
};

Synced sync(const ipvs::Program& full, const std::string& save, const std::string& stats = "",
            bool have_stats = true) {
  Synced s;
  ipvs::PriorState prior;
  std::string e;
  EXPECT_TRUE(cli::ipvs_prior_from_text(save, stats, have_stats, &prior, &e)) << e;
  s.r = ipvs::sync_from_prior(full, prior);
  EXPECT_TRUE(s.r.error.empty()) << s.r.error;
  EXPECT_TRUE(vi::parse_save(save, &s.after, &e)) << e;
  EXPECT_TRUE(vi::apply_script(s.r.ipvs_rules, &s.after, &e)) << e << "\n" << s.r.ipvs_rules;
  return s;
}

const vi::RealServer* server(const vi::Table& t, vi::Proto p, const char* vip, const char* rs) {
  auto it = t.services.find({p, *vi::parse_host_port(vip)});
  return it == t.services.end() ? nullptr : it->second.find(*vi::parse_host_port(rs));
}

const std::string kSave =
    "-A -t 10.96.0.1:80 -s rr\n"
    "-a -t 10.96.0.1:80 -r 10.244.1.1:8080 -m -w 1\n"
    "-a -t 10.96.0.1:80 -r 10.244.1.2:8080 -m -w 1\n";

std::string stats(const char* conns_of_1_2) {
  return std::string("TCP  10.96.0.1:80 rr\n  -> 10.244.1.1:8080 Masq 1 0 0\n  -> 10.244.1.2:8080 Masq 1 ") +
         conns_of_1_2 + "\n";
}

TEST(IpvsSync, NothingToDoWhenTheNodeHasTheProgram) {
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1", "10.244.1.2"})});
  auto s = sync(full, kSave, stats("0 0"));
  EXPECT_EQ(s.r.ipvs_rules, "");
}

TEST(IpvsSync, RemovedTcpServerWithLiveConnectionsDrainsAtWeightZero) {
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1"})});
  auto s = sync(full, kSave, stats("2 1"));
  EXPECT_EQ(s.r.ipvs_rules, "-e -t 10.96.0.1:80 -r 10.244.1.2:8080 -m -w 0\n");
  auto* rs = server(s.after, vi::Proto::TCP, "10.96.0.1:80", "10.244.1.2:8080");
  ASSERT_TRUE(rs);
  EXPECT_EQ(rs->weight, 0u);
  EXPECT_EQ(s.r.stats.rs_draining, 1u);
}

TEST(IpvsSync, RemovedTcpServerWithoutConnectionsIsDeleted) {
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1"})});
  auto s = sync(full, kSave, stats("0 0"));
  EXPECT_EQ(s.r.ipvs_rules, "-d -t 10.96.0.1:80 -r 10.244.1.2:8080\n");
  EXPECT_FALSE(server(s.after, vi::Proto::TCP, "10.96.0.1:80", "10.244.1.2:8080"));
}

TEST(IpvsSync, InactiveConnectionsCountToo) {  // ActiveConn + InActConn == 0, not ActiveConn alone
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1"})});
  EXPECT_EQ(sync(full, kSave, stats("0 3")).r.ipvs_rules, "-e -t 10.96.0.1:80 -r 10.244.1.2:8080 -m -w 0\n");
}

TEST(IpvsSync, CountsNotReadAreTakenAsLive) {
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1"})});
  EXPECT_EQ(sync(full, kSave, "", false).r.ipvs_rules, "-e -t 10.96.0.1:80 -r 10.244.1.2:8080 -m -w 0\n");
}

TEST(IpvsSync, UdpAndSctpServersAreDeletedAtOnce) {
  for (auto [p, opt, name] : {std::tuple{Protocol::UDP, "-u", "UDP"}, std::tuple{Protocol::SCTP, "--sctp-service", "SCTP"}}) {
    std::string save = std::string("-A ") + opt + " 10.96.0.1:53 -s rr\n-a " + opt +
                       " 10.96.0.1:53 -r 10.244.1.1:53 -m -w 1\n-a " + opt + " 10.96.0.1:53 -r 10.244.1.2:53 -m -w 1\n";
    std::string st = std::string(name) + " 10.96.0.1:53 rr\n -> 10.244.1.1:53 Masq 1 0 0\n -> 10.244.1.2:53 Masq 1 7 2\n";
    auto full = program({vs(p, "10.96.0.1", 53, {"10.244.1.1"}, 53)});
    auto s = sync(full, save, st);
    EXPECT_EQ(s.r.ipvs_rules, std::string("-d ") + opt + " 10.96.0.1:53 -r 10.244.1.2:53\n") << name;
  }
}

TEST(IpvsSync, EndpointBackWhileDrainingIsDeletedAndReAdded) {
  std::string save = kSave;
  save.replace(save.rfind("-w 1"), 4, "-w 0");  // 10.244.1.2 drains
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1", "10.244.1.2"})});
  auto s = sync(full, save, stats("4 0"));
  EXPECT_EQ(s.r.ipvs_rules,
            "-d -t 10.96.0.1:80 -r 10.244.1.2:8080\n"
            "-a -t 10.96.0.1:80 -r 10.244.1.2:8080 -m -w 1\n");
  EXPECT_EQ(server(s.after, vi::Proto::TCP, "10.96.0.1:80", "10.244.1.2:8080")->weight, 1u);
  EXPECT_EQ(s.r.stats.rs_readded, 1u);
}

TEST(IpvsSync, AlreadyDrainingServerGoesWhenIdleAndStaysOtherwise) {
  std::string save = kSave;
  save.replace(save.rfind("-w 1"), 4, "-w 0");
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1"})});
  EXPECT_EQ(sync(full, save, stats("1 0")).r.ipvs_rules, "");  // still draining: nothing to do
  EXPECT_EQ(sync(full, save, stats("0 0")).r.ipvs_rules, "-d -t 10.96.0.1:80 -r 10.244.1.2:8080\n");
}

TEST(IpvsSync, VirtualServerNoLongerWantedIsDeletedWithItsServers) {
  auto full = program({vs(Protocol::TCP, "10.96.0.2", 80, {"10.244.1.1"})});
  auto s = sync(full, kSave, stats("5 5"));
  EXPECT_EQ(s.r.ipvs_rules,
            "-A -t 10.96.0.2:80 -s rr\n-a -t 10.96.0.2:80 -r 10.244.1.1:8080 -m -w 1\n-D -t 10.96.0.1:80\n");
  EXPECT_EQ(s.after.services.size(), 1u);
}

TEST(IpvsSync, ExcludedVirtualServersAreNeverDeleted) {  // ipvs.excludeCIDRs
  auto full = program({});
  full.exclude_cidrs = {*CIDR::parse("10.96.0.0/30")};
  EXPECT_EQ(sync(full, kSave + "-A -t 10.96.0.9:80 -s rr\n").r.ipvs_rules, "-D -t 10.96.0.9:80\n");
}

TEST(IpvsSync, SchedulerOrPersistenceChangedIsEdited) {
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1", "10.244.1.2"})});
  full.virtual_servers[0].persistent = true;
  full.virtual_servers[0].timeout = 10800;
  auto s = sync(full, kSave, stats("0 0"));
  EXPECT_EQ(s.r.ipvs_rules, "-E -t 10.96.0.1:80 -s rr -p 10800\n");
  full.virtual_servers[0].scheduler = "mh";
  full.virtual_servers[0].source_port_hash = true;
  s = sync(full, kSave, stats("0 0"));
  EXPECT_EQ(s.r.ipvs_rules, "-E -t 10.96.0.1:80 -s mh -p 10800 -b mh-port\n");
  const auto& after = s.after.services.begin()->second;
  EXPECT_EQ(after.scheduler, "mh");
  EXPECT_EQ(after.flags, "mh-port");
  EXPECT_EQ(after.timeout, 10800u);
}

TEST(IpvsSync, WrongWeightOrForwardingIsEdited) {
  std::string save = "-A -t 10.96.0.1:80 -s rr\n-a -t 10.96.0.1:80 -r 10.244.1.1:8080 -g -w 1\n"
                     "-a -t 10.96.0.1:80 -r 10.244.1.2:8080 -m -w 5\n";
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1", "10.244.1.2"})});
  EXPECT_EQ(sync(full, save).r.ipvs_rules,
            "-e -t 10.96.0.1:80 -r 10.244.1.1:8080 -m -w 1\n-e -t 10.96.0.1:80 -r 10.244.1.2:8080 -m -w 1\n");
}

TEST(IpvsSync, TheOtherFamilyIsLeftAlone) {
  auto full = program({vs(Protocol::TCP, "10.96.0.1", 80, {"10.244.1.1", "10.244.1.2"})});
  auto s = sync(full, kSave + "-A -t [fd00::1]:80 -s rr\n");
  EXPECT_EQ(s.r.ipvs_rules, "");
}

ipvs::IpSet set(const char* name, ipvs::SetType type, std::vector<std::string> entries) {
  ipvs::IpSet s;
  s.name = s.base = name;
  s.type = type;
  s.comment = "why";
  s.entries = std::move(entries);
  return s;
}

TEST(IpvsSync, IpsetEntryDifferences) {
  auto full = program({});
  full.sets = {set("KUBE-CLUSTER-IP", ipvs::SetType::HashIPPort, {"10.96.0.1,tcp:80", "10.96.0.2,tcp:80"}),
               set("KUBE-LOAD-BALANCER-SOURCE-CIDR", ipvs::SetType::HashIPPortNet,
                   {"1.2.3.4,tcp:80,10.1.0.9/32", "1.2.3.4,tcp:80,10.2.0.0/16"}),
               set("KUBE-NODE-PORT-TCP", ipvs::SetType::BitmapPort, {"30080"})};
  ipvs::PriorState prior;
  prior.sets.emplace();
  std::string e;
  ASSERT_TRUE(cli::ipset_prior_from_text(
      "create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1\n"
      "add KUBE-CLUSTER-IP 10.96.0.1,tcp:80\nadd KUBE-CLUSTER-IP 10.96.0.9,tcp:80\n"
      "create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536\n"
      "add KUBE-LOAD-BALANCER-SOURCE-CIDR 1.2.3.4,tcp:80,10.1.0.9\n"
      "create OTHER hash:ip family inet\nadd OTHER 10.0.0.1\n",
      &*prior.sets, &e))
      << e;
  auto r = ipvs::sync_from_prior(full, prior);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.ipset_rules,
            "# why\ndel KUBE-CLUSTER-IP 10.96.0.9,tcp:80\nadd KUBE-CLUSTER-IP 10.96.0.2,tcp:80\n"
            "# why\nadd KUBE-LOAD-BALANCER-SOURCE-CIDR 1.2.3.4,tcp:80,10.2.0.0/16\n"
            "# why\ncreate KUBE-NODE-PORT-TCP bitmap:port range 0-65535 -exist\nadd KUBE-NODE-PORT-TCP 30080\n");
  // A set of kube-proxy's name but another type: no program.
  ASSERT_TRUE(cli::ipset_prior_from_text("create KUBE-CLUSTER-IP hash:ip family inet\n", &*prior.sets, &e));
  r = ipvs::sync_from_prior(full, prior);
  EXPECT_NE(r.error.find("KUBE-CLUSTER-IP is a hash:ip on the node"), std::string::npos) << r.error;
  EXPECT_TRUE(r.ipvs_rules.empty() && r.ipset_rules.empty());
}

TEST(IpvsSync, PriorStateErrorsAreLocated) {
  ipvs::PriorState prior;
  std::string e;
  EXPECT_FALSE(cli::ipvs_prior_from_text("-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r x\n", "", false, &prior, &e));
  EXPECT_EQ(e, "ipvs.save:2: error[E0900]: not an address:port: x");
  EXPECT_FALSE(cli::ipvs_prior_from_text("-A -t 10.0.0.1:80 -s rr\n", "\nTCP 10.0.0.2:80 rr\n", true, &prior, &e));
  EXPECT_EQ(e, "ipvs.stats:2: error[E0900]: virtual service TCP 10.0.0.2:80 is not in the saved table (ipvs.save)");
  std::vector<ipvs::PriorSet> sets;
  EXPECT_FALSE(cli::ipset_prior_from_text("add KUBE-X 10.0.0.1\n", &sets, &e));
  EXPECT_EQ(e.rfind("ipset.save:1: error[E0900]: ", 0), 0u) << e;
}

}  // namespace
}  // namespace kpc::test
