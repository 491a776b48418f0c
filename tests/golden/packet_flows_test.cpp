// kube-proxy's packet-flow expectations (fixtures/kubeproxy-packet-flows.yaml, 239 flows
// transcribed from proxier_test.go's runPacketFlowTests tables) replayed on kpc's pinned
// programs — without the compiler: the kernel state of a flow's fixture (and step) is
// built by the verifier's state machine from
//   kube-proxy's jump rules from the built-in chains (installed outside the restore,
//   add_kube_proxy_jumps),
//   fixtures/<case>[/steps/01]/expected/<backend>.restore                (a full sync),
//   fixtures/<case>/steps/NN/expected/<backend>.partial.restore, NN = 02..N (--noflush),
// and each flow is traced with kube-proxy's own test semantics (trace_kube_proxy_test);
// `output` and `masq` must equal the test's expectation. The concrete tracer is also run
// on every flow and must reach the same answer (ConcreteTracerAgreesWithKubeProxy).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "compiler/support/text.h"
#include "tests/support/test_util.h"
#include "verifier/state/state.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier::trace {
namespace {
namespace fs = std::filesystem;

struct Flow {
  std::string name, source_ip, dest_ip, protocol, output;
  int dest_port = 0;
  bool masq = false;
};

struct FlowGroup {
  std::string test, subtest, fixture, backend;
  int step = 0;  // 0: single-step fixture
  std::vector<Flow> flows;
};

struct FlowFile {
  std::vector<std::string> local_ips;
  std::vector<FlowGroup> groups;
};

FlowFile load_flows() {
  YAML::Node root = YAML::LoadFile(test::source_path("fixtures/kubeproxy-packet-flows.yaml"));
  FlowFile f;
  for (const auto& ip : root["localIPs"]) f.local_ips.push_back(ip.as<std::string>());
  for (const auto& t : root["tests"]) {
    FlowGroup g;
    g.test = t["test"].as<std::string>();
    g.subtest = t["subtest"].IsNull() ? "" : t["subtest"].as<std::string>();
    g.fixture = t["fixture"].as<std::string>();
    g.backend = t["backend"].as<std::string>();
    g.step = t["step"].IsNull() ? 0 : t["step"].as<int>();
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
    f.groups.push_back(std::move(g));
  }
  return f;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Step directories of a multi-step fixture, by step number (case.yaml).
std::map<int, std::string> step_dirs(const std::string& fixture) {
  std::map<int, std::string> out;
  std::string dir = test::source_path("fixtures/" + fixture);
  YAML::Node c = YAML::LoadFile(dir + "/case.yaml");
  if (c["steps"])
    for (const auto& s : c["steps"]) out[s["step"].as<int>()] = dir + "/" + s["dir"].as<std::string>();
  return out;
}

/// The node's tables after the fixture's syncs up to `step`, or an error.
struct Built {
  RulesetState state;
  std::string error;
  std::vector<std::string> programs;  ///< applied, in order (for messages)
};

Built build_state(const std::string& fixture, int step, const std::string& backend) {
  IPFamily fam = backend == "ip6tables" ? IPFamily::V6 : IPFamily::V4;
  Built b{RulesetState::empty(fam), "", {}};
  ApplyOptions ao{true, Flavor::Legacy};
  auto apply = [&](const std::string& label, const std::string& text) {
    ParseError pe;
    auto r = apply_text(b.state, text, ao, &pe);
    if (!r.ok()) b.error = label + ": line " + std::to_string(r.error->line) + ": " + r.error->reason;
    b.programs.push_back(label);
    return r.ok();
  };
  std::string err;
  b.programs.push_back("kube-proxy jump rules");
  if (!add_kube_proxy_jumps(b.state, &err)) {
    b.error = "kube-proxy jump rules: " + err;
    return b;
  }
  std::string file = backend + ".restore", partial = backend + ".partial.restore";
  if (step == 0) {
    std::string p = test::source_path("fixtures/" + fixture + "/expected/" + file);
    apply(p, test::read_file(p));
    return b;
  }
  auto dirs = step_dirs(fixture);
  for (int n = 1; n <= step; ++n) {
    if (!dirs.count(n)) {
      b.error = "no step " + std::to_string(n) + " in " + fixture + "/case.yaml";
      return b;
    }
    std::string full = dirs[n] + "/expected/" + file, part = dirs[n] + "/expected/" + partial;
    // Step 1 is a full sync; later steps apply what kube-proxy wrote then (the partial
    // program; a step without one was a full sync).
    std::string p = n > 1 && fs::exists(part) ? part : full;
    if (!apply(p, test::read_file(p))) return b;
  }
  return b;
}

std::string flow_label(const FlowGroup& g, const Flow& f) {
  std::string s = g.fixture;
  if (g.step) s += " step " + std::to_string(g.step);
  s += " [" + g.test + (g.subtest.empty() ? "" : "/" + g.subtest) + "] \"" + f.name + "\" (" + lower(f.protocol) + " " +
       f.source_ip + " -> " + f.dest_ip + ":" + std::to_string(f.dest_port) + ")";
  return s;
}

struct Cache {
  std::map<std::string, Built> states;
  const Built& get(const FlowGroup& g) {
    std::string key = g.fixture + "#" + std::to_string(g.step) + "#" + g.backend;
    auto it = states.find(key);
    if (it == states.end()) it = states.emplace(key, build_state(g.fixture, g.step, g.backend)).first;
    return it->second;
  }
};

TEST(PacketFlows, FileHas239Flows) {
  FlowFile f = load_flows();
  size_t n = 0;
  for (const auto& g : f.groups) n += g.flows.size();
  EXPECT_EQ(n, 239u);
  EXPECT_EQ(f.groups.size(), 42u);
}

// Every flow, traced as kube-proxy's test traces it, gives the test's output and masq.
TEST(PacketFlows, KubeProxyExpectationsHoldOnKpcPrograms) {
  FlowFile f = load_flows();
  Cache cache;
  size_t total = 0, passed = 0;
  for (const auto& g : f.groups) {
    const Built& b = cache.get(g);
    for (const auto& fl : g.flows) {
      ++total;
      std::string label = flow_label(g, fl);
      if (!b.error.empty()) {
        ADD_FAILURE() << label << ": state does not build: " << b.error;
        continue;
      }
      auto r = trace_kube_proxy_test(b.state, fl.source_ip, lower(fl.protocol), fl.dest_ip,
                                     std::to_string(fl.dest_port), f.local_ips);
      bool ok = r.error.empty() && r.output == fl.output && r.masq == fl.masq;
      if (ok) {
        ++passed;
        continue;
      }
      std::string matches;
      for (const auto& m : r.matches) matches += "    " + m + "\n";
      ADD_FAILURE() << label << "\n  expected output \"" << fl.output << "\" masq " << fl.masq
                    << "\n  got      output \"" << r.output << "\" masq " << r.masq
                    << (r.error.empty() ? "" : "\n  error: " + r.error) << "\n  matched rules:\n"
                    << matches;
    }
  }
  std::printf("[ packet flows ] %zu of %zu kube-proxy flows pass\n", passed, total);
  EXPECT_EQ(total, 239u);
}

// Where kube-proxy's test shortcuts cannot change the answer, the concrete tracer (real
// hook order, conntrack, marks, interfaces, probabilities) must reach the same
// destinations and the same masquerade decision:
//  - the packet's origin is taken from its source: a node address (or loopback) is the
//    node itself, 10.0.0.0/8 / fd00:10::/64 (the fake's cluster CIDR) a pod, anything
//    else external;
//  - kube-proxy's expectation lists the reachable DNAT destinations; the concrete
//    tracer's accepted outcomes must DNAT to exactly that set (in any order), with
//    probabilities summing to 1;
//  - a single ACCEPT/DROP/REJECT expectation must be the concrete verdict (ACCEPT: the
//    packet is accepted without DNAT); "" (no rule matched) must be an ACCEPT without DNAT;
//  - masq must equal "some outcome masquerades" (kube-proxy's test has one masq flag
//    for all branches; no kube-proxy rule makes it differ between endpoints, except
//    the hairpin rule of the endpoint the client itself is — checked per outcome).
// All 239 agree (kube-proxy's shortcuts never change the answer on these flows); a
// difference fails with both traces printed.
TEST(PacketFlows, ConcreteTracerAgreesWithKubeProxy) {
  FlowFile f = load_flows();
  Cache cache;
  size_t compared = 0, agreed = 0;
  std::vector<std::string> differing;
  for (const auto& g : f.groups) {
    const Built& b = cache.get(g);
    if (!b.error.empty()) continue;
    IPFamily fam = b.state.family;
    TraceOptions opts;
    for (const auto& s : f.local_ips)
      if (auto a = IPAddr::parse(s); a && a->family == fam) opts.local_addresses.push_back(*a);
    Tracer tracer(b.state, opts);
    auto pod_cidr = CIDR::parse(fam == IPFamily::V4 ? "10.0.0.0/8" : "fd00:10::/64");
    for (const auto& fl : g.flows) {
      std::string label = flow_label(g, fl);
      Packet p;
      p.src = *IPAddr::parse(fl.source_ip);
      p.dst = *IPAddr::parse(fl.dest_ip);
      p.proto = *proto_from_name(fl.protocol);
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
      ++compared;

      std::set<std::string> expected_dnat, got_dnat;
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
      std::set<std::string> verdicts;
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
        why = "mixed expectation (not in the file)";
      if (why.empty()) {
        if (!expected_dnat.empty()) {
          if (verdicts != std::set<std::string>{"ACCEPT"})
            why = "expected only accepted, DNAT'ed outcomes";
          else if (got_dnat != expected_dnat)
            why = "DNAT destinations differ";
          else if (any_masq != fl.masq)
            why = "masquerade differs";
        } else if (expected_verdict.empty()) {
          if (verdicts != std::set<std::string>{"ACCEPT"} || !got_dnat.empty()) why = "expected a plain ACCEPT";
        } else if (verdicts != std::set<std::string>{expected_verdict}) {
          why = "verdict differs";
        }
      }
      if (why.empty()) {
        ++agreed;
        continue;
      }
      differing.push_back(label + ": " + why + "\n" + format_text(p, opts, r));
    }
  }
  std::printf("[ packet flows ] concrete tracer: %zu of %zu flows agree with kube-proxy's expectation\n", agreed,
              compared);
  for (const auto& s : differing) ADD_FAILURE() << "concrete tracer differs: " << s;
  EXPECT_EQ(compared, 239u);
}

}  // namespace
}  // namespace kpc::verifier::trace
