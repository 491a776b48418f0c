// The cross-back-end diff from IPVS mode (issue 17 §3): every fixtures/kp-ipvs-* snapshot, the
// example, and the eTP=Local variant without a local endpoint (the IPVS fallback) are compiled
// with the IPVS back end and with the nftables (and iptables) back end, and compared by
// verifier/cross. Every difference must be one of IPVS mode's documented differences
// (ipvs_known_differences) except the ones listed in kNotKnown, each with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/driver/compile.h"
#include "compiler/driver/compile_ipvs.h"
#include "compiler/model/loader.h"
#include "compiler/proxy/node_context.h"
#include "tests/support/cross_support.h"
#include "tests/support/test_util.h"
#include "verifier/ipvs_trace/cross_frontend.h"
#include "verifier/ipvs_trace/tracer.h"

namespace kpc {
namespace {

namespace fs = std::filesystem;
namespace cross = verifier::cross;
namespace it = verifier::ipvs_trace;

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// kp-ipvs-only-local-load-balancing with its local endpoint moved to another node (as
// ipvs_trace_golden_test.cpp): no local endpoint for the eTP=Local load balancer and NodePort.
std::string etp_local_without_local_endpoint() {
  std::string s = slurp(test::source_path("fixtures/kp-ipvs-only-local-load-balancing/snapshot.yaml"));
  auto replace = [&](const std::string& a, const std::string& b) {
    size_t i = s.find(a);
    EXPECT_NE(i, std::string::npos) << a;
    if (i != std::string::npos) s.replace(i, a.size(), b);
  };
  replace("nodeName: test-node", "nodeName: node-x");
  replace("- name: kube-ipvs0", "- name: eth0\n  addresses: [10.0.0.10/24]\n- name: kube-ipvs0");
  return s;
}

// Differences that stay not known: "case|to-backend|packet text" -> why (docs/verifier.md).
const std::map<std::string, std::string>& not_known() {
  static const std::map<std::string, std::string> m = {
      {"example|nftables|tcp 198.51.100.7:443 from node 192.168.0.10, new",
       "loadBalancerSourceRanges from the node: IPVS mode's KUBE-PROXY-FIREWALL is jumped to from INPUT and "
       "FORWARD only and KUBE-IPVS-OUT-FILTER blocks the node only for an LB IP it cannot reach otherwise "
       "(issue 119656); not documented as a mode difference"},
      {"example|iptables|tcp 198.51.100.7:443 from node 192.168.0.10, new", "the same, against iptables mode"},
      {"kp-ipvs-load-balancer-source-ranges|nftables|tcp 1.2.3.4:80 from node 192.0.2.254, new",
       "the same (loadBalancerSourceRanges, from the node)"},
      {"kp-ipvs-load-balancer-source-ranges|iptables|tcp 1.2.3.4:80 from node 192.0.2.254, new",
       "the same, against iptables mode"},
  };
  return m;
}

struct Case {
  std::string name;
  std::string dir;   ///< "" for the variant
  IPFamily family = IPFamily::V4;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& e : fs::directory_iterator(test::source_path("fixtures"))) {
    std::string name = e.path().filename().string();
    if (!name.starts_with("kp-ipvs-") || !fs::exists(e.path() / "snapshot.yaml")) continue;
    IPFamily f = name.find("ipv6") != std::string::npos ? IPFamily::V6 : IPFamily::V4;
    out.push_back({name, e.path().string(), f});
  }
  std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  out.push_back({"example", test::source_path("fixtures/example"), IPFamily::V4});
  out.push_back({"etp-local-no-local-endpoint", "", IPFamily::V4});
  return out;
}

TEST(IpvsCrossKnown, IpvsDiffersFromNftablesAndIptablesOnlyByKnownDifferences) {
  size_t programs = 0, known = 0, listed_seen = 0, standin_cells = 0;
  std::map<std::string, size_t> by_id;
  for (const auto& c : cases()) {
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    if (c.dir.empty()) {
      ASSERT_TRUE(load_snapshot_text({{c.name + ".yaml", etp_local_without_local_endpoint()}}, LoadOptions{}, sm,
                                     &snap, diags));
    } else {
      std::vector<std::string> files = {fs::exists(c.dir + "/snapshot.yaml") ? c.dir + "/snapshot.yaml" : c.dir};
      ASSERT_TRUE(load_snapshot(files, LoadOptions{}, sm, &snap, diags)) << c.name << diags.render(sm);
    }
    auto ipvs = compile_ipvs(snap, c.family, diags);
    ASSERT_TRUE(ipvs) << c.name << diags.render(sm);
    it::ProgramTexts texts;
    texts.ipvs = ipvs->ipvs_rules;
    texts.ipset = ipvs->ipset_rules;
    texts.iptables = ipvs->iptables_rules;
    texts.node_plan = ipvs->node_plan;
    it::ProgramSet set;
    it::LoadError e;
    ASSERT_TRUE(it::load_program_set(texts, c.family, &set, &e)) << c.name << ": " << e.text();
    // The node's addresses as kpc diff takes them (tools/kpc: append_node_addresses) but those
    // bound to kube-ipvs0, then the ones the IPVS program set names (inferred_node_addresses).
    std::vector<IPAddr> local;
    DiagSink quiet;
    if (auto node = proxy::build_node_context(snap, c.family, quiet)) {
      if (node->node_ip) local.push_back(*node->node_ip);
      for (const auto& a : node->host_addresses)  // kube-ipvs0's addresses are the services'
        if (!a.is_loopback() && std::find(set.plan.bound.begin(), set.plan.bound.end(), a) == set.plan.bound.end())
          local.push_back(a);
    }
    for (const auto& a : it::inferred_node_addresses(set)) local.push_back(a);
    std::sort(local.begin(), local.end());
    local.erase(std::unique(local.begin(), local.end()), local.end());
    const bool standin = local.empty();
    if (standin) local.push_back(*IPAddr::parse(c.family == IPFamily::V4 ? "192.0.2.254" : "2001:db8::fe"));
    // The other modes: the same snapshot, each program loaded by its own model (cross_support.h).
    auto other = test::cross_diff_snapshot(snap, c.family, {}, local);
    ASSERT_TRUE(other->error.empty()) << c.name << ": " << other->error;
    auto fi = it::make_ipvs_frontend(set, local);
    auto fn = cross::make_nft_frontend(other->nft, c.family, local);
    auto ft = cross::make_iptables_frontend(other->ipt, local);
    for (const auto* fb : {fn.get(), ft.get()}) {
      auto r = cross::compare(*fi, *fb, cross::build_space(*fi, *fb, c.family, local));
      ++programs;
      EXPECT_TRUE(r.first_packets_only) << c.name;
      EXPECT_EQ(r.undecided, 0u) << c.name << " -> " << fb->backend();
      for (const auto& [id, n] : r.known_counts) {
        known += n;
        by_id[id] += n;
      }
      for (const auto& cell : r.differences) {
        if (!cell.known.empty()) continue;
        // The snapshot names no node address, so the comparison runs on a stand-in one: IPVS
        // serves NodePorts only on the node addresses it enumerates (one virtual server each),
        // the stand-in is none of them, so the packet is delivered locally. A test-setup
        // artefact, not a mode difference (with the node's real address both serve it).
        if (standin && cell.packet.dst == local.front() && cell.packet.dest_kind == cross::DestKind::NodePort &&
            cell.a.text() == "accept local") {
          ++standin_cells;
          continue;
        }
        std::string key = c.name + "|" + fb->backend() + "|" + cell.packet.text();
        if (not_known().count(key)) {
          ++listed_seen;
          continue;
        }
        ADD_FAILURE() << "not known: \"" << key << "\"\n  ipvs: " << cell.a.text() << "\n  " << fb->backend() << ": "
                      << cell.b.text();
      }
    }
  }
  EXPECT_EQ(listed_seen, not_known().size()) << "a listed not-known difference no longer occurs: update the list";
  EXPECT_GE(programs, 80u);
  // The fallback variant and kube-proxy's fixtures exercise the named differences.
  for (const char* id : {"ipvs-local-fallback", "ipvs-loopback-masquerade", "ipvs-filter-other-port",
                         "ipvs-no-short-circuit", "ipvs-loopback-local-endpoints"})
    EXPECT_GT(by_id[id], 0u) << id << " never occurred";
  std::string counts;
  for (const auto& [id, n] : by_id) counts += " " + id + "=" + std::to_string(n);
  std::printf("ipvs cross diff: %zu comparisons, %zu known differences (%s ), %zu listed not known, %zu NodePort "
              "cells on a stand-in node address\n",
              programs, known, counts.c_str(), listed_seen, standin_cells);
}

}  // namespace
}  // namespace kpc
