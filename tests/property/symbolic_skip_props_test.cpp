// The iptables explorer passes over a rule that no packet of the class can match without
// splitting the class through its tests (verifier/symbolic/engine.cpp, misses_whole: a node's
// address walked every `--dst-type LOCAL` rule of KUBE-EXTERNAL-SERVICES for each of 44,000
// atoms, copying the class three times a test). The leaves must be exactly those of the plain
// splitting: random clusters (one the other after 1-4 everyday changes), both families, every
// destination atom and origin explored with the skip on and off — the same leaves in the same
// order (class, probability, outcome, services).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "compiler/driver/compile.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/state/state.h"
#include "verifier/symbolic/engine.h"
#include "verifier/trace/tracer.h"

namespace kpc::test {
namespace {

struct Count {
  int programs = 0;
  size_t leaves = 0;
  ~Count() {
    if (programs)
      std::fprintf(stderr, "SymbolicSkip: %d programs, %zu leaves compared\n", programs, leaves);
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

// Every leaf of every atom and origin of `st`, as text (services by name, so that two
// universes compare).
std::vector<std::string> all_leaves(const verifier::RulesetState& a, const verifier::RulesetState& b,
                                    const verifier::RulesetState& st, const std::vector<IPAddr>& local, bool skip) {
  verifier::symbolic::detail::skip_missing_rules = skip;
  verifier::sem::Universe u = verifier::symbolic::build_universe({&a, &b}, local);
  verifier::symbolic::Engine engine(st, u);
  std::vector<std::string> out;
  for (size_t ai = 0; ai < u.atom_count(); ++ai)
    for (auto origin : {verifier::sem::Origin::Arriving, verifier::sem::Origin::Node}) {
      verifier::sem::PacketClass start = verifier::sem::PacketClass::everything(u);
      auto [lo, hi] = u.atom(ai);
      start.dst = verifier::sem::AddrSet::range(lo, hi);
      for (const auto& l : engine.explore(start, origin)) {
        std::string t = std::to_string(ai) + "|" + l.cls.key() + "|" + l.prob.fraction() + "|" +
                        std::to_string(static_cast<int>(l.outcome.verdict)) + "|" + l.outcome.route + "|" +
                        std::to_string(l.outcome.dnat) + "/" + std::to_string(static_cast<uint64_t>(l.outcome.dnat_addr >> 64)) + "." +
                        std::to_string(static_cast<uint64_t>(l.outcome.dnat_addr)) +
                        ":" + std::to_string(l.outcome.dnat_port) + "|" + std::to_string(l.outcome.masquerade) + "|" +
                        l.outcome.snat + "|" + std::to_string(l.outcome.mark_const) + "/" +
                        std::to_string(l.outcome.mark_value) + "/" + std::to_string(l.outcome.mark_flip) + "|" +
                        std::to_string(l.outcome.connmark) + "/" + std::to_string(l.outcome.ct_const) + "/" +
                        std::to_string(l.outcome.ct_value) + "/" + std::to_string(l.outcome.ct_flip) + "/" +
                        std::to_string(l.outcome.ct_from_mark) + "|" + l.outcome.options + "|" + l.outcome.affinity +
                        "|" + l.outcome.unknown + "|";
        for (uint32_t s : l.services) t += u.services[s] + ",";
        out.push_back(std::move(t));
      }
    }
  verifier::symbolic::detail::skip_missing_rules = true;
  return out;
}

RC_GTEST_PROP(SymbolicSkip, SkippingRulesThatMissTheWholeClassKeepsEveryLeaf, ()) {
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
    for (const auto* st : {&*ra, &*rb}) {
      auto plain = all_leaves(*ra, *rb, *st, local, false);
      auto skipped = all_leaves(*ra, *rb, *st, local, true);
      RC_ASSERT(!plain.empty());
      if (plain != skipped) {
        size_t i = 0;
        while (i < plain.size() && i < skipped.size() && plain[i] == skipped[i]) ++i;
        RC_FAIL("leaf " + std::to_string(i) + " of " + std::to_string(plain.size()) + "/" +
                std::to_string(skipped.size()) + ": plain " + (i < plain.size() ? plain[i] : "(none)") +
                "\nskipped " + (i < skipped.size() ? skipped[i] : "(none)"));
      }
      ++counter.programs;
      counter.leaves += plain.size();
    }
  }
}

}  // namespace
}  // namespace kpc::test
