// Cross-back-end diff on kube-proxy's fixtures (issue 16 §5): each fixture snapshot that is not
// an IPVS one is compiled with the iptables and the nftables back ends, and the two programs
// must differ only by kube-proxy's documented mode differences (verifier/cross), packet class by
// packet class (cross/by_class.h: every class of both programs, as `kpc diff` compares them). Any other
// difference is a bug in one back end -- except where the snapshot configures one mode only
// (iptables.masqueradeAll: a real change on migration, expected as a surprise below).
#include <gtest/gtest.h>

#include <filesystem>

#include "compiler/model/loader.h"
#include "tests/support/cross_support.h"
#include "tests/support/test_util.h"

namespace kpc {
namespace {

namespace fs = std::filesystem;

// Fixtures whose KubeProxyConfiguration sets masqueradeAll for one mode only (iptables.masqueradeAll
// or nftables.masqueradeAll): the other mode does not read it, so the migrated node masquerades
// differently. The diff must say so (a real change, not a documented mode difference).
bool mode_specific_config(const std::string& name) {
  return name.find("masquerade-masqueradeall") != std::string::npos;
}

TEST(CrossDiffFixtures, IptablesAndNftablesDifferOnlyByKnownDifferences) {
  size_t checked = 0, known = 0;
  for (const auto& e : fs::directory_iterator(test::source_path("fixtures"))) {
    std::string name = e.path().filename().string();
    fs::path snap_file = e.path() / "snapshot.yaml";
    if (name.rfind("kp-", 0) != 0 || name.rfind("kp-ipvs-", 0) == 0 || !fs::exists(snap_file)) continue;
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    if (!load_snapshot({snap_file.string()}, LoadOptions{}, sm, &snap, diags)) continue;  // invalid on purpose
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
      auto run = test::cross_diff_snapshot(snap, f, {}, {}, false, test::CrossEngine::PerClass);
      if (!run->result) continue;  // no address of the family on the node
      ++checked;
      const auto& r = *run->result;
      for (const auto& [id, n] : r.known_counts) known += n;
      if (mode_specific_config(name) && f == IPFamily::V4) {
        EXPECT_GT(r.surprises, 0u) << name << ": iptables.masqueradeAll is not nftables.masqueradeAll";
        for (const auto& c : r.differences)
          if (c.known.empty()) {
            EXPECT_NE((c.a.text() + c.b.text()).find("masquerade"), std::string::npos) << name << ": " << c.packet.text();
          }
        continue;
      }
      EXPECT_EQ(r.surprises, 0u) << name << " (" << family_name(f) << ")\n" << test::surprises_text(r);
      EXPECT_TRUE(r.self_check_failures.empty()) << name << ": " << r.self_check_failures.front();
    }
  }
  EXPECT_GT(checked, 40u);
  EXPECT_GT(known, 0u);
  std::printf("cross diff: %zu fixture programs, %zu known differences, 0 surprises\n", checked, known);
}

}  // namespace
}  // namespace kpc
