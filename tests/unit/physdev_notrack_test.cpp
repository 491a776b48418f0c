// Issue 12: `-m physdev` (bridge ports, trace/physdev.h) and `CT --notrack` / `NOTRACK`
// (trace/effects.h) in the concrete tracer, hook by hook as xt_physdev and br_netfilter
// answer, and the symbolic comparison on rule sets that differ only in them.
#include <gtest/gtest.h>

#include "verifier/state/state.h"
#include "verifier/symbolic/compare.h"
#include "verifier/trace/physdev.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {
namespace {

RulesetState load(const std::string& program) {
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  auto r = apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe);
  EXPECT_TRUE(r.ok()) << (r.error ? r.error->reason : "") << " " << pe.message << "\n" << program;
  return st;
}

IPAddr ip(const char* s) { return *IPAddr::parse(s); }

Packet arriving(const char* dst, std::optional<std::string> in_port, std::optional<std::string> out_port) {
  Packet p;
  p.src = ip("10.32.0.7");
  p.dst = ip(dst);
  p.dport = 80;
  p.sport = 40000;
  p.origin = Origin::Pod;
  p.in_iface = "weave";
  p.out_iface = "weave";
  p.in_bridge_port = std::move(in_port);
  p.out_bridge_port = std::move(out_port);
  return p;
}

TraceOptions opts() {
  TraceOptions o;
  o.local_addresses = {ip("192.168.0.2")};
  return o;
}

// filter CHAIN: a packet matching M is dropped. DROP = matched, ACCEPT = not, UNKNOWN.
std::string verdict(const std::string& chain, const std::string& m, const Packet& p) {
  RulesetState st = load("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A " + chain + " " +
                         m + " -j DROP\nCOMMIT\n");
  Tracer t(st, opts());
  auto r = t.trace(p);
  EXPECT_EQ(r.outcomes.size(), 1u);
  return r.outcomes.empty() ? "" : verdict_name(r.outcomes[0].verdict);
}

TEST(Physdev, KernelRulesPerOption) {
  using Op = PhysdevOp;
  // No bridge information: an option passes iff negated.
  for (Op op : {Op::In, Op::Out, Op::IsIn, Op::IsOut, Op::IsBridged}) {
    EXPECT_FALSE(physdev_test(op, "veth+", false, false, "", ""));
    EXPECT_TRUE(physdev_test(op, "veth+", true, false, "", ""));
  }
  // --physdev-in without an in port passes whatever `!` says; --physdev-out without an out port fails.
  EXPECT_TRUE(physdev_test(Op::In, "x", false, true, "", ""));
  EXPECT_TRUE(physdev_test(Op::In, "x", true, true, "", ""));
  EXPECT_FALSE(physdev_test(Op::Out, "x", false, true, "veth1", ""));
  EXPECT_FALSE(physdev_test(Op::Out, "x", true, true, "veth1", ""));
  EXPECT_TRUE(physdev_test(Op::Out, "veth+", false, true, "veth1", "veth2"));
  EXPECT_FALSE(physdev_test(Op::Out, "veth+", true, true, "veth1", "veth2"));
  EXPECT_TRUE(physdev_test(Op::In, "veth1", false, true, "veth1", ""));
  EXPECT_FALSE(physdev_test(Op::In, "veth", false, true, "veth1", ""));  // a whole name, not a prefix
  EXPECT_TRUE(physdev_test(Op::IsBridged, "", false, true, "veth1", "veth2"));
  EXPECT_FALSE(physdev_test(Op::IsBridged, "", false, true, "veth1", ""));
  EXPECT_TRUE(physdev_test(Op::IsBridged, "", true, true, "veth1", ""));
}

TEST(Physdev, TracerPerHook) {
  // Bridged pod-to-pod: FORWARD sees both ports.
  Packet b = arriving("10.32.0.9", "vethwepl1", "vethwepl2");
  EXPECT_EQ(verdict("FORWARD", "-m physdev --physdev-in vethwepl+", b), "DROP");
  EXPECT_EQ(verdict("FORWARD", "-m physdev --physdev-out vethwepl2 --physdev-is-bridged", b), "DROP");
  EXPECT_EQ(verdict("FORWARD", "-m physdev ! --physdev-is-bridged", b), "ACCEPT");
  EXPECT_EQ(verdict("FORWARD", "-m physdev --physdev-in vethwepl+ ! --physdev-out vethwepl2", b), "ACCEPT");
  // Routed out of the bridge port it came in by: no out port, --physdev-out fails even negated.
  Packet r = arriving("10.40.0.9", "vethwepl1", "");
  EXPECT_EQ(verdict("FORWARD", "-m physdev ! --physdev-out vethwepl2", r), "ACCEPT");
  EXPECT_EQ(verdict("FORWARD", "-m physdev ! --physdev-is-bridged", r), "DROP");
  EXPECT_EQ(verdict("FORWARD", "-m physdev --physdev-is-in", r), "DROP");
  // To the node: INPUT knows the in port, never an out port.
  Packet l = arriving("192.168.0.2", "vethwepl1", std::nullopt);
  EXPECT_EQ(verdict("INPUT", "-m physdev --physdev-in vethwepl1", l), "DROP");
  EXPECT_EQ(verdict("INPUT", "-m physdev --physdev-is-out", l), "ACCEPT");
  EXPECT_EQ(verdict("INPUT", "-m physdev ! --physdev-is-bridged", l), "DROP");
  // FORWARD with the out side unknown: tests of the out port are Unknown, of the in port decided.
  Packet u = arriving("10.32.0.9", "vethwepl1", std::nullopt);
  EXPECT_EQ(verdict("FORWARD", "-m physdev --physdev-is-bridged", u), "UNKNOWN");
  EXPECT_EQ(verdict("FORWARD", "-m physdev --physdev-in vethwepl1", u), "DROP");
  // Not through a bridge: no information at all.
  Packet n = arriving("10.32.0.9", "", std::nullopt);
  EXPECT_EQ(verdict("FORWARD", "-m physdev --physdev-is-in", n), "ACCEPT");
  EXPECT_EQ(verdict("FORWARD", "-m physdev ! --physdev-is-bridged", n), "DROP");
  EXPECT_EQ(verdict("FORWARD", "-m physdev ! --physdev-in x ! --physdev-out y", n), "DROP");
  // Unknown entry port: every physdev test is Unknown.
  Packet q = arriving("10.32.0.9", std::nullopt, std::nullopt);
  EXPECT_EQ(verdict("FORWARD", "-m physdev ! --physdev-is-in", q), "UNKNOWN");
  // The node's own packets carry no bridge information, whatever the packet says.
  Packet o = arriving("10.32.0.9", std::nullopt, std::nullopt);
  o.origin = Origin::Node;
  EXPECT_EQ(verdict("OUTPUT", "-m physdev --physdev-is-in", o), "ACCEPT");
  EXPECT_EQ(verdict("OUTPUT", "-m physdev ! --physdev-is-in", o), "DROP");
}

TEST(Notrack, UntrackedSkipsNatAndMatchesUntracked) {
  std::string prog =
      "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -p udp --dport 53 -j CT --notrack\n"
      "-A OUTPUT -p udp --dport 53 -j NOTRACK\nCOMMIT\n"
      "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
      "-A PREROUTING -d 10.96.0.10/32 -j DNAT --to-destination 10.32.0.5\n"
      "-A OUTPUT -d 10.96.0.10/32 -j DNAT --to-destination 10.32.0.5\nCOMMIT\n"
      "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
      "-A FORWARD -m conntrack --ctstate UNTRACKED -j DROP\n-A OUTPUT -m state --state UNTRACKED -j REJECT\nCOMMIT\n";
  RulesetState st = load(prog);
  Tracer t(st, opts());
  Packet p = arriving("10.96.0.10", std::nullopt, std::nullopt);
  p.proto = kProtoUDP;
  p.dport = 53;
  auto r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Drop);
  EXPECT_FALSE(r.outcomes[0].dnat);  // no conntrack, no NAT
  EXPECT_EQ(r.outcomes[0].options, "notrack");
  p.dport = 80;  // tracked: DNAT'ed and accepted
  p.proto = kProtoTCP;
  r = t.trace(p);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Accept);
  EXPECT_TRUE(r.outcomes[0].dnat);
  Packet n = p;
  n.origin = Origin::Node;
  n.proto = kProtoUDP;
  n.dport = 53;
  r = t.trace(n);
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Reject);
  EXPECT_FALSE(r.outcomes[0].dnat);
}

TEST(Notrack, OtherCtOptionsAndWrongTableAreUnknown) {
  RulesetState st = load("*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -j CT --zone 5\nCOMMIT\n");
  Tracer t(st, opts());
  auto r = t.trace(arriving("10.32.0.9", "", ""));
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].verdict, Verdict::Unknown);
  EXPECT_NE(r.outcomes[0].unknown_reason.find("target CT"), std::string::npos);
}

}  // namespace
}  // namespace kpc::verifier::trace

namespace kpc::verifier::symbolic {
namespace {

RulesetState load_state(const std::string& program) {
  RulesetState st = RulesetState::empty(IPFamily::V4);
  ParseError pe;
  EXPECT_TRUE(apply_text(st, program, ApplyOptions{true, Flavor::Legacy}, &pe).ok()) << program;
  return st;
}

sem::CompareResult compare(const std::string& a, const std::string& b) {
  sem::CompareOptions co;
  co.local_addresses = {*IPAddr::parse("192.168.0.2")};
  return compare_states(load_state(a), load_state(b), co);
}

std::string filter(const std::string& rules) {
  return "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + rules + "COMMIT\n";
}

TEST(PhysdevCompare, BridgePortsAreDecidedNotUndecided) {
  // A Weave-like FORWARD: bridged traffic to the bridge's own port accepted, the rest to a policy chain.
  std::string a = filter("-A FORWARD -o weave -m physdev --physdev-out vethwe-bridge --physdev-is-bridged -j ACCEPT\n"
                         "-A FORWARD -o weave -j DROP\n");
  std::string b = filter("-A FORWARD -o weave -m physdev --physdev-out vethwe+ --physdev-is-bridged -j ACCEPT\n"
                         "-A FORWARD -o weave -j DROP\n");
  auto r = compare(a, b);
  EXPECT_TRUE(r.self_check_failures.empty()) << r.self_check_failures.front();
  EXPECT_GT(r.differing_classes, 0u);
  EXPECT_EQ(r.undecided_classes, 0u);
  bool named = false;
  for (const auto& d : r.differences) named |= d.witness_text.find("bridged to vethwekpc0") != std::string::npos;
  EXPECT_TRUE(named) << "the witness names the bridge port";
  // Spelling the same test two ways is equivalent: `--physdev-is-bridged` adds nothing to --physdev-out.
  auto e = compare(filter("-A FORWARD -m physdev --physdev-out vethwe+ --physdev-is-bridged -j DROP\n"),
                   filter("-A FORWARD -m physdev --physdev-out vethwe+ -j DROP\n"));
  EXPECT_TRUE(e.equivalent()) << e.differing_classes << " differing, " << e.undecided_classes << " undecided";
  // INPUT never has an out port: `! --physdev-is-bridged` there is the same as "entered a bridge port or not at all".
  auto i = compare(filter("-A INPUT -m physdev ! --physdev-is-bridged -j DROP\n"), filter("-A INPUT -j DROP\n"));
  EXPECT_TRUE(i.equivalent()) << i.differing_classes << " differing, " << i.undecided_classes << " undecided";
}

TEST(NotrackCompare, NotrackIsBehaviourAndSpellingsAgree) {
  auto raw = [](const std::string& r) { return "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + r + "COMMIT\n"; };
  auto d = compare(raw("-A PREROUTING -p udp --dport 53 -j CT --notrack\n"), raw(""));
  EXPECT_GT(d.differing_classes, 0u);
  EXPECT_EQ(d.undecided_classes, 0u);
  auto e = compare(raw("-A PREROUTING -p udp --dport 53 -j CT --notrack\n"), raw("-A PREROUTING -p udp --dport 53 -j NOTRACK\n"));
  EXPECT_TRUE(e.equivalent());
  // A shared notrack is no longer undecided: a change elsewhere is decided.
  std::string f1 = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
                   "-A FORWARD -m conntrack --ctstate UNTRACKED -j DROP\nCOMMIT\n";
  std::string f2 = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
                   "-A FORWARD -m conntrack --ctstate UNTRACKED -j ACCEPT\nCOMMIT\n";
  std::string shared = raw("-A PREROUTING -p udp --dport 53 -j CT --notrack\n");
  auto s = compare(shared + f1, shared + f2);
  EXPECT_GT(s.differing_classes, 0u);
  EXPECT_EQ(s.undecided_classes, 0u);
  EXPECT_TRUE(s.self_check_failures.empty());
}

}  // namespace
}  // namespace kpc::verifier::symbolic

#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

TEST(PhysdevCli, TraceTakesBridgePorts) {
  std::string dir = temp_dir("physdev-cli");
  write_file(dir + "/rules", "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
                             "-A FORWARD -m physdev --physdev-out vethwe+ --physdev-is-bridged -j DROP\nCOMMIT\n");
  std::vector<std::string> base = {bin_path("kpc"), "trace", dir + "/rules", "--src", "10.32.0.7", "--dst", "10.32.0.9",
                                   "--dport", "80", "--from", "pod", "--in-iface", "weave", "--out-iface", "weave"};
  auto with = [&](std::vector<std::string> extra) {
    auto argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
  };
  auto unknown = with({});
  EXPECT_EQ(unknown.exit_code, 0) << unknown.err;
  EXPECT_NE(unknown.out.find("UNKNOWN"), std::string::npos) << unknown.out;
  // --verbose: the packet line at full width (the default text wraps at 100 columns).
  auto bridged = with({"--in-bridge-port", "vethwepl1", "--out-bridge-port", "vethwe-bridge", "--verbose"});
  EXPECT_NE(bridged.out.find("DROP"), std::string::npos) << bridged.out;
  EXPECT_NE(bridged.out.find("bridge port in vethwepl1, bridged to vethwe-bridge"), std::string::npos) << bridged.out;
  auto routed = with({"--in-bridge-port", "vethwepl1", "--routed"});
  EXPECT_NE(routed.out.find("ACCEPT (forward)"), std::string::npos) << routed.out;
  auto none = with({"--no-bridge-port"});
  EXPECT_NE(none.out.find("ACCEPT (forward)"), std::string::npos) << none.out;
  auto json = with({"--in-bridge-port", "vethwepl1", "--routed", "--format", "json"});
  EXPECT_NE(json.out.find("\"in_bridge_port\": \"vethwepl1\""), std::string::npos) << json.out;
  EXPECT_EQ(with({"--no-bridge-port", "--in-bridge-port", "x"}).exit_code, 2);
  EXPECT_EQ(with({"--routed", "--out-bridge-port", "x"}).exit_code, 2);
  EXPECT_EQ(with({"--no-bridge-port", "--out-bridge-port", "x"}).exit_code, 2);
  EXPECT_EQ(with({"--ctmark", "zz"}).exit_code, 2);
}

}  // namespace
}  // namespace kpc::test
