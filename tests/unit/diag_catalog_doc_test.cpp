// docs/diagnostics.md must list every code of the catalog with its name.
#include <gtest/gtest.h>

#include <set>

#include "compiler/support/diag.h"
#include "tests/support/test_util.h"

namespace kpc {
namespace {

TEST(DiagCatalogDoc, EveryCodeIsDocumented) {
  std::string doc = test::read_file(test::source_path("docs/diagnostics.md"));
  for (const auto& info : diag_catalog()) {
    std::string row = "| " + std::string(info.code) + " | " + std::string(info.name) + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/diagnostics.md lacks " << row;
  }
}

TEST(DiagCatalogDoc, CodesAreUniqueAndWellFormed) {
  std::set<std::string> codes, names;
  for (const auto& info : diag_catalog()) {
    EXPECT_TRUE(codes.insert(std::string(info.code)).second) << info.code;
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name;
    ASSERT_EQ(info.code.size(), 5u);
    EXPECT_TRUE(info.code[0] == 'E' || info.code[0] == 'W');
  }
}

}  // namespace
}  // namespace kpc
