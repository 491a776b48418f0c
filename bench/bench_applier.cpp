// Issue 15 §5: kpc-applier's one-change sync at 10,000 Services / 100,000 endpoints, on kpc's
// models as the kernel (ModelDataplane), so that what is measured is the applier's own work:
// compile, the proof (verify), and the held state's upkeep — not the kernel's commit, which the
// soak (scripts/soak.sh single) measures in a namespace with the real tools.
// Each iteration replaces one endpoint of one EndpointSlice (as the soak does) and syncs; the
// split per sync is in the counters (ms, the mean over the iterations).
// docs/performance.md "Issue 15 §5 — session 9".
#include <benchmark/benchmark.h>

#include <map>

#include "applier/node/clock.h"
#include "applier/node/dataplane.h"
#include "applier/node/sync_loop.h"
#include "bench/synthetic_cluster.h"
#include "compiler/model/loader.h"

namespace kpc::bench {
namespace {

const Snapshot& cluster() {
  static const Snapshot s = [] {
    SourceManager sm;
    DiagSink diags;
    Snapshot out;
    load_snapshot_text({{"cluster.json", synthetic_cluster_json(ClusterShape{})}}, LoadOptions{}, sm, &out, diags);
    return out;
  }();
  return s;
}

void one_change_sync(benchmark::State& state, BackendKind mode) {
  applier::FakeClock clock;
  applier::ModelDataplane dp;
  applier::LoopOptions o;
  o.mode = mode;
  o.families = {IPFamily::V4};
  o.sync_period_ms = 1'000'000'000;  // no drift check inside the measurement
  applier::SyncLoop loop(o, clock, dp);
  Snapshot snap = cluster();
  loop.replace_all(snap);
  auto first = loop.sync_now();
  if (!first.ok) return state.SkipWithError("the first sync failed");
  double compile = 0, verify = 0, apply = 0, redone = 0;
  std::string verdicts, want;
  std::map<std::string, double> proof;
  int n = 0;
  for (auto _ : state) {
    state.PauseTiming();
    // svc-(n*37 % 10000): its slice's first endpoint replaced by a fresh address.
    EndpointSlice& sl = snap.slices[(static_cast<size_t>(n) * 37) % snap.slices.size()];
    sl.endpoints[0].addresses = {*IPAddr::parse("10.201." + std::to_string(n / 250) + "." + std::to_string(n % 250 + 1))};
    ++n;
    clock.advance_ms(1000);
    state.ResumeTiming();
    loop.update_slice(sl);
    auto r = loop.sync_now();
    if (!r.ok || r.families.empty() || r.families[0].kind != "partial")
      return state.SkipWithError("the sync failed or was not partial");
    const auto& f = r.families[0];
    if (f.verdict != "identical" && f.verdict != "equivalent") return state.SkipWithError(("proof: " + f.verdict).c_str());
    compile += f.compile_ms, verify += f.verify_ms, apply += f.apply_ms;
    verdicts = f.verdict;
    redone += static_cast<double>(f.want_redone);
    for (const auto& [k, v] : f.proof_ms) proof[k] += v;
    if (!f.want.empty() && want.find(f.want) == std::string::npos) want += (want.empty() ? "" : "+") + f.want;
  }
  state.counters["compile_ms"] = compile / n;
  state.counters["verify_ms"] = verify / n;
  state.counters["apply_model_ms"] = apply / n;
  state.counters["held_from_dump"] = static_cast<double>(loop.counters().held_from_dump);
  // nftables: objects of the proof's reference state redone per change (nft_want.h)
  if (!want.empty()) state.counters["want_objects"] = redone / n;
  for (const auto& [k, v] : proof) state.counters["proof_" + k + "_ms"] = v / n;
  state.SetLabel("verdict " + verdicts + (first.families[0].held.empty() ? "" : ", held from the " + first.families[0].held) +
                 (want.empty() ? "" : ", reference by " + want));
}

void BM_ApplierOneChangeIptables(benchmark::State& state) { one_change_sync(state, BackendKind::IPTables); }
BENCHMARK(BM_ApplierOneChangeIptables)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_ApplierOneChangeNftables(benchmark::State& state) { one_change_sync(state, BackendKind::NFTables); }
BENCHMARK(BM_ApplierOneChangeNftables)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
