// Every whole-table expectation transcribed from kube-proxy's nftables unit tests
// (fixtures/kp-nft-*/**/kubeproxy/*.dump, fixtures/KUBEPROXY_NFT_TESTS.md) is real
// nftables: put into knftables' Dump order (objects before their users) and loaded with
// the real `nft -f` into a fresh network namespace, it must load, and `nft list` must
// then show every chain, set and map it declares and as many rules and elements.
// Needs root (skipped otherwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "tests/support/netns.h"
#include "tests/support/nft_compare.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> dumps() {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(source_path("fixtures"))) {
    auto p = e.path();
    if (p.extension() != ".dump" || p.parent_path().filename() != "kubeproxy") continue;
    if (fs::relative(p, source_path("fixtures")).begin()->string().rfind("kp-nft-", 0) != 0) continue;
    out.push_back(p.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t count_prefix(const std::string& text, const std::string& prefix) {
  size_t n = 0;
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) n += l.rfind(prefix, 0) == 0;
  return n;
}

class NftFixtureLoad : public testing::TestWithParam<std::string> {};

TEST_P(NftFixtureLoad, LoadsIntoTheKernel) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root to create network namespaces";
  if (run({"nft", "--version"}).exit_code != 0) GTEST_SKIP() << "nft is not installed";
  std::string program = nftables_dump_order(read_file(GetParam()));
  Netns ns;
  ASSERT_TRUE(ns.ok());
  auto r = ns.exec({"nft", "-f", "-"}, program);
  ASSERT_EQ(r.exit_code, 0) << r.err << "\n--- program:\n" << program;

  // What the kernel holds: every declared chain, set and map by name, and the counts of
  // rules and elements (nft lists one rule per line; elements are counted per container).
  auto list = ns.exec({"nft", "-a", "list", "table", "ip", "kube-proxy"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  std::stringstream ss(program);
  std::string line;
  while (std::getline(ss, line)) {
    for (const char* kind : {"chain", "set", "map"}) {
      std::string prefix = std::string("add ") + kind + " ip kube-proxy ";
      if (line.rfind(prefix, 0) != 0) continue;
      std::string name = line.substr(prefix.size(), line.find(' ', prefix.size()) - prefix.size());
      EXPECT_NE(list.out.find(std::string(kind) + " " + name + " {"), std::string::npos) << kind << " " << name;
    }
  }
  size_t rules = 0;
  {
    std::stringstream ls(list.out);
    std::string l;
    while (std::getline(ls, l)) rules += l.find(" # handle ") != std::string::npos && l.rfind("\t\t", 0) == 0;
  }
  EXPECT_EQ(rules, count_prefix(program, "add rule ")) << list.out;

  // Every element is in the kernel: `create element` (unlike `add`) fails on an existing
  // key, so checking it with `nft -c` must fail for each one.
  std::stringstream es(program);
  while (std::getline(es, line)) {
    if (line.rfind("add element ", 0) != 0) continue;
    std::string create = "create" + line.substr(3);
    auto c = ns.exec({"nft", "-c", "-f", "-"}, create + "\n");
    EXPECT_NE(c.exit_code, 0) << "element not in the kernel after loading: " << line;
  }
}

std::string param_name(const testing::TestParamInfo<std::string>& info) {
  std::string rel = fs::relative(info.param, source_path("fixtures")).string();
  std::string n;
  for (char c : rel) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NftFixtureLoad, testing::ValuesIn(dumps()), param_name);

}  // namespace
}  // namespace kpc::test
