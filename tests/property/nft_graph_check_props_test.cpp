// The jump-graph check after a batch (verifier/nft/graph.cpp) is quick when the table keeps
// what its last check knew, and whole otherwise: both must give the same answer and message.
// Random small tables whose transactions do make loops, jump chains deeper than 16 and bring
// dnat / masquerade / reject under base chains that refuse them; one state keeps its cache
// from batch to batch, the other drops it before every batch (reindex: the whole check).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/support/nft_gen.h"
#include "verifier/nft/internal.h"
#include "verifier/nft/nft.h"

namespace kpc::verifier::nft {
namespace {

std::string outcome(const ApplyResult& r) { return test::apply_outcome(r); }

constexpr int kChains = 22;
const char* kBases[] = {
    "add chain ip t b-filter-pre { type filter hook prerouting priority -110 ; }",
    "add chain ip t b-nat-pre { type nat hook prerouting priority -100 ; }",
    "add chain ip t b-nat-post { type nat hook postrouting priority 100 ; }",
    "add chain ip t b-filter-in { type filter hook input priority 0 ; }",
};

std::string chain(int i) { return "c" + std::to_string(i); }
std::string base_name(int b) {
  std::string n = std::string(kBases[b]).substr(15);
  return n.substr(0, n.find(' '));
}

// A rule for chain `in`: mostly jumps to later chains (long paths), sometimes back (loops).
std::string rule(const std::string& in, int from) {
  const int kind = *rc::gen::inRange(0, 10);
  auto to = [&] {
    // forward most of the time, so that paths get long; anywhere sometimes
    if (*rc::gen::inRange(0, 8) == 0) return chain(*rc::gen::inRange(0, kChains));
    return chain(std::min(kChains - 1, from + *rc::gen::inRange(1, 3)));
  };
  std::string body;
  switch (kind) {
    case 0: case 1: case 2: body = "jump " + to(); break;
    case 3: body = "goto " + to(); break;
    case 4: body = "ip daddr . meta l4proto . th dport vmap @m"; break;
    case 5: body = "meta l4proto tcp dnat to 10.1.0.1:80"; break;
    case 6: body = "masquerade fully-random"; break;
    case 7: body = "reject"; break;
    case 8: body = "ip daddr 10.9.0.1 drop"; break;
    default: body = "counter"; break;
  }
  return "add rule ip t " + in + " " + body + "\n";
}

std::string element(bool add) {
  std::string key = "10.0.0." + std::to_string(*rc::gen::inRange(1, 12)) + " . tcp . 80";
  if (!add) return "delete element ip t m { " + key + " }\n";
  return "add element ip t m { " + key + " : goto " + chain(*rc::gen::inRange(0, kChains)) + " }\n";
}

std::string state_script() {
  std::string s = "add table ip t\n";
  const int bases = *rc::gen::inRange(1, 5);
  for (int b = 0; b < bases; ++b) s += std::string(kBases[b]) + "\n";
  for (int i = 0; i < kChains; ++i) s += "add chain ip t " + chain(i) + "\n";
  s += "add map ip t m { type ipv4_addr . inet_proto . inet_service : verdict ; }\n";
  // base chains jump into the first chains; each chain a few rules forward (no loop yet)
  for (int b = 0; b < bases; ++b) {
    const std::string name = base_name(b);
    s += "add rule ip t " + name + " jump " + chain(*rc::gen::inRange(0, 4)) + "\n";
    if (*rc::gen::inRange(0, 2)) s += "add rule ip t " + name + " ip daddr . meta l4proto . th dport vmap @m\n";
  }
  for (int i = 0; i + 1 < kChains; ++i)
    if (*rc::gen::inRange(0, 8)) s += "add rule ip t " + chain(i) + " jump " + chain(i + 1) + "\n";
  return s;
}

std::string transaction() {
  std::string tx;
  const int n = *rc::gen::inRange(1, 5);
  for (int k = 0; k < n; ++k) {
    const int op = *rc::gen::inRange(0, 12);
    const int c = *rc::gen::inRange(0, kChains);
    if (op < 4) tx += rule(chain(c), c);
    else if (op == 4)  // a run of forward jumps: paths get deep
      for (int j = c; j < std::min(kChains - 1, c + 4); ++j) tx += "add rule ip t " + chain(j) + " jump " + chain(j + 1) + "\n";
    else if (op < 7) tx += element(true);
    else if (op == 7) tx += element(false);
    else if (op == 8) tx += "flush chain ip t " + chain(c) + "\n";
    else if (op == 9) tx += "delete chain ip t " + chain(c) + "\n";
    else if (op == 10) tx += "add chain ip t " + chain(c) + "\n";
    else {
      const int b = *rc::gen::inRange(0, 4);  // a base chain (new or not) and a jump from it
      tx += std::string(kBases[b]) + "\nadd rule ip t " + base_name(b) + " jump " + chain(c) + "\n";
    }
  }
  return tx;
}

void quick_check_answers_as_the_whole_check(const char* label) {
  size_t batches = 0, applied = 0, loops = 0, depth = 0, misplaced = 0;
  const bool ok = rc::check("the quick check answers as the whole check", [&] {
    NftState cached, whole;
    const std::string init = state_script();
    auto a = apply_script(cached, init, "state.nft");
    RC_PRE(a.ok);  // (a random start may already be too deep)
    RC_ASSERT(apply_script(whole, init, "state.nft").ok);
    const int steps = *rc::gen::inRange(1, 20);
    for (int i = 0; i < steps; ++i) {
      const std::string tx = transaction();
      whole.reindex();  // no cache: the whole check
      auto rc_ = apply_script(cached, tx, "tx.nft"), rw = apply_script(whole, tx, "tx.nft");
      RC_ASSERT(outcome(rc_) == outcome(rw));
      RC_ASSERT(print_ruleset(cached, {true}) == print_ruleset(whole, {true}));
      const std::string text = outcome(rw);
      ++batches;
      applied += rw.ok;
      loops += text.find("a loop through chain") != std::string::npos;
      depth += text.find("jump depth over 16") != std::string::npos;
      misplaced += text.find("refuses such statements") != std::string::npos;
    }
  });
  EXPECT_TRUE(ok);
  std::printf("NftGraphCheckProps (%s): %zu batches (%zu applied; refused for a loop %zu, a depth over 16 %zu, a misplaced statement %zu)\n",
              label, batches, applied, loops, depth, misplaced);
  // The generator must reach every kind of refusal, or the comparison proves little.
  EXPECT_GT(loops, 0u);
  EXPECT_GT(depth, 0u);
  EXPECT_GT(misplaced, 0u);
  EXPECT_GT(applied, batches / 4);
}

TEST(NftGraphCheckProps, TheQuickCheckAnswersAsTheWholeCheck) {
  quick_check_answers_as_the_whole_check("caches built after the check");
}

// Large tables have their caches built on a second thread while the whole check runs, and
// dropped when it fails (a cache built from a graph with a loop must never be kept).
TEST(NftGraphCheckProps, CachesBuiltAsideAnswerAsTheWholeCheck) {
  const size_t was = detail::graph_build_aside_min;
  detail::graph_build_aside_min = 0;
  quick_check_answers_as_the_whole_check("caches built aside");
  detail::graph_build_aside_min = was;
}

}  // namespace
}  // namespace kpc::verifier::nft
