// Issue 3's ground truth: every golden restore program kpc produces is loaded by
// the real iptables-restore (legacy and nft flavours, IPv4 and IPv6) into a
// fresh network namespace with kube-proxy's nfacct counters, exactly as
// kube-proxy runs it (--noflush), and read back with iptables-save.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/golden.h"
#include "tests/support/netns.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

struct LoadCase {
  std::string file;
  bool ipv6;
  std::string flavor;
};

std::vector<LoadCase> load_cases() {
  std::vector<LoadCase> out;
  for (const auto& e : fs::recursive_directory_iterator(source_path("fixtures"))) {
    auto p = e.path();
    if (p.parent_path().filename() != "expected" || p.extension() != ".restore") continue;
    std::string name = p.filename().string();
    if (name != "iptables.restore" && name != "ip6tables.restore") continue;
    for (const char* flavor : {"legacy", "nft"}) out.push_back({p.string(), name == "ip6tables.restore", flavor});
  }
  std::sort(out.begin(), out.end(), [](const LoadCase& a, const LoadCase& b) {
    return std::tie(a.file, a.flavor) < std::tie(b.file, b.flavor);
  });
  return out;
}

std::string case_name(const testing::TestParamInfo<LoadCase>& info) {
  std::string rel = fs::relative(info.param.file, source_path("fixtures")).string();
  std::string n = rel + "_" + info.param.flavor;
  for (auto& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

void PrintTo(const LoadCase& c, std::ostream* os) { *os << c.file << " (" << c.flavor << ")"; }

class KernelLoad : public testing::TestWithParam<LoadCase> {};

TEST_P(KernelLoad, GoldenProgramLoads) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  const LoadCase& c = GetParam();
  Netns ns;
  ASSERT_TRUE(ns.ok());
  ASSERT_TRUE(ns.add_kube_proxy_nfacct());
  auto tools = iptables_tools(c.flavor, c.ipv6);
  std::string program = read_file(c.file);
  auto r = ns.exec({tools.restore, "--noflush"}, program);
  ASSERT_EQ(r.exit_code, 0) << tools.restore << " rejected " << c.file << ":\n" << r.err;
  auto saved = ns.exec({tools.save});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  // Every chain the program declared (and did not delete) exists in the kernel.
  for (size_t p = 0; (p = program.find("\n:", p)) != std::string::npos; ++p) {
    std::string chain = program.substr(p + 2, program.find(' ', p + 2) - (p + 2));
    EXPECT_NE(saved.out.find(":" + chain + " "), std::string::npos) << chain << " missing after load";
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, KernelLoad, testing::ValuesIn(load_cases()), case_name);

}  // namespace
}  // namespace kpc::test
