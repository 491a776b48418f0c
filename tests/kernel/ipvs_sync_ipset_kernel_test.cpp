// The IPVS sync's ipset change lines (issue 17 §2) against the real `ipset` in network
// namespaces: a node's KUBE-* sets drift from the full program (entries missing, stale
// entries, a whole set missing), `ipset save` of that node is read as `kpc compile --backend
// ipvs --prior-state` reads it (verifier/ipset -> tools/kpc/ipvs_prior.cpp), and the change
// lines from compiler/ipvs/sync.h must load with `ipset restore` on top of it and leave
// `ipset save` equal to the full program's sets. Programs: the example cluster (both
// families) and every kp-ipvs fixture. (This kernel has no IPVS: the ipvsadm half of the
// sync is checked in the verifier's model, tests/property/ipvs_sync_props_test.cpp.)
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "compiler/driver/compile_ipvs.h"
#include "compiler/ipvs/print.h"
#include "compiler/ipvs/sync.h"
#include "compiler/model/loader.h"
#include "tests/support/netns.h"
#include "tests/support/test_util.h"
#include "tools/kpc/ipvs_state.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

struct Case {
  std::string name;
  ipvs::Program program;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<std::pair<std::string, std::pair<std::string, IPFamily>>> inputs;
    for (IPFamily f : {IPFamily::V4, IPFamily::V6})
      inputs.push_back({std::string("example-") + family_name(f), {source_path("fixtures/example"), f}});
    for (const auto& e : fs::directory_iterator(source_path("fixtures"))) {
      std::string name = e.path().filename().string();
      if (!name.starts_with("kp-ipvs-")) continue;
      YAML::Node c = YAML::LoadFile((e.path() / "case.yaml").string());
      inputs.push_back({name, {(e.path() / "snapshot.yaml").string(),
                               c["family"].as<std::string>() == "ipv6" ? IPFamily::V6 : IPFamily::V4}});
    }
    std::vector<Case> out;
    for (const auto& [name, in] : inputs) {
      SourceManager sm;
      DiagSink diags;
      Snapshot snap;
      if (!load_snapshot({in.first}, LoadOptions{}, sm, &snap, diags)) continue;
      auto r = compile_ipvs(snap, in.second, diags);
      if (r) out.push_back({name, std::move(r->program)});
    }
    std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
    return out;
  }();
  return all;
}

// An element kube-proxy's set of this type could hold but no program here has.
std::string stale_element(const ipvs::IpSet& s, int i) {
  bool v6 = s.family == IPFamily::V6;
  std::string a = v6 ? "fd99::" + std::to_string(i + 1) : "10.99.0." + std::to_string(i + 1);
  switch (s.type) {
    case ipvs::SetType::HashIP: return a;
    case ipvs::SetType::HashIPPort: return a + ",tcp:80";
    case ipvs::SetType::HashIPPortIP: return a + ",udp:53," + a;
    case ipvs::SetType::HashIPPortNet: return a + ",tcp:443," + (v6 ? "fd98::/64" : "10.98.0.0/16");
    case ipvs::SetType::BitmapPort: return std::to_string(31000 + i);
  }
  return a;
}

// `ipset save` as {set -> "TYPE family F" + sorted elements}, a host network's "/32" or
// "/128" written as ipset prints it (without).
std::map<std::string, std::vector<std::string>> sets_of(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string verb, name, a, b, c;
    w >> verb >> name >> a;
    if (verb == "create") {
      w >> b >> c;
      out[name].insert(out[name].begin(), a + (b == "family" ? " " + c : ""));
    } else if (verb == "add") {
      for (const char* host : {"/32", "/128"}) {
        size_t at;
        while ((at = a.find(std::string(host) + ",")) != std::string::npos) a.erase(at, strlen(host));
        if (a.ends_with(host)) a.erase(a.size() - strlen(host));
      }
      out[name].push_back(a);
    }
  }
  for (auto& [_, v] : out)
    if (v.size() > 1) std::sort(v.begin() + 1, v.end());
  return out;
}

RC_GTEST_PROP(IpvsSyncKernel, IpsetChangeLinesBringTheNodeToTheFullSets, ()) {
  if (!can_use_netns()) RC_SUCCEED("needs root and network namespaces");
  const auto& all = cases();
  RC_PRE(!all.empty());
  const Case& c = *rc::gen::elementOf(all);
  // The drifted node: some sets missing, some entries missing, some stale entries.
  ipvs::Program node = c.program;
  std::vector<ipvs::IpSet> kept;
  for (auto s : node.sets) {
    if (*rc::gen::inRange(0, 6) == 0) continue;  // never created on this node
    std::vector<std::string> entries;
    for (const auto& e : s.entries)
      if (*rc::gen::inRange(0, 3) != 0) entries.push_back(e);
    for (int i = 0, n = *rc::gen::inRange(0, 3); i < n; ++i) entries.push_back(stale_element(s, i));
    s.entries = entries;
    kept.push_back(std::move(s));
  }
  node.sets = kept;
  Netns ns;
  RC_ASSERT(ns.ok());
  auto load = ns.exec({"ipset", "restore"}, ipvs::print_ipsets(node));
  RC_ASSERT(load.exit_code == 0);
  auto before = ns.exec({"ipset", "save"});
  RC_ASSERT(before.exit_code == 0);

  ipvs::PriorState prior;
  prior.sets.emplace();
  std::string e;
  if (!cli::ipset_prior_from_text(before.out, &*prior.sets, &e)) RC_FAIL(c.name + ": " + e);
  auto r = ipvs::sync_from_prior(c.program, prior);
  RC_ASSERT(r.error.empty());
  auto change = ns.exec({"ipset", "restore"}, r.ipset_rules);
  if (change.exit_code != 0) RC_FAIL(c.name + ": ipset restore: " + change.err + "\n" + r.ipset_rules);
  auto after = ns.exec({"ipset", "save"});
  RC_ASSERT(after.exit_code == 0);
  if (sets_of(after.out) != sets_of(ipvs::print_ipsets(c.program)))
    RC_FAIL(c.name + ": the node's sets differ from the full program's\n" + after.out + "\nchange:\n" + r.ipset_rules);
  // The change lines are only the differences: as many as the entries that drifted.
  RC_TAG(r.stats.entries_deleted > 0 ? "stale entries deleted" : "no stale entries");
  RC_TAG(r.stats.sets_created > 0 ? "sets created" : "no set created");
}

// A node that has the full sets already needs no ipset line at all.
TEST(IpvsSyncKernel, NoLinesForANodeThatHasTheSets) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root for network namespaces";
  size_t checked = 0;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    Netns ns;
    ASSERT_TRUE(ns.ok());
    ASSERT_EQ(ns.exec({"ipset", "restore"}, ipvs::print_ipsets(c.program)).exit_code, 0);
    auto save = ns.exec({"ipset", "save"});
    ipvs::PriorState prior;
    prior.sets.emplace();
    std::string e;
    ASSERT_TRUE(cli::ipset_prior_from_text(save.out, &*prior.sets, &e)) << e;
    auto r = ipvs::sync_from_prior(c.program, prior);
    EXPECT_EQ(r.ipset_rules, "");
    ++checked;
  }
  EXPECT_GE(checked, 40u);
}

}  // namespace
}  // namespace kpc::test
