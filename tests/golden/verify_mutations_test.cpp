// Mutation tests for the verifier (issue 5, part 5). For every partial step of the
// golden fixtures (kube-proxy's repeated-sync expectations among them) the
// correct partial must verify identical (0 false alarms), and each mutant of it —
// a dropped rule, a dropped -X, a retargeted DNAT, a changed probability, two
// load-balancing rules swapped, a dropped masquerade jump — must be reported:
// never "identical" when the kernel state differs, and "not equivalent" (with a
// witness the concrete tracer confirms) when the mutation changes behaviour.
// "equivalent" claims are cross-checked with the concrete tracer on sampled
// packets, and the semantic-hash narrowing against exploring every atom.
// Equivalence cases (renamed chains, services' rules shuffled) must be equivalent.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>

#include "tests/support/golden.h"
#include "tests/support/test_util.h"
#include "tests/support/text_lines.h"
#include "verifier/equiv/verify.h"
#include "verifier/sem/report.h"
#include "verifier/symbolic/compare.h"
#include "verifier/trace/tracer.h"

namespace kpc::verifier {
namespace {

using test::join_lines;
using test::lines_of;

struct Mutant {
  std::string kind, text, what;
};

// Replaces the last address component of a DNAT target ("10.0.0.1:80" -> "10.0.0.77:80").
std::string retarget(const std::string& line) {
  size_t p = line.find("--to-destination ");
  if (p == std::string::npos) return "";
  p += 17;
  size_t colon = line.rfind(':');
  bool v6 = line[p] == '[';
  size_t end = v6 ? line.find(']', p) : colon;
  size_t sep = v6 ? line.rfind(':', end) : line.rfind('.', end);
  if (sep == std::string::npos || sep < p) return "";
  return line.substr(0, sep + 1) + (v6 ? "77" : "77") + line.substr(end);
}

std::vector<Mutant> mutants(const std::string& partial) {
  auto ls = lines_of(partial);
  std::vector<Mutant> out;
  auto without = [&](size_t i) {
    auto c = ls;
    c.erase(c.begin() + static_cast<long>(i));
    return join_lines(c);
  };
  size_t rules = 0;
  for (const auto& l : ls) rules += l.rfind("-A ", 0) == 0;
  size_t stride = std::max<size_t>(1, rules / 10), seen = 0;
  for (size_t i = 0; i < ls.size(); ++i) {
    const std::string& l = ls[i];
    if (l.rfind("-X ", 0) == 0) out.push_back({"drop -X", without(i), l});
    if (l.rfind("-A ", 0) != 0) continue;
    if (seen++ % stride == 0) out.push_back({"drop rule", without(i), l});
    if (l.find("-j KUBE-MARK-MASQ") != std::string::npos) out.push_back({"drop masquerade jump", without(i), l});
    if (auto r = retarget(l); !r.empty()) {
      auto c = ls;
      c[i] = r;
      out.push_back({"retarget DNAT", join_lines(c), l});
    }
    size_t p = l.find("--probability ");
    if (p != std::string::npos) {
      auto c = ls;
      size_t e = l.find(' ', p + 14);
      c[i] = l.substr(0, p + 14) + "0.1000000000" + l.substr(e);
      out.push_back({"change probability", join_lines(c), l});
      // Swap with the next rule of the same chain (the cascade's next endpoint).
      std::string chain = l.substr(3, l.find(' ', 3) - 3);
      if (i + 1 < ls.size() && ls[i + 1].rfind("-A " + chain + " ", 0) == 0) {
        auto s = ls;
        std::swap(s[i], s[i + 1]);
        out.push_back({"swap load-balancing rules", join_lines(s), l});
      }
    }
  }
  // At most 14 mutants per step (every kind kept): a large-cluster partial has thousands
  // of rules, and each mutant is verified, cross-checked and traced. Under ASan (memory
  // safety, not coverage, is that run's job) 4, still one of every kind: the release run
  // covers the full sample.
#ifdef KPC_TEST_SANITIZED
  constexpr size_t kMax = 4;
#else
  constexpr size_t kMax = 14;
#endif
  if (out.size() > kMax) {
    std::vector<Mutant> kept;
    std::vector<std::string> kinds;
    for (auto& m : out)
      if (std::find(kinds.begin(), kinds.end(), m.kind) == kinds.end()) kinds.push_back(m.kind), kept.push_back(m);
    size_t step = out.size() / (kMax - std::min<size_t>(kept.size(), kMax - 1));
    for (size_t i = step / 2; i < out.size() && kept.size() < kMax; i += step)
      if (std::find_if(kept.begin(), kept.end(), [&](const Mutant& k) { return k.what == out[i].what && k.kind == out[i].kind; }) == kept.end())
        kept.push_back(out[i]);
    out = std::move(kept);
  }
  return out;
}

// Behaviour oracle for "equivalent" claims: the concrete tracer on sampled packets.
bool concrete_agree(const RulesetState& a, const RulesetState& b, const std::vector<IPAddr>& local, std::string* why) {
  sem::Universe u = symbolic::build_universe({&a, &b}, local);
  trace::TraceOptions to;
  to.local_addresses = local;
  trace::Tracer ta(a, to), tb(b, to);
  std::mt19937 rng(7);
  // At most 48 destination atoms (a large-cluster program has thousands), always the first ones.
  std::vector<size_t> atoms;
  for (size_t i = 0; i < u.atom_count(); ++i) atoms.push_back(i);
  if (atoms.size() > 48) {
    std::shuffle(atoms.begin() + 16, atoms.end(), rng);
    atoms.resize(48);
  }
  for (size_t i : atoms) {
    auto [lo, hi] = u.atom(i);
    for (uint8_t proto : {6, 17}) {
      for (uint16_t port : {uint16_t(53), uint16_t(80), uint16_t(443), uint16_t(3001), uint16_t(30001),
                            static_cast<uint16_t>(rng() % 65536)}) {
        for (auto src : {"10.0.0.5", "203.0.113.9", "10.180.0.1"}) {
          trace::Packet p;
          p.src = *IPAddr::parse(a.family == IPFamily::V4 ? src : "2001:db8:ffff::9");
          p.dst = sem::addr_from_value(lo, a.family);
          p.proto = proto;
          p.sport = 40000;
          p.dport = port;
          p.in_iface = "eth0";
          p.out_iface = "eth1";
          for (auto origin : {trace::Origin::External, trace::Origin::Node}) {
            p.origin = origin;
            auto da = symbolic::concrete_distribution(ta.trace(p), a);
            auto db = symbolic::concrete_distribution(tb.trace(p), b);
            if (!sem::same_outcomes(da, db)) {
              *why = "packet to " + p.dst.str() + ":" + std::to_string(port) + " differs";
              return false;
            }
          }
        }
      }
    }
  }
  return true;
}

struct Tally {
  std::map<std::string, std::pair<size_t, size_t>> by_kind;  // kind -> (mutants, reported)
};

TEST(VerifyMutations, EveryMutantOfEveryGoldenPartialIsReported) {
  Tally tally;
  size_t steps = 0, narrowing_checked = 0;
  for (const auto& fp : test::fixture_params(1)) {
    if (fp.fixture.steps[fp.step].forced_full || fp.fixture.steps[fp.step].expect_restore_failure) continue;
    Backend backend = *backend_from_name(fp.backend);
    const auto& prev = fp.fixture.steps[fp.step - 1].inputs;
    const auto& cur = fp.fixture.steps[fp.step].inputs;
    auto prior_full = test::compile_paths(prev, backend);
    auto partial = test::compile_from_prior_paths(cur, prev, backend, {});
    PriorOptions full_sync;
    full_sync.force_full = true;
    auto full = test::compile_from_prior_paths(cur, prev, backend, full_sync);
    ASSERT_TRUE(prior_full.ok && partial.ok && full.ok) << test::fixture_param_name(fp);
    if (!partial.partial) continue;
    IPFamily family = backend_family(backend);
    RulesetState prior = RulesetState::empty(family);
    ApplyOptions o{true, Flavor::Legacy};
    ASSERT_TRUE(apply_text(prior, prior_full.text, o).ok());
    VerifyOptions vo;
    vo.local_addresses = {*IPAddr::parse(family == IPFamily::V4 ? "192.168.0.2" : "2001:db8::1")};
    ++steps;
    // The correct partial: no false alarm. Identical — or, in large-cluster mode, where
    // kube-proxy leaves the comments of unchanged chains as they were (by design), the
    // states differ in comments only: equivalent, with no packet class differing.
    auto good = verify(prior, partial.text, full.text, Flavor::Legacy, vo);
    bool large = full.sync.large_cluster;
    ASSERT_TRUE(good.verdict == Verdict::Identical || (large && good.verdict == Verdict::Equivalent))
        << test::fixture_param_name(fp) << "\n" << format_text(good);
    RulesetState want = prior;
    ASSERT_TRUE(apply_text(want, full.text, o).ok());
    for (const Mutant& m : mutants(partial.text)) {
      SCOPED_TRACE(test::fixture_param_name(fp) + ": " + m.kind + ": " + m.what);
      auto r = verify(prior, m.text, full.text, Flavor::Legacy, vo);
      auto& t = tally.by_kind[m.kind];
      ++t.first;
      RulesetState got = prior;
      bool applies = apply_text(got, m.text, o).ok();
      if (!applies) {
        EXPECT_EQ(r.verdict, Verdict::FailsToApply) << format_text(r);
        t.second += r.verdict == Verdict::FailsToApply;
        continue;
      }
      bool same_state = diff_states(got, want).empty();
      if (same_state) {
        EXPECT_EQ(r.verdict, Verdict::Identical) << format_text(r);  // a neutral mutant is no alarm
        ++t.second;  // nothing to report: counted as handled
        continue;
      }
      EXPECT_NE(r.verdict, Verdict::Identical) << format_text(r);
      t.second += r.verdict != Verdict::Identical;
      if (r.behaviour) EXPECT_TRUE(r.behaviour->self_check_failures.empty()) << format_text(r);
      bool must_differ = m.kind == "retarget DNAT" || m.kind == "change probability" ||
                         m.kind == "swap load-balancing rules";
      if (must_differ) EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << format_text(r);
      if (r.verdict == Verdict::Equivalent) {
        RulesetState ga = got, wa = want;
        trace::add_kube_proxy_jumps(ga);
        trace::add_kube_proxy_jumps(wa);
        std::string why;
        EXPECT_TRUE(concrete_agree(wa, ga, vo.local_addresses, &why)) << "judged equivalent, but " << why;
      }
      // The narrowing never hides a difference: the same count as exploring everything.
      if (r.behaviour && !large && (tally.by_kind[m.kind].first % 4 == 1)) {
        RulesetState ga = got, wa = want;
        trace::add_kube_proxy_jumps(ga);
        trace::add_kube_proxy_jumps(wa);
        sem::CompareOptions co;
        co.local_addresses = vo.local_addresses;
        co.explore_all = true;
        auto all = symbolic::compare_states(wa, ga, co);
        EXPECT_EQ(all.differing_classes, r.behaviour->differing_classes);
        EXPECT_EQ(all.undecided_classes, r.behaviour->undecided_classes);
        ++narrowing_checked;
      }
    }
    if (HasFailure()) break;
  }
  size_t total = 0, reported = 0;
  for (const auto& [k, v] : tally.by_kind) {
    std::printf("mutants %-26s %4zu, reported %4zu\n", k.c_str(), v.first, v.second);
    total += v.first;
    reported += v.second;
  }
  std::printf("partial steps %zu, mutants %zu, reported %zu, narrowing cross-checked %zu\n", steps, total, reported,
              narrowing_checked);
  EXPECT_GT(steps, 20u);
  EXPECT_EQ(total, reported);
  for (const char* k : {"drop rule", "drop -X", "retarget DNAT", "change probability", "swap load-balancing rules",
                        "drop masquerade jump"})
    EXPECT_GT(tally.by_kind[k].first, 0u) << k;
}

// Renamed chains and the services' KUBE-SERVICES rules in another order: equivalent.
TEST(VerifyMutations, RenamedChainsAndShuffledServicesAreEquivalent) {
  size_t cases = 0;
  std::mt19937 rng(11);
  for (const auto& fp : test::fixture_params(0)) {
    if (fp.step != 0) continue;
    Backend backend = *backend_from_name(fp.backend);
    auto full = test::compile_paths(fp.fixture.steps[0].inputs, backend);
    if (!full.ok) continue;
    IPFamily family = backend_family(backend);
    auto ls = lines_of(full.text);
    // Rename: every per-service chain gets another (consistent) name.
    std::string renamed = full.text;
    for (const char* pre : {"KUBE-SVC-", "KUBE-SEP-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-"}) {
      std::string from = pre, to = std::string(pre).substr(0, std::string(pre).size() - 1) + "X";
      for (size_t p = 0; (p = renamed.find(from, p)) != std::string::npos; p += to.size()) renamed.replace(p, from.size(), to);
    }
    // Shuffle the nat KUBE-SERVICES rules by destination (whole groups: disjoint traffic).
    std::vector<size_t> idx;
    bool in_nat = false;
    for (size_t i = 0; i < ls.size(); ++i) {
      if (ls[i] == "*nat") in_nat = true;
      if (in_nat && ls[i].rfind("-A KUBE-SERVICES ", 0) == 0 && ls[i].find(" -d ") != std::string::npos &&
          ls[i].find("KUBE-NODEPORTS") == std::string::npos)
        idx.push_back(i);
    }
    std::map<std::string, std::vector<std::string>> groups;
    std::vector<std::string> order;
    for (size_t i : idx) {
      size_t d = ls[i].find(" -d ") + 4;
      std::string dst = ls[i].substr(d, ls[i].find(' ', d) - d);
      if (!groups.count(dst)) order.push_back(dst);
      groups[dst].push_back(ls[i]);
    }
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::string> shuffled_rules;
    for (const auto& g : order)
      for (const auto& l : groups[g]) shuffled_rules.push_back(l);
    auto sl = ls;
    for (size_t k = 0; k < idx.size(); ++k) sl[idx[k]] = shuffled_rules[k];
    std::string shuffled = join_lines(sl);
    std::vector<IPAddr> local = {*IPAddr::parse(family == IPFamily::V4 ? "192.168.0.2" : "2001:db8::1")};
    auto load = [&](const std::string& t) {
      RulesetState s = RulesetState::empty(family);
      EXPECT_TRUE(apply_text(s, t, ApplyOptions{true, Flavor::Legacy}).ok());
      trace::add_kube_proxy_jumps(s);
      return s;
    };
    RulesetState base = load(full.text);
    sem::CompareOptions co;
    co.local_addresses = local;
    for (const std::string* other : {&renamed, &shuffled}) {
      auto r = symbolic::compare_states(base, load(*other), co);
      EXPECT_TRUE(r.equivalent()) << test::fixture_param_name(fp) << (other == &renamed ? " renamed" : " shuffled")
                                  << "\n" << sem::diff_text(r);
    }
    ++cases;
  }
  EXPECT_GT(cases, 40u);
}

// Session-affinity lists are named after their KUBE-SEP chain, so a chain rename
// renames the list too. The semantic hashes key a list by what it means (service and
// endpoint, from the --set rule that DNATs): a consistent rename pairs every chain
// without exploring a packet, while a list swapped between two endpoints, or a --set
// into a list nothing checks, changes what remembered clients get and must be found.
TEST(VerifyMutations, AffinityListRenamesPairAndListSwapsDiffer) {
  const std::string full = test::read_file(test::source_path("fixtures/example/expected/iptables.restore"));
  ASSERT_NE(full.find(" --rcheck "), std::string::npos);
  auto load = [](const std::string& t) {
    RulesetState s = RulesetState::empty(IPFamily::V4);
    EXPECT_TRUE(apply_text(s, t, ApplyOptions{true, Flavor::Legacy}).ok());
    trace::add_kube_proxy_jumps(s);
    return s;
  };
  auto replace_all = [](std::string t, const std::string& from, const std::string& to) {
    for (size_t p = 0; (p = t.find(from, p)) != std::string::npos; p += to.size()) t.replace(p, from.size(), to);
    return t;
  };
  sem::CompareOptions co;
  co.local_addresses = {*IPAddr::parse("192.168.0.2")};
  const RulesetState base = load(full);
  auto compare = [&](const std::string& other) { return symbolic::compare_states(base, load(other), co); };

  // Chains and lists renamed together: equivalent from the hashes alone.
  auto r = compare(replace_all(full, "KUBE-SEP-", "KUBE-SEQ-"));
  EXPECT_TRUE(r.equivalent()) << sem::diff_text(r);
  EXPECT_EQ(r.atoms_explored, 0u) << r.narrowing;
  // Lists renamed, chains kept: equivalent too.
  r = compare(replace_all(full, "--name KUBE-SEP-", "--name AFFINITY-"));
  EXPECT_TRUE(r.equivalent()) << sem::diff_text(r);
  EXPECT_EQ(r.atoms_explored, 0u) << r.narrowing;

  // The --rcheck rules of two endpoints test each other's list.
  auto ls = lines_of(full);
  std::vector<size_t> rchecks;
  for (size_t i = 0; i < ls.size(); ++i)
    if (ls[i].find(" --rcheck ") != std::string::npos && ls[i].find("shop/cart") != std::string::npos) rchecks.push_back(i);
  ASSERT_GE(rchecks.size(), 2u);
  auto name_of = [](const std::string& l) {
    size_t b = l.find("--name ") + 7;
    return l.substr(b, l.find(' ', b) - b);
  };
  std::string n0 = name_of(ls[rchecks[0]]), n1 = name_of(ls[rchecks[1]]);
  auto swapped = ls;
  swapped[rchecks[0]] = replace_all(ls[rchecks[0]], "--name " + n0, "--name " + n1);
  swapped[rchecks[1]] = replace_all(ls[rchecks[1]], "--name " + n1, "--name " + n0);
  r = compare(join_lines(swapped));
  EXPECT_FALSE(r.equivalent()) << "swapped lists judged equivalent";
  EXPECT_GT(r.differing_classes, 0u);

  // One endpoint records its clients into a list that no --rcheck tests.
  auto lost = ls;
  for (auto& l : lost)
    if (l.find(" --set ") != std::string::npos && l.find("--name " + n0) != std::string::npos)
      l = replace_all(l, "--name " + n0, "--name NOBODY-CHECKS");
  r = compare(join_lines(lost));
  EXPECT_FALSE(r.equivalent()) << "a --set into an unchecked list judged equivalent";
}

}  // namespace
}  // namespace kpc::verifier
