// kube-proxy test mode (trace_kube_proxy_test): the shortcuts of proxier_test.go's
// tracePacket, reproduced exactly, and a check that the packet-flow comparison does
// catch a broken program.
#include <gtest/gtest.h>

#include "tests/support/test_util.h"
#include "verifier/state/state.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {
namespace {

const std::vector<std::string> kNodeIPs = {"192.168.0.2", "192.168.1.2", "192.168.99.11", "2001:db8::1",
                                           "2001:db8:1::2"};

RulesetState load(const std::string& program, IPFamily family = IPFamily::V4, bool jumps = true) {
  RulesetState st = RulesetState::empty(family);
  ApplyOptions ao{true, Flavor::Legacy};
  if (jumps) {
    EXPECT_TRUE(add_kube_proxy_jumps(st));
  }
  ParseError pe;
  auto r = apply_text(st, program, ao, &pe);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->reason : "") << " " << pe.message;
  return st;
}

RulesetState overall() {
  return load(test::read_file(test::source_path("fixtures/kp-overall-iptables-rules/expected/iptables.restore")));
}

KubeProxyTestResult kp(const RulesetState& st, const std::string& src, const std::string& dst, int port,
                       const std::string& proto = "tcp") {
  return trace_kube_proxy_test(st, src, proto, dst, std::to_string(port), kNodeIPs);
}

std::vector<std::string> targets(const RulesetState& st, ir::TableId t, const std::string& chain) {
  std::vector<std::string> out;
  for (uint32_t id : st.find(t, chain)->rules) out.push_back(st.store->jump(id));
  return out;
}

TEST(TraceKubeProxyMode, JumpRulesAsKubeProxyInstallsThem) {
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ASSERT_TRUE(add_kube_proxy_jumps(st));
  using V = std::vector<std::string>;
  EXPECT_EQ(targets(st, ir::TableId::Filter, "INPUT"),
            (V{"KUBE-FIREWALL", "KUBE-PROXY-FIREWALL", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES"}));
  EXPECT_EQ(targets(st, ir::TableId::Filter, "FORWARD"),
            (V{"KUBE-PROXY-FIREWALL", "KUBE-FORWARD", "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES"}));
  EXPECT_EQ(targets(st, ir::TableId::Filter, "OUTPUT"), (V{"KUBE-FIREWALL", "KUBE-PROXY-FIREWALL", "KUBE-SERVICES"}));
  EXPECT_EQ(targets(st, ir::TableId::Nat, "PREROUTING"), (V{"KUBE-SERVICES"}));
  EXPECT_EQ(targets(st, ir::TableId::Nat, "OUTPUT"), (V{"KUBE-SERVICES"}));
  EXPECT_EQ(targets(st, ir::TableId::Nat, "POSTROUTING"), (V{"KUBE-POSTROUTING"}));
  std::string save = print_save(st, Flavor::Legacy);
  EXPECT_NE(save.find("-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible "
                      "service portals\" -j KUBE-EXTERNAL-SERVICES\n"),
            std::string::npos)
      << save;
  // Idempotent (kube-proxy checks with -C first), and existing rules stay where they are.
  ASSERT_TRUE(add_kube_proxy_jumps(st));
  EXPECT_EQ(st.find(ir::TableId::Filter, "INPUT")->rules.size(), 4u);
  RulesetState kubelet = load(
      "*filter\n:KUBE-FIREWALL - [0:0]\n-A INPUT -s 10.9.0.0/16 -j ACCEPT\n"
      "-A INPUT -j KUBE-FIREWALL\nCOMMIT\n",
      IPFamily::V4, false);
  ASSERT_TRUE(add_kube_proxy_jumps(kubelet));
  EXPECT_EQ(targets(kubelet, ir::TableId::Filter, "INPUT"),
            (V{"KUBE-PROXY-FIREWALL", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "", "KUBE-FIREWALL"}));
}

// The cases of kube-proxy's TestTracePacket, on the pinned TestOverallIPTablesRules program.
TEST(TraceKubeProxyMode, TracePacketCases) {
  RulesetState st = overall();
  auto r = kp(st, "10.0.0.2", "10.0.0.3", 80);
  EXPECT_EQ(r.output, "");
  EXPECT_FALSE(r.masq);
  r = kp(st, "10.0.0.2", "172.30.0.41", 80);
  EXPECT_EQ(r.output, "10.180.0.1:80");
  EXPECT_FALSE(r.masq);
  r = kp(st, "10.0.0.2", "172.30.0.44", 80);
  EXPECT_EQ(r.output, "10.180.0.4:80, 10.180.0.5:80");  // both branches of --probability 0.5
  r = kp(st, "192.168.0.2", "192.168.99.22", 80);
  EXPECT_EQ(r.output, "10.180.0.2:80");
  EXPECT_TRUE(r.masq);
  r = kp(st, "203.0.113.2", "192.168.99.22", 80);
  EXPECT_EQ(r.output, "DROP");
  r = kp(st, "192.168.0.2", "192.168.0.2", 30000);
  EXPECT_EQ(r.output, "ACCEPT");
  r = kp(st, "10.0.0.2", "172.30.0.46", 80);
  EXPECT_EQ(r.output, "REJECT");
  EXPECT_TRUE(r.error.empty());
  EXPECT_FALSE(r.matches.empty());
  // Affinity checks never match: the plain endpoint jump after them is taken.
  r = kp(st, "10.0.0.2", "172.30.0.45", 80);
  EXPECT_EQ(r.output, "10.180.0.3:80");
}

TEST(TraceKubeProxyMode, Shortcuts) {
  std::string prog =
      "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:A - [0:0]\n:B - [0:0]\n"
      "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n"
      // history checks never match
      "-A KUBE-SERVICES -d 172.30.0.1/32 -m mark --mark 0x1 -p tcp -j DNAT --to-destination 1.1.1.1:1\n"
      "-A KUBE-SERVICES -d 172.30.0.1/32 -m conntrack --ctstate NEW -p tcp -j DNAT --to-destination 1.1.1.1:2\n"
      // interfaces are ignored; KUBE-MARK-MASQ sets masq and continues
      "-A KUBE-SERVICES -d 172.30.0.1/32 -i nothing0 -j KUBE-MARK-MASQ\n"
      // RETURN is not a chain: nothing happens, the chain continues
      "-A KUBE-SERVICES -d 172.30.0.1/32 -j A\n"
      "-A A -j RETURN\n"
      "-A A -p tcp -j DNAT --to-destination 10.0.0.9:9\n"
      // goto is not known to that parser: skipped
      "-A KUBE-SERVICES -d 172.30.0.2/32 -g B\n"
      "-A B -p tcp -j DNAT --to-destination 10.0.0.8:8\n"
      "-A KUBE-SERVICES -d 172.30.0.2/32 -p tcp -j DNAT --to-destination 10.0.0.7:7\n"
      "COMMIT\n"
      "*filter\n:KUBE-SERVICES - [0:0]\n:KUBE-PROXY-FIREWALL - [0:0]\n"
      // filter chains see the DNAT'ed address and the original port; all four run
      "-A KUBE-SERVICES -d 10.0.0.9/32 -p tcp --dport 80 -j ACCEPT\n"
      "-A KUBE-PROXY-FIREWALL -d 10.0.0.9/32 -j DROP\n"
      "COMMIT\n";
  RulesetState st = load(prog);
  auto r = kp(st, "10.0.0.2", "172.30.0.1", 80);
  EXPECT_EQ(r.output, "10.0.0.9:9, ACCEPT, DROP");
  EXPECT_TRUE(r.masq);
  r = kp(st, "10.0.0.2", "172.30.0.2", 80);
  EXPECT_EQ(r.output, "10.0.0.7:7");
  // The concrete tracer, by contrast, follows RETURN and the goto and sees the new port.
  TraceOptions o;
  Tracer t(st, o);
  Packet p;
  p.src = *IPAddr::parse("10.0.0.2");
  p.dst = *IPAddr::parse("172.30.0.2");
  p.dport = 80;
  p.origin = Origin::Pod;
  p.in_iface = "cbr0";
  p.out_iface = "eth0";
  auto c = t.trace(p);
  ASSERT_EQ(c.outcomes.size(), 1u);
  EXPECT_EQ(c.outcomes[0].dnat_text, "10.0.0.8:8");
}

TEST(TraceKubeProxyMode, ProtocolsAndLocalAddresses) {
  std::string prog =
      "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-NODEPORTS - [0:0]\n"
      "-A KUBE-SERVICES -d 172.30.0.42/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.0.0.1:53\n"
      "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n"
      "-A KUBE-NODEPORTS -p tcp -m tcp --dport 3001 -m addrtype ! --src-type LOCAL -j DNAT --to-destination "
      "10.0.0.2:80\n"
      "COMMIT\n";
  RulesetState st = load(prog);
  EXPECT_EQ(kp(st, "10.0.0.2", "172.30.0.42", 53, "udp").output, "10.0.0.1:53");
  EXPECT_EQ(kp(st, "10.0.0.2", "172.30.0.42", 53, "tcp").output, "");
  EXPECT_EQ(kp(st, "203.0.113.1", "192.168.99.11", 3001).output, "10.0.0.2:80");
  EXPECT_EQ(kp(st, "203.0.113.1", "127.0.0.1", 3001).output, "10.0.0.2:80");  // always local
  EXPECT_EQ(kp(st, "192.168.1.2", "192.168.99.11", 3001).output, "");         // src LOCAL
  EXPECT_EQ(kp(st, "203.0.113.1", "192.168.99.12", 3001).output, "");         // not local
}

TEST(TraceKubeProxyMode, Ipv6DestinationSplitIsReproduced) {
  // The test takes the DNAT output up to its first ':' as the new destination: for
  // "[fd00::1]:80" that is "[fd00", and a filter rule that tests -d fails the Go test.
  std::string prog =
      "*nat\n:KUBE-SERVICES - [0:0]\n"
      "-A KUBE-SERVICES -d fd00:172:30::41/128 -p tcp -m tcp --dport 80 -j DNAT --to-destination [fd00::1]:80\n"
      "COMMIT\n*filter\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -d fd00::1/128 -j REJECT\nCOMMIT\n";
  RulesetState st = load(prog, IPFamily::V6);
  auto r = trace_kube_proxy_test(st, "fd00:10::2", "tcp", "fd00:172:30::41", "80", kNodeIPs);
  EXPECT_EQ(r.output, "[fd00::1]:80");
  EXPECT_NE(r.error.find("Bad IP in test case: [fd00"), std::string::npos) << r.error;
}

// The comparison is not vacuous: breaking one endpoint jump of a pinned program changes
// the answer kube-proxy's expectation checks.
TEST(TraceKubeProxyMode, DetectsABrokenProgram) {
  RulesetState st =
      load(test::read_file(test::source_path("fixtures/kp-cluster-ip-general/expected/iptables.restore")));
  auto r = kp(st, "10.180.0.2", "172.30.0.42", 80);
  ASSERT_EQ(r.output, "10.180.0.1:80, 10.180.2.1:80");
  // Find the service chain and drop its first endpoint rule.
  std::string svc;
  for (const auto& m : r.matches)
    if (m.find("-A KUBE-SERVICES") == 0) svc = m.substr(m.rfind(' ') + 1);
  ASSERT_EQ(svc.rfind("KUBE-SVC-", 0), 0u) << svc;
  Chain* c = st.find(ir::TableId::Nat, svc);
  ASSERT_NE(c, nullptr);
  size_t before = c->rules.size();
  for (size_t i = 0; i < c->rules.size(); ++i)
    if (st.store->text(c->rules[i]).find("statistic") != std::string::npos) {
      c->rules.erase(c->rules.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  ASSERT_EQ(c->rules.size(), before - 1);
  EXPECT_EQ(kp(st, "10.180.0.2", "172.30.0.42", 80).output, "10.180.2.1:80");
}

}  // namespace
}  // namespace kpc::verifier::trace
