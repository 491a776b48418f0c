// Issue 16's speed target for nft `kpc verify` at 10,000 Services / 100,000 endpoints (≤ 1 s
// from files): prior = the full sync of the reference cluster, partial = the sync after one
// endpoint is added (bench/one_change.h), full = a forced full sync of the new state; the
// prior read as `nft -f` would, both transactions applied, the listings compared.
#include <benchmark/benchmark.h>

#include "bench/one_change.h"
#include "bench/reference_snapshot.h"
#include "compiler/driver/compile_nftables.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_sym/verify.h"

namespace kpc::bench {
namespace {

struct Programs {
  std::string prior, partial, full;
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

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
