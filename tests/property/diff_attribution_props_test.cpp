// Issue 12: differences are filed under the Services whose packets they concern.
//
// Two random clusters (one the other after 1-4 everyday changes: endpoints, ports,
// NodePorts, traffic policies, affinity ...) are compiled and compared by behaviour.
// For every reported class, the concrete tracer is run on its witness on each side,
// and the Services it names on its paths must be exactly the ones the class is filed
// under — the attribution comes from each class's own leaves, never from a neighbour
// that shares its destination atom (NodePorts on the node's addresses). Every witness
// is traced here (compare_states itself traces a sample), and its self-check must stay silent.
//
// Size: rapidcheck's default 100 cases x 2 families; RC_PARAMS="max_success=2000" for a long run.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "compiler/driver/compile.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/state/state.h"
#include "verifier/symbolic/compare.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

struct Count {
  int pairs = 0, classes = 0;
  ~Count() {
    if (pairs)
      std::fprintf(stderr, "DiffAttribution: %d program pairs, %d differing classes checked against the tracer\n",
                   pairs, classes);
  }
};
Count counter;

std::optional<verifier::RulesetState> load(const std::string& text, IPFamily f) {
  verifier::RulesetState st = verifier::RulesetState::empty(f);
  verifier::ParseError pe;
  if (!verifier::apply_text(st, text, verifier::ApplyOptions{true, verifier::Flavor::Legacy}, &pe).ok()) return {};
  if (!verifier::trace::add_kube_proxy_jumps(st)) return {};
  return st;
}

std::set<std::string> traced_services(const verifier::RulesetState& st, const std::vector<IPAddr>& local,
                                      const verifier::trace::Packet& p) {
  verifier::trace::TraceOptions to;
  to.local_addresses = local;
  verifier::trace::Tracer t(st, to);
  std::set<std::string> out;
  for (const auto& o : t.trace(p).outcomes) out.insert(o.services.begin(), o.services.end());
  return out;
}

RC_GTEST_PROP(DiffAttribution, EveryClassIsFiledUnderTheServicesItsWitnessMeets, ()) {
  testgen::GenOptions go;
  go.max_services = 6;
  testgen::GeneratedCluster a = make_compilable(*testgen::gen_cluster(go));
  testgen::GeneratedCluster b = a;
  int serial = 0;
  for (int m = *rc::gen::inRange(1, 5); m > 0; --m) mutate_cluster(b, ++serial);
  auto sa = load_compilable(a), sb = load_compilable(b);
  RC_PRE(sa.has_value() && sb.has_value());
  for (Backend be : {Backend::IPTables, Backend::IP6Tables}) {
    DiagSink d1, d2;
    auto pa = compile_iptables(*sa, be, {}, d1), pb = compile_iptables(*sb, be, {}, d2);
    if (!pa || !pb) continue;
    IPFamily f = backend_family(be);
    auto ra = load(pa->text, f), rb = load(pb->text, f);
    RC_ASSERT(ra.has_value() && rb.has_value());
    std::vector<IPAddr> local;
    for (const auto* s : {&*sa, &*sb})
      for (const auto& n : s->nodes)
        for (const auto& ad : n.addresses)
          if (auto ip = IPAddr::parse(ad.address); ip && ip->family == f) local.push_back(*ip);
    verifier::sem::CompareOptions co;
    co.local_addresses = local;
    // Default tracing limits: most classes are attributed without the tracer's help.
    auto r = verifier::symbolic::compare_states(*ra, *rb, co);
    ++counter.pairs;
    RC_ASSERT(r.self_check_failures.empty());
    for (const auto& d : r.differences) {
      std::set<std::string> named = traced_services(*ra, local, d.witness_a);
      auto nb = traced_services(*rb, local, d.witness_b);
      named.insert(nb.begin(), nb.end());
      std::set<std::string> filed(d.services.begin(), d.services.end());
      if (named != filed) {
        std::string msg = d.witness_text + ": filed under";
        for (const auto& s : filed) msg += " " + s;
        msg += "; the tracer names";
        for (const auto& s : named) msg += " " + s;
        RC_FAIL(msg);
      }
      ++counter.classes;
    }
  }
}

}  // namespace
}  // namespace kpc::test
