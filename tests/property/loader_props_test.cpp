// Properties of the snapshot loader over random valid clusters (tests/support/snapshot_gen.h):
// valid clusters load cleanly into the model that was generated, every shape (YAML
// multi-doc, YAML List, JSON List, several files, any document order) gives the same
// model, and random corruptions never crash, never hang, always locate their errors and
// make `kpc validate` exit 0 or 2 (2 iff there are errors).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "compiler/support/text.h"
#include "tests/support/snapshot_gen.h"
#include "tests/support/test_util.h"
#include "tests/unit/loader_test_util.h"

namespace kpc {
namespace {

using loadtest::Loaded;
using testgen::GeneratedCluster;

Loaded load(std::vector<std::pair<std::string, std::string>> files) { return loadtest::load_files(std::move(files)); }

// ---------------------------------------------------------------- valid clusters
RC_GTEST_PROP(LoaderProps, ValidClustersLoadCleanlyAsGenerated, ()) {
  const GeneratedCluster c = *testgen::gen_cluster();
  auto l = load({{"cluster.yaml", c.to_yaml()}});
  RC_TAG(c.services.size() < 3 ? "few services" : "several services");
  if (!l.ok || !l.diags.all().empty()) RC_FAIL("diagnostics for a valid cluster:\n" + l.rendered());
  RC_ASSERT(l.snap.documents == c.object_count());
  std::string diff = testgen::mismatch(c, l.snap);
  if (!diff.empty()) RC_FAIL(diff);
  // Every object remembers where it came from.
  for (const auto& s : l.snap.services) RC_ASSERT(s.meta.pos.known());
  for (const auto& s : l.snap.slices) RC_ASSERT(s.meta.pos.known());
  for (const auto& n : l.snap.nodes) RC_ASSERT(n.meta.pos.known());
}

RC_GTEST_PROP(LoaderProps, ModelIsSortedByNamespaceAndName, ()) {
  const GeneratedCluster c = *testgen::gen_cluster();
  auto l = load({{"cluster.yaml", c.to_yaml()}});
  RC_ASSERT(l.ok);
  auto key = [](const auto& o) { return std::make_pair(o.meta.ns, o.meta.name); };
  for (size_t i = 1; i < l.snap.services.size(); ++i) RC_ASSERT(key(l.snap.services[i - 1]) < key(l.snap.services[i]));
  for (size_t i = 1; i < l.snap.slices.size(); ++i) RC_ASSERT(key(l.snap.slices[i - 1]) < key(l.snap.slices[i]));
  for (size_t i = 1; i < l.snap.nodes.size(); ++i) RC_ASSERT(key(l.snap.nodes[i - 1]) < key(l.snap.nodes[i]));
}

RC_GTEST_PROP(LoaderProps, YamlAndJsonShapesLoadToEqualModels, ()) {
  const GeneratedCluster c = *testgen::gen_cluster();
  auto yaml = load({{"cluster.yaml", c.to_yaml()}});
  auto json = load({{"cluster.json", c.to_json_list()}});
  auto yaml_list = load({{"list.yaml", c.to_yaml_list()}});
  auto json_in_yaml = load({{"list.yml", c.to_json_list()}});  // JSON is YAML too
  for (const Loaded* l : {&yaml, &json, &yaml_list, &json_in_yaml})
    if (!l->ok) RC_FAIL("load failed:\n" + l->rendered());
  std::string want = testgen::dump_model(yaml.snap);
  RC_ASSERT(testgen::dump_model(json.snap) == want);
  RC_ASSERT(testgen::dump_model(yaml_list.snap) == want);
  RC_ASSERT(testgen::dump_model(json_in_yaml.snap) == want);
}

RC_GTEST_PROP(LoaderProps, DocumentOrderAndFileSplitDoNotMatter, ()) {
  const GeneratedCluster c = *testgen::gen_cluster();
  auto docs = c.yaml_documents();
  auto base = load({{"cluster.yaml", c.to_yaml()}});
  RC_ASSERT(base.ok);

  const auto seed = *rc::gen::arbitrary<uint32_t>();
  std::mt19937 rng(seed);
  std::shuffle(docs.begin(), docs.end(), rng);
  std::string shuffled;
  for (const auto& d : docs) shuffled += "---\n" + d;
  auto l = load({{"shuffled.yaml", shuffled}});
  RC_ASSERT(l.ok);
  RC_ASSERT(testgen::dump_model(l.snap) == testgen::dump_model(base.snap));

  // The same documents spread over several files (YAML and JSON mixed).
  auto json = c.json_objects();
  std::vector<std::pair<std::string, std::string>> files;
  const int nfiles = *rc::gen::inRange(1, 5);
  files.resize(static_cast<size_t>(nfiles));
  for (int f = 0; f < nfiles; ++f) files[static_cast<size_t>(f)].first = "part" + std::to_string(f) + ".yaml";
  for (size_t i = 0; i < json.size(); ++i) {
    auto& file = files[rng() % files.size()];
    bool as_json = rng() % 2;
    file.second += "---\n" + (as_json ? json[i] + "\n" : c.yaml_documents()[i]);
  }
  auto split = load(files);
  if (!split.ok) RC_FAIL(split.rendered());
  RC_ASSERT(testgen::dump_model(split.snap) == testgen::dump_model(base.snap));
}

// ---------------------------------------------------------------- the generator itself
TEST(SnapshotGen, IsDeterministic) {
  for (uint64_t seed : {1u, 2u, 99u}) {
    EXPECT_EQ(testgen::sample_cluster(seed).to_yaml(), testgen::sample_cluster(seed).to_yaml());
    EXPECT_EQ(testgen::sample_cluster(seed).to_json_list(), testgen::sample_cluster(seed).to_json_list());
  }
  EXPECT_NE(testgen::sample_cluster(1, 100).to_yaml(), testgen::sample_cluster(2, 100).to_yaml());
}

TEST(SnapshotGen, CoversEveryFeature) {
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    auto c = testgen::sample_cluster(seed, 100);
    ASSERT_FALSE(nlohmann::json::parse(c.to_json_list(), nullptr, false).is_discarded()) << seed;
    for (const auto& s : c.services) {
      seen.insert("type:" + s.type);
      if (s.headless) seen.insert("headless");
      if (s.cluster_ips.size() == 2) seen.insert(s.cluster_ips[0].find(':') == std::string::npos ? "dual v4 first" : "dual v6 first");
      if (s.cluster_ips.size() == 1 && s.cluster_ips[0].find(':') != std::string::npos) seen.insert("single v6");
      if (!s.write_cluster_ips) seen.insert("clusterIP only");
      if (s.ports.size() == 3) seen.insert("3 ports");
      for (const auto& p : s.ports) {
        seen.insert("protocol:" + p.protocol);
        if (!p.target_port_name.empty()) seen.insert("named targetPort");
        if (p.node_port) seen.insert("nodePort");
      }
      if (s.health_check_node_port) seen.insert("healthCheckNodePort");
      if (s.client_ip_affinity && s.affinity_timeout) seen.insert("affinity timeout");
      if (!s.external_ips.empty()) seen.insert("externalIPs");
      if (!s.lb_source_ranges.empty()) seen.insert("source ranges");
      if (!s.lb_ingress_ips.empty()) seen.insert("ingress");
      if (s.external_traffic_policy == "Local") seen.insert("eTP Local");
      if (s.internal_traffic_policy == "Local") seen.insert("iTP Local");
    }
    for (const auto& sl : c.slices) {
      seen.insert("slice " + sl.address_type);
      for (const auto& e : sl.endpoints) {
        if (e.ready == false) seen.insert("not ready");
        if (e.terminating == true) seen.insert("terminating");
        if (e.serving == true && e.ready == false) seen.insert("serving not ready");
        if (!e.node_name.empty()) seen.insert("nodeName");
      }
    }
    for (const auto& n : c.nodes)
      if (n.pod_cidrs.size() == 2) seen.insert("dual-stack node");
    if (c.config) {
      seen.insert("mode:" + c.config->mode);
      if (c.config->cluster_cidrs.size() == 2) seen.insert("dual clusterCIDR");
      if (!c.config->hostname_override.empty()) seen.insert("hostnameOverride");
    }
    if (c.to_yaml().find("- {") != std::string::npos) seen.insert("flow style");
  }
  for (const char* f : {"type:", "type:ClusterIP", "type:NodePort", "type:LoadBalancer", "type:ExternalName", "headless",
                        "dual v4 first", "dual v6 first", "single v6", "clusterIP only", "3 ports", "protocol:",
                        "protocol:TCP", "protocol:UDP", "protocol:SCTP", "named targetPort", "nodePort",
                        "healthCheckNodePort", "affinity timeout", "externalIPs", "source ranges", "ingress",
                        "eTP Local", "iTP Local", "slice IPv4", "slice IPv6", "not ready", "terminating",
                        "serving not ready", "nodeName", "dual-stack node", "mode:", "mode:iptables", "mode:ipvs",
                        "mode:nftables", "dual clusterCIDR", "hostnameOverride", "flow style"})
    EXPECT_TRUE(seen.count(f)) << "the generator never produced: " << f;
}

// ---------------------------------------------------------------- corruptions
struct Corruption {
  std::string kind;
  std::string text;
};

// The scalar tokens of a text (after ": " in YAML or JSON, or "- " list items).
std::vector<std::pair<size_t, size_t>> value_spans(const std::string& t) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i + 2 < t.size(); ++i) {
    if (!((t[i] == ':' && t[i + 1] == ' ') || (t[i] == '-' && t[i + 1] == ' '))) continue;
    size_t b = i + 2;
    if (b >= t.size() || t[b] == '{' || t[b] == '[' || t[b] == '\n') continue;
    size_t e = b;
    bool quoted = t[b] == '"';
    if (quoted) {
      e = t.find('"', b + 1);
      if (e == std::string::npos) continue;
      ++e;
    } else {
      while (e < t.size() && t[e] != ',' && t[e] != '}' && t[e] != ']' && t[e] != '\n') ++e;
    }
    if (e > b) out.emplace_back(b, e - b);
  }
  return out;
}

rc::Gen<Corruption> gen_corruption(const std::string& text) {
  return rc::gen::exec([text] {
    Corruption c;
    c.text = text;
    const size_t n = text.size();
    const std::string structural = " :-[]{},'\"&*!|>#%@`?\n\t.\\0x~";
    auto any_char = [&] {
      return *rc::gen::inRange(0, 2) ? static_cast<char>(*rc::gen::inRange(0, 256))
                                     : structural[static_cast<size_t>(*rc::gen::inRange(0, static_cast<int>(structural.size())))];
    };
    switch (*rc::gen::inRange(0, 7)) {
      case 0: {
        c.kind = "delete range";
        size_t at = static_cast<size_t>(*rc::gen::inRange<size_t>(0, n + 1));
        size_t len = static_cast<size_t>(*rc::gen::inRange(1, 80));
        c.text.erase(at, len);
        break;
      }
      case 1: {
        c.kind = "insert bytes";
        size_t at = static_cast<size_t>(*rc::gen::inRange<size_t>(0, n + 1));
        std::string ins;
        for (int k = *rc::gen::inRange(1, 12); k > 0; --k) ins += any_char();
        c.text.insert(at, ins);
        break;
      }
      case 2: {
        c.kind = "flip characters";
        for (int k = *rc::gen::inRange(1, 6); k > 0 && !c.text.empty(); --k)
          c.text[static_cast<size_t>(*rc::gen::inRange<size_t>(0, c.text.size()))] = any_char();
        break;
      }
      case 4: {
        // Structure lives at line starts in YAML (indentation, "- ", "---"): hit them often.
        c.kind = "insert at line start";
        std::vector<size_t> starts = {0};
        for (size_t i = 0; i < n; ++i)
          if (text[i] == '\n') starts.push_back(i + 1);
        size_t at = starts[static_cast<size_t>(*rc::gen::inRange<size_t>(0, starts.size()))];
        std::string ins;
        for (int k = *rc::gen::inRange(1, 4); k > 0; --k) ins += any_char();
        c.text.insert(at, ins);
        break;
      }
      case 3: {
        c.kind = "truncate";
        c.text.resize(static_cast<size_t>(*rc::gen::inRange<size_t>(0, n + 1)));
        break;
      }
      default: {
        auto spans = value_spans(text);
        if (spans.empty()) {
          c.kind = "truncate";
          c.text.resize(n / 2);
          break;
        }
        auto [at, len] = spans[static_cast<size_t>(*rc::gen::inRange<size_t>(0, spans.size()))];
        static const std::vector<std::string> replacements = {
            "99999999999999999999999999999", "-99999999999999999999999999999", "18446744073709551617",
            "4294967296", "-1", "0", "1e999", "\"x\"", "\"\"", "\"80\"", "null", "[]", "{}", "true", "yes",
            "\"10.0.0.256\"", "\"::ffff:1.2.3.4\"", "\"a\\nb\"", "\"None\""};
        std::string rep = *rc::gen::elementOf(replacements);
        c.kind = "replace value with " + rep;
        c.text.replace(at, len, rep);
        break;
      }
    }
    return c;
  });
}

/// Loads text in a forked child (a crash or a hang fails the property instead of the
/// binary) and returns "crash", "hang", "unlocated: ...", "unsafe: ...", "errors" or "clean".
std::string isolated_outcome(const std::string& name, const std::string& text) {
  auto r = loadtest::isolated_sweep(
      1,
      [&](size_t) -> std::string {
        auto l = loadtest::load_files({{name, text}});
        if (l.diags.has_errors() != !l.ok) return "inconsistent: ok=" + std::to_string(l.ok);
        if (l.diags.has_errors() && !loadtest::all_errors_located(l)) return "unlocated: " + l.rendered();
        std::string out = l.rendered();
        size_t lines = 0;
        for (const auto& d : l.diags.all()) lines += 1 + d.notes.size();
        if (static_cast<size_t>(std::count(out.begin(), out.end(), '\n')) != lines) return "unsafe: " + out;
        return l.diags.has_errors() ? "errors" : "clean";
      },
      1, /*timeout_s=*/1);
  if (!r.crashes.empty()) return "crash";
  if (!r.hangs.empty()) return "hang";
  return r.failures.empty() ? "?" : r.failures[0].second;
}

RC_GTEST_PROP(LoaderProps, CorruptionsNeverCrashAndErrorsAreLocated, ()) {
  const GeneratedCluster c = *testgen::gen_cluster();
  const bool json = *rc::gen::arbitrary<bool>();
  const std::string text = json ? c.to_json_list() : c.to_yaml();
  const Corruption bad = *gen_corruption(text);
  RC_TAG(bad.kind.substr(0, bad.kind.find(' ', 8)));
  std::string outcome = isolated_outcome(json ? "c.json" : "c.yaml", bad.text);
  RC_TAG(outcome.substr(0, 6));
  if (outcome != "errors" && outcome != "clean")
    RC_FAIL(outcome + " after " + bad.kind + " of:\n" + printable(bad.text));
}

RC_GTEST_PROP(LoaderProps, CliValidateExitsZeroOrTwoOnCorruptedFiles, ()) {
  static loadtest::TempDir dir;
  static int counter = 0;
  const GeneratedCluster c = *testgen::gen_cluster(testgen::GenOptions{.max_services = 4, .max_nodes = 2});
  const bool json = *rc::gen::arbitrary<bool>();
  const Corruption bad = *gen_corruption(json ? c.to_json_list() : c.to_yaml());
  std::string path = dir.write("case" + std::to_string(counter++) + (json ? ".json" : ".yaml"), bad.text);
  auto r = test::run({test::bin_path("kpc"), "validate", "-q", path});
  RC_TAG(r.exit_code);
  if (r.exit_code != 0 && r.exit_code != 2)
    RC_FAIL("kpc validate exited " + std::to_string(r.exit_code) + " (-1: killed by a signal) after " + bad.kind +
            "\nstderr: " + r.err.substr(0, 2000) + "\ninput:\n" + printable(bad.text));
  std::string outcome = isolated_outcome(path, bad.text);
  RC_ASSERT((r.exit_code == 2) == (outcome != "clean"));
  // Exit 2 prints located diagnostics; exit 0 prints none.
  if (r.exit_code == 2) RC_ASSERT(r.err.find("error[E") != std::string::npos);
  else RC_ASSERT(r.err.find("error[") == std::string::npos);
}

}  // namespace
}  // namespace kpc
