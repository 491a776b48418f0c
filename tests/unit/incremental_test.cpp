// The incremental compiler (compiler/driver/incremental.h), case by case on the example
// cluster: each sync is checked against the batch path (compile_iptables /
// compile_iptables_from_prior) and for what it should say (partial or full, which
// services, which chains). The random-sequence proof is tests/property/incremental_props_test.cpp.
#include <gtest/gtest.h>

#include "compiler/driver/incremental.h"
#include "compiler/model/loader.h"
#include "tests/support/test_util.h"

namespace kpc {
namespace {

Snapshot example() {
  static const Snapshot snap = [] {
    SourceManager sm;
    DiagSink diags;
    Snapshot s;
    EXPECT_TRUE(load_snapshot({test::source_path("fixtures/example")}, LoadOptions{}, sm, &s, diags))
        << diags.render(sm);
    return s;
  }();
  return snap;
}

EndpointSlice& slice_named(Snapshot& s, const std::string& name) {
  for (auto& sl : s.slices)
    if (sl.meta.name == name) return sl;
  throw std::logic_error("no slice " + name);
}

const EndpointSlice& first_slice_of(const Snapshot& s, const std::string& ns, const std::string& service) {
  for (const auto& sl : s.slices)
    if (sl.meta.ns == ns && sl.service_name() == service && sl.address_type == AddressType::IPv4) return sl;
  throw std::logic_error("no slice for " + ns + "/" + service);
}

CompileResult batch(const Snapshot& next, const Snapshot* prior, Backend b = Backend::IPTables,
                    const PriorOptions& opts = {}) {
  DiagSink d;
  auto r = prior ? compile_iptables_from_prior(next, *prior, b, opts, d) : compile_iptables(next, b, {}, d);
  EXPECT_TRUE(r.has_value());
  return *r;
}

CompileResult sync(IncrementalCompiler& ic, const IncrementalSyncOptions& opts = {}) {
  DiagSink d;
  auto r = ic.sync(opts, d);
  EXPECT_TRUE(r.has_value());
  return *r;
}

void expect_same(const CompileResult& got, const CompileResult& want) {
  EXPECT_EQ(got.partial, want.partial);
  EXPECT_EQ(got.full_sync_reason, want.full_sync_reason);
  EXPECT_EQ(got.changed_services, want.changed_services);
  EXPECT_EQ(got.sync.chains_written, want.sync.chains_written);
  EXPECT_EQ(got.sync.rules_written, want.sync.rules_written);
  EXPECT_EQ(got.sync.nat_rules_skipped, want.sync.nat_rules_skipped);
  EXPECT_EQ(got.sync.deleted_chains, want.sync.deleted_chains);
  EXPECT_EQ(got.text, want.text);
}

// A compiler that has synced the example once.
struct Synced {
  Backend backend;
  IncrementalCompiler ic;
  Snapshot state = example();
  explicit Synced(Backend b = Backend::IPTables) : backend(b), ic(b) {
    ic.replace_all(state);
    expect_same(sync(ic), batch(state, nullptr, b));
  }
};

TEST(Incremental, FirstSyncIsTheFullProgram) {
  for (Backend b : {Backend::IPTables, Backend::IP6Tables}) {
    IncrementalCompiler ic(b);
    EXPECT_FALSE(ic.has_synced());
    ic.replace_all(example());
    auto r = sync(ic);
    EXPECT_TRUE(ic.has_synced());
    EXPECT_FALSE(r.partial);
    expect_same(r, batch(example(), nullptr, b));
  }
}

TEST(Incremental, NothingChangedWritesNoServiceChains) {
  Synced s;
  auto r = sync(s.ic);
  EXPECT_TRUE(r.partial);
  EXPECT_TRUE(r.changed_services.empty());
  EXPECT_EQ(r.text.find(":KUBE-SEP-"), std::string::npos);
  expect_same(r, batch(s.state, &s.state));
}

TEST(Incremental, ResentUnchangedObjectsChangeNothing) {
  Synced s;
  for (const auto& svc : s.state.services) s.ic.update_service(svc);
  for (const auto& sl : s.state.slices) s.ic.update_slice(sl);
  auto r = sync(s.ic);
  EXPECT_TRUE(r.partial);
  EXPECT_TRUE(r.changed_services.empty());
  expect_same(r, batch(s.state, &s.state));
}

TEST(Incremental, AnEndpointAddedRewritesOnlyItsService) {
  Synced s;
  Snapshot next = s.state;
  EndpointSlice sl = first_slice_of(next, "shop", "web");
  Endpoint ep = sl.endpoints.at(0);
  ep.addresses = {*IPAddr::parse("10.244.9.9")};
  sl.endpoints.push_back(ep);
  slice_named(next, sl.meta.name) = sl;
  s.ic.update_slice(sl);
  auto r = sync(s.ic);
  EXPECT_TRUE(r.partial);
  EXPECT_EQ(r.changed_services, std::set<std::string>{"shop/web"});
  expect_same(r, batch(next, &s.state));
}

TEST(Incremental, ChangesThatCancelOutBeforeTheSyncAreNoChange) {
  Synced s;
  EndpointSlice sl = first_slice_of(s.state, "shop", "web");
  EndpointSlice grown = sl;
  grown.endpoints.push_back(grown.endpoints.at(0));
  grown.endpoints.back().addresses = {*IPAddr::parse("10.244.9.9")};
  s.ic.update_slice(grown);
  s.ic.update_slice(sl);  // back as it was at the last sync
  auto r = sync(s.ic);
  EXPECT_TRUE(r.changed_services.empty());
  expect_same(r, batch(s.state, &s.state));
}

TEST(Incremental, ADeletedServiceHasItsChainsDeleted) {
  Synced s;
  Snapshot next = s.state;
  std::erase_if(next.services, [](const Service& svc) { return svc.meta.name == "web"; });
  s.ic.delete_service("shop", "web");
  s.ic.delete_service("shop", "no-such-service");  // harmless
  s.ic.delete_slice("shop", "no-such-slice");
  auto r = sync(s.ic);
  EXPECT_TRUE(r.partial);
  EXPECT_GT(r.sync.deleted_chains, 0u);
  EXPECT_NE(r.text.find("\n-X KUBE-SVC-"), std::string::npos);
  expect_same(r, batch(next, &s.state));
  // And the next sync has nothing left to delete.
  auto again = sync(s.ic);
  EXPECT_EQ(again.sync.deleted_chains, 0u);
  expect_same(again, batch(next, &next));
}

TEST(Incremental, ASliceRelabelledToAnotherServiceChangesBoth) {
  Synced s;
  Snapshot next = s.state;
  EndpointSlice sl = first_slice_of(next, "shop", "web");
  sl.meta.labels["kubernetes.io/service-name"] = "api";
  slice_named(next, sl.meta.name) = sl;
  s.ic.update_slice(sl);
  auto r = sync(s.ic);
  EXPECT_TRUE(r.changed_services.count("shop/web"));
  EXPECT_TRUE(r.changed_services.count("shop/api"));
  expect_same(r, batch(next, &s.state));
}

TEST(Incremental, TopologyChangeOnThisNodeIsAFullSync) {
  Synced s;
  Snapshot next = s.state;
  Node node = *next.find_node("node-a");
  node.meta.labels["topology.kubernetes.io/zone"] = "zone-b";
  for (auto& n : next.nodes)
    if (n.meta.name == "node-a") n = node;
  s.ic.update_node(node);
  auto r = sync(s.ic);
  EXPECT_FALSE(r.partial);
  EXPECT_EQ(r.full_sync_reason, "the node's topology labels changed");
  expect_same(r, batch(next, &s.state));
}

TEST(Incremental, AnotherNodeComingOrGoingIsNoChange) {
  Synced s;
  Snapshot next = s.state;
  std::erase_if(next.nodes, [](const Node& n) { return n.meta.name == "node-b"; });
  s.ic.delete_node("node-b");
  auto r = sync(s.ic);
  EXPECT_TRUE(r.partial);
  EXPECT_TRUE(r.changed_services.empty());
  expect_same(r, batch(next, &s.state));
}

TEST(Incremental, AFailedSyncKeepsThePrior) {
  Synced s;
  ProxyConfig broken = s.state.config;
  broken.hostname_override = "";  // two Nodes, no hostname: no node to compile for
  NodeEnvironment env = s.state.env;
  env.hostname = "";
  s.ic.update_config(broken);
  s.ic.update_environment(env);
  DiagSink d;
  EXPECT_FALSE(s.ic.sync({}, d).has_value());
  EXPECT_TRUE(d.has_errors());
  // Repaired, and an endpoint added meanwhile: the sync is from the last good state.
  s.ic.update_config(s.state.config);
  s.ic.update_environment(s.state.env);
  Snapshot next = s.state;
  EndpointSlice sl = first_slice_of(next, "shop", "web");
  sl.endpoints.pop_back();
  slice_named(next, sl.meta.name) = sl;
  s.ic.update_slice(sl);
  auto r = sync(s.ic);
  expect_same(r, batch(next, &s.state));
}

TEST(Incremental, ARequestedFullSyncSaysSo) {
  Synced s;
  IncrementalSyncOptions o;
  o.force_full = true;
  PriorOptions po;
  po.force_full = true;
  auto r = sync(s.ic, o);
  EXPECT_FALSE(r.partial);
  EXPECT_EQ(r.full_sync_reason, "a full sync was requested");
  expect_same(r, batch(s.state, &s.state, Backend::IPTables, po));
}

TEST(Incremental, AFailedRestoreMakesTheNextSyncFullAndDeletesAgain) {
  Synced s;
  Snapshot next = s.state;
  std::erase_if(next.services, [](const Service& svc) { return svc.meta.name == "web"; });
  s.ic.delete_service("shop", "web");
  auto failed = sync(s.ic);
  ASSERT_GT(failed.sync.deleted_chains, 0u);
  s.ic.restore_failed();  // the kernel still has web's chains
  auto r = sync(s.ic);
  EXPECT_FALSE(r.partial);
  EXPECT_EQ(r.full_sync_reason, "the last restore failed");
  EXPECT_EQ(r.sync.deleted_chains, failed.sync.deleted_chains);
  // kube-proxy's retry: a full sync from the last state that was applied.
  PriorOptions po;
  po.force_full = true;
  CompileResult want = batch(next, &s.state, Backend::IPTables, po);
  EXPECT_EQ(r.text, want.text);
}

TEST(Incremental, ExplicitKernelChainsAreCleanedUp) {
  Synced s;
  IncrementalSyncOptions o;
  o.existing_nat_chains = {"KUBE-SVC-AAAAAAAAAAAAAAAA", "KUBE-SERVICES", "SOMEONE-ELSES"};
  PriorOptions po;
  po.existing_nat_chains = o.existing_nat_chains;
  auto r = sync(s.ic, o);
  EXPECT_EQ(r.sync.deleted_chains, 1u);
  EXPECT_NE(r.text.find("-X KUBE-SVC-AAAAAAAAAAAAAAAA\n"), std::string::npos);
  expect_same(r, batch(s.state, &s.state, Backend::IPTables, po));
}

}  // namespace
}  // namespace kpc
