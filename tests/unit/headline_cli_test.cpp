// The one-line per-Service summaries name the real change: a source range is named as one, not as
// an endpoint added; an endpoint is named only when one was added or removed; an nft trace that
// ends in kube-proxy's no-endpoints REJECT names its Service (the map element's comment), as the
// iptables trace does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <functional>
#include <regex>
#include <string>

#include "tests/support/test_util.h"

namespace kpc {
namespace {

using test::run;

std::string copy_example(const std::string& tag, const std::function<std::string(const std::string&, std::string)>& edit) {
  std::string dir = test::temp_dir(tag);
  for (const char* f : {"services.yaml", "endpointslices.json", "nodes.yaml", "kube-proxy.yaml"})
    test::write_file(dir + "/" + f, edit(f, test::read_file(test::source_path(std::string("fixtures/example/") + f))));
  return dir;
}

std::string same(const std::string&, std::string text) { return text; }

class Headlines : public ::testing::TestWithParam<const char*> {};

TEST_P(Headlines, SourceRangeIsNamedAsOne) {
  const std::string backend = GetParam();
  std::string old_snap = copy_example("hl-old", same);
  std::string new_snap = copy_example("hl-new", [](const std::string& f, std::string t) {
    return f == "services.yaml" ? std::regex_replace(t, std::regex("203\\.0\\.113\\.0/24"), "198.51.100.0/24") : t;
  });
  auto r = run({test::bin_path("kpc"), "diff", old_snap, new_snap, "--backend", backend, "--format", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::string words;
  for (const auto& s : j["services"])
    if (s["service"] == "shop/api:https") words = s["change"];
  EXPECT_EQ(words, "source 198.51.100.0/24 now allowed; source 203.0.113.0/24 no longer allowed") << r.out.substr(0, 3000);
}

TEST_P(Headlines, EndpointRemovedIsNamed) {
  const std::string backend = GetParam();
  std::string old_snap = copy_example("hl-ep-old", same);
  std::string new_snap = copy_example("hl-ep-new", [](const std::string& f, std::string t) {
    if (f != "endpointslices.json") return t;
    auto j = nlohmann::json::parse(t);
    for (auto& item : j["items"])
      if (item["metadata"]["name"] == "api-1") item["endpoints"].erase(1);  // 10.244.2.21
    return j.dump(1);
  });
  auto r = run({test::bin_path("kpc"), "diff", old_snap, new_snap, "--backend", backend, "--format", "json"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::string words;
  for (const auto& s : j["services"])
    if (s["service"] == "shop/api:https") words = s["change"];
  EXPECT_NE(words.find("endpoint removed 10.244.2.21:8443"), std::string::npos) << words;
  EXPECT_EQ(words.find("source"), std::string::npos) << words;
}

INSTANTIATE_TEST_SUITE_P(Modes, Headlines, ::testing::Values("iptables", "nftables"));

TEST(NftTraceHeadline, NoEndpointsRejectNamesItsService) {
  std::string snap = copy_example("hl-reject", [](const std::string& f, std::string t) {
    if (f != "endpointslices.json") return t;
    auto j = nlohmann::json::parse(t);
    for (auto& item : j["items"])
      if (item["metadata"]["name"] == "cart-1") item["endpoints"] = nlohmann::json::array();
    return j.dump(1);
  });
  for (const char* backend : {"nftables", "iptables"}) {
    auto r = run({test::bin_path("kpc"), "trace", snap, "--backend", backend, "--src", "10.244.1.50", "--dst",
                  "10.96.30.30", "--dport", "9000", "--from", "pod", "--format", "json"});
    ASSERT_EQ(r.exit_code, 0) << backend << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["outcomes"].size(), 1u) << backend;
    EXPECT_EQ(j["outcomes"][0]["verdict"], "REJECT") << backend;
    EXPECT_NE(j["outcomes"][0]["services"].dump().find("shop/cart"), std::string::npos) << backend << r.out;
  }
}

}  // namespace
}  // namespace kpc
