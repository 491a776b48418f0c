// Issue 16 §5: the cross-back-end diff (iptables vs nftables programs of one snapshot) at 1,000
// and 10,000 Services (10 endpoints each); target <= 10 s at 10,000. Each iteration does what
// `kpc diff SNAPSHOT --from-backend iptables --to-backend nftables` does after compiling: load
// both programs into their verifier models, build the front ends and the packet space, trace
// every packet with both tracers. docs/performance.md.
#include <benchmark/benchmark.h>

#include <map>

#include "bench/synthetic_cluster.h"
#include "compiler/driver/compile.h"
#include "compiler/driver/compile_nftables.h"
#include "compiler/model/loader.h"
#include "verifier/cross/compare.h"
#include "verifier/nft/nft.h"
#include "verifier/trace/tracer.h"

namespace kpc::bench {
namespace {

struct Texts {
  std::string ipt, nft;
};

const Texts& texts(int services) {
  static std::map<int, Texts> cache;
  auto it = cache.find(services);
  if (it != cache.end()) return it->second;
  ClusterShape shape;
  shape.services = services;
  SourceManager sm;
  DiagSink d;
  Snapshot s;
  load_snapshot_text({{"cluster.json", synthetic_cluster_json(shape)}}, LoadOptions{}, sm, &s, d);
  Texts t;
  t.ipt = compile_iptables(s, Backend::IPTables, {}, d)->text;
  NftOptions no;
  no.keep_state = false;
  t.nft = compile_nftables(s, IPFamily::V4, no, d)->text;
  return cache.emplace(services, std::move(t)).first->second;
}

void BM_CrossDiff(benchmark::State& st) {
  const Texts& t = texts(static_cast<int>(st.range(0)));
  size_t packets = 0, surprises = 0;
  for (auto _ : st) {
    verifier::RulesetState ipt = verifier::RulesetState::empty(IPFamily::V4);
    verifier::ApplyOptions o;
    o.discard_on_failure = true;
    verifier::apply_text(ipt, t.ipt, o);
    verifier::trace::add_kube_proxy_jumps(ipt);
    verifier::nft::NftState nft;
    verifier::nft::apply_script(nft, t.nft, "bench.nft");
    std::vector<IPAddr> local = {*IPAddr::parse("10.0.0.1")};
    auto fa = verifier::cross::make_iptables_frontend(ipt, local);
    auto fb = verifier::cross::make_nft_frontend(nft, IPFamily::V4, local);
    auto r = verifier::cross::compare(*fa, *fb, verifier::cross::build_space(*fa, *fb, IPFamily::V4, local));
    packets = r.packets;
    surprises = r.surprises;
    benchmark::DoNotOptimize(r);
  }
  st.counters["packets"] = static_cast<double>(packets);
  st.counters["surprises"] = static_cast<double>(surprises);
}
BENCHMARK(BM_CrossDiff)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
