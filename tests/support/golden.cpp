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
    if (e.is_regular_file() && name != "case.yaml" && (ext == ".yaml" || ext == ".yml" || ext == ".json"))
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

bool updating_golden() {
  const char* v = std::getenv("KPC_UPDATE_GOLDEN");
  return v && std::string(v) == "1";
}

std::vector<FixtureCase> discover_fixtures() {
  std::vector<FixtureCase> cases;
  for (const auto& e : fs::directory_iterator(source_path("fixtures"))) {
    if (!e.is_directory() || !fs::exists(e.path() / "case.yaml")) continue;
    FixtureCase c;
    c.name = e.path().filename().string();
    c.dir = e.path().string();
    YAML::Node meta = YAML::LoadFile((e.path() / "case.yaml").string());
    for (const auto& b : meta["backends"]) c.backends.push_back(b.as<std::string>());
    if (meta["steps"]) {
      for (const auto& s : meta["steps"]) {
        FixtureStep step;
        step.dir = (e.path() / s["dir"].as<std::string>()).string();
        step.inputs = snapshot_files(step.dir);
        if (s["sync"]) step.sync = s["sync"].as<std::string>();
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
