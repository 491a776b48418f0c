// `kpc-applier --apply-with tools|in-process`: the option, and libnftables' error text as
// `nft -f -` prints it. Nothing here changes a ruleset (a syntax error stops nft before its
// netlink batch); the kernel tests are tests/kernel/applier_inprocess_kernel_test.cpp.
#include <gtest/gtest.h>

#include "applier/node/kernel_dataplane.h"
#include "applier/node/nft_library.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

TEST(ApplyWith, ParsesTheTwoValuesOnly) {
  EXPECT_EQ(applier::parse_apply_with("tools"), applier::ApplyWith::Tools);
  EXPECT_EQ(applier::parse_apply_with("in-process"), applier::ApplyWith::InProcess);
  EXPECT_FALSE(applier::parse_apply_with("inprocess").has_value());
  EXPECT_FALSE(applier::parse_apply_with("").has_value());
  EXPECT_EQ(applier::KernelTools{}.apply_with, applier::ApplyWith::Tools);  // kube-proxy's behaviour
}

TEST(ApplyWith, UnknownValueIsExitCode2) {
  auto r = run({bin_path("kpc-applier"), "--apply-with", "libiptc", "--watch", "/nonexistent"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--apply-with"), std::string::npos) << r.err;
}

TEST(NftLibrary, SyntaxErrorIsReportedAsTheToolReportsStdin) {
  auto r = applier::nft_lib_apply("add table ip kpc-unit\nadd chain ip kpc-unit c\nadd rule ip kpc-unit c tcp dport 80 bogus\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "/dev/stdin:3:42-42: Error: syntax error, unexpected newline\n"
            "add rule ip kpc-unit c tcp dport 80 bogus\n"
            "                                         ^\n")
      << r.err;
}

}  // namespace
}  // namespace kpc::test
