// Mutation tests of `kpc verify` on nft (issue 16 §5): kube-proxy's own syncs of the
// multi-step kp-nft fixtures (kpc's nftables back end, sync by sync as the proxier decides:
// full, then partial) give correct partial transactions; each must verify as identical or
// equivalent (0 false alarms). Every mutant (one line of the partial deleted) is then
// verified and checked against independent evidence: a mutant that fails to apply must be
// "fails to apply"; one whose resulting ruleset (`nft list ruleset`) differs from the full
// sync's must not be "identical"; one that changes a sampled packet's fate (the concrete nft
// tracer on both states) must be "not equivalent" (or "cannot prove"), never "equivalent".
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <random>

#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "compiler/proxy/change_tracker.h"
#include "compiler/proxy/service_ports.h"
#include "compiler/support/text.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/explorer.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::verifier::nft_sym {
namespace {
namespace vn = kpc::verifier::nft;

Snapshot load(const std::string& path) {
  SourceManager sm;
  DiagSink diags;
  Snapshot snap;
  EXPECT_TRUE(load_snapshot({path}, LoadOptions{}, sm, &snap, diags)) << diags.render(sm);
  return snap;
}

struct Step {
  vn::NftState prior;
  std::string partial, full;
  std::string label;
};

// The fixture's syncs: for each step after the first, (state before, partial, full).
std::vector<Step> steps_of(const std::string& fixture) {
  std::string dir = test::source_path("fixtures/" + fixture);
  YAML::Node c = YAML::LoadFile(dir + "/case.yaml");
  std::vector<std::string> snaps;
  for (const auto& s : c["steps"])
    snaps.push_back(dir + "/" + s["dir"].as<std::string>() + "/" + s["files"]["snapshot"].as<std::string>());
  std::vector<Step> out;
  nftables::SyncState proxier;
  vn::NftState node;
  std::optional<Snapshot> prior;
  int64_t now = 0;
  for (size_t i = 0; i < snaps.size(); ++i) {
    Snapshot snap = load(snaps[i]);
    DiagSink diags;
    auto ctx = nft_node_context(snap, IPFamily::V4, diags);
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
      out.push_back(Step{node, partial, full, fixture + " step " + std::to_string(i + 1)});
    auto a = vn::apply_script(node, partial, "sync.nft");
    EXPECT_TRUE(a.ok) << fixture << ": " << (a.error ? a.error->render() : "");
    if (!a.ok) return out;
    prior = std::move(snap);
  }
  return out;
}

// A packet's outcomes as comparable text (kernel numgen shares on both sides).
std::string fate(nft_trace::Tracer& t, const nft_trace::Packet& p) {
  std::vector<std::string> v;
  for (const auto& o : t.trace(p).outcomes)
    v.push_back(std::string(nft_trace::verdict_name(o.verdict)) + " " + o.route + " " + o.dnat_text +
                (o.masquerade ? " masq" : "") + " mark " + std::to_string(o.final_mark) + " p " +
                o.probability.fraction() + " " + o.unknown_reason);
  std::sort(v.begin(), v.end());
  std::string s;
  for (auto& x : v) s += x + "; ";
  return s;
}

// Does some sampled packet meet another fate in the two states?
bool fate_differs(const vn::NftState& a, const vn::NftState& b, const std::vector<IPAddr>& local) {
  symbolic::Universe u = build_universe({&a, &b}, IPFamily::V4, local);
  nft_trace::TraceOptions to;
  to.local_addresses = local;
  to.kernel_numgen = true;
  nft_trace::Tracer ta(a, to), tb(b, to);
  std::vector<uint16_t> ports = {80, 443, 53, 3001, 3002, 8080, 30000, 30080};
  std::string la = vn::print_ruleset(a) + vn::print_ruleset(b);
  for (size_t p = la.find(" . "); p != std::string::npos; p = la.find(" . ", p + 1)) {
    unsigned v = 0;
    size_t k = p + 3;
    while (k < la.size() && isdigit(static_cast<unsigned char>(la[k])) && v < 100000) v = v * 10 + unsigned(la[k++] - '0');
    if (k > p + 3 && v <= 65535) ports.push_back(static_cast<uint16_t>(v));
  }
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  for (size_t i = 0; i < u.atom_count(); ++i) {
    IPAddr dst = symbolic::addr_from_value(u.atom(i).first, IPFamily::V4);
    for (uint16_t port : ports)
      for (uint8_t proto : {6, 17})
        for (int from = 0; from < 3; ++from) {
          nft_trace::Packet p;
          p.src = *IPAddr::parse(from == 0 ? "10.0.1.5" : "203.0.113.9");
          p.dst = dst;
          p.proto = proto;
          p.sport = 40000;
          p.dport = port;
          p.origin = from == 0 ? trace::Origin::Pod : from == 1 ? trace::Origin::External : trace::Origin::Node;
          if (from == 2) p.src = local[0];
          if (from != 2) p.in_iface = "eth0";
          p.out_iface = "eth0";
          if (fate(ta, p) != fate(tb, p)) return true;
        }
  }
  return false;
}

TEST(NftVerifyMutations, CorrectPartialsVerifyAndMutantsAreCaught) {
  std::vector<IPAddr> local = {*IPAddr::parse("10.0.0.2"), *IPAddr::parse("192.168.0.2")};
  NftVerifyOptions vo;
  vo.local_addresses = local;
  size_t partials = 0, mutants = 0, failing = 0, changed = 0, fate_changing = 0, reported = 0, narrowing_checked = 0;
  for (const char* fx : {"kp-nft-sync-proxy-rules-repeated", "kp-nft-build-service-map-add-remove",
                         "kp-nft-build-service-map-service-update",
                         "kp-nft-terminating-endpoints-traffic-policy-local-ready-endpoints-exist"}) {
    for (const Step& s : steps_of(fx)) {
      ++partials;
      auto ok = verify_nft(s.prior, s.partial, s.full, vo);
      EXPECT_TRUE(ok.verdict == Verdict::Identical || ok.verdict == Verdict::Equivalent)
          << s.label << ": a correct partial is " << verdict_name(ok.verdict) << "\n" << format_text(ok);
      vn::NftState want = s.prior;
      ASSERT_TRUE(vn::apply_script(want, s.full, "full.nft").ok) << s.label;
      const std::string want_listing = vn::print_ruleset(want);
      auto lines = split(s.partial, '\n');
      for (size_t i = 0; i < lines.size(); ++i) {
        std::string_view l = trim(lines[i]);
        if (l.empty() || l[0] == '#') continue;
        std::string mutant;
        for (size_t j = 0; j < lines.size(); ++j)
          if (j != i) mutant += std::string(lines[j]) + "\n";
        ++mutants;
        auto r = verify_nft(s.prior, mutant, s.full, vo);
        std::string where = s.label + ", line " + std::to_string(i + 1) + " deleted: " + std::string(l);
        vn::NftState got = s.prior;
        if (!vn::apply_script(got, mutant, "mutant.nft").ok) {
          ++failing;
          EXPECT_EQ(r.verdict, Verdict::FailsToApply) << where;
          ++reported;
          continue;
        }
        if (vn::print_ruleset(got) == want_listing) {
          EXPECT_EQ(r.verdict, Verdict::Identical) << where;
          continue;
        }
        ++changed;
        EXPECT_NE(r.verdict, Verdict::Identical) << where;
        if (r.verdict != Verdict::Identical) ++reported;
        if (fate_differs(want, got, local)) {
          ++fate_changing;
          EXPECT_TRUE(r.verdict == Verdict::NotEquivalent || r.verdict == Verdict::CannotProve)
              << where << ": a packet's fate changes, verdict " << verdict_name(r.verdict);
        }
        if (r.behaviour) {
          EXPECT_TRUE(r.behaviour->self_check_failures.empty()) << where;
          // The atom narrowing (affected.cpp) loses nothing: every atom explored finds the same.
          symbolic::CompareOptions co;
          co.local_addresses = local;
          co.explore_all = true;
          auto every = compare_nft(want, got, co);
          EXPECT_EQ(every.differing_classes, r.behaviour->differing_classes) << where;
          EXPECT_EQ(every.undecided_classes, r.behaviour->undecided_classes) << where;
          ++narrowing_checked;
        }
      }
    }
  }
  EXPECT_GE(partials, 4u);
  EXPECT_GE(mutants, 50u);
  std::printf("[ nft mutations ] %zu correct partials verified; %zu mutants: %zu fail to apply, %zu change the "
              "ruleset (%zu of them a sampled packet's fate); %zu reported; narrowing = every atom on %zu\n",
              partials, mutants, failing, changed, fate_changing, reported, narrowing_checked);
  EXPECT_GT(narrowing_checked, 20u);
}

}  // namespace
}  // namespace kpc::verifier::nft_sym
