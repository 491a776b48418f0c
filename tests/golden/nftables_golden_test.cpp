// kube-proxy's own nftables unit tests (fixtures/kp-nft-*, transcribed from
// pkg/proxy/nftables/proxier_test.go; fixtures/KUBEPROXY_NFT_TESTS.md) replayed against kpc:
// the compiler writes each sync's transactions, kpc's independent nft model (verifier/nft)
// applies them to the node's state exactly as `nft -f` would (every transaction must be
// accepted), and knftables' Fake.Dump() of the resulting table must equal kube-proxy's
// expected text under kube-proxy's comparison (sortNFTablesTransaction). Per step also: the
// operation count of the main transaction (NumOperations), the stale chains deleted first and
// those left flushed afterwards. Time is kube-proxy's: syncs follow each other "at once",
// except where the test ages stale chains (ageStaleChainsBefore: two seconds pass).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/service_ports.h"
#include "tests/support/nft_compare.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::test {
namespace {
namespace fs = std::filesystem;
namespace vn = kpc::verifier::nft;

struct Step {
  std::string dir, snapshot, expected, initial, assertions;
  bool aged = false;
  std::optional<size_t> operations;
  std::vector<std::string> stale_deleted_before, stale_after;
  bool has_stale_lists = false;
};
struct Case {
  std::string name;
  bool ipv6 = false;
  std::vector<Step> steps;
};

std::vector<std::string> strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n && n.IsSequence())
    for (const auto& s : n) out.push_back(s.as<std::string>());
  return out;
}

Step read_step(const fs::path& dir, const YAML::Node& node) {
  Step s;
  s.dir = dir.string();
  const YAML::Node files = node["files"];
  auto file = [&](const char* key) { return files && files[key] ? (dir / files[key].as<std::string>()).string() : ""; };
  s.snapshot = file("snapshot");
  s.expected = file("expected");
  s.initial = file("initialState");
  s.assertions = file("assertions");
  s.aged = node["ageStaleChainsBefore"].IsDefined();
  if (node["numOperations"] && node["numOperations"].as<std::string>() != "not asserted")
    s.operations = node["numOperations"].as<size_t>();
  s.has_stale_lists = node["staleChainsAfter"].IsDefined();
  s.stale_deleted_before = strings(node["staleChainsDeletedBefore"]);
  s.stale_after = strings(node["staleChainsAfter"]);
  return s;
}

// Every kp-nft fixture with whole-table expectations.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& e : fs::directory_iterator(source_path("fixtures"))) {
    std::string name = e.path().filename().string();
    if (!name.starts_with("kp-nft-") || !fs::exists(e.path() / "case.yaml")) continue;
    YAML::Node meta = YAML::LoadFile((e.path() / "case.yaml").string());
    Case c;
    c.name = name;
    c.ipv6 = meta["family"] && meta["family"].as<std::string>() == "ipv6";
    if (meta["steps"]) {
      for (const auto& st : meta["steps"]) c.steps.push_back(read_step(e.path() / st["dir"].as<std::string>(), st));
    } else {
      c.steps.push_back(read_step(e.path(), meta));
    }
    bool any_dump = false;
    for (const auto& s : c.steps) any_dump |= !s.expected.empty() && fs::exists(s.expected);
    if (any_dump) out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  return out;
}

Snapshot load(const std::string& path) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  EXPECT_TRUE(load_snapshot({path}, LoadOptions{}, sm, &snap, diags)) << diags.render(sm);
  return snap;
}

// What kube-proxy reads from the kernel when it starts on a node that has its table: the
// chains and sets the table lists, and the elements of the six dispatch containers as
// knftables' ListElements returns them (the text they were written with).
nftables::KernelListing listing_of(const vn::NftState& node, vn::Family family) {
  nftables::KernelListing l;
  l.chains.emplace();
  l.sets.emplace();
  l.elements.emplace();
  const vn::Table* t = node.find_table(family, "kube-proxy");
  if (!t) return l;
  for (const auto& c : t->chains) l.chains->insert(c.name);
  for (const auto& s : t->sets) {
    l.sets->insert(s.name);
    for (size_t c = 0; c < nftables::kContainers; ++c) {
      if (s.name != nftables::container_name(static_cast<nftables::Container>(c))) continue;
      for (const auto& e : s.elements) {
        std::string key;
        for (const auto& k : e.written_key) key += (key.empty() ? "" : " . ") + k;
        (*l.elements)[c][key] = e.written_value.value_or("");
      }
    }
  }
  return l;
}

class NftGolden : public testing::TestWithParam<Case> {};

TEST_P(NftGolden, KubeProxysExpectationsHold) {
  const Case& c = GetParam();
  const IPFamily family = c.ipv6 ? IPFamily::V6 : IPFamily::V4;
  const vn::Family table_family = c.ipv6 ? vn::Family::Ip6 : vn::Family::Ip;
  vn::NftState node;
  nftables::SyncState proxier;
  std::optional<Snapshot> prior;
  int64_t now = 0;
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const Step& st = c.steps[i];
    SCOPED_TRACE(c.name + " step " + std::to_string(i + 1));
    std::optional<nftables::KernelListing> listing;
    if (!st.initial.empty()) {  // the table a previous kube-proxy left on the node
      auto r = vn::apply_script(node, nftables_dump_order(read_file(st.initial)), st.initial);
      ASSERT_TRUE(r.ok) << r.error->render();
      listing = listing_of(node, table_family);
      proxier.table_exists = true;
    }
    Snapshot snap = load(st.snapshot);
    DiagSink diags;
    auto ctx = nft_node_context(snap, family, diags);
    ASSERT_TRUE(ctx) << diags.render(SourceManager{});
    auto ports = proxy::build_service_ports(snap, *ctx);
    nftables::SyncOptions o;
    o.full = !prior.has_value();
    if (prior) {
      auto pctx = nft_node_context(*prior, family, diags);
      auto pports = proxy::build_service_ports(*prior, *pctx);
      auto ch = proxy::compute_changes(*prior, pports, *pctx, snap, ports, *ctx);
      o.full = ch.full_sync;
      o.changed_services = ch.services;
    }
    o.service_cidrs = service_cidrs_of(snap, family);
    now += st.aged ? 2000 : 1;
    o.now_ms = now;
    auto r = nftables::sync_nftables(ports, *ctx, o, proxier, listing ? &*listing : nullptr);

    // The node applies the stale-chain deletions, then the sync, as nft -f would.
    std::vector<std::string> deleted;
    for (const auto& op : r.cleanup.ops) deleted.emplace_back(op.name);
    if (!r.cleanup.empty()) {
      auto a = vn::apply_script(node, nftables::print_transaction(r.cleanup), "cleanup.nft");
      ASSERT_TRUE(a.ok) << a.error->render();
    }
    std::string text = nftables::print_transaction(r.tx);
    auto a = vn::apply_script(node, text, "sync.nft");
    ASSERT_TRUE(a.ok) << a.error->render() << "\n" << text;

    if (!st.expected.empty() && fs::exists(st.expected)) {
      NftDiff d = diff_nftables_transaction(read_file(st.expected), vn::print_knftables_dump(node, table_family, "kube-proxy"));
      EXPECT_TRUE(d.equal) << describe(d) << "\n--- transaction\n" << text;
    }
    if (st.operations) EXPECT_EQ(r.tx.num_operations(), *st.operations) << text;
    if (st.has_stale_lists) {
      std::set<std::string> want_after(st.stale_after.begin(), st.stale_after.end()), got_after;
      for (const auto& [chain, t] : proxier.stale_chains) got_after.insert(chain);
      EXPECT_EQ(got_after, want_after);
      EXPECT_EQ(std::set<std::string>(deleted.begin(), deleted.end()),
                std::set<std::string>(st.stale_deleted_before.begin(), st.stale_deleted_before.end()));
    }
    prior = std::move(snap);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NftGolden, testing::ValuesIn(cases()), [](const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

}  // namespace
}  // namespace kpc::test
