// kube-proxy's nftables packet-flow expectations (fixtures/kp-nft-*/kubeproxy/packet-flows.yaml:
// the 207 flows of runPacketFlowTests in pkg/proxy/nftables/proxier_test.go, transcribed in
// fixtures/KUBEPROXY_NFT_TESTS.md) replayed on kpc's nftables programs with the concrete
// nft tracer (verifier/nft_trace): for each fixture (and step), the compiler writes each
// sync's transactions, the nft model applies them as `nft -f` would, and every flow is traced
// with the kernel's semantics (hooks and priorities, conntrack, marks, numgen shares). The
// expectation is compared as runPacketFlowTests compares it:
//  - the packet's origin is taken from its source: a node address (the fixture's localIPs)
//    is the node itself, the fake's cluster CIDR (10.0.0.0/8, fd00:10::/64) a pod, anything
//    else external;
//  - a list of DNAT destinations must be exactly the set the accepted outcomes DNAT to, every
//    outcome accepted and DNAT'ed, probabilities summing to 1;
//  - ACCEPT / DROP / REJECT must be every outcome's verdict; "" (no verdict, no DNAT) must be
//    an ACCEPT without DNAT;
//  - masq must equal "some outcome masquerades" (kube-proxy's test has one flag for all
//    branches).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>

#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/service_ports.h"
#include "compiler/support/text.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::verifier::nft_trace {
namespace {
namespace fs = std::filesystem;
namespace vn = kpc::verifier::nft;

struct Flow {
  std::string name, source_ip, dest_ip, protocol, output;
  int dest_port = 0;
  bool masq = false;
};
struct FlowGroup {
  std::string test, subtest, fixture;
  int step = 0;
  bool ipv6 = false;
  std::vector<Flow> flows;
};
struct FlowFiles {
  std::vector<std::string> local_ips;
  std::vector<FlowGroup> groups;
};

FlowFiles load_flows() {
  FlowFiles out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(test::source_path("fixtures"))) {
    fs::path f = e.path() / "kubeproxy" / "packet-flows.yaml";
    if (e.path().filename().string().starts_with("kp-nft-") && fs::exists(f)) files.push_back(f);
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    YAML::Node root = YAML::LoadFile(f.string());
    if (out.local_ips.empty())
      for (const auto& ip : root["localIPs"]) out.local_ips.push_back(ip.as<std::string>());
    for (const auto& t : root["tests"]) {
      FlowGroup g;
      g.test = t["test"].as<std::string>();
      g.subtest = t["subtest"].IsNull() ? "" : t["subtest"].as<std::string>();
      g.fixture = t["fixture"].as<std::string>();
      g.step = t["step"].IsNull() ? 0 : t["step"].as<int>();
      g.ipv6 = t["family"] && t["family"].as<std::string>() == "ipv6";
      for (const auto& fl : t["flows"]) {
        Flow x;
        x.name = fl["name"].as<std::string>();
        x.source_ip = fl["sourceIP"].as<std::string>();
        x.dest_ip = fl["destIP"].as<std::string>();
        x.dest_port = fl["destPort"].as<int>();
        x.protocol = fl["protocol"].as<std::string>();
        x.output = fl["output"].as<std::string>();
        x.masq = fl["masq"].as<bool>();
        g.flows.push_back(x);
      }
      out.groups.push_back(std::move(g));
    }
  }
  return out;
}

/// Snapshot files of steps 1..N of a fixture (one for a single-step fixture).
std::vector<std::string> step_snapshots(const std::string& fixture) {
  std::string dir = test::source_path("fixtures/" + fixture);
  YAML::Node c = YAML::LoadFile(dir + "/case.yaml");
  std::vector<std::string> out;
  if (c["steps"]) {
    for (const auto& s : c["steps"])
      out.push_back(dir + "/" + s["dir"].as<std::string>() + "/" + s["files"]["snapshot"].as<std::string>());
  } else {
    out.push_back(dir + "/" + c["files"]["snapshot"].as<std::string>());
  }
  return out;
}

Snapshot load(const std::string& path, std::string* error) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  if (!load_snapshot({path}, LoadOptions{}, sm, &snap, diags)) *error = diags.render(sm);
  return snap;
}

struct Built {
  vn::NftState node;
  std::string error;
  std::vector<std::string> transactions;  ///< applied, in order (for messages)
};

/// The node's nftables state after the fixture's syncs 1..step (kube-proxy's proxier: the
/// first sync full, later ones partial as the change tracker decides), as the golden
/// suite (nftables_golden_test.cpp) builds it.
Built build(const std::string& fixture, int step, bool ipv6) {
  Built b;
  const IPFamily family = ipv6 ? IPFamily::V6 : IPFamily::V4;
  auto snaps = step_snapshots(fixture);
  size_t n = step == 0 ? 1 : static_cast<size_t>(step);
  if (n > snaps.size()) {
    b.error = "no step " + std::to_string(step);
    return b;
  }
  nftables::SyncState proxier;
  std::optional<Snapshot> prior;
  int64_t now = 0;
  for (size_t i = 0; i < n; ++i) {
    Snapshot snap = load(snaps[i], &b.error);
    if (!b.error.empty()) return b;
    DiagSink diags;
    auto ctx = nft_node_context(snap, family, diags);
    if (!ctx) {
      b.error = "no node context: " + diags.render(SourceManager{});
      return b;
    }
    auto ports = proxy::build_service_ports(snap, *ctx);
    nftables::SyncOptions o;
    o.full = !prior.has_value();
    if (prior) {
      auto pctx = nft_node_context(*prior, family, diags);
      auto pports = proxy::build_service_ports(*prior, *pctx);
      auto ch = proxy::compute_changes(*prior, pports, *pctx, snap, ports, *ctx);
      o.full = ch.full_sync;
      o.changed_services = ch.services;
    }
    o.service_cidrs = service_cidrs_of(snap, family);
    now += 1;
    o.now_ms = now;
    auto r = nftables::sync_nftables(ports, *ctx, o, proxier, nullptr);
    std::vector<std::string> texts;
    if (!r.cleanup.empty()) texts.push_back(nftables::print_transaction(r.cleanup));
    texts.push_back(nftables::print_transaction(r.tx));
    for (const std::string& text : texts) {
      b.transactions.push_back(text);
      auto a = vn::apply_script(b.node, text, "sync.nft");
      if (!a.ok) {
        b.error = a.error->render();
        return b;
      }
    }
    prior = std::move(snap);
  }
  return b;
}

std::string label(const FlowGroup& g, const Flow& f) {
  std::string s = g.fixture;
  if (g.step) s += " step " + std::to_string(g.step);
  s += " [" + g.test + (g.subtest.empty() ? "" : "/" + g.subtest) + "] \"" + f.name + "\" (" + f.protocol + " " +
       f.source_ip + " -> " + f.dest_ip + ":" + std::to_string(f.dest_port) + ")";
  return s;
}

TEST(NftPacketFlows, FilesHold207Flows) {
  FlowFiles f = load_flows();
  size_t n = 0;
  for (const auto& g : f.groups) n += g.flows.size();
  EXPECT_EQ(n, 207u);
}

TEST(NftPacketFlows, KubeProxyExpectationsHoldOnKpcPrograms) {
  FlowFiles f = load_flows();
  std::map<std::string, Built> cache;
  size_t compared = 0, agreed = 0;
  for (const auto& g : f.groups) {
    std::string key = g.fixture + "#" + std::to_string(g.step);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, build(g.fixture, g.step, g.ipv6)).first;
    const Built& b = it->second;
    const IPFamily fam = g.ipv6 ? IPFamily::V6 : IPFamily::V4;
    TraceOptions opts;
    for (const auto& s : f.local_ips)
      if (auto a = IPAddr::parse(s); a && a->family == fam) opts.local_addresses.push_back(*a);
    Tracer tracer(b.node, opts);
    auto pod_cidr = CIDR::parse(fam == IPFamily::V4 ? "10.0.0.0/8" : "fd00:10::/64");
    for (const auto& fl : g.flows) {
      ++compared;
      std::string where = label(g, fl);
      if (!b.error.empty()) {
        ADD_FAILURE() << where << ": the node's state does not build: " << b.error;
        continue;
      }
      Packet p;
      p.src = *IPAddr::parse(fl.source_ip);
      p.dst = *IPAddr::parse(fl.dest_ip);
      p.proto = *trace::proto_from_name(fl.protocol);
      p.dport = static_cast<uint16_t>(fl.dest_port);
      p.sport = 40000;
      if (tracer.is_local(p.src))
        p.origin = Origin::Node;
      else if (pod_cidr->contains(p.src))
        p.origin = Origin::Pod, p.in_iface = "cbr0";
      else
        p.origin = Origin::External, p.in_iface = "eth0";
      p.out_iface = "eth0";
      TraceResult r = tracer.trace(p);

      std::set<std::string> expected_dnat, got_dnat, verdicts;
      std::string expected_verdict;
      for (auto part : split(fl.output, ',')) {
        std::string w(trim(part));
        if (w.empty()) continue;
        if (w == "ACCEPT" || w == "DROP" || w == "REJECT")
          expected_verdict = w;
        else
          expected_dnat.insert(w);
      }
      bool any_masq = false, unknown = false;
      for (const auto& o : r.outcomes) {
        if (o.verdict == Verdict::Unknown) unknown = true;
        verdicts.insert(verdict_name(o.verdict));
        if (o.dnat && o.verdict == Verdict::Accept) got_dnat.insert(o.dnat_text);
        if (o.verdict == Verdict::Accept && !o.dnat && !expected_dnat.empty()) got_dnat.insert("(no DNAT)");
        any_masq = any_masq || o.masquerade;
      }
      std::string why;
      if (unknown)
        why = "an outcome is unknown";
      else if (!r.total().is_one())
        why = "probabilities sum to " + r.total().fraction();
      else if (!expected_dnat.empty() && !expected_verdict.empty())
        why = "mixed expectation (not in the files)";
      else if (!expected_dnat.empty()) {
        if (verdicts != std::set<std::string>{"ACCEPT"})
          why = "expected only accepted, DNAT'ed outcomes";
        else if (got_dnat != expected_dnat)
          why = "DNAT destinations differ";
        else if (any_masq != fl.masq)
          why = "masquerade differs";
      } else if (expected_verdict.empty()) {
        if (verdicts != std::set<std::string>{"ACCEPT"} || !got_dnat.empty())
          why = "expected a plain ACCEPT (no verdict, no DNAT)";
        else if (any_masq != fl.masq)
          why = "masquerade differs";
      } else if (verdicts != std::set<std::string>{expected_verdict}) {
        why = "verdict differs";
      }
      if (why.empty()) {
        ++agreed;
        continue;
      }
      ADD_FAILURE() << where << ": " << why << "\n  expected output \"" << fl.output << "\" masq " << fl.masq << "\n"
                    << format_text(p, opts, r);
    }
  }
  std::printf("[ nft packet flows ] %zu of %zu kube-proxy flows hold on kpc's nftables programs\n", agreed, compared);
  EXPECT_EQ(compared, 207u);
}

}  // namespace
}  // namespace kpc::verifier::nft_trace
