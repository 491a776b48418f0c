// Pinned reports of `kpc drift` and `kpc diff` on small hand-written cases (issue 12 §5):
//   fixtures/drift/<case>/        node.save (the node's iptables-save dump) against
//                                 fixtures/drift/snapshot.yaml: expected/drift.txt,
//                                 drift.json, repair.restore (-o) and exit;
//   fixtures/verifier-regressions/<case>/
//                                 a.rules, b.rules (optional `args`: extra words for
//                                 `kpc diff`): expected/diff.txt (stdout, then stderr) and exit.
// Paths of the source tree in the output are written as "@". KPC_UPDATE_GOLDEN=1 rewrites
// the expected files (review `git diff fixtures/` before committing: a change is a
// behaviour change). Besides the text, every drift repair must leave the node without drift.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "tests/support/golden.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

// The reports wrap at 100 columns and name their input files, so where a line breaks depends on
// the length of the path kpc was given. The cases are read through a symlink to the source tree
// whose name has the same length on every machine (/tmp/kpc-fixtures-<pid, 10 digits>), and that
// prefix is written "@" in the expected files: the same bytes wherever the checkout is.
class FixedRoot {
 public:
  FixedRoot() {
    char name[64];
    std::snprintf(name, sizeof name, "/tmp/kpc-fixtures-%010d", static_cast<int>(getpid()));
    path_ = name;
    fs::remove(path_);
    fs::create_directory_symlink(fs::path(source_path("")).lexically_normal(), path_);
  }
  ~FixedRoot() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  std::string operator()(const std::string& rel) const { return path_ + "/" + rel; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const FixedRoot& fixed_root() {
  static FixedRoot root;
  return root;
}

std::string relative(std::string s) {
  const std::string root = fixed_root().path() + "/";
  for (size_t p = 0; (p = s.find(root, p)) != std::string::npos;) s.replace(p, root.size(), "@/");
  return s;
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

// Compares (or, updating, writes) one expected file.
void expect_file(const std::string& path, const std::string& actual) {
  if (updating_golden()) {
    fs::create_directories(fs::path(path).parent_path());
    write_file(path, actual);
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " missing (KPC_UPDATE_GOLDEN=1 writes it)";
  std::string want = read_file(path);
  EXPECT_EQ(want, actual) << path << ": " << first_difference(want, actual, "expected", "actual");
}

std::vector<fs::path> cases(const std::string& dir, const std::string& marker) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fixed_root()(dir)))
    if (e.is_directory() && fs::exists(e.path() / marker)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ReportFixtures, Drift) {
  auto all = cases("fixtures/drift", "node.save");
  ASSERT_GE(all.size(), 4u);
  const std::string snap = fixed_root()("fixtures/drift/snapshot.yaml");
  for (const auto& c : all) {
    SCOPED_TRACE(c.filename().string());
    std::string tmp = temp_dir("drift-fixture");
    std::string save = (c / "node.save").string();
    auto t = run({bin_path("kpc"), "drift", snap, "--state", save, "-o", tmp + "/repair"});
    auto j = run({bin_path("kpc"), "drift", snap, "--state", save, "--format", "json"});
    ASSERT_NE(t.exit_code, 2) << t.err;
    EXPECT_EQ(t.exit_code, j.exit_code);
    expect_file((c / "expected/drift.txt").string(), relative(t.out + t.err));
    expect_file((c / "expected/drift.json").string(), relative(j.out + j.err));
    std::string repair = read_file(tmp + "/repair");
    expect_file((c / "expected/repair.restore").string(), repair);
    expect_file((c / "expected/exit").string(), std::to_string(t.exit_code) + "\n");
    // The repair applied to the node leaves no drift.
    auto s = run({bin_path("kpc"), "simulate", "--noflush", save, tmp + "/repair"});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    write_file(tmp + "/repaired.save", s.out);
    auto after = run({bin_path("kpc"), "drift", snap, "--state", tmp + "/repaired.save"});
    EXPECT_EQ(after.exit_code, 0) << after.out << after.err;
  }
}

TEST(ReportFixtures, VerifierRegressions) {
  auto all = cases("fixtures/verifier-regressions", "a.rules");
  ASSERT_GE(all.size(), 4u);
  for (const auto& c : all) {
    SCOPED_TRACE(c.filename().string());
    std::vector<std::string> argv = {bin_path("kpc"), "diff"};
    if (fs::exists(c / "args"))
      for (auto& w : words(read_file((c / "args").string()))) argv.push_back(w);
    argv.push_back((c / "a.rules").string());
    argv.push_back((c / "b.rules").string());
    auto r = run(argv);
    expect_file((c / "expected/diff.txt").string(), relative(r.out + r.err));
    expect_file((c / "expected/exit").string(), std::to_string(r.exit_code) + "\n");
  }
}

}  // namespace
}  // namespace kpc::test
