// The nftables proof's held state (session 10): the partial runs on the held state in place
// with only the chains and sets it names saved (applier/node/nft_held.h). A failed proof must
// leave nothing lost: the report's prior is the held state before the partial, and the full
// transaction goes in instead. A proven one leaves the held state as the kernel's.
#include <gtest/gtest.h>

#include "applier/node/dataplane.h"
#include "applier/node/nft_equiv.h"
#include "applier/node/sources.h"
#include "applier/node/sync_loop.h"
#include "compiler/driver/compile_nftables.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::applier {
namespace {

namespace vn = verifier::nft;

// A dataplane whose chosen nft read drops the DNAT rule of one kube-dns endpoint chain (not
// shop/web's, which the partial rewrites): the held state then differs from the kernel the
// compiler assumes, and the partial cannot be proven.
class TamperingNftDataplane final : public Dataplane {
 public:
  ModelDataplane inner;
  int tamper_read = -1;
  int reads = 0;
  std::string tampered;  ///< the listing handed out by the tampered read
  verifier::Flavor flavor() const override { return inner.flavor(); }
  DataplaneResult read(BackendKind k, IPFamily f, std::string* out) override {
    auto r = inner.read(k, f, out);
    if (k == BackendKind::NFTables && f == IPFamily::V4 && reads++ == tamper_read) {
      size_t at = out->find("dnat to 10.244.1.2:53");
      EXPECT_NE(at, std::string::npos);
      size_t b = out->rfind('\n', at) + 1, e = out->find('\n', at) + 1;
      out->erase(b, e - b);
      tampered = *out;
    }
    return r;
  }
  DataplaneResult apply(BackendKind k, IPFamily f, const std::string& p) override { return inner.apply(k, f, p); }
  DataplaneResult ensure_jumps(IPFamily f, const ChainSet& t, size_t* n) override { return inner.ensure_jumps(f, t, n); }
};

Snapshot example() {
  Snapshot s;
  std::string diags;
  EXPECT_TRUE(load_snapshot_paths({test::source_path("fixtures/example")}, "", &s, &diags)) << diags;
  s.config.mode = ProxyMode::NFTables;
  return s;
}

// shop/web's IPv4 slice with its first endpoint replaced: a new endpoint chain, an old one stale.
EndpointSlice move_web(const Snapshot& s, const std::string& ip) {
  for (const auto& sl : s.slices)
    if (sl.meta.name == "web-v4") {
      EndpointSlice c = sl;
      c.endpoints[0].addresses = {*IPAddr::parse(ip)};
      return c;
    }
  ADD_FAILURE() << "no web-v4";
  return {};
}

std::string want_listing(const Snapshot& snap) {
  DiagSink d;
  auto full = compile_nftables(snap, IPFamily::V4, {}, d);
  EXPECT_TRUE(full.has_value());
  vn::NftState want;
  EXPECT_TRUE(vn::apply_script(want, full->text, "full").ok);
  return vn::print_ruleset(want);
}

TEST(ApplierNftProof, FailedProofKeepsThePriorAndAppliesTheFullTransaction) {
  FakeClock clock;
  TamperingNftDataplane dp;
  dp.tamper_read = 1;  // the first sync's read-back: the held state
  LoopOptions o;
  o.mode = BackendKind::NFTables;
  o.families = {IPFamily::V4};
  o.state_dir = test::temp_dir("applier-nft-proof");
  SyncLoop loop(o, clock, dp);
  Snapshot snap = example();
  loop.replace_all(snap);
  auto r1 = loop.tick();
  ASSERT_TRUE(r1.has_value() && r1->ok);
  EndpointSlice web = move_web(snap, "10.244.1.99");
  loop.update_slice(web);
  for (auto& sl : snap.slices)
    if (sl.meta.name == web.meta.name) sl = web;
  clock.advance_ms(1000);
  auto r = loop.tick();
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok) << r->families[0].error;
  EXPECT_TRUE(r->families[0].fallback);
  EXPECT_EQ(r->families[0].verdict, "not-equivalent");
  EXPECT_EQ(r->families[0].want, "objects");  // the reference state was made at the full sync
  EXPECT_EQ(loop.counters().verify_failures, 1u);
  // The prior kept for the report is the held state before the partial, put back exactly.
  vn::NftState held;
  vn::NftError err;
  ASSERT_TRUE(vn::parse_listing(dp.tampered, "held", &held, &err)) << err.to_string();
  auto dir = test::run({"sh", "-c", "ls -d " + o.state_dir + "/verify-failures/*"});
  std::string failure = dir.out.substr(0, dir.out.find('\n'));
  EXPECT_EQ(test::read_file(failure + "/prior.nft"), vn::print_ruleset(held));
  EXPECT_NE(test::read_file(failure + "/full.nft").find("add table ip kube-proxy"), std::string::npos);
  // The full transaction went in: the kernel holds what it gives on a fresh node (the old
  // endpoint chain flushed, for kube-proxy's deferred deletion).
  vn::NftState want;
  vn::NftError e2;
  ASSERT_TRUE(vn::parse_listing(want_listing(snap), "want", &want, &e2));
  auto cmp = compare_nft_tables(dp.inner.nft(IPFamily::V4), want, vn::Family::Ip, "kube-proxy");
  EXPECT_EQ(cmp.verdict, NftVerdict::Equivalent) << (cmp.differences.empty() ? "" : cmp.differences[0]);
}

TEST(ApplierNftProof, ProvenPartialsOnTheHeldStateInPlace) {
  FakeClock clock;
  ModelDataplane dp;
  LoopOptions o;
  o.mode = BackendKind::NFTables;
  o.families = {IPFamily::V4};
  SyncLoop loop(o, clock, dp);
  Snapshot snap = example();
  loop.replace_all(snap);
  ASSERT_TRUE(loop.tick()->ok);
  // Five moves of web's endpoint: each a partial, proven on the held state in place (stale
  // chains flushed, then deleted by the next sync's cleanup), the reference by the object path.
  for (int i = 0; i < 5; ++i) {
    EndpointSlice web = move_web(snap, "10.244.1." + std::to_string(100 + i));
    loop.update_slice(web);
    for (auto& sl : snap.slices)
      if (sl.meta.name == web.meta.name) sl = web;
    clock.advance_ms(2000);
    auto r = loop.tick();
    ASSERT_TRUE(r.has_value() && r->ok);
    const auto& f = r->families[0];
    EXPECT_EQ(f.kind, "partial");
    EXPECT_FALSE(f.fallback) << f.verdict;
    EXPECT_EQ(f.want, "objects");
    EXPECT_GT(f.want_redone, 0u);
  }
  EXPECT_EQ(loop.counters().verify_failures, 0u);
  // Every proof ran on the held state the previous proofs advanced in place (not applied a
  // second time after the kernel took the partial); the kernel ends as the full transaction.
  DiagSink d;
  auto full = compile_nftables(snap, IPFamily::V4, {}, d);
  ASSERT_TRUE(full.has_value());
  vn::NftState want;
  ASSERT_TRUE(vn::apply_script(want, full->text, "full").ok);
  auto cmp = compare_nft_tables(dp.nft(IPFamily::V4), want, vn::Family::Ip, "kube-proxy");
  EXPECT_NE(cmp.verdict, NftVerdict::NotEquivalent);
}

// After a proven partial the next proof compares only the objects that changed (NftScope):
// with the whole comparison run beside every scoped one (nft_whole_compare_every = 1), both
// must agree on every proof of a mixed sequence -- endpoint moves (stale chains carried from
// proof to proof), Services added and deleted, syncs that change nothing, and a failed apply
// (which ends the scope: the next proof compares whole).
TEST(ApplierNftProof, ScopedComparisonsAgreeWithWholeOnes) {
  FakeClock clock;
  ModelDataplane dp;
  LoopOptions o;
  o.mode = BackendKind::NFTables;
  o.families = {IPFamily::V4};
  o.nft_whole_compare_every = 1;
  SyncLoop loop(o, clock, dp);
  Snapshot snap = example();
  loop.replace_all(snap);
  ASSERT_TRUE(loop.tick()->ok);
  const Service* web = nullptr;
  const EndpointSlice* web_slice = nullptr;
  for (const auto& sv : snap.services) if (sv.meta.name == "web") web = &sv;
  for (const auto& sl : snap.slices) if (sl.meta.name == "web-v4") web_slice = &sl;
  ASSERT_TRUE(web && web_slice);
  const Service web0 = *web;
  const EndpointSlice slice0 = *web_slice;
  std::vector<std::string> compares;
  for (int i = 0; i < 14; ++i) {
    switch (i % 7) {
      case 0: case 1: case 3: {
        EndpointSlice m = move_web(snap, "10.244.1." + std::to_string(100 + i));
        loop.update_slice(m);
        for (auto& sl : snap.slices) if (sl.meta.name == m.meta.name) sl = m;
        break;
      }
      case 2: {  // a new Service (web-N, its own ClusterIP) with a copy of web's endpoints
        Service sv = web0;
        sv.meta.name = "web-" + std::to_string(i);
        sv.cluster_ips = {*IPAddr::parse("10.96.77." + std::to_string(10 + i))};
        EndpointSlice sl = slice0;
        sl.meta.name = "web-" + std::to_string(i) + "-v4";
        sl.meta.labels["kubernetes.io/service-name"] = sv.meta.name;
        loop.update_service(sv);
        loop.update_slice(sl);
        break;
      }
      case 4: loop.delete_service(web0.meta.ns, "web-" + std::to_string(i - 2)); break;
      case 5: dp.fail_next_applies = 1; [[fallthrough]];
      default: {
        EndpointSlice m = move_web(snap, "10.244.2." + std::to_string(100 + i));
        loop.update_slice(m);
        for (auto& sl : snap.slices) if (sl.meta.name == m.meta.name) sl = m;
      }
    }
    clock.advance_ms(2000);
    auto r = loop.tick();
    ASSERT_TRUE(r.has_value());
    for (const auto& f : r->families) compares.push_back(f.kind + ":" + f.compare + ":" + f.verdict);
  }
  std::string all;
  for (const auto& c : compares) all += c + " ";
  const Counters c = loop.counters();
  EXPECT_EQ(c.nft_scope_mismatches, 0u) << all;
  EXPECT_GE(c.nft_scoped_compares, 6u) << all;
  EXPECT_EQ(c.verify_failures, 0u) << all;
  // The kernel ends as the full transaction of the objects.
  std::string kernel;
  ASSERT_TRUE(dp.read(BackendKind::NFTables, IPFamily::V4, &kernel).ok);
  EXPECT_NE(all.find("scoped+whole"), std::string::npos) << all;
}

// A scope names what may differ: a difference in a named chain is found, one elsewhere is
// not looked at (the caller's invariant is that there is none).
TEST(ApplierNftProof, AScopeComparesOnlyTheObjectsItNames) {
  vn::NftState a, b;
  const std::string base =
      "add table ip kube-proxy\nadd chain ip kube-proxy x\nadd chain ip kube-proxy y\n"
      "add set ip kube-proxy s { type ipv4_addr ; }\n";
  ASSERT_TRUE(vn::apply_script(a, base + "add rule ip kube-proxy x drop\nadd rule ip kube-proxy y drop\n", "a").ok);
  ASSERT_TRUE(vn::apply_script(b, base + "add rule ip kube-proxy x accept\nadd element ip kube-proxy s { 10.0.0.1 }\n", "b").ok);
  NftScope x;
  x.chains = {"x"};
  auto cx = compare_nft_tables(a, b, vn::Family::Ip, "kube-proxy", &x);
  EXPECT_EQ(cx.verdict, NftVerdict::NotEquivalent);
  ASSERT_EQ(cx.differences.size(), 1u);
  EXPECT_EQ(cx.differences[0], "chain x: differs");
  NftScope none;
  EXPECT_EQ(compare_nft_tables(a, b, vn::Family::Ip, "kube-proxy", &none).verdict, NftVerdict::Identical);
  NftScope sets;
  sets.sets = {"s"};
  EXPECT_EQ(compare_nft_tables(a, b, vn::Family::Ip, "kube-proxy", &sets).differences,
            std::vector<std::string>{"set s: differs"});
  EXPECT_EQ(compare_nft_tables(a, b, vn::Family::Ip, "kube-proxy").differences.size(), 3u);
}

}  // namespace
}  // namespace kpc::applier
