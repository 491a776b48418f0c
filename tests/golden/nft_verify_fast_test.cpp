// The fast path of nft `kpc verify` (verify_nft_texts: the transactions parsed while the prior
// is read, both applied and listed on two threads; nft::prepare_script/apply_prepared) against
// the sequential reference (read_nft_state, then verify_nft on a const prior: copies, apply_script
// one after the other, listings always printed; the fast path first compares the fields the
// listing prints): the same verdict, failure (nft's rendered message, the failing
// program), differences, packet-level result and report text, on random clusters (the generator
// of the property tests, a random change for the next snapshot) and random mutations of the
// three texts (a line deleted, duplicated, moved, swapped with its neighbour, cut in half,
// `add` made `create`, a chain name misspelt, a line of another text spliced in), the prior
// given as a transaction or as its listing. Also apply_prepared against apply_script (result,
// errors, warnings, operations, `nft -a list ruleset`). Seeded; the count of cases is printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <random>

#include <rapidcheck.h>

#include "compiler/driver/compile_nftables.h"
#include "compiler/support/text.h"
#include "tests/support/cluster_changes.h"
#include "tests/support/cluster_env.h"
#include "tests/support/snapshot_gen.h"
#include "verifier/nft/nft.h"
#include "verifier/nft_sym/verify.h"

namespace kpc::verifier::nft_sym {
namespace {
namespace vn = kpc::verifier::nft;

std::string text_of(const NftCompileResult& r) {
  std::string t;
  if (!r.cleanup_text.empty()) t += r.cleanup_text + "\n";
  t += r.text;
  if (!t.empty() && t.back() != '\n') t += "\n";
  return t;
}

std::string mutate(const std::string& text, const std::string& other, std::mt19937_64& rng) {
  auto lines = split(text, '\n');
  std::vector<std::string> v;
  for (auto l : lines) v.emplace_back(l);
  while (!v.empty() && v.back().empty()) v.pop_back();
  if (v.empty()) return text;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  size_t i = pick(v.size());
  switch (pick(8)) {
    case 0: v.erase(v.begin() + static_cast<long>(i)); break;
    case 1: v.insert(v.begin() + static_cast<long>(i), v[i]); break;
    case 2: {
      std::string l = v[i];
      v.erase(v.begin() + static_cast<long>(i));
      v.insert(v.begin() + static_cast<long>(pick(v.size() + 1)), l);
      break;
    }
    case 3:
      if (i + 1 < v.size()) std::swap(v[i], v[i + 1]);
      break;
    case 4: v[i] = v[i].substr(0, v[i].size() / 2); break;
    case 5:
      if (v[i].rfind("add ", 0) == 0) v[i] = "create " + v[i].substr(4);
      break;
    case 6: {
      size_t p = v[i].find("service-");
      if (p == std::string::npos) p = v[i].find("endpoint-");
      if (p != std::string::npos) v[i].insert(p + 3, "x");
      break;
    }
    case 7: {
      auto o = split(other, '\n');
      if (!o.empty()) v.insert(v.begin() + static_cast<long>(i), std::string(o[pick(o.size())]));
      break;
    }
  }
  std::string out;
  for (const auto& l : v) out += l + "\n";
  return out;
}

std::string describe(const NftVerifyResult& r) { return format_json(r) + format_text(r, true) + format_markdown(r); }

std::string describe(const vn::ApplyResult& r, const vn::NftState& s) {
  std::string out = std::string(r.ok ? "ok" : "fails") + " ops " + std::to_string(r.operations) + "\n";
  for (const auto& e : r.errors) out += e.render() + (e.not_modelled ? " (not modelled)\n" : "\n");
  vn::PrintOptions po;
  po.handles = true;
  return out + vn::print_ruleset(s, po);
}

struct Counts {
  int cases = 0, prior_fails = 0, fails = 0, identical = 0, other = 0, split_priors = 0, split_prior_fails = 0;
  ~Counts() {
    if (cases)
      std::fprintf(stderr,
                   "NftVerifyFast: %d cases compared with the sequential path (%d priors that fail, %d fails to apply, "
                   "%d identical, %d other verdicts); %d priors parsed in two halves (%d of them fail)\n",
                   cases, prior_fails, fails, identical, other, split_priors, split_prior_fails);
  }
};

TEST(NftVerifyFast, SameResultsAsTheSequentialPath) {
  static Counts counts;
  std::mt19937_64 rng(20261129);
  NftVerifyOptions vo;
  vo.local_addresses = {*IPAddr::parse("192.168.0.10")};
  int clusters = 0;
  for (uint64_t seed = 1; clusters < 12 && seed < 200; ++seed) {
    testgen::GenOptions go;
    go.max_services = 6;
    auto c = test::make_compilable(testgen::sample_cluster(seed, 30, go));
    auto prior_snap = test::load_compilable(c);
    if (!prior_snap) continue;
    const int changes = 1 + static_cast<int>(rng() % 3);
    auto next_c = rc::gen::exec([&] {
                    auto n = c;
                    for (int m = changes; m > 0; --m) test::mutate_cluster(n, m + 100 * static_cast<int>(seed));
                    return n;
                  })(rc::Random(seed), 30)
                      .value();
    auto next_snap = test::load_compilable(next_c);
    if (!next_snap) continue;
    DiagSink d;
    auto a = compile_nftables(*prior_snap, IPFamily::V4, {}, d);
    auto b = compile_nftables_from_prior(*next_snap, *prior_snap, IPFamily::V4, {}, d);
    NftPriorOptions fo;
    fo.force_full = true;
    auto f = compile_nftables_from_prior(*next_snap, *prior_snap, IPFamily::V4, fo, d);
    if (!a || !b || !f) continue;
    ++clusters;
    const std::string prior0 = text_of(*a), partial0 = text_of(*b), full0 = text_of(*f);
    vn::NftState listed;
    ASSERT_TRUE(vn::apply_script(listed, prior0, "p").ok);
    const std::string listing = vn::print_ruleset(listed);
    for (int k = 0; k < 40; ++k) {
      std::string prior = k % 5 == 4 ? listing : prior0, partial = partial0, full = full0;
      const int what = k == 0 ? -1 : static_cast<int>(rng() % 10);
      if (what >= 0 && what < 6) partial = mutate(partial, full0, rng);
      else if (what >= 6 && what < 9) full = mutate(full, partial0, rng);
      else if (what == 9) prior = mutate(prior, full0, rng);
      const std::string where = "seed " + std::to_string(seed) + " case " + std::to_string(k);
      // The reference.
      vn::NftState ref_prior;
      vn::NftError ref_err;
      bool ref_ok = read_nft_state(prior, "prior.nft", &ref_prior, &ref_err);
      NftVerifyResult ref;
      if (ref_ok) ref = verify_nft(static_cast<const vn::NftState&>(ref_prior), partial, full, vo, "partial.nft", "full.nft");
      // The prior (a transaction or a listing's table blocks, possibly mutated) parsed in two
      // halves onto an empty node: a split inside a block falls back to the whole parse.
      {
        vn::NftState e1, e2;
        auto q1 = vn::apply_script(e1, prior, "prior.nft");
        auto q2 = vn::apply_prepared(e2, vn::prepare_script(prior, vn::ParseThreads::Two, 0), prior, "prior.nft");
        EXPECT_EQ(describe(q1, e1), describe(q2, e2)) << where;
        ++counts.split_priors;
        if (!q1.ok) ++counts.split_prior_fails;
      }
      // The fast path.
      NftVerifyResult got;
      vn::NftError got_err;
      bool got_ok = verify_nft_texts(prior, "prior.nft", partial, full, vo, "partial.nft", "full.nft", &got, &got_err);
      ++counts.cases;
      ASSERT_EQ(ref_ok, got_ok) << where;
      if (!ref_ok) {
        ++counts.prior_fails;
        EXPECT_EQ(ref_err.render(), got_err.render()) << where;
        EXPECT_EQ(ref_err.not_modelled, got_err.not_modelled) << where;
        continue;
      }
      EXPECT_EQ(describe(ref), describe(got)) << where << "\npartial:\n" << partial;
      // The states and spent transactions handed to the caller (the benchmark's way) change
      // nothing, and all four are handed over.
      if (k % 8 == 0) {
        std::vector<std::shared_ptr<void>> spent;
        NftVerifyOptions handed = vo;
        handed.spent = &spent;
        NftVerifyResult h;
        vn::NftError h_err;
        ASSERT_TRUE(verify_nft_texts(prior, "prior.nft", partial, full, handed, "partial.nft", "full.nft", &h, &h_err));
        EXPECT_EQ(describe(ref), describe(h)) << where;
        EXPECT_EQ(spent.size(), 4u) << where;
      }
      if (ref.verdict == Verdict::FailsToApply) ++counts.fails;
      else if (ref.verdict == Verdict::Identical) ++counts.identical;
      else ++counts.other;
      // The prior taken over (the && overload).
      vn::NftState moved = ref_prior;
      EXPECT_EQ(describe(ref), describe(verify_nft(std::move(moved), partial, full, vo, "partial.nft", "full.nft")))
          << where;
      // apply_prepared is apply_script, on the prior and on an empty node.
      for (const std::string* t : {&partial, &full}) {
        vn::NftState s1 = ref_prior, s2 = ref_prior;
        auto r1 = vn::apply_script(s1, *t, "t.nft");
        auto r2 = vn::apply_prepared(s2, vn::prepare_script(*t), *t, "t.nft");
        EXPECT_EQ(describe(r1, s1), describe(r2, s2)) << where;
        vn::NftState e1, e2;
        auto q1 = vn::apply_script(e1, *t, "t.nft");
        auto q2 = vn::apply_prepared(e2, vn::prepare_script(*t), *t, "t.nft");
        EXPECT_EQ(describe(q1, e1), describe(q2, e2)) << where;
        // Parsed in two halves (split_min 0: every input is split at its middle line).
        vn::NftState s3 = ref_prior, e3;
        auto r3 = vn::apply_prepared(s3, vn::prepare_script(*t, vn::ParseThreads::Two, 0), *t, "t.nft");
        EXPECT_EQ(describe(r1, s1), describe(r3, s3)) << where;
        auto q3 = vn::apply_prepared(e3, vn::prepare_script(*t, vn::ParseThreads::Two, 0), *t, "t.nft");
        EXPECT_EQ(describe(q1, e1), describe(q3, e3)) << where;
        // apply_prepared_forking is apply_prepared, and hands a plain copy of the state as it
        // was to with_copy (here given the other transaction while the batch runs).
        {
          const std::string& other = t == &partial ? full : partial;
          vn::NftState f = ref_prior, copy, o = ref_prior;
          vn::ApplyResult on_copy;
          int calls = 0;
          auto rf = vn::apply_prepared_forking(f, vn::prepare_script(*t), *t, "t.nft", [&](vn::NftState& c) {
            ++calls;
            copy = std::move(c);
            on_copy = vn::apply_script(copy, other, "o.nft");
          });
          EXPECT_EQ(describe(r1, s1), describe(rf, f)) << where;
          auto ro = vn::apply_script(o, other, "o.nft");
          EXPECT_EQ(describe(ro, o), describe(on_copy, copy)) << where;
          EXPECT_EQ(calls, 1) << where;
        }
      }
    }
  }
  EXPECT_GE(clusters, 8);
  EXPECT_GT(counts.fails, 0);
  EXPECT_GT(counts.identical, 0);
  EXPECT_GT(counts.other, 0);
  EXPECT_GT(counts.split_prior_fails, 0);
  EXPECT_GT(counts.split_priors, counts.split_prior_fails);
}

// A default (or moved-from) prepared script parses the text itself.
TEST(NftVerifyFast, AnEmptyPreparedScriptParsesTheText) {
  const std::string t = "add table ip t\nadd chain ip t c\nadd rule ip t c accept\n";
  vn::NftState s1, s2;
  auto r1 = vn::apply_script(s1, t, "t.nft");
  vn::PreparedScript p = vn::prepare_script(t);
  vn::PreparedScript q = std::move(p);
  auto r2 = vn::apply_prepared(s2, std::move(p), t, "t.nft");  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(describe(r1, s1), describe(r2, s2));
  // A syntax error is reported when the prepared script is applied, with the file's name.
  vn::NftState s4;
  auto bad = vn::apply_prepared(s4, vn::prepare_script("add rule ip t c {\n"), "add rule ip t c {\n", "bad.nft");
  vn::NftState s5;
  auto ref = vn::apply_script(s5, "add rule ip t c {\n", "bad.nft");
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(describe(ref, s5), describe(bad, s4));
  // The forking application of a script that does not parse still hands over the copy.
  vn::NftState s6;
  vn::apply_script(s6, t, "t.nft");
  const std::string listed = vn::print_ruleset(s6, {true});
  std::string copied;
  auto bad2 = vn::apply_prepared_forking(s6, vn::prepare_script("add rule ip t c {\n"), "add rule ip t c {\n", "bad.nft",
                                         [&](vn::NftState& c) { copied = vn::print_ruleset(c, {true}); });
  ASSERT_TRUE(bad.error && bad2.error);
  EXPECT_EQ(bad.error->render(), bad2.error->render());
  EXPECT_EQ(listed, copied);
  EXPECT_EQ(listed, vn::print_ruleset(s6, {true}));
}

}  // namespace
}  // namespace kpc::verifier::nft_sym
