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

#include "compiler/driver/compile.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/state/state.h"
#include "verifier/symbolic/compare.h"
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

// The iptables programs (both families) of a random cluster and of the same after 1-4
// everyday changes (or, a fifth of the time, with masqueradeAll flipped: every Service's
// chains change), with the nodes' addresses of each family.
struct ProgramPair {
  verifier::RulesetState a, b;
  std::vector<IPAddr> local;
};
std::vector<ProgramPair> program_pairs() {
  testgen::GenOptions go;
  go.max_services = 6;
  testgen::GeneratedCluster a = make_compilable(*testgen::gen_cluster(go));
  testgen::GeneratedCluster b = a;
  int serial = 0;
  for (int m = *rc::gen::inRange(1, 5); m > 0; --m) mutate_cluster(b, ++serial);
  auto sa = load_compilable(a), sb = load_compilable(b);
  RC_PRE(sa.has_value() && sb.has_value());
  if (*rc::gen::inRange(0, 5) == 0) {
    sb = sa;
    sb->config.iptables.masquerade_all = !sa->config.iptables.masquerade_all;
  }
  std::vector<ProgramPair> out;
  for (Backend be : {Backend::IPTables, Backend::IP6Tables}) {
    DiagSink d1, d2;
    auto pa = compile_iptables(*sa, be, {}, d1), pb = compile_iptables(*sb, be, {}, d2);
    if (!pa || !pb) continue;
    IPFamily f = backend_family(be);
    auto ra = load(pa->text, f), rb = load(pb->text, f);
    RC_ASSERT(ra.has_value() && rb.has_value());
    ProgramPair p{std::move(*ra), std::move(*rb), {}};
    for (const auto* s : {&*sa, &*sb})
      for (const auto& n : s->nodes)
        for (const auto& ad : n.addresses)
          if (auto ip = IPAddr::parse(ad.address); ip && ip->family == f) p.local.push_back(*ip);
    out.push_back(std::move(p));
  }
  return out;
}

// The narrowing (step 1: the atoms a difference can reach) hides nothing: the same classes,
// witnesses and services as exploring every atom.
RC_GTEST_PROP(IptablesNarrowing, NarrowedComparisonSaysWhatEveryAtomSays, ()) {
  for (ProgramPair& p : program_pairs()) {
    verifier::sem::CompareOptions co;
    co.local_addresses = p.local;
    auto narrowed = verifier::symbolic::compare_states(p.a, p.b, co);
    co.explore_all = true;
    auto every = verifier::symbolic::compare_states(p.a, p.b, co);
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
  for (ProgramPair& p : program_pairs()) {
    const auto& ra = p.a;
    const auto& rb = p.b;
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
