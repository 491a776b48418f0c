// The iptables explorer passes over a rule that no packet of the class can match without
// splitting the class through its tests (verifier/symbolic/engine.cpp, misses_whole: each of
// ~110,000 destination atoms at 10,000 Services walked every `--dst-type LOCAL` rule of
// KUBE-EXTERNAL-SERVICES, copying the class three times a test). The leaves must be exactly those of the plain
// splitting: random clusters (one the other after 1-4 everyday changes), both families, every
// destination atom and origin explored with the skip on and off — the same leaves in the same
// order (class, probability, outcome, services). And the iptables narrowing (which atoms a
// difference can reach: verifier/symbolic/affected.cpp, sparse atom sets since session 18)
// against exploring every atom.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/support/iptables_pairs.h"
#include "verifier/symbolic/compare.h"
#include "verifier/symbolic/engine.h"

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

// The narrowing (step 1: the atoms a difference can reach) hides nothing: the same classes,
// witnesses and services as exploring every atom.
RC_GTEST_PROP(IptablesNarrowing, NarrowedComparisonSaysWhatEveryAtomSays, ()) {
  for (IptablesPair& p : random_iptables_pairs(5)) {
    verifier::sem::CompareOptions co;
    co.local_addresses = p.local;
    auto narrowed = verifier::symbolic::compare_states(p.before, p.after, co);
    co.explore_all = true;
    auto every = verifier::symbolic::compare_states(p.before, p.after, co);
    RC_ASSERT(narrowed.differing_classes == every.differing_classes);
    RC_ASSERT(narrowed.undecided_classes == every.undecided_classes);
    RC_ASSERT(narrowed.services_differing == every.services_differing);
    RC_ASSERT(narrowed.differences.size() == every.differences.size());
    for (size_t i = 0; i < narrowed.differences.size(); ++i) {
      RC_ASSERT(narrowed.differences[i].cls == every.differences[i].cls);
      RC_ASSERT(narrowed.differences[i].witness_text == every.differences[i].witness_text);
      RC_ASSERT(narrowed.differences[i].services == every.differences[i].services);
    }
    RC_ASSERT(narrowed.self_check_failures.empty());
  }
}

RC_GTEST_PROP(SymbolicSkip, SkippingRulesThatMissTheWholeClassKeepsEveryLeaf, ()) {
  for (IptablesPair& p : random_iptables_pairs(5)) {
    const auto& ra = p.before;
    const auto& rb = p.after;
    const auto& local = p.local;
    for (const auto* st : {&ra, &rb}) {
      auto plain = all_leaves(ra, rb, *st, local, false);
      auto skipped = all_leaves(ra, rb, *st, local, true);
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
