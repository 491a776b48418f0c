#include "tests/support/nft_sync_steps.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <optional>

#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/service_ports.h"
#include "compiler/support/text.h"
#include "tests/support/test_util.h"

namespace kpc::test {
namespace {

Snapshot load(const std::string& path) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  EXPECT_TRUE(load_snapshot({path}, LoadOptions{}, sm, &snap, diags)) << diags.render(sm);
  return snap;
}

}  // namespace

std::vector<LineDeleted> one_line_deleted(const std::string& program, const std::string& label) {
  std::vector<LineDeleted> out;
  auto lines = split(program, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = trim(lines[i]);
    if (l.empty() || l[0] == '#') continue;
    std::string mutant;
    for (size_t j = 0; j < lines.size(); ++j)
      if (j != i) mutant += std::string(lines[j]) + "\n";
    out.push_back({std::move(mutant), label + ", line " + std::to_string(i + 1) + " deleted: " + std::string(l)});
  }
  return out;
}

std::vector<NftSyncStep> nft_sync_steps(const std::string& fixture) {
  namespace vn = verifier::nft;
  std::string dir = source_path("fixtures/" + fixture);
  YAML::Node c = YAML::LoadFile(dir + "/case.yaml");
  std::vector<std::string> snaps;
  for (const auto& s : c["steps"])
    snaps.push_back(dir + "/" + s["dir"].as<std::string>() + "/" + s["files"]["snapshot"].as<std::string>());
  std::vector<NftSyncStep> out;
  nftables::SyncState proxier;
  vn::NftState node;
  std::vector<std::string> applied;
  std::optional<Snapshot> prior;
  int64_t now = 0;
  for (size_t i = 0; i < snaps.size(); ++i) {
    Snapshot snap = load(snaps[i]);
    DiagSink diags;
    auto ctx = nft_node_context(snap, IPFamily::V4, diags);
    EXPECT_TRUE(ctx.has_value()) << fixture << " step " << i + 1;
    if (!ctx) return out;
    auto ports = proxy::build_service_ports(snap, *ctx);
    nftables::SyncOptions o;
    o.full = !prior.has_value();
    if (prior) {
      auto pctx = nft_node_context(*prior, IPFamily::V4, diags);
      auto pports = proxy::build_service_ports(*prior, *pctx);
      auto ch = proxy::compute_changes(*prior, pports, *pctx, snap, ports, *ctx);
      o.full = ch.full_sync;
      o.changed_services = ch.services;
    }
    o.service_cidrs = service_cidrs_of(snap, IPFamily::V4);
    now += 2000;  // stale chains are old enough to be deleted
    o.now_ms = now;
    auto text_of = [](const nftables::SyncResult& r) {
      std::string t = r.cleanup.empty() ? "" : nftables::print_transaction(r.cleanup);
      return t + nftables::print_transaction(r.tx);
    };
    nftables::SyncState full_state = proxier;
    nftables::SyncOptions fo = o;
    fo.full = true;
    std::string full = text_of(nftables::sync_nftables(ports, *ctx, fo, full_state, nullptr));
    std::string partial = text_of(nftables::sync_nftables(ports, *ctx, o, proxier, nullptr));
    if (prior && !o.full)
      out.push_back(NftSyncStep{node, partial, full, fixture + " step " + std::to_string(i + 1), applied});
    auto a = vn::apply_script(node, partial, "sync.nft");
    EXPECT_TRUE(a.ok) << fixture << ": " << (a.error ? a.error->render() : "");
    if (!a.ok) return out;
    applied.push_back(partial);
    prior = std::move(snap);
  }
  return out;
}

}  // namespace kpc::test
