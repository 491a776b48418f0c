// The concrete tracer (verifier/trace/tracer.h): every match and target it models,
// three-valued unknowns, hook order per origin, call/goto/return, policies, and the
// exact probabilities of statistic branches.
#include <gtest/gtest.h>

#include "verifier/state/state.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {
namespace {

RulesetState load(const std::string& program, IPFamily family = IPFamily::V4) {
  RulesetState st = RulesetState::empty(family);
  ParseError pe;
  auto r = apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->reason : "") << " " << pe.message;
  return st;
}

IPAddr ip(const char* s) { return *IPAddr::parse(s); }

Packet pod(const char* src, const char* dst, uint16_t dport) {
  Packet p;
  p.src = ip(src);
  p.dst = ip(dst);
  p.dport = dport;
  p.sport = 40000;
  p.origin = Origin::Pod;
  p.in_iface = "cbr0";
  p.out_iface = "eth0";
  return p;
}

TraceOptions opts() {
  TraceOptions o;
  o.local_addresses = {ip("192.168.0.2")};
  return o;
}

// A filter program where a forwarded packet matching M is dropped ("DROP" = matched,
// "ACCEPT" = not, "UNKNOWN" = undecided).
std::string forward_drop(const std::string& m) {
  bool input_ok = m.find("-o ") == std::string::npos;  // iptables refuses -o in INPUT
  return "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD " + m + " -j DROP\n" +
         (input_ok ? "-A INPUT " + m + " -j DROP\n" : std::string()) + "COMMIT\n";
}

std::string verdict(const std::string& m, const Packet& p, TraceOptions o = opts()) {
  RulesetState st = load(forward_drop(m), p.src.family);
  Tracer t(st, o);
  auto r = t.trace(p);
  EXPECT_EQ(r.outcomes.size(), 1u) << m;
  if (r.outcomes.empty()) return "";
  return verdict_name(r.outcomes[0].verdict);
}

TEST(TraceMatch, Addresses) {
  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  EXPECT_EQ(verdict("-s 10.0.0.0/8", p), "DROP");
  EXPECT_EQ(verdict("! -s 10.0.0.0/8", p), "ACCEPT");
  EXPECT_EQ(verdict("-s 10.0.0.3", p), "ACCEPT");
  EXPECT_EQ(verdict("-s 10.0.0.2", p), "DROP");
  EXPECT_EQ(verdict("-d 172.30.0.41/32", p), "DROP");
  EXPECT_EQ(verdict("! -d 172.30.0.0/16", p), "ACCEPT");
  EXPECT_EQ(verdict("-d 172.31.0.0/16", p), "ACCEPT");
}

TEST(TraceMatch, ProtocolAndPorts) {
  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  EXPECT_EQ(verdict("-p tcp", p), "DROP");
  EXPECT_EQ(verdict("-p udp", p), "ACCEPT");
  EXPECT_EQ(verdict("! -p udp", p), "DROP");
  EXPECT_EQ(verdict("-p 6", p), "DROP");
  EXPECT_EQ(verdict("-p all", p), "DROP");
  EXPECT_EQ(verdict("-p tcp --dport 80", p), "DROP");
  EXPECT_EQ(verdict("-p tcp --dport 81", p), "ACCEPT");
  EXPECT_EQ(verdict("-p tcp --dport 70:90", p), "DROP");
  EXPECT_EQ(verdict("-p tcp ! --dport 70:90", p), "ACCEPT");
  EXPECT_EQ(verdict("-p tcp --sport 40000", p), "DROP");
  EXPECT_EQ(verdict("-p tcp ! --sport 1:1024", p), "DROP");
  EXPECT_EQ(verdict("-p tcp -m multiport --dports 22,80,443", p), "DROP");
  EXPECT_EQ(verdict("-p tcp -m multiport ! --dports 22,443", p), "DROP");
  EXPECT_EQ(verdict("-p tcp -m multiport --dports 1000:2000", p), "ACCEPT");
  p.proto = kProtoUDP;
  EXPECT_EQ(verdict("-p udp --dport 80", p), "DROP");
  EXPECT_EQ(verdict("-p tcp --dport 80", p), "ACCEPT");
  p.proto = kProtoSCTP;
  EXPECT_EQ(verdict("-p sctp --dport 80", p), "DROP");
  // A source port the caller did not give is not guessed.
  p = pod("10.0.0.2", "172.30.0.41", 80);
  p.sport.reset();
  EXPECT_EQ(verdict("-p tcp --sport 40000", p), "UNKNOWN");
  EXPECT_EQ(verdict("-p udp --sport 40000", p), "ACCEPT");  // false elsewhere in the rule wins
}

TEST(TraceMatch, Interfaces) {
  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  p.in_iface = "veth1234";
  EXPECT_EQ(verdict("-i veth+", p), "DROP");
  EXPECT_EQ(verdict("! -i veth+", p), "ACCEPT");
  EXPECT_EQ(verdict("-i veth1234", p), "DROP");
  EXPECT_EQ(verdict("-i veth", p), "ACCEPT");  // no '+': the exact name
  EXPECT_EQ(verdict("-i cbr0", p), "ACCEPT");
  EXPECT_EQ(verdict("-o eth0", p), "DROP");  // FORWARD sees the output interface
  EXPECT_EQ(verdict("-o eth+", p), "DROP");
  p.in_iface.reset();
  EXPECT_EQ(verdict("-i veth+", p), "UNKNOWN");
  p.in_iface = "cbr0";
  p.out_iface.reset();
  EXPECT_EQ(verdict("-o eth0", p), "UNKNOWN");
}

TEST(TraceMatch, InterfacesOfLocallyGeneratedPackets) {
  // In OUTPUT the packet has no input interface: "-i X" never matches, "! -i X" always does.
  std::string prog =
      "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:C - [0:0]\n-A OUTPUT -j C\n"
      "-A C ! -i veth+ -j DROP\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  Packet p = pod("192.168.0.2", "10.180.0.1", 80);
  p.origin = Origin::Node;
  auto r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Drop);
  // Node -> local address: the packet comes back in on lo and goes through INPUT.
  RulesetState st2 = load(forward_drop("-i lo -d 192.168.0.2"));
  Tracer t2(st2, opts());
  p.dst = ip("192.168.0.2");
  auto r2 = t2.trace(p);
  ASSERT_EQ(r2.outcomes.size(), 1u);
  EXPECT_EQ(r2.outcomes[0].verdict, Verdict::Drop);
  EXPECT_EQ(r2.outcomes[0].path.back().chain, "INPUT");
}

TEST(TraceMatch, AddrtypeLocal) {
  Packet p = pod("10.0.0.2", "192.168.0.2", 3001);
  EXPECT_EQ(verdict("-m addrtype --dst-type LOCAL", p), "DROP");
  EXPECT_EQ(verdict("-m addrtype ! --dst-type LOCAL", p), "ACCEPT");
  EXPECT_EQ(verdict("-m addrtype --src-type LOCAL", p), "ACCEPT");
  p.dst = ip("127.0.0.5");  // 127.0.0.0/8 is always local
  EXPECT_EQ(verdict("-m addrtype --dst-type LOCAL", p), "DROP");
  p.dst = ip("172.30.0.41");
  EXPECT_EQ(verdict("-m addrtype --dst-type LOCAL", p), "ACCEPT");
  // Other types of a non-local address depend on the routing table.
  EXPECT_EQ(verdict("-m addrtype --dst-type UNICAST", p), "UNKNOWN");
  EXPECT_EQ(verdict("-m addrtype --dst-type LOCAL --limit-iface-in", p), "UNKNOWN");
  p.src = ip("192.168.0.2");
  EXPECT_EQ(verdict("-m addrtype --src-type LOCAL", p), "DROP");
}

TEST(TraceMatch, ConntrackStates) {
  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  EXPECT_EQ(verdict("-m conntrack --ctstate NEW", p), "DROP");
  EXPECT_EQ(verdict("-m conntrack --ctstate RELATED,ESTABLISHED", p), "ACCEPT");
  EXPECT_EQ(verdict("-m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT", p), "DROP");
  EXPECT_EQ(verdict("-m conntrack --ctstate DNAT", p), "ACCEPT");
  EXPECT_EQ(verdict("-m state --state NEW", p), "DROP");
  p.ctstate = ir::kCtEstablished;
  EXPECT_EQ(verdict("-m conntrack --ctstate RELATED,ESTABLISHED", p), "DROP");
  p.ctstate = ir::kCtInvalid;
  EXPECT_EQ(verdict("-m conntrack --ctstate INVALID", p), "DROP");

  // After a DNAT the connection carries the DNAT status.
  std::string prog =
      "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -d 172.30.0.41 -p tcp --dport 80 -j DNAT --to-destination "
      "10.180.0.1:8080\nCOMMIT\n*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m conntrack --ctstate NEW -m conntrack "
      "--ctstate DNAT -d 10.180.0.1 -p tcp --dport 8080 -j REJECT\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  auto r = t.trace(pod("10.0.0.2", "172.30.0.41", 80));
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Reject);
  EXPECT_EQ(r.outcomes[0].dnat_text, "10.180.0.1:8080");
}

TEST(TraceMatch, MarksCommentsNfacct) {
  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  p.mark = 0x4001;
  EXPECT_EQ(verdict("-m mark --mark 0x4000/0x4000", p), "DROP");
  EXPECT_EQ(verdict("-m mark ! --mark 0x4000/0x4000", p), "ACCEPT");
  EXPECT_EQ(verdict("-m mark --mark 0x4000", p), "ACCEPT");  // mask all ones
  EXPECT_EQ(verdict("-m mark --mark 0x4001", p), "DROP");
  EXPECT_EQ(verdict("-m comment --comment \"anything at all\"", p), "DROP");
  EXPECT_EQ(verdict("-m nfacct --nfacct-name ct_state_invalid_dropped_pkts", p), "DROP");
}

TEST(TraceMatch, UnmodelledMatchesAreUnknownNeverGuessed) {
  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  EXPECT_EQ(verdict("-m set --match-set KUBE-X dst", p), "UNKNOWN");
  EXPECT_EQ(verdict("-m statistic --mode nth --every 2 --packet 0", p), "UNKNOWN");
  EXPECT_EQ(verdict("-m pkttype --pkt-type unicast", p), "UNKNOWN");
  // A false match anywhere decides the rule.
  EXPECT_EQ(verdict("-s 10.99.0.0/16 -m set --match-set KUBE-X dst", p), "ACCEPT");

  RulesetState st = load(forward_drop("-m set --match-set KUBE-X dst"));
  Tracer t(st, opts());
  auto r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  const Outcome& o = r.outcomes[0];
  EXPECT_EQ(o.verdict, Verdict::Unknown);
  EXPECT_NE(o.unknown_reason.find("ipset"), std::string::npos) << o.unknown_reason;
  ASSERT_FALSE(o.path.empty());
  EXPECT_EQ(o.path.back().kind, Step::Unknown);
  EXPECT_EQ(o.path.back().chain, "FORWARD");
  EXPECT_EQ(o.path.back().rule_no, 1u);
  EXPECT_EQ(o.path.back().text, "-A FORWARD -m set --match-set KUBE-X dst -j DROP");
}

TEST(TraceMatch, StatisticBranchesCarryExactProbabilities) {
  std::string prog =
      "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m statistic --mode random --probability 0.3333333333 -j DROP\n"
      "-A FORWARD -m statistic --mode random --probability 0.5000000000 -j REJECT\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  auto r = t.trace(pod("10.0.0.2", "172.30.0.41", 80));
  ASSERT_EQ(r.outcomes.size(), 3u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Drop);
  EXPECT_EQ(r.outcomes[0].probability.fraction(), "715827883/2147483648");
  EXPECT_EQ(r.outcomes[1].verdict, Verdict::Reject);
  EXPECT_EQ(r.outcomes[1].probability.fraction(), "1431655765/4294967296");
  EXPECT_EQ(r.outcomes[2].verdict, Verdict::Accept);
  EXPECT_EQ(r.outcomes[2].probability.fraction(), "1431655765/4294967296");
  EXPECT_TRUE(r.total().is_one());
  // The not-taken branch is part of the path.
  ASSERT_GE(r.outcomes[2].path.size(), 2u);
  EXPECT_EQ(r.outcomes[2].path[0].kind, Step::NotTaken);
  EXPECT_EQ(r.outcomes[2].path[1].kind, Step::NotTaken);

  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  RulesetState inv = load(forward_drop("-m statistic --mode random ! --probability 0.25"));
  Tracer ti(inv, opts());
  auto ri = ti.trace(p);
  ASSERT_EQ(ri.outcomes.size(), 2u);
  EXPECT_EQ(ri.outcomes[0].verdict, Verdict::Drop);
  EXPECT_EQ(ri.outcomes[0].probability.fraction(), "3/4");
  // Probability 1 and 0 do not branch.
  EXPECT_EQ(verdict("-m statistic --mode random --probability 1.0", p), "DROP");
  EXPECT_EQ(verdict("-m statistic --mode random --probability 0.0", p), "ACCEPT");
}

TEST(TraceMatch, RecentAffinityClientModels) {
  std::string prog =
      "*filter\n:FORWARD ACCEPT [0:0]\n"
      "-A FORWARD -m recent --name KUBE-SEP-A --rcheck --seconds 10800 --reap -j DROP\n"
      "-A FORWARD -m recent --name KUBE-SEP-B --rcheck --seconds 10800 --reap -j REJECT\n"
      "-A FORWARD -m recent --name KUBE-SEP-B --set -j ACCEPT\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  Packet p = pod("10.0.0.2", "172.30.0.41", 80);
  auto fresh = t.trace(p);  // a new client is in no list; --set matches
  ASSERT_EQ(fresh.outcomes.size(), 1u);
  EXPECT_EQ(fresh.outcomes[0].verdict, Verdict::Accept);
  EXPECT_EQ(fresh.outcomes[0].path.back().rule_no, 3u);
  p.remembered = {"KUBE-SEP-B"};
  auto b = t.trace(p);
  ASSERT_EQ(b.outcomes.size(), 1u);
  EXPECT_EQ(b.outcomes[0].verdict, Verdict::Reject);
  p.remembered = {"KUBE-SEP-A"};
  EXPECT_EQ(t.trace(p).outcomes[0].verdict, Verdict::Drop);
  EXPECT_EQ(verdict("-m recent --name X ! --rcheck", pod("10.0.0.2", "172.30.0.41", 80)), "DROP");
  EXPECT_EQ(verdict("-m recent --name X --rcheck --hitcount 3", p), "UNKNOWN");
}

TEST(TraceTarget, CallReturnGotoAndPolicies) {
  std::string prog =
      "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n:G - [0:0]\n"
      "-A FORWARD -j A\n"
      "-A FORWARD -p tcp --dport 81 -j ACCEPT\n"
      "-A A -p tcp --dport 80 -j RETURN\n"
      "-A A -p tcp --dport 81 -g G\n"
      "-A A -j B\n"
      "-A A -p tcp --dport 82 -j ACCEPT\n"
      "-A B -p tcp --dport 82 -j RETURN\n"
      "-A B -j REJECT\n"
      "-A G -j RETURN\n"
      "COMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  auto run = [&](uint16_t port) {
    auto r = t.trace(pod("10.0.0.2", "10.1.0.1", port));
    EXPECT_EQ(r.outcomes.size(), 1u);
    return r.outcomes.empty() ? Outcome{} : r.outcomes[0];
  };
  Outcome o80 = run(80);  // RETURN from A, FORWARD continues, falls to its DROP policy
  EXPECT_EQ(o80.verdict, Verdict::Drop);
  EXPECT_EQ(o80.path.back().kind, Step::Policy);
  EXPECT_EQ(o80.path.back().text, ":FORWARD DROP");
  Outcome o81 = run(81);  // goto G; G returns to FORWARD (not to A), whose next rule accepts 81
  EXPECT_EQ(o81.verdict, Verdict::Accept);
  EXPECT_EQ(o81.path.back().chain, "FORWARD");
  EXPECT_EQ(o81.path.back().rule_no, 2u);
  Outcome o82 = run(82);  // A calls B, B returns, A's next rule accepts
  EXPECT_EQ(o82.verdict, Verdict::Accept);
  EXPECT_EQ(o82.path.back().chain, "A");
  EXPECT_EQ(o82.path.back().rule_no, 4u);
  EXPECT_EQ(run(83).verdict, Verdict::Reject);
  EXPECT_EQ(o82.route, "forward");
}

TEST(TraceTarget, MarkTargets) {
  std::string prog =
      "*mangle\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j MARK --set-xmark 0x10/0xf0\n"
      "-A PREROUTING -j MARK --or-mark 0x4000\n-A PREROUTING -j MARK --xor-mark 0x1\n"
      "-A PREROUTING -j MARK --and-mark 0xffff\nCOMMIT\n"
      "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m mark --mark 0x4011 -j REJECT\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  Packet p = pod("10.0.0.2", "10.1.0.1", 80);
  p.mark = 0x100ab;  // (0x100ab & ~0xf0) ^ 0x10 = 0x1001b; | 0x4000 = 0x1401b; ^1 = 0x1401a; & 0xffff = 0x401a
  auto r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].final_mark, 0x401au);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Accept);
  p.mark = 0xa0;  // (0xa0 & ~0xf0) ^ 0x10 = 0x10; | 0x4000; ^ 1 = 0x4011; & 0xffff -> REJECT
  r = t.trace(p);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Reject);
  EXPECT_EQ(r.outcomes[0].final_mark, 0x4011u);
}

TEST(TraceTarget, DnatRoutesAndStopsTheNatHook) {
  std::string prog =
      "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:S - [0:0]\n"
      "-A PREROUTING -j S\n"
      "-A PREROUTING -p tcp -j DNAT --to-destination 10.9.9.9:9\n"  // never reached after S's DNAT
      "-A S -d 172.30.0.41 -p tcp -j DNAT --to-destination 10.180.0.1:8080\n"
      "-A S -d 172.30.0.42 -p tcp -j DNAT --to-destination 192.168.0.2\n"
      "-A POSTROUTING -s 10.0.0.0/8 -j MASQUERADE\n"
      "COMMIT\n"
      "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n-A INPUT -p tcp --dport 82 -j REJECT\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  auto r = t.trace(pod("10.0.0.2", "172.30.0.41", 80));
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_TRUE(r.outcomes[0].dnat);
  EXPECT_EQ(r.outcomes[0].dnat_text, "10.180.0.1:8080");
  EXPECT_EQ(r.outcomes[0].route, "forward");
  EXPECT_TRUE(r.outcomes[0].masquerade);
  // DNAT without a port keeps it; to a local address the packet goes to INPUT (no POSTROUTING).
  r = t.trace(pod("10.0.0.2", "172.30.0.42", 82));
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].dnat_text, "192.168.0.2:82");
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Reject);
  r = t.trace(pod("10.0.0.2", "172.30.0.42", 83));
  EXPECT_EQ(r.outcomes[0].route, "local");
  EXPECT_FALSE(r.outcomes[0].masquerade);
  // No DNAT: the unconditional one in PREROUTING applies.
  r = t.trace(pod("10.0.0.2", "172.30.0.43", 80));
  EXPECT_EQ(r.outcomes[0].dnat_text, "10.9.9.9:9");
}

TEST(TraceTarget, SnatAndUnmodelledTargets) {
  std::string prog =
      "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -p tcp --dport 80 -j SNAT --to-source 192.168.0.2\n"
      "-A POSTROUTING -p tcp --dport 81 -j LOG\n-A POSTROUTING -p tcp --dport 81 -j NETMAP --to 10.0.0.0/8\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  auto r = t.trace(pod("10.0.0.2", "10.1.0.1", 80));
  EXPECT_EQ(r.outcomes[0].snat_text, "192.168.0.2");
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Accept);
  r = t.trace(pod("10.0.0.2", "10.1.0.1", 81));
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Unknown);
  EXPECT_NE(r.outcomes[0].unknown_reason.find("NETMAP"), std::string::npos);
  EXPECT_EQ(r.outcomes[0].path.back().rule_no, 3u);  // LOG continued
}

TEST(TraceHooks, NatOnlyForNewConnections) {
  std::string prog =
      "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -p tcp -j DNAT --to-destination 10.9.9.9:9\nCOMMIT\n"
      "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT\n"
      "-A FORWARD -j DROP\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  Packet p = pod("10.0.0.2", "10.1.0.1", 80);
  p.ctstate = ir::kCtEstablished;
  auto r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_FALSE(r.outcomes[0].dnat);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Accept);
  EXPECT_FALSE(r.notes.empty());
}

TEST(TraceHooks, NodeTrafficUsesOutputThenPostrouting) {
  std::string prog =
      "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
      "-A PREROUTING -p tcp -j DNAT --to-destination 10.9.9.9:9\n"
      "-A OUTPUT -d 172.30.0.41 -p tcp -j DNAT --to-destination 10.180.0.1:80\n"
      "-A POSTROUTING -m addrtype --src-type LOCAL -j MASQUERADE\nCOMMIT\n"
      "*filter\n:OUTPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n-A OUTPUT -d 10.180.0.1 -j ACCEPT\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  Packet p = pod("192.168.0.2", "172.30.0.41", 80);
  p.origin = Origin::Node;
  auto r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  const Outcome& o = r.outcomes[0];
  EXPECT_EQ(o.dnat_text, "10.180.0.1:80");
  EXPECT_EQ(o.verdict, Verdict::Accept);
  EXPECT_EQ(o.route, "output");
  EXPECT_TRUE(o.masquerade);
  std::vector<std::string> chains;
  for (const auto& s : o.path) chains.push_back(std::string(ir::table_name(s.table)) + " " + s.chain);
  EXPECT_EQ(chains, (std::vector<std::string>{"nat OUTPUT", "filter OUTPUT", "nat POSTROUTING"}));
}

TEST(TraceHooks, MissingTablesAreSkippedAndDepthIsBounded) {
  RulesetState empty = RulesetState::empty(IPFamily::V4);
  Tracer t(empty, opts());
  auto r = t.trace(pod("10.0.0.2", "10.1.0.1", 80));
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Accept);
  EXPECT_TRUE(r.outcomes[0].path.empty());

  std::string prog = "*filter\n:FORWARD ACCEPT [0:0]\n";
  for (int i = 0; i < 150; ++i) prog += ":C" + std::to_string(i) + " - [0:0]\n";
  prog += "-A FORWARD -j C0\n";
  for (int i = 0; i + 1 < 150; ++i) prog += "-A C" + std::to_string(i) + " -j C" + std::to_string(i + 1) + "\n";
  prog += "COMMIT\n";
  RulesetState deep = load(prog);
  Tracer td(deep, opts());
  auto rd = td.trace(pod("10.0.0.2", "10.1.0.1", 80));
  ASSERT_EQ(rd.outcomes.size(), 1u);
  EXPECT_EQ(rd.outcomes[0].verdict, Verdict::Unknown);
  EXPECT_NE(rd.outcomes[0].unknown_reason.find("chain depth"), std::string::npos);
}

TEST(TraceHooks, OutcomeLimitKeepsTheTotalExact) {
  std::string prog = "*filter\n:FORWARD ACCEPT [0:0]\n";
  for (int i = 0; i < 12; ++i)
    prog += "-A FORWARD -m statistic --mode random --probability 0.5 -j MARK --or-mark 0x1\n";
  prog += "COMMIT\n";
  RulesetState st = load(prog);
  TraceOptions o = opts();
  o.max_outcomes = 100;
  Tracer t(st, o);
  auto r = t.trace(pod("10.0.0.2", "10.1.0.1", 80));
  EXPECT_EQ(r.outcomes.size(), 101u);
  EXPECT_EQ(r.outcomes.back().verdict, Verdict::Unknown);
  EXPECT_TRUE(r.total().is_one());
  o.max_outcomes = 100000;
  Tracer full(st, o);
  auto rf = full.trace(pod("10.0.0.2", "10.1.0.1", 80));
  EXPECT_EQ(rf.outcomes.size(), 4096u);
  EXPECT_TRUE(rf.total().is_one());
}

TEST(TraceHooks, Ipv6) {
  std::string prog =
      "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -d fd00:172:30::41/128 -p tcp --dport 80 -j DNAT "
      "--to-destination [fd00:10:180::1]:80\nCOMMIT\n";
  RulesetState st = load(prog, IPFamily::V6);
  TraceOptions o;
  o.local_addresses = {ip("2001:db8::1")};
  Tracer t(st, o);
  Packet p = pod("fd00:10::2", "fd00:172:30::41", 80);
  auto r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].dnat_text, "[fd00:10:180::1]:80");
  EXPECT_TRUE(t.is_local(ip("::1")));
  EXPECT_TRUE(t.is_local(ip("2001:db8::1")));
  EXPECT_FALSE(t.is_local(ip("2001:db8::2")));
}

TEST(TraceReport, ServiceFromCommentsAndText) {
  EXPECT_EQ(service_from_comment("ns1/svc1:p80 cluster IP"), "ns1/svc1:p80");
  EXPECT_EQ(service_from_comment("masquerade traffic for ns1/svc1:p80 external destinations"), "ns1/svc1:p80");
  EXPECT_EQ(service_from_comment("ns1/svc1 -> 10.0.1.1:80"), "ns1/svc1");
  EXPECT_EQ(service_from_comment("kubernetes service portals"), "");
  EXPECT_EQ(host_port(ip("10.0.0.1"), 80), "10.0.0.1:80");
  EXPECT_EQ(host_port(ip("fd00::1"), 80), "[fd00::1]:80");
}

TEST(TraceReport, ResolvesAffinityEndpoints) {
  std::string prog =
      "*nat\n:KUBE-SEP-AAA - [0:0]\n:KUBE-SEP-BBB - [0:0]\n"
      "-A KUBE-SEP-AAA -p tcp -j DNAT --to-destination 10.0.1.1:80\n"
      "-A KUBE-SEP-BBB -p tcp -j DNAT --to-destination 10.0.1.2:80\nCOMMIT\n";
  RulesetState st = load(prog);
  EXPECT_EQ(resolve_affinity(st, "10.0.1.2:80"), (std::vector<std::string>{"KUBE-SEP-BBB"}));
  EXPECT_EQ(resolve_affinity(st, "KUBE-SEP-AAA"), (std::vector<std::string>{"KUBE-SEP-AAA"}));
  EXPECT_TRUE(resolve_affinity(st, "10.0.1.3:80").empty());
}

}  // namespace
}  // namespace kpc::verifier::trace
