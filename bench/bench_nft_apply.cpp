// `--apply-with tools|in-process` for nftables (issue 15 §2): the same transaction text applied
// with `nft -f -` (fork/exec, nft's start-up, parse, netlink) and with libnftables in the
// benchmark's own process (parse, netlink). Figures in docs/performance.md.
//
// Runs in a network namespace of its own (unshare at start; needs root), so the host's ruleset
// is never touched. Arguments: {services, 0 = tool | 1 = in-process}.
#include <benchmark/benchmark.h>
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "applier/node/nft_library.h"
#include "applier/node/process.h"
#include "bench/one_change.h"
#include "bench/synthetic_cluster.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"

namespace kpc::bench {
namespace {

struct Programs {
  std::string full, partial;
};

// The synthetic cluster of N Services × 10 endpoints: its full transaction, and the partial
// one after bench/one_change.h's change (svc-42 gains an endpoint).
const Programs& programs(int services) {
  static std::map<int, Programs> cache;
  auto it = cache.find(services);
  if (it != cache.end()) return it->second;
  SourceManager sm;
  DiagSink diags;
  Snapshot prior;
  load_snapshot_text({{"cluster.json", synthetic_cluster_json(ClusterShape{services, 10, 100})}}, LoadOptions{}, sm,
                     &prior, diags);
  Snapshot next = prior;
  add_one_endpoint(next);
  Programs p;
  if (auto full = compile_nftables(prior, IPFamily::V4, {}, diags)) p.full = full->text;
  if (auto part = compile_nftables_from_prior(next, prior, IPFamily::V4, {}, diags)) p.partial = part->text;
  return cache[services] = std::move(p);
}

applier::ProcessResult apply(bool in_process, const std::string& text) {
  if (in_process) {
    auto r = applier::nft_lib_apply(text);
    return {r.exit_code, r.out, r.err};
  }
  return applier::run_process({"nft", "-f", "-"}, text);
}

applier::ProcessResult list_table(bool in_process) {
  if (in_process) {
    auto r = applier::nft_lib_command("list table ip kube-proxy");
    return {r.exit_code, r.out, r.err};
  }
  return applier::run_process({"nft", "list", "table", "ip", "kube-proxy"});
}

// The kernel holds the full program of `services` (loaded once per size, in-process).
bool hold_full(int services) {
  static int held = -1;
  if (held == services) return true;
  applier::nft_lib_command("delete table ip kube-proxy");
  auto t0 = std::chrono::steady_clock::now();
  auto r = applier::nft_lib_apply(programs(services).full);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "loaded the full program of %d Services in-process: %.2f s (exit %d)\n", services, s, r.exit_code);
  held = r.exit_code == 0 ? services : -1;
  return held == services;
}

// Fixed cost: a one-command transaction.
void BM_NftApplyTiny(benchmark::State& state) {
  const bool lib = state.range(0) == 1;
  for (auto _ : state)
    if (apply(lib, "add table ip kpc-probe\n").exit_code != 0) state.SkipWithError("apply failed");
}
BENCHMARK(BM_NftApplyTiny)->ArgNames({"in_process"})->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(50);

void BM_NftApplyFull(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool lib = state.range(1) == 1;
  const std::string& text = programs(n).full;
  for (auto _ : state) {
    state.PauseTiming();
    applier::nft_lib_command("delete table ip kube-proxy");
    state.ResumeTiming();
    if (apply(lib, text).exit_code != 0) state.SkipWithError("apply failed");
  }
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
}
BENCHMARK(BM_NftApplyFull)->ArgNames({"services", "in_process"})->Args({1000, 0})->Args({1000, 1})
    ->Unit(benchmark::kMillisecond)->Iterations(3);

// The partial is idempotent (add chain, flush chain, add rule, add element): applied again and
// again on the full state it measures the same work each time.
void BM_NftApplyPartial(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool lib = state.range(1) == 1;
  if (!hold_full(n)) {
    state.SkipWithError("full program not loaded");
    return;
  }
  const std::string& text = programs(n).partial;
  for (auto _ : state)
    if (apply(lib, text).exit_code != 0) state.SkipWithError("apply failed");
  state.counters["KB"] = static_cast<double>(text.size()) / 1e3;
}
void BM_NftListTable(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool lib = state.range(1) == 1;
  if (!hold_full(n)) {
    state.SkipWithError("full program not loaded");
    return;
  }
  size_t bytes = 0;
  for (auto _ : state) {
    auto r = list_table(lib);
    if (r.exit_code != 0) state.SkipWithError("list failed");
    bytes = r.out.size();
  }
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
}
BENCHMARK(BM_NftApplyPartial)->ArgNames({"services", "in_process"})->Args({1000, 0})->Args({1000, 1})
    ->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_NftListTable)->ArgNames({"services", "in_process"})->Args({1000, 0})->Args({1000, 1})
    ->Unit(benchmark::kMillisecond)->Iterations(5);
// 10,000 Services: loading the full program takes minutes of kernel time (docs/performance.md).
BENCHMARK(BM_NftApplyPartial)->ArgNames({"services", "in_process"})->Args({10000, 0})->Args({10000, 1})
    ->Unit(benchmark::kMillisecond)->Iterations(5);
BENCHMARK(BM_NftListTable)->ArgNames({"services", "in_process"})->Args({10000, 0})->Args({10000, 1})
    ->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace kpc::bench

int main(int argc, char** argv) {
  if (unshare(CLONE_NEWNET) != 0) {
    std::perror("kpc_bench_nft_apply: unshare(CLONE_NEWNET) (needs root)");
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
