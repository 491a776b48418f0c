#include "tests/support/golden.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "compiler/model/loader.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> snapshot_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto name = e.path().filename().string();
    auto ext = e.path().extension().string();
    if (e.is_regular_file() && name != "case.yaml" && name[0] != '.' && (ext == ".yaml" || ext == ".yml" || ext == ".json"))
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Compiled finish(SourceManager& sm, Snapshot& snap, DiagSink& diags, bool loaded, Backend backend,
                const iptables::SyncOptions& opts) {
  Compiled c;
  if (loaded)
    if (auto r = compile_iptables(snap, backend, opts, diags)) {
      c.ok = true;
      c.text = std::move(r->text);
      c.sync = std::move(r->sync);
    }
  diags.sort_and_dedup();
  c.diagnostics = diags.render(sm);
  return c;
}

}  // namespace

bool is_iptables_backend(const std::string& backend) { return backend == "iptables" || backend == "ip6tables"; }

std::vector<FixtureParam> fixture_params(size_t first_step) {
  std::vector<FixtureParam> out;
  for (const auto& c : discover_fixtures())
    for (size_t s = first_step; s < c.steps.size(); ++s)
      for (const auto& b : c.backends)
        if (is_iptables_backend(b)) out.push_back({c, s, b});
  return out;
}

std::string fixture_param_name(const FixtureParam& p) {
  std::string n = p.fixture.name + "_" + std::to_string(p.step + 1) + "_" + p.backend;
  for (auto& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

void PrintTo(const FixtureParam& p, std::ostream* os) {
  *os << p.fixture.name << " step " << p.step + 1 << " " << p.backend;
}

bool updating_golden() {
  const char* v = std::getenv("KPC_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

std::vector<FixtureCase> discover_fixtures() {
  std::vector<FixtureCase> cases;
  for (const auto& e : fs::directory_iterator(source_path("fixtures"))) {
    // Metadata is case.yaml, or .case.yaml where the directory doubles as a snapshot
    // users point kpc at (fixtures/example: the loader skips hidden files).
    fs::path meta_path = e.path() / "case.yaml";
    if (!fs::exists(meta_path)) meta_path = e.path() / ".case.yaml";
    if (!e.is_directory() || !fs::exists(meta_path)) continue;
    FixtureCase c;
    c.name = e.path().filename().string();
    c.dir = e.path().string();
    YAML::Node meta = YAML::LoadFile(meta_path.string());
    for (const auto& b : meta["backends"]) c.backends.push_back(b.as<std::string>());
    if (meta["steps"]) {
      for (const auto& s : meta["steps"]) {
        FixtureStep step;
        step.dir = (e.path() / s["dir"].as<std::string>()).string();
        step.inputs = snapshot_files(step.dir);
        if (s["sync"]) step.sync = s["sync"].as<std::string>();
        if (s["forcedFullSync"]) step.forced_full = s["forcedFullSync"].as<bool>();
        if (s["expectRestoreFailure"]) step.expect_restore_failure = s["expectRestoreFailure"].as<bool>();
        for (const auto& r : s["injectBefore"])
          step.inject_before.emplace_back(r["table"].as<std::string>(), r["rule"].as<std::string>());
        if (s["lastIPTablesCleanupAge"]) step.since_last_cleanup = s["lastIPTablesCleanupAge"].as<std::string>();
        c.steps.push_back(std::move(step));
      }
    } else {
      c.steps.push_back(FixtureStep{c.dir, snapshot_files(c.dir), "full"});
    }
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(), [](const FixtureCase& a, const FixtureCase& b) { return a.name < b.name; });
  return cases;
}

Compiled compile_paths(const std::vector<std::string>& inputs, Backend backend, const iptables::SyncOptions& opts) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  bool loaded = load_snapshot(inputs, LoadOptions{}, sm, &snap, diags);
  return finish(sm, snap, diags, loaded, backend, opts);
}

Compiled compile_texts(const std::vector<std::pair<std::string, std::string>>& files, Backend backend,
                       const iptables::SyncOptions& opts) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  bool loaded = load_snapshot_text(files, LoadOptions{}, sm, &snap, diags);
  return finish(sm, snap, diags, loaded, backend, opts);
}

Compiled compile_from_prior_paths(const std::vector<std::string>& next, const std::vector<std::string>& prior,
                                  Backend backend, const PriorOptions& opts) {
  SourceManager sm;
  DiagSink diags;
  Snapshot next_snap, prior_snap;
  bool loaded = load_snapshot(next, LoadOptions{}, sm, &next_snap, diags);
  loaded = load_snapshot(prior, LoadOptions{}, sm, &prior_snap, diags) && loaded;
  Compiled c;
  if (loaded)
    if (auto r = compile_iptables_from_prior(next_snap, prior_snap, backend, opts, diags)) {
      c.ok = true;
      c.text = std::move(r->text);
      c.sync = std::move(r->sync);
      c.partial = r->partial;
    }
  diags.sort_and_dedup();
  c.diagnostics = diags.render(sm);
  return c;
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::string line;
  for (std::istringstream in(text); std::getline(in, line);) out.push_back(line);
  return out;
}

// kube-proxy's metric values for one sync, from kpc's sync statistics.
std::optional<double> metric_value(const std::string& name, const YAML::Node& labels, const iptables::SyncResult& s) {
  std::string table = labels["table"] ? labels["table"].as<std::string>() : "";
  std::string policy = labels["traffic_policy"] ? labels["traffic_policy"].as<std::string>() : "";
  if (name == "kubeproxy_sync_proxy_rules_iptables_last")
    return table == "filter" ? double(s.filter_rules) : double(s.nat_rules_written - s.deleted_chains);
  if (name == "kubeproxy_sync_proxy_rules_iptables_total")
    return table == "filter" ? double(s.filter_rules)
                             : double(s.nat_rules_written + s.nat_rules_skipped - s.deleted_chains);
  if (name == "kubeproxy_sync_proxy_rules_no_local_endpoints_total")
    return policy == "internal" ? double(s.no_local_endpoints_internal) : double(s.no_local_endpoints_external);
  return std::nullopt;
}

}  // namespace

void expect_kubeproxy_assertions(const std::string& path, const Compiled& c) {
  if (!fs::exists(path)) return;
  auto lines = lines_of(c.text);
  for (const auto& a : YAML::LoadFile(path)["assertions"]) {
    std::string type = a["type"].as<std::string>();
    if (type == "sep-dnat-lines") {
      size_t count = 0, with_comment = 0;
      std::string matched;
      for (const auto& l : lines) {
        if (l.rfind("-A KUBE-SEP-", 0) != 0 || l.find("-j DNAT") == std::string::npos) continue;
        ++count;
        with_comment += l.find("--comment") != std::string::npos;
        if (l.find(a["match"].as<std::string>()) != std::string::npos) matched = l;
      }
      EXPECT_EQ(count, a["count"].as<size_t>()) << path << ": SEP DNAT lines";
      if (a["withComment"]) EXPECT_EQ(with_comment, a["withComment"].as<size_t>()) << path << ": with comment";
      if (a["matchedLine"]) EXPECT_EQ(matched, a["matchedLine"].as<std::string>()) << path;
    } else if (type == "contains" || type == "not-contains") {
      bool found = c.text.find(a["text"].as<std::string>()) != std::string::npos;
      EXPECT_EQ(found, type == "contains") << path << ": " << type << " " << a["text"].as<std::string>();
    } else if (type == "rule-with-destination") {
      std::string prefix = "-A " + a["chain"].as<std::string>() + " ";
      std::string dest = a["destination"].as<std::string>();
      bool found = false;
      for (const auto& l : lines)
        if (l.rfind(prefix, 0) == 0 && (l.find(" -d " + dest + " ") != std::string::npos ||
                                        l.find(" -d " + dest + "/") != std::string::npos))
          found = true;
      EXPECT_EQ(found, a["present"].as<bool>()) << path << ": rule with -d " << dest;
    } else if (type == "metric") {
      auto v = metric_value(a["name"].as<std::string>(), a["labels"], c.sync);
      if (v) EXPECT_EQ(*v, a["value"].as<double>()) << path << ": " << a["name"].as<std::string>();
    }
  }
}

std::string line_diff(const std::string& expected, const std::string& actual) {
  std::vector<std::string> a, b;
  std::string line;
  for (std::istringstream in(expected); std::getline(in, line);) a.push_back(line);
  for (std::istringstream in(actual); std::getline(in, line);) b.push_back(line);
  std::string out;
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  size_t ea = a.size(), eb = b.size();
  while (ea > i && eb > i && a[ea - 1] == b[eb - 1]) --ea, --eb;
  out += "@@ first difference at line " + std::to_string(i + 1) + " @@\n";
  for (size_t k = i; k < ea && k < i + 40; ++k) out += "-" + a[k] + "\n";
  for (size_t k = i; k < eb && k < i + 40; ++k) out += "+" + b[k] + "\n";
  return out;
}

void expect_golden(const std::string& path, const std::string& actual) {
  if (updating_golden()) {
    if (!fs::exists(path) || read_file(path) != actual) write_file(path, actual);
    return;
  }
  if (!fs::exists(path)) {
    ADD_FAILURE() << "missing expected file " << path << " (run with KPC_UPDATE_GOLDEN=1 to create it, then review)";
    return;
  }
  std::string expected = read_file(path);
  if (expected != actual) ADD_FAILURE() << "golden mismatch: " << path << "\n" << line_diff(expected, actual);
}

}  // namespace kpc::test
