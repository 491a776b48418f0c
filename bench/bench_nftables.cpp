// Issue 14's speed targets for the nftables back end, at 10,000 Services / 100,000 endpoints:
//   full compile phase (model -> nft transaction text) <= 150 ms;
//   incremental partial after one EndpointSlice change <= 5 ms; peak RSS <= 1 GB.
// Results are reported in docs/performance.md.
#include <benchmark/benchmark.h>

#include "bench/one_change.h"
#include "bench/reference_snapshot.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/driver/incremental.h"
#include "compiler/proxy/service_ports.h"

namespace kpc::bench {
namespace {

// The compile phase of a first sync as `kpc compile --backend nftables` runs it: node context,
// service ports, the transaction, its text (keep_state: also what the next sync needs).
void nft_compile_full(benchmark::State& state, bool keep_state) {
  const Snapshot& snap = reference_snapshot();
  size_t bytes = 0, ops = 0;
  NftOptions opts;
  opts.keep_state = keep_state;
  for (auto _ : state) {
    DiagSink diags;
    auto r = compile_nftables(snap, IPFamily::V4, opts, diags);
    if (!r) state.SkipWithError("compile failed");
    bytes = r->text.size();
    ops = r->sync.tx.num_operations();
    benchmark::DoNotOptimize(r);
  }
  state.counters["output_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["operations"] = static_cast<double>(ops);
}
void BM_NftCompileFull(benchmark::State& state) { nft_compile_full(state, false); }
void BM_NftCompileFullKeepState(benchmark::State& state) { nft_compile_full(state, true); }
BENCHMARK(BM_NftCompileFull)->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_NftCompileFullKeepState)->Unit(benchmark::kMillisecond)->Iterations(5);

// Where the time goes: the transaction alone (ports built already), and its printing.
void BM_NftPhaseSync(benchmark::State& state) {
  const Snapshot& snap = reference_snapshot();
  DiagSink diags;
  auto node = nft_node_context(snap, IPFamily::V4, diags);
  auto ports = proxy::build_service_ports(snap, *node);
  for (auto _ : state) {
    nftables::SyncState st;
    benchmark::DoNotOptimize(nftables::sync_nftables(ports, *node, {}, st));
  }
}
BENCHMARK(BM_NftPhaseSync)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_NftPhasePrint(benchmark::State& state) {
  const Snapshot& snap = reference_snapshot();
  DiagSink diags;
  auto node = nft_node_context(snap, IPFamily::V4, diags);
  auto ports = proxy::build_service_ports(snap, *node);
  nftables::SyncState st;
  auto r = nftables::sync_nftables(ports, *node, {}, st);
  for (auto _ : state) benchmark::DoNotOptimize(nftables::print_transaction(r.tx));
}
BENCHMARK(BM_NftPhasePrint)->Unit(benchmark::kMillisecond)->Iterations(5);

// The `kpc compile NEW --prior OLD --backend nftables` path: both snapshots' ports, the prior
// sync to rebuild kube-proxy's memory, the partial.
void BM_NftCompilePartialOneChange(benchmark::State& state) {
  const Snapshot& prior = reference_snapshot();
  static Snapshot next = [] {
    Snapshot s = reference_snapshot();
    add_one_endpoint(s);
    return s;
  }();
  size_t ops = 0;
  for (auto _ : state) {
    DiagSink diags;
    auto r = compile_nftables_from_prior(next, prior, IPFamily::V4, {}, diags);
    if (!r || !r->partial) state.SkipWithError("not a partial");
    ops = r->sync.tx.num_operations();
    benchmark::DoNotOptimize(r);
  }
  state.counters["operations"] = static_cast<double>(ops);
}
BENCHMARK(BM_NftCompilePartialOneChange)->Unit(benchmark::kMillisecond)->Iterations(3);

// The on-node path: a warm IncrementalCompiler receives one EndpointSlice update (svc-42's
// slice with an endpoint added, then without it again, alternately, so that every iteration
// is a real change) and syncs. Timed: the event, change detection, the one Service's ports,
// the partial transaction (visiting only that Service) and its text.
void BM_NftIncrementalOneChange(benchmark::State& state) {
  IncrementalCompiler ic(Target{BackendKind::NFTables, IPFamily::V4});
  ic.replace_all(reference_snapshot());
  {
    DiagSink d;
    if (!ic.sync_nft({}, d)) state.SkipWithError("first sync failed");
  }
  EndpointSlice base, grown;
  for (const auto& sl : reference_snapshot().slices)
    if (sl.meta.name == kChangedSlice) base = grown = sl;
  add_one_endpoint(grown);
  bool grow = true;
  size_t ops = 0, visited = 0;
  for (auto _ : state) {
    ic.update_slice(grow ? grown : base);
    grow = !grow;
    DiagSink diags;
    auto r = ic.sync_nft({}, diags);
    if (!r || !r->partial || r->changed_services.size() != 1) state.SkipWithError("not a one-service partial");
    ops = r->sync.tx.num_operations();
    visited = r->sync.ports_visited;
    benchmark::DoNotOptimize(r);
  }
  state.counters["operations"] = static_cast<double>(ops);
  state.counters["ports_visited"] = static_cast<double>(visited);
}
BENCHMARK(BM_NftIncrementalOneChange)->Unit(benchmark::kMillisecond)->Iterations(40);

// Warming it: every object as an event, then the first (full) sync with footprints kept.
void BM_NftIncrementalFirstSync(benchmark::State& state) {
  for (auto _ : state) {
    IncrementalCompiler ic(Target{BackendKind::NFTables, IPFamily::V4});
    ic.replace_all(reference_snapshot());
    DiagSink d;
    auto r = ic.sync_nft({}, d);
    if (!r) state.SkipWithError("first sync failed");
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_NftIncrementalFirstSync)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
