// Issue 17's speed target for the IPVS back end, at 10,000 Services / 100,000 endpoints:
// the compile phase (model -> ipvs.rules, ipset.rules, iptables.rules, node.plan) <= 200 ms.
// The snapshot is loaded once outside the timed loop, as for the other back ends, so the figure
// is what a sync costs the applier, not what reading 100 MB of JSON costs `kpc compile`.
// Results are reported in docs/performance.md.
#include <benchmark/benchmark.h>

#include "bench/reference_snapshot.h"
#include "compiler/driver/compile_ipvs.h"

namespace kpc::bench {
namespace {

void BM_IpvsCompileFull(benchmark::State& state) {
  const Snapshot& snap = reference_snapshot();
  size_t bytes = 0, virtual_servers = 0;
  for (auto _ : state) {
    DiagSink diags;
    auto r = compile_ipvs(snap, IPFamily::V4, diags);
    if (!r) {
      state.SkipWithError("compile failed");
      break;
    }
    bytes = r->ipvs_rules.size() + r->ipset_rules.size() + r->iptables_rules.size() + r->node_plan.size();
    virtual_servers = r->program.virtual_servers.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["output_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["virtual_servers"] = static_cast<double>(virtual_servers);
}
BENCHMARK(BM_IpvsCompileFull)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
