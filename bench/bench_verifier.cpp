// Issue 5 speed targets, at 10,000 Services / 100,000 endpoints:
//   `kpc verify` of a partial <= 1 s; `kpc diff` of two full programs <= 5 s; peak RSS <= 2 GB.
// Each benchmark runs what the command does after reading its files: build the states
// from the program texts, then verify / compare. Google Benchmark's CPU column counts
// the benchmark's own thread only: apply_text parses a large program's tail on a second
// thread, so the wall-clock column (Time) is the figure. docs/performance.md.
#include <benchmark/benchmark.h>

#include "bench/one_change.h"
#include "bench/synthetic_cluster.h"
#include "compiler/driver/compile.h"
#include "compiler/model/loader.h"
#include "verifier/equiv/verify.h"
#include "verifier/symbolic/compare.h"
#include "verifier/trace/tracer.h"

namespace kpc::bench {
namespace {

struct Programs {
  std::string old_full, new_full, partial, renamed;
};

Snapshot load(const std::string& json) {
  SourceManager sm;
  DiagSink diags;
  Snapshot s;
  load_snapshot_text({{"cluster.json", json}}, LoadOptions{}, sm, &s, diags);
  return s;
}

// The reference cluster and the same cluster with one endpoint added to one Service.
const Programs& programs() {
  static const Programs p = [] {
    Programs out;
    Snapshot old_snap = load(synthetic_cluster_json(ClusterShape{}));
    Snapshot new_snap = old_snap;
    add_one_endpoint(new_snap);
    DiagSink d;
    out.old_full = compile_iptables(old_snap, Backend::IPTables, {}, d)->text;
    out.new_full = compile_iptables(new_snap, Backend::IPTables, {}, d)->text;
    out.partial = compile_iptables_from_prior(new_snap, old_snap, Backend::IPTables, {}, d)->text;
    // The same rules under other chain names (a pre-upgrade diff that must come out equivalent).
    out.renamed = out.old_full;
    for (size_t q = 0; (q = out.renamed.find("KUBE-SEP-", q)) != std::string::npos; q += 9) out.renamed[q + 7] = 'Q';
    return out;
  }();
  return p;
}

// As kpc reads a rule file: in place, a large program parsed on two threads; with a
// store, the rules are interned there (kpc diff reads both sides into one store).
verifier::RulesetState state_of(const std::string& text, std::shared_ptr<verifier::RuleStore> store = nullptr) {
  verifier::RulesetState s = verifier::RulesetState::empty(IPFamily::V4, std::move(store));
  verifier::ApplyOptions o{true, verifier::Flavor::Legacy};
  o.discard_on_failure = true;
  verifier::apply_text(s, text, o);
  return s;
}

const std::vector<IPAddr> kLocal = {*IPAddr::parse("192.168.0.2")};

// kpc verify --state OLD_FULL --partial PARTIAL --full NEW_FULL (identical).
void BM_VerifyPartial(benchmark::State& state) {
  const Programs& p = programs();
  for (auto _ : state) {
    verifier::RulesetState prior = state_of(p.old_full);
    verifier::VerifyOptions vo;
    vo.local_addresses = kLocal;
    auto r = verifier::verify(prior, p.partial, p.new_full, verifier::Flavor::Legacy, vo);
    if (r.verdict != verifier::Verdict::Identical) state.SkipWithError("not identical");
  }
}
BENCHMARK(BM_VerifyPartial)->Unit(benchmark::kMillisecond)->Iterations(3);

// Only the verify step, the prior already loaded (what an applier holding its state pays).
void BM_VerifyPartialPriorLoaded(benchmark::State& state) {
  const Programs& p = programs();
  verifier::RulesetState prior = state_of(p.old_full);
  for (auto _ : state) {
    verifier::VerifyOptions vo;
    vo.local_addresses = kLocal;
    auto r = verifier::verify(prior, p.partial, p.new_full, verifier::Flavor::Legacy, vo);
    if (r.verdict != verifier::Verdict::Identical) state.SkipWithError("not identical");
  }
}
BENCHMARK(BM_VerifyPartialPriorLoaded)->Unit(benchmark::kMillisecond)->Iterations(3);

void diff(benchmark::State& state, const std::string& a, const std::string& b, bool expect_equivalent) {
  size_t classes = 0, explored = 0;
  for (auto _ : state) {
    auto store = std::make_shared<verifier::RuleStore>();
    verifier::RulesetState sa = state_of(a, store), sb = state_of(b, store);
    verifier::trace::add_kube_proxy_jumps(sa);
    verifier::trace::add_kube_proxy_jumps(sb);
    verifier::sem::CompareOptions co;
    co.local_addresses = kLocal;
    auto r = verifier::symbolic::compare_states(sa, sb, co);
    if (r.equivalent() != expect_equivalent) state.SkipWithError("unexpected verdict");
    classes = r.differing_classes;
    explored = r.atoms_explored;
  }
  state.counters["differing_classes"] = static_cast<double>(classes);
  state.counters["atoms_explored"] = static_cast<double>(explored);
}

// kpc diff OLD_FULL NEW_FULL: one Service gained an endpoint.
void BM_DiffFullOneChange(benchmark::State& state) { diff(state, programs().old_full, programs().new_full, false); }
BENCHMARK(BM_DiffFullOneChange)->Unit(benchmark::kMillisecond)->Iterations(2);

// kpc diff OLD_FULL RENAMED: every endpoint chain renamed (equivalent).
void BM_DiffFullRenamed(benchmark::State& state) { diff(state, programs().old_full, programs().renamed, true); }
BENCHMARK(BM_DiffFullRenamed)->Unit(benchmark::kMillisecond)->Iterations(2);

// The worst case: every destination explored on both sides (no narrowing).
void BM_DiffFullEveryAtom(benchmark::State& state) {
  const Programs& p = programs();
  for (auto _ : state) {
    auto store = std::make_shared<verifier::RuleStore>();
    verifier::RulesetState sa = state_of(p.old_full, store), sb = state_of(p.new_full, store);
    verifier::trace::add_kube_proxy_jumps(sa);
    verifier::trace::add_kube_proxy_jumps(sb);
    verifier::sem::CompareOptions co;
    co.local_addresses = kLocal;
    co.explore_all = true;
    auto r = verifier::symbolic::compare_states(sa, sb, co);
    state.counters["atoms_explored"] = static_cast<double>(r.atoms_explored);
    state.counters["leaves"] = static_cast<double>(r.leaves);
  }
}
BENCHMARK(BM_DiffFullEveryAtom)->Unit(benchmark::kMillisecond)->Iterations(1);

// Only reading: every line of the full program split and parsed into typed rules,
// and each rule printed in canonical save form (what interning a new rule costs),
// on one thread, with no state machine.
void BM_ParseFullProgram(benchmark::State& state) {
  size_t rules = 0;
  const Programs& p = programs();  // built before the clock runs
  for (auto _ : state) {
    verifier::RestoreReader reader(p.old_full, verifier::ParseOptions{});
    rules = 0;
    for (auto ev = reader.next(); ev != verifier::RestoreReader::Event::End; ev = reader.next())
      if (ev == verifier::RestoreReader::Event::Op && reader.op().kind == ir::OpKind::Append) {
        benchmark::DoNotOptimize(verifier::RuleStore::canonical_text(reader.op().rule, IPFamily::V4));
        ++rules;
      }
  }
  state.counters["rules"] = static_cast<double>(rules);
}
BENCHMARK(BM_ParseFullProgram)->Unit(benchmark::kMillisecond)->Iterations(2);

// Reading one full program into a state (what each side costs before comparing).
void BM_LoadFullProgram(benchmark::State& state) {
  const Programs& p = programs();  // built before the clock runs
  for (auto _ : state) benchmark::DoNotOptimize(state_of(p.old_full));
}
BENCHMARK(BM_LoadFullProgram)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace kpc::bench

BENCHMARK_MAIN();
