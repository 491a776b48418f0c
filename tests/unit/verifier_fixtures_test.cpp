// Every golden restore program under fixtures/**/expected parses, and the
// simulator loads it as the real tool would: a full program into an empty
// state; a partial program (a MinimizeIPTablesRestore sync) on top of the state
// the previous steps left. The state a partial sync leaves must equal the one
// the full program of the same step describes (kube-proxy's "partial == full"),
// except in large-cluster mode, where kube-proxy knowingly keeps old comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/support/test_util.h"
#include "verifier/state/state.h"

namespace kpc::verifier {
namespace {
namespace fs = std::filesystem;

std::vector<fs::path> restore_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(test::source_path("fixtures")))
    if (e.path().parent_path().filename() == "expected" && e.path().extension() == ".restore") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

IPFamily family_of(const fs::path& p) {
  return p.filename().string().rfind("ip6tables", 0) == 0 ? IPFamily::V6 : IPFamily::V4;
}

TEST(VerifierFixtures, EveryExpectedProgramParses) {
  auto files = restore_files();
  ASSERT_GT(files.size(), 50u);
  for (const auto& f : files) {
    ParseOptions po;
    po.family = family_of(f);
    auto p = parse_restore(test::read_file(f.string()), po);
    EXPECT_FALSE(p.error) << f << ":" << (p.error ? std::to_string(p.error->line) + ": " + p.error->message : "");
    EXPECT_EQ(p.unknown_args, 0u) << f << ": kube-proxy output should need no unmodelled match";
  }
}

TEST(VerifierFixtures, FullProgramsLoadIntoAnEmptyState) {
  for (const auto& f : restore_files()) {
    std::string name = f.filename().string();
    if (name != "iptables.restore" && name != "ip6tables.restore") continue;
    std::string text = test::read_file(f.string());
    for (Flavor fl : {Flavor::Legacy, Flavor::Nft}) {
      RulesetState st = RulesetState::empty(family_of(f));
      auto r = apply_text(st, text, ApplyOptions{true, fl});
      EXPECT_TRUE(r.ok()) << f << " (" << flavor_name(fl) << "): " << (r.error ? r.error->message : "");
    }
  }
}

TEST(VerifierFixtures, PartialSyncsLoadAndEqualFullSyncs) {
  size_t partials = 0;
  for (const auto& e : fs::directory_iterator(test::source_path("fixtures"))) {
    fs::path steps = e.path() / "steps";
    if (!fs::is_directory(steps)) continue;
    std::vector<fs::path> dirs;
    for (const auto& s : fs::directory_iterator(steps)) dirs.push_back(s.path());
    std::sort(dirs.begin(), dirs.end());
    bool large_cluster = e.path().filename().string().find("large-cluster") != std::string::npos;
    for (const char* file : {"iptables", "ip6tables"}) {
      IPFamily fam = file[1] == 'p' && file[2] == '6' ? IPFamily::V6 : IPFamily::V4;
      for (Flavor fl : {Flavor::Legacy, Flavor::Nft}) {
        RulesetState applied = RulesetState::empty(fam);  // what the node holds after each real sync
        bool started = false;
        for (const auto& d : dirs) {
          fs::path full = d / "expected" / (std::string(file) + ".restore");
          fs::path partial = d / "expected" / (std::string(file) + ".partial.restore");
          if (!fs::exists(full)) continue;
          SCOPED_TRACE(d.string() + " " + file + " (" + flavor_name(fl) + ")");
          // The full program describes the whole desired state (it has no "-X" for chains it
          // never knew about), so it is loaded into an empty state.
          RulesetState expect = RulesetState::empty(fam, applied.store);
          ASSERT_TRUE(apply_text(expect, test::read_file(full.string()), ApplyOptions{true, fl}).ok());
          if (started && fs::exists(partial)) {
            ++partials;
            auto r = apply_text(applied, test::read_file(partial.string()), ApplyOptions{true, fl});
            ASSERT_TRUE(r.ok()) << r.error->message;
            auto diffs = diff_states(applied, expect);
            if (!large_cluster) {
              std::string all;
              for (const auto& df : diffs) all += describe(df) + "\n";
              EXPECT_TRUE(diffs.empty()) << "partial sync differs from the full sync:\n" << all;
            }
          } else {
            applied = expect;
          }
          started = true;
        }
      }
    }
  }
  EXPECT_GT(partials, 0u);
}

}  // namespace
}  // namespace kpc::verifier
