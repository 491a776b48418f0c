// Golden verdicts of `kpc verify` on nft transactions, one case per verdict kind
// (fixtures/nft-verify/<case>/: partial.nft and full.nft applied to the shared prior.nft):
// expected/verify.txt (stdout, then stderr; source-tree paths as "@/"), expected/verify.json
// and expected/exit. KPC_UPDATE_GOLDEN=1 rewrites them (review `git diff fixtures/`).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/golden.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

// Reports name their inputs: read through a symlink of a fixed length (as report_fixtures_test).
class Root {
 public:
  Root() {
    char name[64];
    std::snprintf(name, sizeof name, "/tmp/kpc-nftverify-%010d", static_cast<int>(getpid()));
    path_ = name;
    fs::remove(path_);
    fs::create_directory_symlink(fs::path(source_path("")).lexically_normal(), path_);
  }
  ~Root() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  std::string rel(std::string s) const {
    const std::string r = path_ + "/";
    for (size_t p = 0; (p = s.find(r, p)) != std::string::npos;) s.replace(p, r.size(), "@/");
    return s;
  }
  std::string path_;
};

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

TEST(NftVerifyFixtures, VerdictPerKind) {
  Root root;
  const std::string dir = root.path_ + "/fixtures/nft-verify";
  const std::map<std::string, std::pair<std::string, int>> want = {
      {"identical", {"identical", 0}},
      {"equivalent-stale-chain", {"equivalent", 1}},
      {"equivalent-behaviour", {"equivalent", 1}},
      {"not-equivalent", {"not equivalent", 1}},
      {"fails-to-apply", {"fails to apply", 1}},
      {"unknown-statement-refused", {"fails to apply", 2}},
  };
  size_t n = 0;
  for (const auto& [name, verdict] : want) {
    SCOPED_TRACE(name);
    fs::path c = fs::path(dir) / name;
    std::vector<std::string> argv = {bin_path("kpc"), "verify", "--state", dir + "/prior.nft", "--partial",
                                     (c / "partial.nft").string(), "--full", (c / "full.nft").string()};
    auto t = run(argv);
    argv.insert(argv.end(), {"--format", "json"});
    auto j = run(argv);
    EXPECT_EQ(t.exit_code, verdict.second) << t.out << t.err;
    EXPECT_EQ(j.exit_code, verdict.second);
    auto doc = nlohmann::json::parse(j.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << j.out;
    EXPECT_EQ(doc["verdict"], verdict.first);
    EXPECT_EQ(doc["backend"], "nftables");
    expect_file((c / "expected/verify.txt").string(), root.rel(t.out + t.err));
    expect_file((c / "expected/verify.json").string(), root.rel(j.out + j.err));
    expect_file((c / "expected/exit").string(), std::to_string(t.exit_code) + "\n");
    // (the model keeps no rule it does not read: nothing to list as unproved)
    EXPECT_FALSE(doc.contains("unmodelled_rules")) << j.out;
    ++n;
  }
  EXPECT_EQ(n, 6u);
  // --allow-equivalent: equivalent is exit 0; a detected back end can be forced.
  auto r = run({bin_path("kpc"), "verify", "--state", dir + "/prior.nft", "--partial",
                dir + "/equivalent-behaviour/partial.nft", "--full", dir + "/equivalent-behaviour/full.nft",
                "--allow-equivalent", "--backend", "nftables"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // The full transaction failing is an error (2), as for iptables.
  r = run({bin_path("kpc"), "verify", "--state", dir + "/prior.nft", "--partial",
           dir + "/identical/partial.nft", "--full", dir + "/fails-to-apply/partial.nft"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
}

// `kpc diff` of two nft programs: the prior against each case's full transaction applied to
// it (as a listing), and two transactions.
TEST(NftVerifyFixtures, DiffTwoNftPrograms) {
  Root root;
  const std::string dir = root.path_ + "/fixtures/nft-verify";
  auto same = run({bin_path("kpc"), "diff", dir + "/prior.nft", dir + "/prior.nft"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  std::string tmp = temp_dir("nft-diff");
  write_file(tmp + "/new.nft", read_file(dir + "/prior.nft") + read_file(dir + "/not-equivalent/full.nft"));
  auto d = run({bin_path("kpc"), "diff", dir + "/prior.nft", tmp + "/new.nft"});
  EXPECT_EQ(d.exit_code, 1) << d.out << d.err;
  EXPECT_NE(d.out.find("shop/web"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("10.96.40.40"), std::string::npos) << d.out;
  auto j = run({bin_path("kpc"), "diff", dir + "/prior.nft", tmp + "/new.nft", "--format", "json"});
  EXPECT_EQ(j.exit_code, 1);
  auto doc = nlohmann::json::parse(j.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << j.out;
  EXPECT_EQ(doc["schema"], "kpc.dev/diff/v1");
  // A listing on one side: the same state as its transaction.
  auto l = run({bin_path("kpc"), "simulate", "--backend", "nftables", tmp + "/new.nft"});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  write_file(tmp + "/new.listing", l.out);
  auto dl = run({bin_path("kpc"), "diff", tmp + "/new.nft", tmp + "/new.listing"});
  EXPECT_EQ(dl.exit_code, 0) << dl.out << dl.err;
}

}  // namespace
}  // namespace kpc::test
