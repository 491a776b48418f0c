// Issue 12 §3: the model of -m physdev (verifier/trace/physdev.h) against real bridged
// traffic. A "node" namespace has a bridge br0 with two ports (vetha, vethb) to two "pod"
// namespaces and a routed interface (vethc) to a third; br_netfilter hands bridged IPv4 to
// iptables (bridge-nf-call-iptables). Every physdev option, plain and negated, is a counting
// rule (no target) in mangle PREROUTING, INPUT, FORWARD and POSTROUTING, for UDP probes only.
// For each probe — bridged pod to pod, pod to the node, pod routed out of the bridge,
// routed into the bridge — the rules whose counters moved must be exactly the rules on the
// concrete tracer's path for the same packet.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "tests/support/netns.h"
#include "verifier/state/state.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

using verifier::trace::Origin;
using verifier::trace::Packet;

bool sh(const std::vector<std::string>& argv) {
  auto r = run(argv);
  EXPECT_EQ(r.exit_code, 0) << argv[0] << " " << (argv.size() > 1 ? argv[1] : "") << ": " << r.err;
  return r.exit_code == 0;
}

std::string rules() {
  static const char* const opts[] = {"--physdev-in vetha", "--physdev-in veth+", "--physdev-is-in",
                                     "--physdev-out vethb", "--physdev-out veth+", "--physdev-is-out",
                                     "--physdev-is-bridged"};
  std::string p = "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
                  ":POSTROUTING ACCEPT [0:0]\n";
  for (const char* chain : {"PREROUTING", "INPUT", "FORWARD", "POSTROUTING"})
    for (const char* o : opts)
      for (const char* neg : {"", "! "}) {
        std::string opt = o;
        std::string pre = opt.substr(0, opt.find(' ') == std::string::npos ? opt.size() : opt.find(' '));
        std::string rest = opt.substr(pre.size());
        p += std::string("-A ") + chain + " -s 10.8.0.0/15 -p udp -m udp --dport 7777 -m physdev " + neg + pre + rest + "\n";
      }
  return p + "COMMIT\n";
}

// (chain, 1-based position) of every rule whose packet counter is not zero.
std::set<std::pair<std::string, uint32_t>> kernel_hits(const Netns& node) {
  auto r = node.exec({"iptables-legacy-save", "-c", "-t", "mangle"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::set<std::pair<std::string, uint32_t>> hits;
  std::map<std::string, uint32_t> pos;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[", 0) != 0) continue;
    size_t close = line.find(']');
    std::string counters = line.substr(1, close - 1);
    std::istringstream rest(line.substr(close + 1));
    std::string a, chain;
    rest >> a >> chain;
    uint32_t n = ++pos[chain];
    if (counters.substr(0, counters.find(':')) != "0") hits.insert({chain, n});
  }
  return hits;
}

std::set<std::pair<std::string, uint32_t>> traced_hits(const verifier::RulesetState& st, const Packet& p) {
  verifier::trace::TraceOptions o;
  o.local_addresses = {*IPAddr::parse("10.9.0.1"), *IPAddr::parse("10.8.0.1")};
  verifier::trace::Tracer t(st, o);
  auto r = t.trace(p);
  std::set<std::pair<std::string, uint32_t>> hits;
  EXPECT_EQ(r.outcomes.size(), 1u);
  for (const auto& out : r.outcomes) {
    EXPECT_NE(out.verdict, verifier::trace::Verdict::Unknown) << out.unknown_reason;
    for (const auto& s : out.path)
      if (s.kind == verifier::trace::Step::Rule && s.table == ir::TableId::Mangle) hits.insert({s.chain, s.rule_no});
  }
  return hits;
}

std::string show(const std::set<std::pair<std::string, uint32_t>>& s, const std::string& program) {
  std::vector<std::string> lines;
  std::istringstream in(program);
  std::map<std::string, std::vector<std::string>> by_chain;
  for (std::string l; std::getline(in, l);)
    if (l.rfind("-A ", 0) == 0) by_chain[l.substr(3, l.find(' ', 3) - 3)].push_back(l);
  std::string out;
  for (const auto& [c, n] : s) out += "  " + by_chain[c][n - 1] + "\n";
  return out;
}

TEST(PhysdevKernel, CountersMatchTheTracerPerHook) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  Netns node, a, b, c;
  ASSERT_TRUE(node.ok() && a.ok() && b.ok() && c.ok());
  const std::string n = node.name();
  ASSERT_TRUE(sh({"ip", "-n", n, "link", "add", "br0", "type", "bridge"}));
  ASSERT_TRUE(sh({"ip", "-n", n, "addr", "add", "10.9.0.1/24", "dev", "br0"}));
  ASSERT_TRUE(sh({"ip", "-n", n, "link", "set", "br0", "up"}));
  struct Pod { const Netns* ns; const char* port; const char* addr; };
  for (Pod p : {Pod{&a, "vetha", "10.9.0.2/24"}, Pod{&b, "vethb", "10.9.0.3/24"}}) {
    ASSERT_TRUE(sh({"ip", "-n", n, "link", "add", p.port, "type", "veth", "peer", "name", "eth0", "netns", p.ns->name()}));
    ASSERT_TRUE(sh({"ip", "-n", n, "link", "set", p.port, "master", "br0"}));
    ASSERT_TRUE(sh({"ip", "-n", n, "link", "set", p.port, "up"}));
    ASSERT_TRUE(sh({"ip", "-n", p.ns->name(), "addr", "add", p.addr, "dev", "eth0"}));
    ASSERT_TRUE(sh({"ip", "-n", p.ns->name(), "link", "set", "eth0", "up"}));
    ASSERT_TRUE(sh({"ip", "-n", p.ns->name(), "route", "add", "default", "via", "10.9.0.1"}));
  }
  // A routed (non-bridge) interface to a third namespace.
  ASSERT_TRUE(sh({"ip", "-n", n, "link", "add", "vethc", "type", "veth", "peer", "name", "eth0", "netns", c.name()}));
  ASSERT_TRUE(sh({"ip", "-n", n, "addr", "add", "10.8.0.1/24", "dev", "vethc"}));
  ASSERT_TRUE(sh({"ip", "-n", n, "link", "set", "vethc", "up"}));
  ASSERT_TRUE(sh({"ip", "-n", c.name(), "addr", "add", "10.8.0.2/24", "dev", "eth0"}));
  ASSERT_TRUE(sh({"ip", "-n", c.name(), "link", "set", "eth0", "up"}));
  ASSERT_TRUE(sh({"ip", "-n", c.name(), "route", "add", "default", "via", "10.8.0.1"}));
  auto sysctl = node.exec({"sh", "-c",
                           "echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables && "
                           "echo 1 > /proc/sys/net/ipv4/ip_forward"});
  if (sysctl.exit_code != 0) GTEST_SKIP() << "br_netfilter not available here: " << sysctl.err;

  const std::string program = rules();
  auto load = node.exec({"iptables-legacy-restore"}, program);
  ASSERT_EQ(load.exit_code, 0) << load.err;
  verifier::RulesetState st = verifier::RulesetState::empty(IPFamily::V4);
  verifier::ParseError pe;
  ASSERT_TRUE(verifier::apply_text(st, program, verifier::ApplyOptions{true, verifier::Flavor::Legacy}, &pe).ok());

  struct Probe {
    const char* what;
    const Netns* from;
    const char* src;
    const char* dst;
    std::optional<std::string> in_port, out_port;
    const char* in_iface;
    const char* out_iface;
  };
  const Probe probes[] = {
      {"bridged pod to pod", &a, "10.9.0.2", "10.9.0.3", "vetha", "vethb", "br0", "br0"},
      {"pod to the node", &a, "10.9.0.2", "10.9.0.1", "vetha", "", "br0", ""},
      {"pod routed out of the bridge", &a, "10.9.0.2", "10.8.0.2", "vetha", "", "br0", "vethc"},
      {"routed into the bridge", &c, "10.8.0.2", "10.9.0.3", "", "", "vethc", "br0"},
  };
  // Neighbours first, so that each probe is one packet through the hooks.
  for (const auto& p : probes) p.from->exec({"ping", "-c", "1", "-W", "1", p.dst});
  for (const auto& p : probes) {
    SCOPED_TRACE(p.what);
    ASSERT_EQ(node.exec({"iptables-legacy", "-t", "mangle", "-Z"}).exit_code, 0);
    auto send = p.from->exec({"bash", "-c", std::string("echo probe > /dev/udp/") + p.dst + "/7777"});
    ASSERT_EQ(send.exit_code, 0) << send.err;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Packet pk;
    pk.src = *IPAddr::parse(p.src);
    pk.dst = *IPAddr::parse(p.dst);
    pk.proto = verifier::trace::kProtoUDP;
    pk.dport = 7777;
    pk.origin = Origin::Pod;
    pk.in_iface = p.in_iface;
    pk.out_iface = p.out_iface;
    pk.in_bridge_port = p.in_port;
    pk.out_bridge_port = p.out_port;
    auto kernel = kernel_hits(node);
    auto traced = traced_hits(st, pk);
    EXPECT_FALSE(kernel.empty());
    EXPECT_EQ(kernel, traced) << "kernel:\n" << show(kernel, program) << "tracer:\n" << show(traced, program);
  }
}

}  // namespace
}  // namespace kpc::test
