// Issue 16's speed target for nft `kpc verify` at 10,000 Services / 100,000 endpoints (≤ 1 s
// from files): prior = the full sync of the reference cluster, partial = the sync after one
// endpoint is added (bench/one_change.h), full = a forced full sync of the new state; the
// prior read as `nft -f` would, both transactions applied, the listings compared. And
// `kpc diff prior.nft next.nft` of two full transactions (next = the full sync of the changed
// cluster from nothing, as `kpc compile cluster-next.json --backend nftables` writes it).
#include <benchmark/benchmark.h>

#include "bench/one_change.h"
#include "bench/reference_snapshot.h"
#include "compiler/driver/compile_nftables.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_sym/compare.h"
#include "compiler/support/side_by_side.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/nft_trace/tracer.h"

namespace kpc::bench {
namespace {

struct Programs {
  std::string prior, partial, full, next;  ///< next: the new state's full sync from nothing
};

const Programs& programs() {
  static const Programs p = [] {
    Programs out;
    const Snapshot& old_snap = reference_snapshot();
    Snapshot new_snap = old_snap;
    add_one_endpoint(new_snap);
    DiagSink d;
    auto text = [](const NftCompileResult& r) { return r.cleanup_text + r.text; };
    out.prior = text(*compile_nftables(old_snap, IPFamily::V4, {}, d));
    out.partial = text(*compile_nftables_from_prior(new_snap, old_snap, IPFamily::V4, {}, d));
    NftPriorOptions full;
    full.force_full = true;
    out.full = text(*compile_nftables_from_prior(new_snap, old_snap, IPFamily::V4, full, d));
    out.next = text(*compile_nftables(new_snap, IPFamily::V4, {}, d));
    return out;
  }();
  return p;
}

// kpc verify --state PRIOR --partial PARTIAL --full FULL (nft), the prior read from its text.
void BM_NftVerifyPartial(benchmark::State& state) {
  const Programs& p = programs();
  for (auto _ : state) {
    verifier::nft::NftState prior;
    verifier::nft::NftError e;
    if (!verifier::nft_sym::read_nft_state(p.prior, "prior.nft", &prior, &e)) state.SkipWithError("prior fails");
    verifier::nft_sym::NftVerifyOptions vo;
    vo.local_addresses = {*IPAddr::parse("192.168.0.2")};
    auto r = verifier::nft_sym::verify_nft(prior, p.partial, p.full, vo);
    state.counters["verdict"] = static_cast<double>(r.verdict);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_NftVerifyPartial)->Unit(benchmark::kMillisecond)->Iterations(1);

// The same as `kpc verify` runs it now (verify_nft_texts): the transactions parsed while the
// prior is read, partial and full applied side by side, the listings printed side by side.
// CPU time counts both threads (MeasureProcessCPUTime).
void BM_NftVerifyPartialTexts(benchmark::State& state) {
  const Programs& p = programs();
  for (auto _ : state) {
    verifier::nft_sym::NftVerifyOptions vo;
    vo.local_addresses = {*IPAddr::parse("192.168.0.2")};
    verifier::nft_sym::NftVerifyResult r;
    verifier::nft::NftError e;
    if (!verifier::nft_sym::verify_nft_texts(p.prior, "prior.nft", p.partial, p.full, vo, "partial", "full", &r, &e))
      state.SkipWithError("prior fails");
    state.counters["verdict"] = static_cast<double>(r.verdict);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_NftVerifyPartialTexts)->Unit(benchmark::kMillisecond)->Iterations(1)->MeasureProcessCPUTime()->UseRealTime();

// `kpc diff prior.nft next.nft` as the CLI runs it (cmd_verify_nft.cpp): both texts read on
// two threads, the local addresses inferred from both states, compare_nft. Issue 16 §5's
// target: <= 5 s. CPU time counts both threads.
void diff_states(const verifier::nft::NftState& a, const verifier::nft::NftState& b, benchmark::State& state) {
  std::vector<IPAddr> local;
  std::vector<std::string> why;
  for (const auto* st : {&a, &b})
    for (IPFamily f : {IPFamily::V4, IPFamily::V6})
      for (const auto& x : verifier::nft_trace::infer_local_addresses(*st, f, &why)) local.push_back(x);
  if (local.empty()) local = {*IPAddr::parse("192.168.0.2")};
  verifier::sem::CompareOptions co;
  co.local_addresses = local;
  auto r = verifier::nft_sym::compare_nft(a, b, co);
  state.counters["differing"] = static_cast<double>(r.differing_classes);
  state.counters["atoms_explored"] = static_cast<double>(r.atoms_explored);
  benchmark::DoNotOptimize(r);
}

void BM_NftDiffFullTransactions(benchmark::State& state) {
  const Programs& p = programs();
  for (auto _ : state) {
    verifier::nft::NftState a, b;
    verifier::nft::NftError ea, eb;
    bool oka = false, okb = false;
    side_by_side([&] { okb = verifier::nft_sym::read_nft_state(p.next, "next.nft", &b, &eb); },
                                    [&] { oka = verifier::nft_sym::read_nft_state(p.prior, "prior.nft", &a, &ea); });
    if (!oka || !okb) state.SkipWithError("a side fails");
    diff_states(a, b, state);
  }
}
BENCHMARK(BM_NftDiffFullTransactions)->Unit(benchmark::kMillisecond)->Iterations(1)->MeasureProcessCPUTime()->UseRealTime();

// The comparison alone (both states read before the clock starts).
void BM_NftDiffFullTransactionsCompare(benchmark::State& state) {
  const Programs& p = programs();
  verifier::nft::NftState a, b;
  verifier::nft::NftError e;
  if (!verifier::nft_sym::read_nft_state(p.prior, "prior.nft", &a, &e) ||
      !verifier::nft_sym::read_nft_state(p.next, "next.nft", &b, &e))
    state.SkipWithError("a side fails");
  for (auto _ : state) diff_states(a, b, state);
}
BENCHMARK(BM_NftDiffFullTransactionsCompare)->Unit(benchmark::kMillisecond)->Iterations(1)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
