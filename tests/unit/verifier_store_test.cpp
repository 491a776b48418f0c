// The rule store's fast paths and the chain map: each checked against a plain
// reference (a std::map, a fresh store, a lookup without hints), since a wrong
// shortcut here would not crash, only make the simulator disagree with the kernel.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "verifier/state/state.h"

namespace kpc::verifier {
namespace {

// Random inserts, erases and keep_if against a std::map: every name id must find
// the chain it holds (erase moves the last chain into the hole, and keep_if erases
// while it walks).
TEST(VerifierStore, ChainMapMatchesAReferenceMap) {
  std::mt19937 rng(20261122);
  ChainMap m;
  std::map<uint32_t, uint64_t> ref;  // name id -> seq
  uint64_t seq = 0;
  for (int step = 0; step < 20000; ++step) {
    uint32_t id = rng() % 300;
    switch (rng() % 7) {
      case 0:
      case 1:
      case 2:
        if (!ref.count(id)) {
          Chain c;
          c.id = id;
          c.seq = ++seq;
          m.insert(c);
          ref[id] = seq;
        }
        break;
      case 3:
      case 4:
        m.erase(id);  // absent ids are ignored
        ref.erase(id);
        break;
      case 5:
        if (step % 50 == 0) {
          m.keep_if([](const Chain& c) { return c.seq % 3 != 0; });
          std::erase_if(ref, [](const auto& e) { return e.second % 3 == 0; });
        }
        break;
      default: break;
    }
    ASSERT_EQ(m.size(), ref.size()) << "step " << step;
    for (uint32_t k = 0; k < 310; ++k) {
      const Chain* c = m.find(k);
      auto it = ref.find(k);
      ASSERT_EQ(c != nullptr, it != ref.end()) << "step " << step << " id " << k;
      if (c) {
        ASSERT_EQ(c->seq, it->second);
        ASSERT_LT(m.index_of(*c), m.size());
      }
    }
  }
  EXPECT_EQ(m.find(RuleStore::kNoName), nullptr);
}

TEST(VerifierStore, BuiltinNamesHaveFixedIds) {
  RuleStore a, b;
  b.name_id("KUBE-SERVICES");
  for (std::string_view n : RuleStore::kBuiltinNames) {
    EXPECT_EQ(a.find_name(n), RuleStore::builtin_name_id(n));
    EXPECT_EQ(b.find_name(n), RuleStore::builtin_name_id(n));
  }
  EXPECT_EQ(RuleStore::builtin_name_id("KUBE-SERVICES"), RuleStore::kNoName);
}

// find_name_near() answers exactly what find_name() does, whatever the guess.
TEST(VerifierStore, FindNameNearIsFindName) {
  RuleStore s;
  std::vector<std::string> names;
  for (int i = 0; i < 200; ++i) names.push_back("KUBE-SEP-" + std::to_string(i * 7919));
  for (const auto& n : names) s.name_id(n);
  std::mt19937 rng(7);
  uint32_t last = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string q = rng() % 5 ? names[rng() % names.size()] : "KUBE-SVC-MISSING-" + std::to_string(i);
    if (rng() % 3 == 0) last = static_cast<uint32_t>(rng() % 400);  // any guess, even past the end
    uint32_t before = last;
    ASSERT_EQ(s.find_name_near(q, &last), s.find_name(q)) << q << " guess " << before;
  }
  // In order (a program declaring its chains as the prior did): each found next to the last.
  last = 0;
  for (const auto& n : names) ASSERT_EQ(s.find_name_near(n, &last), s.find_name(n));
}

std::string apply_twice(const std::string& first, const std::string& second, std::shared_ptr<RuleStore> store) {
  RulesetState st = RulesetState::empty(IPFamily::V4, store);
  ApplyOptions o{true, Flavor::Legacy};
  o.parallel_parse_min_bytes = SIZE_MAX;
  auto r = apply_text(st, first, o);
  if (r.ok()) r = apply_text(st, second, o);
  return (r.ok() ? std::string("ok\n") : r.error->reason + "\n") + print_save(st, Flavor::Legacy);
}

// After a long run of new lines the known-line lookup is made only for some lines:
// a program that then repeats known lines (in order, out of order, in another chain)
// must give exactly what a store that knows nothing gives.
TEST(VerifierStore, KnownLinesAfterALongRunOfNewLines) {
  auto rules = [](const std::string& chain, int from, int n) {
    std::string out;
    for (int i = from; i < from + n; ++i)
      out += "-A " + chain + " -d 10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + " -j ACCEPT\n";
    return out;
  };
  const std::string prior = "*filter\n:A - [0:0]\n:B - [0:0]\n" + rules("A", 0, 300) + "COMMIT\n";
  // 200 lines never seen, then the prior's lines in order, then some again out of order and
  // into chain B (same bytes after the chain name, so not the same line).
  const std::string next = "*filter\n:A - [0:0]\n:B - [0:0]\n" + rules("A", 1000, 200) + rules("A", 0, 300) +
                           rules("A", 150, 20) + rules("A", 10, 5) + rules("B", 0, 40) + "COMMIT\n";
  const std::string want = apply_twice(prior, next, std::make_shared<RuleStore>());
  auto warm = std::make_shared<RuleStore>();
  apply_twice(prior, "", warm);  // the store knows the prior's lines
  EXPECT_EQ(apply_twice(prior, next, warm), want);
  // And with the store knowing the next program too (every line known).
  EXPECT_EQ(apply_twice(prior, next, warm), want);
  EXPECT_NE(want.find("-A B -d 10.0.0.39/32 -j ACCEPT"), std::string::npos);
}

// States on two stores (different name ids for the same names) compare by name.
TEST(VerifierStore, DiffStatesAcrossStores) {
  const char* prog = "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-A - [0:0]\n-A KUBE-SERVICES -d 10.0.0.1 -j KUBE-SVC-A\n"
                     "-A KUBE-SVC-A -j RETURN\nCOMMIT\n";
  auto s1 = std::make_shared<RuleStore>(), s2 = std::make_shared<RuleStore>();
  s2->name_id("KUBE-SVC-A");  // other ids in the second store
  s2->name_id("X");
  RulesetState a = RulesetState::empty(IPFamily::V4, s1), b = RulesetState::empty(IPFamily::V4, s2);
  ASSERT_TRUE(apply_text(a, prog, ApplyOptions{true, Flavor::Legacy}).ok());
  ASSERT_TRUE(apply_text(b, prog, ApplyOptions{true, Flavor::Legacy}).ok());
  EXPECT_NE(a.find(ir::TableId::Nat, "KUBE-SVC-A")->id, b.find(ir::TableId::Nat, "KUBE-SVC-A")->id);
  EXPECT_TRUE(diff_states(a, b).empty());
  ASSERT_TRUE(apply_text(b, "*nat\n:KUBE-SVC-A - [0:0]\n:KUBE-SVC-B - [0:0]\nCOMMIT\n", ApplyOptions{true, Flavor::Legacy}).ok());
  auto d = diff_states(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(describe(d[0]), "nat KUBE-SVC-A: rules differ");
  EXPECT_EQ(describe(d[1]), "nat KUBE-SVC-B: only in the second state");
}

}  // namespace
}  // namespace kpc::verifier
