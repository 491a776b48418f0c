// The IPVS back end's ipset and iptables programs against the real tools in network
// namespaces (issue 17 §1): for every kp-ipvs fixture and the example cluster, both
// families, `ipset restore` must take ipset.rules (twice: the program is re-runnable, as
// kube-proxy's `create -exist` is) and `ipset save` must list exactly kpc's sets, types,
// families and entries; then `iptables-restore --noflush` (legacy and nft) must take
// iptables.rules after the sets exist, and `iptables-save` must list as many rules per
// kube chain as kpc wrote. This kernel has no IPVS: ipvs.rules cannot be loaded here (its
// content is checked against kube-proxy's expectations, tests/golden/ipvs_golden_test.cpp),
// and the `-m ipvs` match of KUBE-IPVS-OUT-FILTER needs the ip_vs module, so when the
// kernel refuses that match those rules (and only those) are left out and counted.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "compiler/driver/compile_ipvs.h"
#include "compiler/model/loader.h"
#include "tests/support/netns.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

struct Input {
  std::string name;
  std::vector<std::string> paths;
  IPFamily family;
};

std::vector<Input> inputs() {
  std::vector<Input> out;
  for (IPFamily f : {IPFamily::V4, IPFamily::V6})
    out.push_back({std::string("example-") + family_name(f), {source_path("fixtures/example")}, f});
  for (const auto& e : fs::directory_iterator(source_path("fixtures"))) {
    std::string name = e.path().filename().string();
    if (!name.starts_with("kp-ipvs-")) continue;
    YAML::Node c = YAML::LoadFile((e.path() / "case.yaml").string());
    out.push_back({name, {(e.path() / "snapshot.yaml").string()},
                   c["family"].as<std::string>() == "ipv6" ? IPFamily::V6 : IPFamily::V4});
  }
  return out;
}

// "create NAME TYPE family F ..." / "add NAME ENTRY" of ipset.rules or `ipset save`, as
// {name -> "TYPE family" + sorted entries}; bitmap:port has no family.
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
      out[name].push_back(a);
    }
  }
  for (auto& [_, v] : out)
    if (v.size() > 1) std::sort(v.begin() + 1, v.end());
  return out;
}

std::map<std::string, size_t> rules_per_chain(const std::string& text) {
  std::map<std::string, size_t> out;
  std::istringstream in(text);
  std::string line, table;
  while (std::getline(in, line)) {
    if (line.starts_with("*")) table = line.substr(1);
    if (!line.starts_with("-A KUBE-")) continue;
    std::string chain = line.substr(3, line.find(' ', 3) - 3);
    ++out[table + "/" + chain];
  }
  return out;
}

bool kernel_has_ipvs_match(const Netns& ns, const IptablesTools& tools) {
  auto r = ns.exec({tools.restore, "--noflush"},
                   "*filter\n:KPC-PROBE - [0:0]\n-A KPC-PROBE -m ipvs --vaddr 10.0.0.1 -j DROP\n-X KPC-PROBE\nCOMMIT\n");
  return r.exit_code == 0;
}

TEST(IpvsKernel, IpsetAndIptablesProgramsLoad) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root for network namespaces";
  size_t programs = 0, ipvs_rules_left_out = 0;
  for (const auto& in : inputs()) {
    SCOPED_TRACE(in.name);
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    ASSERT_TRUE(load_snapshot(in.paths, LoadOptions{}, sm, &snap, diags)) << diags.render(sm);
    auto r = compile_ipvs(snap, in.family, diags);
    if (!r && in.name.starts_with("example")) continue;  // the example's node may lack the family
    ASSERT_TRUE(r) << diags.render(sm);
    for (const char* flavor : {"legacy", "nft"}) {
      SCOPED_TRACE(flavor);
      Netns ns;
      ASSERT_TRUE(ns.ok());
      auto restore = ns.exec({"ipset", "restore"}, r->ipset_rules);
      ASSERT_EQ(restore.exit_code, 0) << restore.err;
      restore = ns.exec({"ipset", "restore"}, r->ipset_rules);  // again: create -exist, flush, add
      ASSERT_EQ(restore.exit_code, 0) << restore.err;
      auto save = ns.exec({"ipset", "save"});
      ASSERT_EQ(save.exit_code, 0) << save.err;
      EXPECT_EQ(sets_of(save.out), sets_of(r->ipset_rules));

      auto tools = iptables_tools(flavor, in.family == IPFamily::V6);
      std::string program = r->iptables_rules;
      if (!kernel_has_ipvs_match(ns, tools)) {
        std::string kept, line;
        std::istringstream lines(program);
        while (std::getline(lines, line))
          if (line.find(" -m ipvs ") == std::string::npos) kept += line + "\n";
          else ++ipvs_rules_left_out;
        program = kept;
      }
      auto ipt = ns.exec({tools.restore, "--noflush"}, program);
      ASSERT_EQ(ipt.exit_code, 0) << ipt.err << program;
      auto listed = ns.exec({tools.save});
      ASSERT_EQ(listed.exit_code, 0) << listed.err;
      EXPECT_EQ(rules_per_chain(listed.out), rules_per_chain(program));
      ++programs;
    }
  }
  EXPECT_GE(programs, 80u);
  std::printf("%zu programs loaded; %zu -m ipvs rules left out (no ip_vs in this kernel)\n", programs,
              ipvs_rules_left_out);
}

}  // namespace
}  // namespace kpc::test
