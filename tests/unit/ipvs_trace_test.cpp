// The IPVS concrete tracer (verifier/ipvs_trace) on hand-written program sets: hook order,
// masquerading by mark and by KUBE-LOOP-BACK, the scheduler's shares (rr, wrr, fo, weight 0,
// schedulers not modelled), persistence, a virtual server without usable real servers
// (ip_vs_leave: ICMP port unreachable), KUBE-IPVS-FILTER's REJECT, -m ipvs in OUTPUT, and
// located errors of bad files.
#include <gtest/gtest.h>

#include <map>

#include "verifier/ipvs_trace/tracer.h"

namespace kpc::test {
namespace {

namespace it = verifier::ipvs_trace;
namespace vt = verifier::trace;

const char* kIptables = R"(*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
-A KUBE-POSTROUTING -m comment --comment "hairpin" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-NODE-PORT -p tcp -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-A KUBE-IPVS-OUT-FILTER -s 10.96.0.50 -m ipvs --vaddr 10.96.0.50 --vproto tcp --vport 443 -j DROP
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
COMMIT
)";

const char* kIpset = R"(create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536 -exist
flush KUBE-LOOP-BACK
add KUBE-LOOP-BACK 10.244.1.5,tcp:8080,10.244.1.5
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 -exist
flush KUBE-CLUSTER-IP
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
add KUBE-CLUSTER-IP 10.96.0.11,tcp:80
add KUBE-CLUSTER-IP 10.96.0.12,tcp:80
add KUBE-CLUSTER-IP 10.96.0.13,tcp:80
add KUBE-CLUSTER-IP 10.96.0.14,tcp:80
add KUBE-CLUSTER-IP 10.96.0.15,tcp:80
add KUBE-CLUSTER-IP 10.96.0.50,tcp:443
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535 -exist
flush KUBE-NODE-PORT-TCP
add KUBE-NODE-PORT-TCP 30080
create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536 -exist
flush KUBE-IPVS-IPS
add KUBE-IPVS-IPS 10.96.0.10
add KUBE-IPVS-IPS 10.96.0.11
add KUBE-IPVS-IPS 10.96.0.12
add KUBE-IPVS-IPS 10.96.0.13
add KUBE-IPVS-IPS 10.96.0.14
add KUBE-IPVS-IPS 10.96.0.15
add KUBE-IPVS-IPS 10.96.0.50
)";

// 10: rr over three; 11: wrr 1:3 (+ one weight 0); 12: no real server; 13: only weight 0;
// 14: persistent rr; 15: lc (not modelled); 50: rr, OUT-FILTER'd from its own address;
// 192.168.0.10:30080 a NodePort (a node address).
const char* kIpvs = R"(-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.6:8080 -m -w 1
-a -t 10.96.0.10:80 -r 10.244.2.7:8080 -m -w 1
-A -t 10.96.0.11:80 -s wrr
-a -t 10.96.0.11:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.11:80 -r 10.244.2.6:8080 -m -w 3
-a -t 10.96.0.11:80 -r 10.244.2.7:8080 -m -w 0
-A -t 10.96.0.12:80 -s rr
-A -t 10.96.0.13:80 -s rr
-a -t 10.96.0.13:80 -r 10.244.2.7:8080 -m -w 0
-A -t 10.96.0.14:80 -s rr -p 10800
-a -t 10.96.0.14:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.14:80 -r 10.244.2.6:8080 -m -w 1
-a -t 10.96.0.14:80 -r 10.244.2.7:8080 -m -w 0
-A -t 10.96.0.15:80 -s lc
-a -t 10.96.0.15:80 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.15:80 -r 10.244.2.6:8080 -m -w 2
-A -t 10.96.0.50:443 -s rr
-a -t 10.96.0.50:443 -r 10.244.2.6:8443 -m -w 1
-A -t 192.168.0.10:30080 -s rr
-a -t 192.168.0.10:30080 -r 10.244.2.6:8080 -m -w 1
)";

const char* kPlan = R"(# plan
ip link add kube-ipvs0 type dummy
ip addr add 10.96.0.10/32 dev kube-ipvs0
ip addr add 10.96.0.11/32 dev kube-ipvs0
ip addr add 10.96.0.12/32 dev kube-ipvs0
ip addr add 10.96.0.13/32 dev kube-ipvs0
ip addr add 10.96.0.14/32 dev kube-ipvs0
ip addr add 10.96.0.15/32 dev kube-ipvs0
ip addr add 10.96.0.50/32 dev kube-ipvs0
net.ipv4.vs.conntrack = 1
net.ipv4.vs.expire_quiescent_template = 1
)";

it::ProgramTexts texts() {
  it::ProgramTexts t;
  t.ipvs = kIpvs;
  t.ipset = kIpset;
  t.iptables = kIptables;
  t.node_plan = std::string(kPlan);
  return t;
}

it::ProgramSet load(const it::ProgramTexts& t = texts()) {
  it::ProgramSet s;
  it::LoadError e;
  EXPECT_TRUE(it::load_program_set(t, std::nullopt, &s, &e)) << e.text();
  return s;
}

vt::Packet packet(const char* src, const char* dst, uint16_t dport, vt::Origin from = vt::Origin::Pod) {
  vt::Packet p;
  p.src = *IPAddr::parse(src);
  p.dst = *IPAddr::parse(dst);
  p.dport = dport;
  p.origin = from;
  p.in_iface = "cbr0";
  return p;
}

// real server -> share, of the accepted outcomes; other verdicts under their name.
std::map<std::string, std::string> shares(const it::TraceResult& r) {
  std::map<std::string, std::string> m;
  for (const auto& d : it::distribution(r))
    m[d.verdict == vt::Verdict::Accept ? d.dnat_text + (d.masquerade ? " masq" : "")
                                       : std::string(vt::verdict_name(d.verdict))] = d.probability.fraction();
  return m;
}

struct IpvsTrace : ::testing::Test {
  it::ProgramSet set = load();
  it::TraceOptions opts() {
    it::TraceOptions o;
    o.local_addresses = {*IPAddr::parse("192.168.0.10")};
    return o;
  }
};

TEST_F(IpvsTrace, RoundRobinEqualSharesFromAPodWithoutMasquerade) {
  it::Tracer t(set, opts());
  auto r = t.trace(packet("10.244.2.9", "10.96.0.10", 80), {});
  using M = std::map<std::string, std::string>;
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080", "1/3"}, {"10.244.2.6:8080", "1/3"}, {"10.244.2.7:8080", "1/3"}}));
  ASSERT_EQ(r.outcomes.size(), 3u);
  const auto& o = r.outcomes[0];
  EXPECT_EQ(o.route, "ipvs-nat");
  EXPECT_EQ(o.virtual_server, "TCP 10.96.0.10:80");
  // Hook order: nat PREROUTING, filter INPUT (KUBE-IPVS-FILTER returns), IPVS at LOCAL_IN, nat POSTROUTING.
  std::vector<std::string> where;
  for (const auto& s : o.path) where.push_back(s.table + " " + s.chain);
  auto pos = [&](const std::string& w) { return std::find(where.begin(), where.end(), w) - where.begin(); };
  EXPECT_LT(pos("nat PREROUTING"), pos("filter INPUT"));
  EXPECT_LT(pos("filter INPUT"), pos("ipvs LOCAL_IN"));
  EXPECT_LT(pos("ipvs LOCAL_IN"), pos("nat POSTROUTING"));
  EXPECT_TRUE(r.total().is_one());
}

TEST_F(IpvsTrace, MasqueradeByMarkFromOutsideThePodCidrAndHairpinByLoopBackSet) {
  it::Tracer t(set, opts());
  using M = std::map<std::string, std::string>;
  auto r = t.trace(packet("192.168.0.77", "10.96.0.10", 80, vt::Origin::External), {});
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080 masq", "1/3"}, {"10.244.2.6:8080 masq", "1/3"},
                          {"10.244.2.7:8080 masq", "1/3"}}));
  EXPECT_EQ(r.outcomes[0].final_mark, 0u);  // KUBE-POSTROUTING's --xor-mark clears it
  // A pod reaching itself through the service: KUBE-LOOP-BACK (dst,dst,src) masquerades.
  r = t.trace(packet("10.244.1.5", "10.96.0.10", 80), {});
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080 masq", "1/3"}, {"10.244.2.6:8080", "1/3"}, {"10.244.2.7:8080", "1/3"}}));
}

TEST_F(IpvsTrace, WeightedRoundRobinAndDrainingServersGetNothing) {
  it::Tracer t(set, opts());
  using M = std::map<std::string, std::string>;
  auto r = t.trace(packet("10.244.2.9", "10.96.0.11", 80), {});
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080", "1/4"}, {"10.244.2.6:8080", "3/4"}}));
}

TEST_F(IpvsTrace, NoUsableRealServerIsIcmpPortUnreachable) {
  it::Tracer t(set, opts());
  for (const char* vip : {"10.96.0.12", "10.96.0.13"}) {
    auto r = t.trace(packet("10.244.2.9", vip, 80), {});
    ASSERT_EQ(r.outcomes.size(), 1u) << vip;
    EXPECT_EQ(r.outcomes[0].verdict, vt::Verdict::Reject);
    EXPECT_NE(r.outcomes[0].options.find("icmp-port-unreachable (ip_vs_leave)"), std::string::npos);
    EXPECT_TRUE(r.outcomes[0].route.empty());
  }
}

TEST_F(IpvsTrace, AKubeIpvs0AddressOnAPortWithoutVirtualServerIsRejectedByTheFilter) {
  it::Tracer t(set, opts());
  auto r = t.trace(packet("10.244.2.9", "10.96.0.10", 81), {});
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, vt::Verdict::Reject);
  EXPECT_TRUE(r.outcomes[0].virtual_server.empty());
  EXPECT_EQ(r.outcomes[0].path.back().chain, "KUBE-IPVS-FILTER");
}

TEST_F(IpvsTrace, PersistenceNewRememberedExpiredAndQuiescent) {
  it::Tracer t(set, opts());
  using M = std::map<std::string, std::string>;
  auto p = packet("10.244.2.9", "10.96.0.14", 80);
  auto r = t.trace(p, {});
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080", "1/2"}, {"10.244.2.6:8080", "1/2"}}));
  EXPECT_NE(r.outcomes[0].affinity.find("new client"), std::string::npos);
  it::Client c;
  c.remembered = *verifier::ipvs::parse_host_port("10.244.2.6:8080");
  c.age = 100;
  r = t.trace(p, c);
  EXPECT_EQ(shares(r), (M{{"10.244.2.6:8080", "1"}}));
  c.age = 10800;  // the template timed out
  r = t.trace(p, c);
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080", "1/2"}, {"10.244.2.6:8080", "1/2"}}));
  // Remembered at a weight-0 server: expire_quiescent_template = 1 (the plan) reschedules ...
  c.remembered = *verifier::ipvs::parse_host_port("10.244.2.7:8080");
  c.age = 5;
  r = t.trace(p, c);
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080", "1/2"}, {"10.244.2.6:8080", "1/2"}}));
  // ... and without it the client stays on the draining server.
  auto t2 = texts();
  t2.node_plan = "ip addr add 10.96.0.14/32 dev kube-ipvs0\n";
  auto set2 = load(t2);
  it::Tracer tq(set2, opts());
  r = tq.trace(p, c);
  EXPECT_EQ(shares(r), (M{{"10.244.2.7:8080", "1"}}));
  // A remembered server that is gone: rescheduled.
  c.remembered = *verifier::ipvs::parse_host_port("10.244.9.9:8080");
  r = t.trace(p, c);
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080", "1/2"}, {"10.244.2.6:8080", "1/2"}}));
}

TEST_F(IpvsTrace, SchedulersNotModelledAreUnknownUnlessSharesAreAssumed) {
  it::Tracer t(set, opts());
  auto r = t.trace(packet("10.244.2.9", "10.96.0.15", 80), {});
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, vt::Verdict::Unknown);
  EXPECT_NE(r.outcomes[0].unknown_reason.find("scheduler lc"), std::string::npos);
  auto o = opts();
  o.equal_shares_for_others = true;
  it::Tracer t2(set, o);
  using M = std::map<std::string, std::string>;
  EXPECT_EQ(shares(t2.trace(packet("10.244.2.9", "10.96.0.15", 80), {})),
            (M{{"10.244.1.5:8080", "1/3"}, {"10.244.2.6:8080", "2/3"}}));
}

TEST_F(IpvsTrace, NodePortOnANodeAddressAndForwardedTraffic) {
  it::Tracer t(set, opts());
  using M = std::map<std::string, std::string>;
  auto r = t.trace(packet("203.0.113.7", "192.168.0.10", 30080, vt::Origin::External), {});
  EXPECT_EQ(shares(r), (M{{"10.244.2.6:8080 masq", "1"}}));
  // Without the node address the NodePort is not local: forwarded, IPVS not involved.
  it::Tracer t2(set, {});
  r = t2.trace(packet("203.0.113.7", "192.168.0.10", 30080, vt::Origin::External), {});
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].route, "forward");
  EXPECT_FALSE(r.outcomes[0].dnat);
  // A local address without virtual server: delivered locally.
  r = t.trace(packet("203.0.113.7", "192.168.0.10", 22, vt::Origin::External), {});
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].route, "local");
}

TEST_F(IpvsTrace, FromTheNodeIpvsAtLocalOutAndTheIpvsMatchInOutput) {
  it::Tracer t(set, opts());
  using M = std::map<std::string, std::string>;
  auto r = t.trace(packet("192.168.0.10", "10.96.0.10", 80, vt::Origin::Node), {});
  EXPECT_EQ(shares(r), (M{{"10.244.1.5:8080 masq", "1/3"}, {"10.244.2.6:8080 masq", "1/3"},
                          {"10.244.2.7:8080 masq", "1/3"}}));
  bool local_out = false;
  for (const auto& s : r.outcomes[0].path) local_out |= s.table == "ipvs" && s.chain == "LOCAL_OUT";
  EXPECT_TRUE(local_out);
  // KUBE-IPVS-OUT-FILTER: the node reaching 10.96.0.50 from that address is dropped (-m ipvs).
  r = t.trace(packet("10.96.0.50", "10.96.0.50", 443, vt::Origin::Node), {});
  EXPECT_EQ(shares(r), (M{{"DROP", "1"}}));
  EXPECT_EQ(r.outcomes[0].path.back().chain, "KUBE-IPVS-OUT-FILTER");
  // From another source the same rule does not match.
  r = t.trace(packet("192.168.0.10", "10.96.0.50", 443, vt::Origin::Node), {});
  EXPECT_EQ(shares(r), (M{{"10.244.2.6:8443 masq", "1"}}));
}

TEST_F(IpvsTrace, NotTheFirstPacketIsUnknownAtIpvs) {
  it::Tracer t(set, opts());
  auto p = packet("10.244.2.9", "10.96.0.10", 80);
  p.ctstate = ir::kCtEstablished;
  auto r = t.trace(p, {});
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, vt::Verdict::Unknown);
  EXPECT_NE(r.outcomes[0].unknown_reason.find("connection entry"), std::string::npos);
}

TEST(IpvsTraceLoad, BadFilesAreLocated) {
  auto t = texts();
  t.ipvs = "-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r x -m -w 1\n";
  it::ProgramSet s;
  it::LoadError e;
  EXPECT_FALSE(it::load_program_set(t, std::nullopt, &s, &e));
  EXPECT_EQ(e.file, "ipvs.rules");
  EXPECT_EQ(e.line, 2u);
  t = texts();
  t.ipset = std::string(kIpset) + "bogus line\n";
  EXPECT_FALSE(it::load_program_set(t, std::nullopt, &s, &e));
  EXPECT_EQ(e.file, "ipset.rules");
  EXPECT_EQ(e.line, 25u);
  t = texts();
  t.iptables = "*nat\n-A NOPE -j ACCEPT\nCOMMIT\n";
  EXPECT_FALSE(it::load_program_set(t, std::nullopt, &s, &e));
  EXPECT_EQ(e.file, "iptables.rules");
  EXPECT_EQ(e.line, 2u);
  t = texts();
  t.node_plan = "ip addr add 10.96.0.10/32 dev kube-ipvs0\nrm -rf /\n";
  EXPECT_FALSE(it::load_program_set(t, std::nullopt, &s, &e));
  EXPECT_EQ(e.file, "node.plan");
  EXPECT_EQ(e.line, 2u);
  t = texts();
  t.ipset = "create A hash:ip\nadd A 10.0.0.1\nflush A\n";
  EXPECT_FALSE(it::load_program_set(t, std::nullopt, &s, &e));
  EXPECT_EQ(e.line, 3u);
}

}  // namespace
}  // namespace kpc::test
