// Issue 14: what kpc writes for nftables nodes loads into the real nft (nftables 1.0.6) in a
// fresh network namespace: every pinned nftables golden, the full transaction of every
// kube-proxy nftables fixture's snapshots (both families where the node has them), and the
// KEP-4963 fast-path table -- without its flowtable and `flow add` rule, which this kernel
// cannot load (no flowtable support: the flowtable text is checked by the unit tests and the
// nft model instead).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "tests/support/netns.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;

std::string without_flowtable(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.find(" flowtable ") == std::string::npos && line.find("flow add @") == std::string::npos) out += line + "\n";
  return out;
}

TEST(NftLoad, EveryPinnedNftablesGoldenLoads) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  int loaded = 0;
  for (const auto& e : fs::recursive_directory_iterator(source_path("fixtures"))) {
    auto p = e.path();
    if (p.parent_path().filename() != "expected" || p.extension() != ".nft") continue;
    Netns ns;
    ASSERT_TRUE(ns.ok());
    std::string text = read_file(p.string());
    bool fast = p.filename() == "fastpath.nft";
    std::string script = fast ? without_flowtable(text) : text;
    auto r = ns.exec({"nft", "-f", "-"}, script);
    EXPECT_EQ(r.exit_code, 0) << p << ": " << r.err;
    auto list = ns.exec({"nft", "list", "ruleset"});
    // kpc's nft model (what `kpc simulate --backend nftables --format nft` prints) lists the
    // same ruleset, byte for byte.
    verifier::nft::NftState model;
    auto applied = verifier::nft::apply_script(model, script, p.string());
    ASSERT_TRUE(applied.ok) << applied.error->render();
    EXPECT_EQ(verifier::nft::print_ruleset(model), list.out) << p;
    if (fast) {
      for (const char* want : {"set service-nodeports", "set service-ip4-ports", "set service-ip6-ports",
                               "chain fastpath-mark", "type filter hook prerouting priority dstnat - 10; policy accept;",
                               "meta mark set meta mark & 0xffff7fff"})
        EXPECT_NE(list.out.find(want), std::string::npos) << want << "\n" << list.out;
    } else {
      EXPECT_NE(list.out.find("table ip"), std::string::npos) << list.out;
    }
    ++loaded;
  }
  EXPECT_GE(loaded, 3);
}

TEST(NftLoad, EveryKubeProxyNftablesFixtureCompilesToALoadableTransaction) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  int loaded = 0;
  for (const auto& e : fs::recursive_directory_iterator(source_path("fixtures"))) {
    auto p = e.path();
    if (p.filename() != "snapshot.yaml" || p.string().find("/kp-nft-") == std::string::npos) continue;
    SourceManager sm;
    DiagSink diags;
    Snapshot snap;
    if (!load_snapshot({p.string()}, LoadOptions{}, sm, &snap, diags)) continue;  // cases of refused input
    for (IPFamily f : {IPFamily::V4, IPFamily::V6}) {
      DiagSink d;
      auto r = compile_nftables(snap, f, {}, d);
      if (!r) continue;  // the node has no address of this family
      Netns ns;
      ASSERT_TRUE(ns.ok());
      auto out = ns.exec({"nft", "-f", "-"}, r->text);
      EXPECT_EQ(out.exit_code, 0) << p << " " << family_name(f) << ": " << out.err;
      verifier::nft::NftState model;
      auto applied = verifier::nft::apply_script(model, r->text, "sync.nft");
      ASSERT_TRUE(applied.ok) << applied.error->render();
      EXPECT_EQ(verifier::nft::print_ruleset(model), ns.exec({"nft", "list", "ruleset"}).out) << p << " " << family_name(f);
      ++loaded;
    }
  }
  EXPECT_GE(loaded, 40);
}

}  // namespace
}  // namespace kpc::test
