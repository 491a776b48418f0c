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

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
