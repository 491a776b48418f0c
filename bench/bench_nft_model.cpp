// The nft model (verifier/nft) at 10,000 Services: what `kpc simulate --backend nftables`
// does with kube-proxy's full transaction of the reference cluster (about 610,000 commands,
// 75 MB), a one-change partial on top of it, and the printing of the result.
// Targets (docs/performance.md, "nft model at 10,000 Services"): the full transaction
// <= 15 s and <= 2 GB peak RSS; the partial and the printing fast.
#include <benchmark/benchmark.h>

#include "bench/one_change.h"
#include "bench/reference_snapshot.h"
#include "compiler/driver/compile_nftables.h"
#include "verifier/nft/internal.h"  // apply_script_eager
#include "verifier/nft/nft.h"

namespace kpc::bench {
namespace {

namespace nft = verifier::nft;

// kube-proxy's first sync of the reference cluster, as `kpc compile --backend nftables` writes it.
const std::string& full_text() {
  static const std::string text = [] {
    DiagSink diags;
    NftOptions opts;
    opts.keep_state = false;
    auto r = compile_nftables(reference_snapshot(), IPFamily::V4, opts, diags);
    return r ? r->text : std::string();
  }();
  return text;
}

// The next sync after svc-42 gains an endpoint (a partial transaction).
const std::string& partial_text() {
  static const std::string text = [] {
    Snapshot next = reference_snapshot();
    add_one_endpoint(next);
    DiagSink diags;
    auto r = compile_nftables_from_prior(next, reference_snapshot(), IPFamily::V4, {}, diags);
    return r && r->partial ? r->text : std::string();
  }();
  return text;
}

// The node after the full transaction.
const nft::NftState& full_state() {
  static const nft::NftState s = [] {
    nft::NftState st;
    nft::apply_script(st, full_text(), "full.nft");
    return st;
  }();
  return s;
}

const std::string& full_listing() {
  static const std::string text = nft::print_ruleset(full_state());
  return text;
}

void BM_NftModelApplyFull(benchmark::State& state) {
  const std::string& text = full_text();
  if (text.empty()) state.SkipWithError("compile failed");
  size_t ops = 0;
  for (auto _ : state) {
    nft::NftState st;
    auto r = nft::apply_script(st, text, "full.nft");
    if (!r.ok) state.SkipWithError("the full transaction fails");
    ops = r.operations;
    benchmark::DoNotOptimize(st);
  }
  state.counters["operations"] = static_cast<double>(ops);
  state.counters["input_MB"] = static_cast<double>(text.size()) / 1e6;
}
BENCHMARK(BM_NftModelApplyFull)->Unit(benchmark::kMillisecond)->Iterations(2);

// A copy of the 10k node with its look-up indexes built (as the node a transaction left).
nft::NftState warm_copy() {
  nft::NftState st = full_state();
  for (const auto& t : st.tables) (void)t.find_chain("");
  return st;
}

// The partial applied to the 10k node (the copy of the node is not timed).
void BM_NftModelApplyPartial(benchmark::State& state) {
  const std::string& text = partial_text();
  if (text.empty()) state.SkipWithError("not a partial");
  size_t ops = 0;
  for (auto _ : state) {
    state.PauseTiming();
    nft::NftState st = warm_copy();
    state.ResumeTiming();
    auto r = nft::apply_script(st, text, "partial.nft");
    if (!r.ok) state.SkipWithError("the partial fails");
    ops = r.operations;
    state.PauseTiming();
    { nft::NftState gone = std::move(st); }
    state.ResumeTiming();
  }
  state.counters["operations"] = static_cast<double>(ops);
}
BENCHMARK(BM_NftModelApplyPartial)->Unit(benchmark::kMillisecond)->Iterations(5);

// The next sync forced full (kube-proxy's hourly or after-failure sync: every chain flushed and
// written again), applied to the 10k node: what nft `kpc verify` does with --full. Almost every
// chain comes back unchanged, so the model defers those flushes (apply.cpp, "rules kept through
// a flush"; session 14: 1.31 s -> 0.46 s). rules_kept counts the rules it kept; deferred:0
// applies every flush where it is written (apply_script_eager, the tests' reference). Both
// include the parse of the 72 MB transaction (~0.7 s).
const std::string& forced_full_text() {
  static const std::string text = [] {
    Snapshot next = reference_snapshot();
    add_one_endpoint(next);
    DiagSink diags;
    NftPriorOptions o;
    o.force_full = true;
    auto r = compile_nftables_from_prior(next, reference_snapshot(), IPFamily::V4, o, diags);
    return r && !r->partial ? r->text : std::string();
  }();
  return text;
}
void BM_NftModelApplyFullOnNode(benchmark::State& state) {
  const std::string& text = forced_full_text();
  if (text.empty()) state.SkipWithError("not a full transaction");
  size_t ops = 0, kept = 0;
  for (auto _ : state) {
    state.PauseTiming();
    nft::NftState st = warm_copy();
    state.ResumeTiming();
    auto r = state.range(0) ? nft::apply_script(st, text, "full.nft") : nft::apply_script_eager(st, text, "full.nft");
    if (!r.ok) state.SkipWithError("the full transaction fails on the node");
    ops = r.operations;
    kept = r.rules_kept;
    state.PauseTiming();
    { nft::NftState gone = std::move(st); }
    state.ResumeTiming();
  }
  state.counters["operations"] = static_cast<double>(ops);
  state.counters["rules_kept"] = static_cast<double>(kept);
}
BENCHMARK(BM_NftModelApplyFullOnNode)->ArgNames({"deferred"})->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

// A failing partial (its last command deletes a missing chain, which nft answers with a
// "did you mean" hint from its cache of 133,000 chains): applied, then rolled back.
void BM_NftModelApplyPartialRolledBack(benchmark::State& state) {
  std::string text = partial_text() + "delete chain ip kube-proxy no-such-chain\n";
  for (auto _ : state) {
    state.PauseTiming();
    nft::NftState st = warm_copy();
    state.ResumeTiming();
    auto r = nft::apply_script(st, text, "partial.nft");
    if (r.ok) state.SkipWithError("the failing partial applies");
    state.PauseTiming();
    { nft::NftState gone = std::move(st); }
    state.ResumeTiming();
  }
}
BENCHMARK(BM_NftModelApplyPartialRolledBack)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_NftModelPrintRuleset(benchmark::State& state) {
  const nft::NftState& st = full_state();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out = nft::print_ruleset(st, {true});
    bytes = out.size();
    benchmark::DoNotOptimize(out);
  }
  state.counters["output_MB"] = static_cast<double>(bytes) / 1e6;
}
BENCHMARK(BM_NftModelPrintRuleset)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_NftModelKnftablesDump(benchmark::State& state) {
  const nft::NftState& st = full_state();
  for (auto _ : state) benchmark::DoNotOptimize(nft::print_knftables_dump(st, nft::Family::Ip, "kube-proxy"));
}
BENCHMARK(BM_NftModelKnftablesDump)->Unit(benchmark::kMillisecond)->Iterations(5);

// `--state LISTING`: the 10k listing read back.
void BM_NftModelParseListing(benchmark::State& state) {
  const std::string& text = full_listing();
  for (auto _ : state) {
    nft::NftState st;
    nft::NftError err;
    if (!nft::parse_listing(text, "listing.nft", &st, &err)) state.SkipWithError("the listing does not load");
    benchmark::DoNotOptimize(st);
  }
  state.counters["input_MB"] = static_cast<double>(text.size()) / 1e6;
}
BENCHMARK(BM_NftModelParseListing)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
