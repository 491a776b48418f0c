// Issue 12, part 4, against the real kernel: `kpc drift` on a node that kube-proxy
// set up (the bundled example's full program plus kube-proxy's jumps from the built-in
// chains) next to foreign rules (a Docker-like nat/filter setup and a user's own
// chain), in network namespaces with the real iptables-restore / iptables-save,
// legacy and nft, IPv4 and IPv6. For each kind of drift — a missing jump, an edited
// rule, a flushed chain, a stale per-service chain, several at once — the node's dump
// must be reported as drift (and only kube-proxy's part), the repair must load in the
// kernel, and afterwards the node's dump must equal the clean node's exactly (foreign
// rules untouched) and `kpc drift` must report no drift.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "applier/core/drift.h"
#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "tests/support/netns.h"
#include "tests/support/test_util.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

std::string full_program(Backend b) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  EXPECT_TRUE(load_snapshot({source_path("fixtures/example")}, LoadOptions{}, sm, &snap, diags));
  auto r = compile_iptables(snap, b, {}, diags);
  EXPECT_TRUE(r.has_value());
  return r ? r->text : "";
}

// kube-proxy's jumps as it installs them: each inserted at the top, in its list order.
std::string jumps_program(bool v6) {
  std::string filter, nat;
  for (const auto& j : verifier::trace::kube_proxy_jumps()) {
    if (v6 && std::string(j.to) == "KUBE-FIREWALL") continue;  // IPv4 only (and only when the program has it)
    (j.table == ir::TableId::Nat ? nat : filter) += "-I " + std::string(j.from) + " 1 " + j.rule_text() + "\n";
  }
  return "*filter\n" + filter + "COMMIT\n*nat\n" + nat + "COMMIT\n";
}

std::string foreign_program(bool v6) {
  std::string net = v6 ? "fd00:17::/64" : "172.17.0.0/16";
  return "*nat\n:DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n"
         "-A POSTROUTING -s " + net + " ! -o docker0 -j MASQUERADE\n-A DOCKER -i docker0 -j RETURN\nCOMMIT\n"
         "*filter\n:USER-RULES - [0:0]\n-A FORWARD -o docker0 -j ACCEPT\n-A INPUT -p tcp -m tcp --dport 22 -j USER-RULES\n"
         "-A USER-RULES -s " + std::string(v6 ? "2001:db8::/32" : "198.51.100.0/24") + " -j ACCEPT\nCOMMIT\n";
}

// A dump without counters, where kube-proxy's jumps in a built-in chain are listed
// sorted after the chain's other rules: kube-proxy puts a missing jump back at the top
// (as the repair does), so only their set is the node's contract; every other rule
// keeps its order.
std::string canonical(const std::string& save) {
  static const std::vector<std::string> builtins = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"};
  std::string out;
  std::vector<std::string> jumps;
  std::string jump_chain;
  auto flush = [&] {
    std::sort(jumps.begin(), jumps.end());
    for (const auto& j : jumps) out += j + "\n";
    jumps.clear();
  };
  size_t i = 0;
  while (i < save.size()) {
    size_t e = save.find('\n', i);
    std::string l = save.substr(i, e == std::string::npos ? std::string::npos : e - i);
    i = e == std::string::npos ? save.size() : e + 1;
    if (l.empty() || l[0] == '#') continue;
    if (l[0] == ':') l = l.substr(0, l.find(" ["));
    std::string chain = l.rfind("-A ", 0) == 0 ? l.substr(3, l.find(' ', 3) - 3) : "";
    if (chain != jump_chain) flush(), jump_chain = chain;
    bool builtin = std::find(builtins.begin(), builtins.end(), chain) != builtins.end();
    bool kube_jump = false;
    for (const auto& j : verifier::trace::kube_proxy_jumps())
      kube_jump |= builtin && chain == j.from && l == "-A " + chain + " " + j.rule_text();
    if (kube_jump)
      jumps.push_back(l);
    else
      out += l + "\n";
  }
  flush();
  return out;
}

struct Drift {
  const char* name;
  std::function<std::string(const std::string& full, bool v6)> commands;  ///< a restore program (--noflush)
};

// The per-service chain of the first "-A KUBE-SVC-" line, and that line.
std::pair<std::string, std::string> first_svc_rule(const std::string& full) {
  size_t p = full.find("\n-A KUBE-SVC-");
  if (p == std::string::npos) return {};
  size_t e = full.find('\n', p + 1);
  std::string line = full.substr(p + 1, e - p - 1);
  return {line.substr(3, line.find(' ', 3) - 3), line};
}

const Drift kDrifts[] = {
    {"missing PREROUTING jump",
     [](const std::string&, bool) {
       return std::string("*nat\n-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n"
                          "COMMIT\n");
     }},
    {"edited rule",
     [](const std::string& full, bool) {
       auto [chain, line] = first_svc_rule(full);
       return "*nat\n-D " + line.substr(3) + "\n-A " + chain + " -j RETURN\nCOMMIT\n";
     }},
    {"flushed chain",
     [](const std::string& full, bool) {
       auto [chain, line] = first_svc_rule(full);
       return "*nat\n-F " + chain + "\nCOMMIT\n";
     }},
    {"stale chain",
     [](const std::string&, bool) {
       return std::string("*nat\n:KUBE-SEP-STALESTALESTALE - [0:0]\n-A KUBE-SEP-STALESTALESTALE -j RETURN\nCOMMIT\n");
     }},
    {"all at once",
     [](const std::string& full, bool) {
       auto [chain, line] = first_svc_rule(full);
       return "*nat\n-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n-F " + chain +
              "\n:KUBE-SVC-STALESTALESTALE - [0:0]\nCOMMIT\n*filter\n-D FORWARD -m comment --comment "
              "\"kubernetes forwarding rules\" -j KUBE-FORWARD\nCOMMIT\n";
     }},
};

void run_case(const std::string& flavor, bool v6) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root for network namespaces";
  Backend b = v6 ? Backend::IP6Tables : Backend::IPTables;
  std::string full = full_program(b);
  auto tools = iptables_tools(flavor, v6);
  auto fl = flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  std::vector<IPAddr> local = {*IPAddr::parse(v6 ? "fd00::10" : "192.168.0.10")};
  for (const Drift& d : kDrifts) {
    SCOPED_TRACE(std::string(d.name) + ", " + flavor + (v6 ? ", IPv6" : ", IPv4"));
    Netns ns;
    ASSERT_TRUE(ns.ok() && ns.add_kube_proxy_nfacct());
    for (const std::string* prog : {&full})
      ASSERT_EQ(ns.exec({tools.restore, "--noflush"}, *prog).exit_code, 0) << ns.exec({tools.restore, "--noflush"}, *prog).err;
    ASSERT_EQ(ns.exec({tools.restore, "--noflush"}, jumps_program(v6)).exit_code, 0);
    ASSERT_EQ(ns.exec({tools.restore, "--noflush"}, foreign_program(v6)).exit_code, 0);
    std::string clean = ns.exec({tools.save}).out;
    {  // the clean node: no drift, whatever the foreign rules
      verifier::RulesetState st;
      std::string err;
      ASSERT_TRUE(verifier::load_save(clean, v6 ? IPFamily::V6 : IPFamily::V4, fl, st, &err)) << err;
      applier::DriftOptions o{fl, local, 2000};
      auto rep = applier::check_drift(st, full, o);
      ASSERT_TRUE(rep.ok) << rep.error;
      EXPECT_FALSE(rep.drift()) << "clean node reported as drift";
    }
    auto drift_cmd = ns.exec({tools.restore, "--noflush"}, d.commands(full, v6));
    ASSERT_EQ(drift_cmd.exit_code, 0) << drift_cmd.err;
    std::string drifted = ns.exec({tools.save}).out;
    verifier::RulesetState st;
    std::string err;
    ASSERT_TRUE(verifier::load_save(drifted, v6 ? IPFamily::V6 : IPFamily::V4, fl, st, &err)) << err;
    applier::DriftOptions o{fl, local, 2000};
    auto rep = applier::check_drift(st, full, o);
    ASSERT_TRUE(rep.ok) << rep.error;
    EXPECT_TRUE(rep.drift());
    for (const auto& c : rep.chains) EXPECT_EQ(c.chain.rfind("KUBE-", 0), 0u) << "foreign chain reported: " << c.chain;
    EXPECT_TRUE(rep.packets.self_check_failures.empty());
    // The repair loads in the kernel and leaves exactly the clean node.
    auto applied = ns.exec({tools.restore, "--noflush"}, rep.repair);
    ASSERT_EQ(applied.exit_code, 0) << applied.err << "\n" << rep.repair;
    std::string repaired = ns.exec({tools.save}).out;
    EXPECT_EQ(canonical(repaired), canonical(clean)) << rep.repair;
    verifier::RulesetState after;
    ASSERT_TRUE(verifier::load_save(repaired, v6 ? IPFamily::V6 : IPFamily::V4, fl, after, &err)) << err;
    auto again = applier::check_drift(after, full, o);
    ASSERT_TRUE(again.ok) << again.error;
    EXPECT_FALSE(again.drift()) << "still drift after the repair";
  }
}

TEST(DriftKernel, LegacyIPv4) { run_case("legacy", false); }
TEST(DriftKernel, LegacyIPv6) { run_case("legacy", true); }
TEST(DriftKernel, NftIPv4) { run_case("nft", false); }
TEST(DriftKernel, NftIPv6) { run_case("nft", true); }

}  // namespace
}  // namespace kpc::test
