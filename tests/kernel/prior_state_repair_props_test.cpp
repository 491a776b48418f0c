// Issue 4's --prior-state, as a property against the real kernel: a node loaded
// with full(cluster) drifts at random (rules deleted or added, chains flushed,
// stale per-service chains created); kpc reads the drifted iptables-save dump and
// writes a repair program; applied with --noflush, it must leave exactly the
// iptables-save of a node loaded with full(cluster) alone. Legacy and nft, IPv4/IPv6.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "applier/core/repair.h"
#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "tests/support/cluster_env.h"
#include "tests/support/netns.h"
#include "tests/support/snapshot_gen.h"

namespace kpc::test {
namespace {

std::optional<std::string> compile_full(const testgen::GeneratedCluster& c, Backend backend) {
  auto snap = load_compilable(c);
  if (!snap) return std::nullopt;
  DiagSink diags;
  auto r = compile_iptables(*snap, backend, {}, diags);
  if (!r) return std::nullopt;
  return r->text;
}

// Chains of a table as iptables-save lists them (from a dump).
std::vector<std::pair<std::string, std::string>> user_chains(const std::string& save) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string table;
  std::istringstream in(save);
  for (std::string l; std::getline(in, l);) {
    if (l[0] == '*') table = l.substr(1);
    else if (l[0] == ':' && l.find(" - ") != std::string::npos) out.emplace_back(table, l.substr(1, l.find(' ') - 1));
  }
  return out;
}

std::string normalized(const std::string& save) {
  std::map<std::string, std::vector<std::string>> decls, rules;
  std::string table, out;
  std::istringstream in(save);
  for (std::string l; std::getline(in, l);) {
    if (l.empty() || l[0] == '#' || l == "COMMIT") continue;
    if (l[0] == '*') table = l.substr(1);
    else if (l[0] == ':') decls[table].push_back(l.substr(0, l.find(" [")));
    else rules[table].push_back(l);
  }
  for (auto& [t, d] : decls) {
    std::sort(d.begin(), d.end());
    out += "*" + t + "\n";
    for (const auto& l : d) out += l + "\n";
    std::stable_sort(rules[t].begin(), rules[t].end(), [](const std::string& a, const std::string& b) {
      return a.substr(0, a.find(' ', 3)) < b.substr(0, b.find(' ', 3));
    });
    for (const auto& l : rules[t]) out += l + "\n";
  }
  return out;
}

}  // namespace

RC_GTEST_PROP(KernelRepair, RepairOfDriftedStateEqualsFull, ()) {
  if (!can_use_netns()) RC_SUCCEED("needs root and network namespaces");
  testgen::GenOptions go;
  go.max_services = 5;
  auto cluster = *testgen::gen_cluster(go);
  const bool v6 = *rc::gen::arbitrary<bool>();
  const std::string flavor = *rc::gen::element<std::string>("legacy", "nft");
  auto full = compile_full(cluster, v6 ? Backend::IP6Tables : Backend::IPTables);
  RC_PRE(full.has_value());
  auto tools = iptables_tools(flavor, v6);
  std::string cmd = (v6 ? "ip6tables-" : "iptables-") + flavor;
  Netns drifted, clean;
  RC_ASSERT(drifted.add_kube_proxy_nfacct() && clean.add_kube_proxy_nfacct());
  RC_ASSERT(drifted.exec({tools.restore, "--noflush"}, *full).exit_code == 0);
  RC_ASSERT(clean.exec({tools.restore, "--noflush"}, *full).exit_code == 0);

  // Drift: a few random edits of the kind operators and other agents make.
  auto chains = user_chains(drifted.exec({tools.save}).out);
  RC_PRE(!chains.empty());
  const int edits = *rc::gen::inRange(1, 5);
  for (int i = 0; i < edits; ++i) {
    auto [table, chain] = *rc::gen::elementOf(chains);
    switch (*rc::gen::inRange(0, 4)) {
      case 0: drifted.exec({cmd, "-t", table, "-D", chain, "1"}); break;          // a rule lost
      case 1: drifted.exec({cmd, "-t", table, "-A", chain, "-j", "RETURN"}); break;  // a rule added
      case 2: drifted.exec({cmd, "-t", table, "-F", chain}); break;                  // a chain flushed
      default: {                                                                     // a stale service chain
        std::string stale = "KUBE-SEP-STALE" + std::to_string(i) + "XXXXXXXX";
        drifted.exec({cmd, "-t", "nat", "-N", stale});
        drifted.exec({cmd, "-t", "nat", "-A", stale, "-j", "RETURN"});
      }
    }
  }
  std::string dump = drifted.exec({tools.save}).out;
  verifier::Flavor fl = flavor == "nft" ? verifier::Flavor::Nft : verifier::Flavor::Legacy;
  auto actual = verifier::RulesetState::empty(v6 ? IPFamily::V6 : IPFamily::V4);
  std::string error;
  RC_ASSERT(verifier::load_save(dump, v6 ? IPFamily::V6 : IPFamily::V4, fl, actual, &error));
  auto repair = applier::repair(actual, *full, fl);
  if (!repair.ok) RC_FAIL("repair failed: " + repair.error + "\n--- dump\n" + dump);
  auto applied = drifted.exec({tools.restore, "--noflush"}, repair.program);
  if (applied.exit_code != 0) RC_FAIL("kernel rejected the repair: " + applied.err + "\n" + repair.program);
  std::string got = normalized(drifted.exec({tools.save}).out);
  std::string want = normalized(clean.exec({tools.save}).out);
  if (got != want) RC_FAIL("repaired state differs\n--- repair\n" + repair.program + "\n--- got\n" + got + "\n--- want\n" + want);
}

}  // namespace kpc::test
