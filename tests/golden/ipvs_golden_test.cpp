// kube-proxy's own IPVS unit tests (fixtures/kp-ipvs-*, transcribed from
// pkg/proxy/ipvs/proxier_test.go; fixtures/KUBEPROXY_IPVS_TESTS.md) replayed against kpc's
// IPVS back end: each snapshot is compiled (--backend ipvs) and kubeproxy/expected.yaml is
// checked the way the kube-proxy test asserts it -
//   ipvs.exact       reflect.DeepEqual of the fake IPVS: exactly these virtual servers
//                    (protocol, address, port, scheduler, persistence) and real servers;
//   ipvs.count       len(GetVirtualServers()); listed virtual servers must exist with exactly
//                    their real servers (checkIPVS);
//   ipvs.timeoutAll  every virtual server persistent with this timeout (TestSessionAffinity);
//   ipsets           each named set (kube-proxy's constant name) holds exactly these entries;
//   iptables         checkIptables/hasJump: the chain has a rule with this target whose
//                    match-set names the set (and -s, when given);
//   firstRule, chains, masqueradeRandomFully: the restore program's first rule of a chain, its
//                    chain declarations (text), the MASQUERADE rule's --random-fully.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "compiler/driver/compile_ipvs.h"
#include "compiler/ipvs/ipsets.h"
#include "compiler/ipvs/print.h"
#include "compiler/ir/printer.h"
#include "compiler/model/loader.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

struct Fixture {
  std::string name, dir;
  IPFamily family = IPFamily::V4;
};

std::vector<Fixture> fixtures() {
  std::vector<Fixture> out;
  for (const auto& e : fs::directory_iterator(source_path("fixtures"))) {
    std::string name = e.path().filename().string();
    if (!name.starts_with("kp-ipvs-") || !fs::exists(e.path() / "case.yaml")) continue;
    YAML::Node c = YAML::LoadFile((e.path() / "case.yaml").string());
    out.push_back({name, e.path().string(), c["family"].as<std::string>() == "ipv6" ? IPFamily::V6 : IPFamily::V4});
  }
  std::sort(out.begin(), out.end(), [](const Fixture& a, const Fixture& b) { return a.name < b.name; });
  return out;
}

std::optional<IpvsCompileResult> compile(const Fixture& f, std::string* diags_text) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  if (!load_snapshot({f.dir + "/snapshot.yaml"}, LoadOptions{}, sm, &snap, diags)) {
    *diags_text = diags.render(sm);
    return std::nullopt;
  }
  auto r = compile_ipvs(snap, f.family, diags);
  *diags_text = diags.render(sm);
  return r;
}

std::string vs_key(const std::string& proto, const std::string& address, int port) {
  return proto + " " + address + " " + std::to_string(port);
}

const ipvs::VirtualServer* find_vs(const ipvs::Program& p, const std::string& key) {
  for (const auto& vs : p.virtual_servers)
    if (vs_key(protocol_name(vs.protocol), vs.address.str(), vs.port) == key) return &vs;
  return nullptr;
}

std::set<std::string> real_servers(const ipvs::VirtualServer& vs) {
  std::set<std::string> out;
  for (const auto& rs : vs.real_servers) {
    EXPECT_EQ(rs.weight, 1u);
    out.insert(ipvs::host_port(rs.address, rs.port));
  }
  return out;
}

// One expected virtual server against kpc's: scheduler, persistence and real servers.
void check_vs(const YAML::Node& e, const ipvs::Program& p, std::vector<std::string>& errors) {
  std::string key = vs_key(e["protocol"].as<std::string>(), e["address"].as<std::string>(), e["port"].as<int>());
  const ipvs::VirtualServer* vs = find_vs(p, key);
  if (!vs) {
    errors.push_back("no virtual server " + key);
    return;
  }
  if (e["scheduler"] && vs->scheduler != e["scheduler"].as<std::string>())
    errors.push_back(key + ": scheduler " + vs->scheduler);
  bool persistent = e["timeout"].IsDefined();
  if (vs->persistent != persistent || (persistent && vs->timeout != e["timeout"].as<uint32_t>()))
    errors.push_back(key + ": persistence differs");
  std::set<std::string> want;
  for (const auto& rs : e["realServers"]) want.insert(rs.as<std::string>());
  if (real_servers(*vs) != want) {
    std::string got;
    for (const auto& s : real_servers(*vs)) got += " " + s;
    errors.push_back(key + ": real servers" + (got.empty() ? " (none)" : got));
  }
}

const ir::Rule* find_rule(const ipvs::Program& p, const std::string& chain, const YAML::Node& e, IPFamily family,
                          bool first_only) {
  std::string jump = e["jump"].as<std::string>();
  std::string set = e["set"] ? ipvs::set_name(e["set"].as<std::string>(), family) : "";
  std::string source = e["source"] ? e["source"].as<std::string>() : "";
  for (const auto& t : p.iptables.tables) {
    bool first = true;
    for (const auto& op : t.ops) {
      if (op.kind != ir::OpKind::Append || op.chain != chain) continue;
      std::string line;
      ir::print_rule_restore(line, chain, op.rule);
      bool target = line.ends_with(" -j " + jump) || line.find(" -j " + jump + " ") != std::string::npos;
      bool has_set = set.empty() || line.find("--match-set " + set + " ") != std::string::npos;
      bool has_source = source.empty() || line.find(" -s " + source + " ") != std::string::npos;
      if (target && has_set && has_source) return &op.rule;
      if (first_only && first) return nullptr;
      first = false;
    }
  }
  return nullptr;
}

std::vector<std::string> check(const YAML::Node& exp, const IpvsCompileResult& r, IPFamily family) {
  std::vector<std::string> errors;
  const ipvs::Program& p = r.program;
  if (const YAML::Node ipvs = exp["ipvs"]) {
    size_t expected_count = ipvs["exact"] && ipvs["exact"].as<bool>() ? ipvs["virtualServers"].size()
                            : ipvs["count"]                           ? ipvs["count"].as<size_t>()
                                                                      : p.virtual_servers.size();
    if (p.virtual_servers.size() != expected_count)
      errors.push_back("virtual servers: " + std::to_string(p.virtual_servers.size()) + ", expected " +
                       std::to_string(expected_count));
    for (const auto& vs : ipvs["virtualServers"]) check_vs(vs, p, errors);
    if (ipvs["timeoutAll"])
      for (const auto& vs : p.virtual_servers)
        if (!vs.persistent || vs.timeout != ipvs["timeoutAll"].as<uint32_t>())
          errors.push_back(vs_key(protocol_name(vs.protocol), vs.address.str(), vs.port) + ": timeout");
  }
  for (const auto& kv : exp["ipsets"]) {
    std::string base = kv.first.as<std::string>();
    const ipvs::IpSet* set = p.set(base);
    if (!set) {
      errors.push_back("no set " + base);
      continue;
    }
    std::vector<std::string> want;
    for (const auto& e : kv.second) want.push_back(e.as<std::string>());
    std::vector<std::string> got = set->entries;
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    if (got != want) errors.push_back("set " + base + " (" + set->name + ") entries differ");
  }
  for (const auto& kv : exp["iptables"]) {
    std::string chain = kv.first.as<std::string>();
    for (const auto& rule : kv.second)
      if (!find_rule(p, chain, rule, family, false))
        errors.push_back("no rule in " + chain + " -> " + rule["jump"].as<std::string>() +
                         (rule["set"] ? " matching " + rule["set"].as<std::string>() : ""));
  }
  for (const auto& kv : exp["firstRule"])
    if (!find_rule(p, kv.first.as<std::string>(), kv.second, family, true))
      errors.push_back("first rule of " + kv.first.as<std::string>() + " differs");
  if (const YAML::Node chains = exp["chains"]) {
    for (const auto& t : p.iptables.tables) {
      std::string text;
      for (const auto& op : t.ops)
        if (op.kind == ir::OpKind::DeclareChain) text += ":" + op.chain + " - [0:0]\n";
      std::string want;
      for (const auto& line : chains[ir::table_name(t.table)]) want += line.as<std::string>() + "\n";
      if (text != want) errors.push_back(std::string(ir::table_name(t.table)) + " chains:\n" + text);
    }
  }
  if (exp["masqueradeRandomFully"]) {
    bool want = exp["masqueradeRandomFully"].as<bool>();
    bool found = false;
    for (const auto& t : p.iptables.tables)
      for (const auto& op : t.ops)
        if (op.kind == ir::OpKind::Append && op.chain == "KUBE-POSTROUTING" &&
            op.rule.target.kind == ir::TargetKind::Masquerade && op.rule.args.size() == 2) {
          found = true;
          if (op.rule.target.random_fully != want) errors.push_back("MASQUERADE --random-fully differs");
        }
    if (!found) errors.push_back("no MASQUERADE rule in KUBE-POSTROUTING");
  }
  return errors;
}

TEST(IpvsGolden, KubeProxyIpvsTests) {
  auto all = fixtures();
  ASSERT_GE(all.size(), 30u);
  for (const auto& f : all) {
    SCOPED_TRACE(f.name);
    std::string diags;
    auto r = compile(f, &diags);
    ASSERT_TRUE(r) << diags;
    YAML::Node exp = YAML::LoadFile(f.dir + "/kubeproxy/expected.yaml");
    for (const auto& e : check(exp, *r, f.family)) ADD_FAILURE() << e;
    // The same snapshot compiles to the same bytes (objects are sorted after loading).
    std::string again_diags;
    auto again = compile(f, &again_diags);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->ipvs_rules + again->ipset_rules + again->iptables_rules + again->node_plan,
              r->ipvs_rules + r->ipset_rules + r->iptables_rules + r->node_plan);
  }
}

// The checks can fail: a changed expectation of every kind is reported.
TEST(IpvsGolden, CheckerSeesDifferences) {
  Fixture f;
  for (const auto& x : fixtures())
    if (x.name == "kp-ipvs-node-port-ipv4-udp") f = x;
  ASSERT_FALSE(f.name.empty());
  std::string diags;
  auto r = compile(f, &diags);
  ASSERT_TRUE(r) << diags;
  auto mutated = [&](auto change) {
    YAML::Node exp = YAML::LoadFile(f.dir + "/kubeproxy/expected.yaml");
    change(exp);
    return check(exp, *r, f.family).size();
  };
  EXPECT_EQ(mutated([](YAML::Node&) {}), 0u);
  EXPECT_GT(mutated([](YAML::Node& e) { e["ipvs"]["virtualServers"][1]["port"] = 3002; }), 0u);
  EXPECT_GT(mutated([](YAML::Node& e) { e["ipvs"]["virtualServers"][0]["realServers"][0] = "10.180.0.2:80"; }), 0u);
  EXPECT_GT(mutated([](YAML::Node& e) { e["ipvs"]["virtualServers"][0]["timeout"] = 10800; }), 0u);
  EXPECT_GT(mutated([](YAML::Node& e) { e["ipsets"]["KUBE-NODE-PORT-UDP"][0] = "3002"; }), 0u);
  EXPECT_GT(mutated([](YAML::Node& e) { e["iptables"]["KUBE-NODE-PORT"][0]["set"] = "KUBE-NODE-PORT-TCP"; }), 0u);
  EXPECT_GT(mutated([](YAML::Node& e) { e["masqueradeRandomFully"] = false; }), 0u);
}

}  // namespace
}  // namespace kpc::test
