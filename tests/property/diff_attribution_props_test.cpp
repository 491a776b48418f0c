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

#include "tests/support/iptables_pairs.h"
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
  for (test::IptablesPair& p : random_iptables_pairs()) {
    const verifier::RulesetState *ra = &p.before, *rb = &p.after;
    const std::vector<IPAddr>& local = p.local;
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
