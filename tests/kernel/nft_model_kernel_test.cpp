// The nft model (verifier/nft) against the real `nft -f` (nftables 1.0.6) in a network
// namespace: random kube-proxy-shaped states and transactions (valid and invalid), each
// applied by both; the same verdict, the same error messages (file, line, columns, text,
// source line and markers, every error nft prints) and the same `nft -a list ruleset`. Every
// other random state is applied by the model while it is parsed (apply_while_parsing).
//
// CI: 300 pairs (each a state and up to three transactions in a row). KPC_LONG=1: 10,000.
// KPC_NFT_DIFF_PAIRS=N overrides the count, KPC_NFT_DIFF_SEED=N the seed (default 20261121).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/netns.h"
#include "tests/support/nft_gen.h"
#include "tests/support/test_util.h"
#include "verifier/nft/nft.h"

namespace kpc::test {
namespace {

namespace nft = verifier::nft;

std::string source(const std::string& rel) {
  std::ifstream f(std::string(KPC_SOURCE_DIR) + "/" + rel);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The table handle is the namespace's counter (kept across `flush ruleset`): not compared.
std::string strip_table_handles(const std::string& s) {
  static const std::regex re(R"(^(table \S+ \S+ \{) # handle \d+)", std::regex::multiline);
  return std::regex_replace(s, re, "$1");
}

struct Runner {
  Netns ns;
  std::string dir;
  Runner() {
    char tmpl[] = "/tmp/kpc-nft-model-XXXXXX";
    dir = mkdtemp(tmpl) ? tmpl : "/tmp";
  }
  ~Runner() { run({"rm", "-rf", dir}); }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  CommandResult nft(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"nft"};
    argv.insert(argv.end(), args.begin(), args.end());
    return ns.exec(argv);
  }
};

std::string render_all(const nft::ApplyResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e.render();
  return s;
}

size_t pair_count() {
  if (const char* n = std::getenv("KPC_NFT_DIFF_PAIRS")) return std::strtoul(n, nullptr, 10);
  if (const char* l = std::getenv("KPC_LONG"); l && std::string(l) == "1") return 10000;
  return 300;
}

// Random states, then transactions from next_tx, each applied by the model and by nft.
struct DiffCounts {
  size_t ran = 0, txs = 0, accepted = 0, refused_by_nft = 0, not_modelled = 0, mismatches = 0, rules_kept = 0,
         txs_keeping = 0;
};
template <class NextTx>
DiffCounts differential(Runner& r, uint64_t seed, size_t pairs, NextTx next_tx) {
  DiffCounts n;
  for (size_t i = 0; i < pairs && n.mismatches < 5; ++i) {
    ++n.ran;
    NftGen gen(seed + i);
    EXPECT_EQ(r.nft({"flush", "ruleset"}).exit_code, 0);
    std::string state_text = gen.state_script();
    std::string sp = r.write("state.nft", state_text);
    nft::NftState model;
    // (every other state applied while parsed in parts, as kpc verify reads its prior: the
    // transactions after it then run on that state too)
    nft::ApplyResult ms =
        i % 2 ? nft::apply_while_parsing(model, state_text, sp, [](const nft::PreparedScript&) {}, 0, 2 + i % 5)
              : nft::apply_script(model, state_text, sp);
    CommandResult rs = r.nft({"-f", sp});
    std::string real = strip_table_handles(r.nft({"-a", "list", "ruleset"}).out);
    if (rs.exit_code != 0 || !ms.ok || strip_table_handles(nft::print_ruleset(model, {true})) != real) {
      ++n.mismatches;
      ADD_FAILURE() << "pair " << i << ": the generated state does not load alike:\n" << rs.err << render_all(ms)
                    << state_text;
      continue;
    }
    int steps = 1 + static_cast<int>(gen.next(3));
    for (int s = 0; s < steps; ++s) {
      std::string tx = next_tx(gen, model);
      std::string tp = r.write("tx" + std::to_string(s) + ".nft", tx);
      nft::NftState before = model;
      nft::ApplyResult mr = nft::apply_script(model, tx, tp);
      ++n.txs;
      n.rules_kept += mr.rules_kept;
      if (mr.rules_kept) ++n.txs_keeping;
      if (mr.not_modelled()) {
        ++n.not_modelled;
        if (std::getenv("KPC_NFT_DIFF_VERBOSE")) std::printf("not modelled: %s\n", mr.error->message.c_str());
        break;  // the node and the model may differ from here: next pair
      }
      CommandResult rr = r.nft({"-f", tp});
      bool real_ok = rr.exit_code == 0;
      if (std::getenv("KPC_NFT_DIFF_TRACE"))
        std::printf("=== step %d\n%s--- nft:\n%s--- model:\n%s", s, tx.c_str(), rr.err.c_str(), render_all(mr).c_str());
      std::string real_list = strip_table_handles(r.nft({"-a", "list", "ruleset"}).out);
      std::string model_list = strip_table_handles(nft::print_ruleset(model, {true}));
      bool same = real_ok == mr.ok && real_list == model_list && (real_ok || rr.err == render_all(mr));
      ++(real_ok ? n.accepted : n.refused_by_nft);
      if (!same) {
        ++n.mismatches;
        ADD_FAILURE() << "pair " << i << " step " << s << " (seed " << seed + i << "): nft "
                      << (real_ok ? "accepts" : "refuses") << ", the model " << (mr.ok ? "accepts" : "refuses")
                      << "\n--- state:\n" << state_text << "--- transaction:\n" << tx << "--- nft stderr:\n" << rr.err
                      << "--- model errors:\n" << render_all(mr)
                      << (real_list != model_list ? "--- listings differ\nnft:\n" + real_list + "model:\n" + model_list : "");
        break;
      }
    }
  }
  return n;
}

// Why the differentials cannot run here ("" when they can).
std::string differential_unavailable() {
  if (!can_use_netns()) return "needs root and network namespaces";
  if (run({"nft", "--version"}).exit_code != 0) return "nft is not installed";
  return "";
}

TEST(NftModelKernel, RandomStatesAndTransactionsAgreeWithNft) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  uint64_t seed = 20261121;
  if (const char* e = std::getenv("KPC_NFT_DIFF_SEED")) seed = std::strtoull(e, nullptr, 10);
  auto t0 = std::chrono::steady_clock::now();
  DiffCounts n = differential(r, seed, pair_count(), [](NftGen& g, const nft::NftState& m) { return g.transaction(m); });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("nft model vs nft: %zu pairs, %zu transactions: %zu accepted, %zu refused by nft (errors compared), "
              "%zu not modelled, %zu mismatches, %.1f s\n",
              n.ran, n.txs, n.accepted, n.refused_by_nft, n.not_modelled, n.mismatches, secs);
  EXPECT_EQ(n.mismatches, 0u);
  // The comparison must mean something: most transactions are modelled, both outcomes occur.
  EXPECT_LT(n.not_modelled * 10, n.txs) << "too many transactions the model refuses";
  EXPECT_GT(n.accepted, n.txs / 10);
  EXPECT_GT(n.refused_by_nft, n.txs / 10);
}

// Full-sync rewrites (NftGen::rewrite): `flush chain` and the chain's rules added again, the
// case the model defers flushes for (apply.cpp, "rules kept through a flush"). nft's handles
// are compared too (`nft -a list ruleset`): the kept rules must get the handles nft gives the
// rules it adds again. CI: 150 pairs; KPC_LONG=1: 3,000 (KPC_NFT_DIFF_PAIRS overrides both).
TEST(NftModelKernel, FullSyncRewritesAgreeWithNft) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  size_t pairs = 150;
  if (const char* l = std::getenv("KPC_LONG"); l && std::string(l) == "1") pairs = 3000;
  if (const char* e = std::getenv("KPC_NFT_DIFF_PAIRS")) pairs = std::strtoul(e, nullptr, 10);
  auto t0 = std::chrono::steady_clock::now();
  DiffCounts n = differential(r, 20261204, pairs, [](NftGen& g, const nft::NftState& m) {
    return g.chance(85) ? g.rewrite(m) : g.transaction(m);
  });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("nft model vs nft, full-sync rewrites: %zu pairs, %zu transactions: %zu accepted (%zu keeping %zu rules), "
              "%zu refused by nft, %zu not modelled, %zu mismatches, %.1f s\n",
              n.ran, n.txs, n.accepted, n.txs_keeping, n.rules_kept, n.refused_by_nft, n.not_modelled, n.mismatches,
              secs);
  EXPECT_EQ(n.mismatches, 0u);
  EXPECT_LT(n.not_modelled * 10, n.txs) << "too many transactions the model refuses";
  // Most rewrites keep rules; some fail after keeping (the batch undone), covered above by the
  // refusals being compared.
  EXPECT_GT(n.txs_keeping * 3, n.txs);
  EXPECT_GT(n.refused_by_nft, n.txs / 20);
}

// kube-proxy's own base ruleset (its unit tests' baseRules, knftables Dump form) and the
// whole TestOverallNFTablesRules expectation: the Dump order names chains before it creates
// them, so the real nft refuses it as written, exactly as the model does; in dependency order
// both load it and list it identically; and the model prints kube-proxy's Dump back.
TEST(NftModelKernel, KubeProxyBaseRulesLoadAsInNft) {
  if (!can_use_netns()) GTEST_SKIP() << "needs root and network namespaces";
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  const std::string base = source("tests/data/nft/kubeproxy_base_rules.nft");
  const std::string svcs = source("tests/data/nft/kubeproxy_overall_services.nft");
  ASSERT_FALSE(base.empty());
  std::string bp = r.write("base.nft", base);
  nft::NftState model;
  ASSERT_TRUE(nft::apply_script(model, base, bp).ok);
  ASSERT_EQ(r.nft({"-f", bp}).exit_code, 0);
  EXPECT_EQ(nft::print_ruleset(model, {true}), r.nft({"-a", "list", "ruleset"}).out);

  // As written (Dump order): both refuse, with the same errors.
  std::string sp = r.write("services.nft", svcs);
  // (applied to the model itself: a failed batch changes nothing but the handles it consumed)
  nft::ApplyResult mr = nft::apply_script(model, svcs, sp);
  CommandResult rr = r.nft({"-f", sp});
  EXPECT_FALSE(mr.ok);
  EXPECT_NE(rr.exit_code, 0);
  EXPECT_EQ(render_all(mr), rr.err);

  // In dependency order (chains and sets first, then rules, then elements): both load it.
  std::string decl, rules, elems;
  std::istringstream in(svcs);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("add chain", 0) == 0 || line.rfind("add set", 0) == 0) decl += line + "\n";
    else if (line.rfind("add rule", 0) == 0) rules += line + "\n";
    else if (line.rfind("add element", 0) == 0) elems += line + "\n";
  }
  std::string ordered = decl + rules + elems;
  std::string op = r.write("ordered.nft", ordered);
  nft::ApplyResult ok = nft::apply_script(model, ordered, op);
  ASSERT_TRUE(ok.ok) << render_all(ok);
  ASSERT_EQ(r.nft({"-f", op}).exit_code, 0);
  EXPECT_EQ(nft::print_ruleset(model, {true}), r.nft({"-a", "list", "ruleset"}).out);
  // The listing read back is the same state.
  nft::NftState back;
  nft::NftError err;
  ASSERT_TRUE(nft::parse_listing(r.nft({"-a", "list", "ruleset"}).out, "listing", &back, &err)) << err.render();
  EXPECT_EQ(nft::print_ruleset(back, {true}), nft::print_ruleset(model, {true}));
  // knftables' Dump of the loaded state: kube-proxy's expected text, line for line (kube-proxy's
  // tests compare after sorting; the Dump order itself is knftables').
  std::string dump = nft::print_knftables_dump(model, nft::Family::Ip, "kube-proxy");
  auto lines = [](const std::string& t) {
    std::vector<std::string> v;
    std::istringstream s(t);
    for (std::string l; std::getline(s, l);)
      if (!l.empty() && l[0] != '#') v.push_back(l);
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(lines(dump), lines(base + svcs));
}

// A namespace and a model both holding exactly `state` (a script), for tests that apply one
// transaction after another to both.
void load_both(Runner& r, const std::string& state, nft::NftState* model) {
  ASSERT_EQ(r.nft({"flush", "ruleset"}).exit_code, 0);
  ASSERT_EQ(r.nft({"-f", r.write("state.nft", state)}).exit_code, 0);
  *model = nft::NftState{};
  ASSERT_TRUE(nft::apply_script(*model, state, "state.nft").ok);
}

// nat statements with and without a transport protocol before them, and rules whose '{' is not
// closed at the end of the file, each applied by nft and by the model: nft's verdict, and for
// the transport error its message byte for byte (an unclosed brace: kpc refuses what nft refuses,
// at the same line and column).
TEST(NftModelKernel, NatPortsAndUnclosedBracesAsInNft) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  const std::string state =
      "add table ip t\n"
      "add chain ip t c { type nat hook prerouting priority -100 ; }\n"
      "add chain ip t p { type nat hook postrouting priority 100 ; }\n"
      "add chain ip t f\n"
      "add set ip t ps { type inet_proto ; }\n"
      "add table ip6 t6\n"
      "add chain ip6 t6 c { type nat hook prerouting priority -100 ; }\n";
  const char* rules[] = {
      "add rule ip t c meta l4proto tcp dnat to 2.2.2.2:80", "add rule ip t c ip protocol tcp dnat to 2.2.2.2:80",
      "add rule ip t c tcp dport 80 dnat to 2.2.2.2:80", "add rule ip t c th dport 80 dnat to 2.2.2.2:80",
      "add rule ip t c meta l4proto { tcp, udp } dnat to 2.2.2.2:80", "add rule ip t c meta l4proto != tcp dnat to 2.2.2.2:80",
      "add rule ip t c dnat to 2.2.2.2", "add rule ip t c ip daddr 1.1.1.1 dnat to 2.2.2.2:80",
      "add rule ip t c dnat ip to 2.2.2.2:80", "add rule ip t c dnat to 2.2.2.2:80 comment \"x\"",
      "add rule ip t p snat to 2.2.2.2:80", "add rule ip t p meta l4proto udp snat to 2.2.2.2:80",
      "add rule ip6 t6 c dnat to [fd00::1]:80", "add rule ip6 t6 c meta l4proto tcp dnat to [fd00::1]:80",
      "add rule ip t c ip protocol != tcp dnat to 2.2.2.2:80", "add rule ip t c meta l4proto @ps dnat to 2.2.2.2:80",
      "add rule ip t c th dport { 80, 443 } dnat to 2.2.2.2:80", "add rule ip t c tcp dport != 80 dnat to 2.2.2.2:80",
      "add rule ip t c meta l4proto != { tcp, udp } dnat to 2.2.2.2:80",
      "add rule ip t c meta l4proto != tcp tcp dport 80 dnat to 2.2.2.2:80",
      "add rule ip t c ip saddr @nothere dnat to 2.2.2.2:80",
      "add rule ip t c meta l4proto tcp ip daddr 1.1.1.1 dnat to 2.2.2.2:80",
  };
  size_t n = 0, refused = 0;
  for (const char* rule : rules) {
    SCOPED_TRACE(rule);
    nft::NftState model;
    load_both(r, state, &model);
    const std::string tp = r.write("tx.nft", std::string(rule) + "\n");
    CommandResult real = r.nft({"-f", tp});
    nft::ApplyResult mr = nft::apply_script(model, std::string(rule) + "\n", tp);
    EXPECT_EQ(real.exit_code == 0, mr.ok) << real.err << render_all(mr);
    if (real.exit_code != 0) {
      ++refused;
      EXPECT_EQ(real.err, render_all(mr));
    }
    EXPECT_EQ(strip_table_handles(r.nft({"-a", "list", "ruleset"}).out),
              strip_table_handles(nft::print_ruleset(model, {true})));
    ++n;
  }
  EXPECT_EQ(n, std::size(rules));
  EXPECT_GE(refused, 11u);
  // Unclosed braces at the end of the file: nft refuses each, and so does kpc; at nft's place when
  // nft's error is the end of the file (not when nft stops at an earlier token: `accept` below).
  const std::pair<const char*, bool> unclosed[] = {{"add rule ip t f {", true},
                                                   {"add rule ip t f ip daddr { 1.1.1.1\n", true},
                                                   {"add rule ip t f ip daddr { 1.1.1.1,\n 2.2.2.2 accept\n", false}};
  for (const auto& [text, same_place] : unclosed) {
    SCOPED_TRACE(text);
    nft::NftState model;
    load_both(r, state, &model);
    const std::string tp = r.write("tx.nft", text);
    CommandResult real = r.nft({"-f", tp});
    nft::ApplyResult mr = nft::apply_script(model, text, tp);
    EXPECT_NE(real.exit_code, 0);
    ASSERT_FALSE(mr.ok);
    EXPECT_TRUE(mr.not_modelled());
    if (!same_place) continue;
    // nft's first line starts "FILE:LINE:COL-COL: Error: syntax error, unexpected end of file"
    EXPECT_EQ(real.err.substr(0, real.err.find(": Error:")), mr.error->to_string().substr(0, mr.error->to_string().find(": Error:")))
        << real.err << mr.error->render();
  }
}

// Rules of kube-proxy's vocabulary, mutated token by token (a token dropped, repeated, swapped
// with the next, replaced by another word of the vocabulary, or the rule cut short), each added
// by nft and by the model to the same state (`flush chain` then `add rule`): whenever the model
// takes a rule, nft takes it too and lists the same ruleset; whenever the model refuses one with
// nft's own message (not "not modelled"), nft refuses it with that message. (The model keeps no
// rule it does not read: those are "not modelled", and only counted.) 25 seeds, 5 of them IPv6.
// CI: 400 mutants; KPC_LONG=1: 4,000.
TEST(NftModelKernel, MutatedRulesTakenByTheModelAreTakenByNft) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  const std::string state =
      "add table ip t\n"
      "add chain ip t nat { type nat hook prerouting priority -100 ; }\n"
      "add chain ip t post { type nat hook postrouting priority 100 ; }\n"
      "add chain ip t filt { type filter hook forward priority 0 ; }\n"
      "add chain ip t svc\nadd chain ip t ep\n"
      "add set ip t s4 { type ipv4_addr ; }\n"
      "add set ip t aff { type ipv4_addr ; flags dynamic,timeout ; timeout 3h ; }\n"
      "add map ip t m { type ipv4_addr . inet_proto . inet_service : verdict ; }\n"
      "add table ip6 t6\n"
      "add chain ip6 t6 nat { type nat hook output priority -100 ; }\n"
      "add chain ip6 t6 filt { type filter hook input priority 0 ; }\n"
      "add chain ip6 t6 svc\nadd chain ip6 t6 ep\n"
      "add set ip6 t6 s6 { type ipv6_addr ; }\n"
      "add map ip6 t6 m { type ipv6_addr . inet_proto . inet_service : verdict ; }\n";
  // (chain, rule): the chain a rule of this kind may be in
  const std::pair<const char*, const char*> seeds[] = {
      {"svc", "ip daddr 172.30.0.41 ip saddr != 10.0.0.0/8 jump ep"},
      {"svc", "numgen random mod 2 vmap { 0 : goto ep, 1 : goto ep }"},
      {"ep", "ip saddr 10.180.0.1 jump svc"},
      {"nat", "meta l4proto tcp dnat to 10.180.0.1:8080"},
      {"nat", "ip daddr . meta l4proto . th dport vmap @m"},
      {"nat", "tcp dport 80 ip daddr 1.2.3.4 dnat to 10.180.0.2:80"},
      {"ep", "update @aff { ip saddr }"},
      {"svc", "ip saddr @aff goto ep"},
      {"filt", "ct state new jump svc"},
      {"filt", "ct state invalid drop"},
      {"filt", "ip daddr @s4 reject"},
      {"filt", "fib saddr type local jump svc comment \"masquerade local traffic\""},
      {"post", "mark and 0x4000 == 0 return"},
      {"post", "mark set mark xor 0x4000"},
      {"post", "masquerade fully-random"},
      {"svc", "mark set mark or 0x4000"},
      {"filt", "iifname != \"eth0\" jump svc"},
      {"filt", "ip saddr != { 203.0.113.0/25, 5.6.7.8 } drop"},
      {"filt", "meta l4proto { tcp, udp } th dport 53 accept"},
      {"filt", "udp sport 1-100 counter drop"},
      {"ip6 t6 svc", "ip6 daddr fd00:10:96::41 ip6 saddr != fd00:10::/64 jump ep"},
      {"ip6 t6 nat", "meta l4proto tcp dnat to [fd00:10::1]:8080"},
      {"ip6 t6 nat", "ip6 daddr . meta l4proto . th dport vmap @m"},
      {"ip6 t6 filt", "ip6 daddr @s6 drop"},
      {"ip6 t6 filt", "ip6 saddr { fd00::/64, 2001:db8::1 } accept"},
  };
  const char* words[] = {"ip", "saddr", "daddr", "meta", "l4proto", "tcp", "udp", "th", "dport", "sport", "ct",
                         "state", "new", "jump", "goto", "accept", "drop", "return", "dnat", "to", "masquerade",
                         "mark", "set", "or", "xor", "and", "==", "!=", "numgen", "random", "mod", "vmap", "@s4",
                         "@m", "@aff", "{", "}", ":", ",", "10.0.0.1", "80", "0x4000", "svc", "comment", "\"x\"",
                         "counter", "fib", "type", "local", "update", "reject", "protocol", "ip6", "snat", ".",
                         "fd00::1", "[fd00::1]:80", "@s6", "fd00::/64", "nexthdr"};
  size_t count = 400;
  if (const char* l = std::getenv("KPC_LONG"); l && std::string(l) == "1") count = 4000;
  std::mt19937_64 rng(20261205);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto reload = [&](nft::NftState* model) { load_both(r, state, model); };
  nft::NftState model;
  reload(&model);
  size_t canonical = 0, not_modelled = 0, refused_alike = 0, mismatches = 0;
  for (size_t k = 0; k < count && mismatches < 5; ++k) {
    const auto& [chain, seed] = seeds[pick(std::size(seeds))];
    std::vector<std::string> toks;
    {
      std::istringstream in(seed);
      for (std::string w; in >> w;) toks.push_back(w);
    }
    const int edits = 1 + static_cast<int>(pick(2));
    for (int e = 0; e < edits && !toks.empty(); ++e) {
      const size_t i = pick(toks.size());
      switch (pick(5)) {
        case 0: toks.erase(toks.begin() + static_cast<long>(i)); break;
        case 1: toks.insert(toks.begin() + static_cast<long>(i), toks[i]); break;
        case 2: if (i + 1 < toks.size()) std::swap(toks[i], toks[i + 1]); break;
        case 3: toks[i] = words[pick(std::size(words))]; break;
        default: toks.resize(i + 1); break;
      }
    }
    std::string rule;
    for (const auto& w : toks) rule += (rule.empty() ? "" : " ") + w;
    // (a seed's chain is "CHAIN" in table ip t, or "FAMILY TABLE CHAIN")
    const std::string where = std::string(chain).find(' ') == std::string::npos ? std::string("ip t ") + chain : chain;
    const std::string tx = "flush chain " + where + "\nadd rule " + where + " " + rule + "\n";
    const std::string tp = r.write("tx.nft", tx);
    nft::ApplyResult mr = nft::apply_script(model, tx, tp);
    if (mr.not_modelled()) {
      ++not_modelled;
      continue;
    }
    CommandResult real = r.nft({"-f", tp});
    const bool real_ok = real.exit_code == 0;
    bool bad = false;
    if (mr.ok) {
      ++canonical;
      bad = !real_ok || strip_table_handles(r.nft({"list", "ruleset"}).out) != nft::print_ruleset(model);
    } else {
      ++refused_alike;
      bad = real_ok || real.err != render_all(mr);
    }
    if (bad) {
      ++mismatches;
      ADD_FAILURE() << "mutant " << k << ": nft " << (real_ok ? "takes" : "refuses") << ", the model "
                    << (mr.ok ? "takes" : "refuses") << ":\n" << tx << "--- nft:\n" << real.err << "--- model:\n"
                    << render_all(mr) << "--- nft list:\n" << r.nft({"list", "ruleset"}).out << "--- model list:\n"
                    << nft::print_ruleset(model);
      reload(&model);
    }
  }
  std::printf("mutated rules: %zu: %zu taken and canonical (nft agrees), %zu refused alike, %zu not modelled, %zu "
              "mismatches\n",
              count, canonical, refused_alike, not_modelled, mismatches);
  EXPECT_GT(canonical, count / 20);
  EXPECT_EQ(mismatches, 0u);
}

// The names the model refuses unquoted (nft::keyword_names(), keywords.cpp) derived again from
// the nft installed here: every token name of nft's parser (the quoted words in libnftables.so)
// written unquoted as a table, chain, set and map name, a rule's chain, a jump target and a set
// reference, checked with `nft -c`. A word nft refuses somewhere must be in the list (else the
// model would take a name nft refuses), and every word of the list must be refused somewhere.
TEST(NftModelKernel, KeywordNamesAsInNft) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  CommandResult lib = run({"sh", "-c", "ldd \"$(command -v nft)\" | grep -o '/[^ ]*libnftables[^ ]*'"});
  std::string path = lib.out.substr(0, lib.out.find('\n'));
  CommandResult words = run({"sh", "-c", "strings '" + path + "' | grep -E '^\"[a-z][a-z0-9_-]*\"$' | tr -d '\"' | sort -u"});
  if (path.empty() || words.exit_code != 0 || words.out.empty()) GTEST_SKIP() << "libnftables or strings(1) not found";
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  ASSERT_EQ(r.nft({"-f", r.write("state.nft", "add table ip t\nadd chain ip t c\nadd set ip t s4 { type ipv4_addr ; }\n")}).exit_code, 0);
  const char* places[] = {"add table ip %s\n", "add chain ip t %s\n", "add set ip t %s { type ipv4_addr ; }\n",
                          "add map ip t %s { type ipv4_addr : verdict ; }\n", "add rule ip t %s accept\n",
                          "add rule ip t c jump %s\n", "add rule ip t c ip saddr @%s accept\n"};
  auto refused_somewhere = [&](const std::string& w) {
    for (const char* p : places) {
      char line[256];
      std::snprintf(line, sizeof line, p, w.c_str());
      if (r.nft({"-c", "-f", r.write("k.nft", line)}).err.find("syntax error") != std::string::npos) return true;
    }
    return false;
  };
  std::istringstream in(words.out);
  std::set<std::string> listed;
  for (auto w : nft::keyword_names()) listed.insert(std::string(w));
  size_t n = 0, refused = 0;
  for (std::string w; std::getline(in, w);) {
    if (w.empty()) continue;
    ++n;
    const bool nft_refuses = refused_somewhere(w);
    refused += nft_refuses;
    EXPECT_EQ(nft_refuses, listed.count(w) > 0) << "'" << w << "'";
  }
  // the operator words (their token names are symbols)
  for (const char* w : {"and", "or", "xor", "not", "eq", "ne", "lt", "gt", "le", "ge", "lshift", "rshift"}) {
    EXPECT_TRUE(refused_somewhere(w)) << w;
    EXPECT_TRUE(listed.count(w)) << w;
  }
  std::printf("nft token names: %zu, refused as names somewhere: %zu (listed: %zu)\n", n, refused, listed.size());
  EXPECT_GT(n, 200u);
}

// What the model refuses with nft's words (not "not modelled"), nft refuses with those words:
// the first line of nft's stderr is the model's first error, and a lone error is the same byte
// for byte. The cases: words nft does not know where a statement starts (alone, with a value,
// after other statements, before or after a terminal statement), each word nft's parser names
// as such a word, each keyword after one, a field nft does not know after each protocol keyword,
// statements after terminal ones, unbalanced blocks. (The model says nothing of what it calls
// not modelled: those are counted.)
TEST(NftModelKernel, RefusedAsNftRefuses) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  const std::string base =
      "add table ip kube-proxy\nadd chain ip kube-proxy services\nadd chain ip kube-proxy x\n"
      "add set ip kube-proxy s { type ipv4_addr ; }\n";
  std::vector<std::string> scripts;
  auto rule = [&](const std::string& text) { scripts.push_back(base + "add rule ip kube-proxy services " + text + "\n"); };
  for (const char* t : {"frobnicate 7", "foo bar", "foo", "foo \"bar\"", "foo == 7", "foo != bar", "foo 10.0.0.1",
                        "foo 7 accept", "foo 7 counter", "counter foo 7", "counter foo", "accept foo 7", "accept foo",
                        "foo 7 bar", "foo 7 bar 8", "foo comment \"x\"", "foo 7 comment \"x\"", "ip daddr 1.2.3.4 foo",
                        "ip daddr @s foo 7", "ip daddr @nosuch foo 7", "foo 7 jump nochain", "DROP", "ACCEPT 1",
                        "ip frobnicate 7", "ip da 10.0.0.1", "tcp dprot 80", "udp dprot 53", "th dprot 53",
                        "meta l4prot tcp", "ct stat new", "fib daddr type local drop counter",
                        "drop counter packets 1 bytes 2", "drop meta mark set 0x4000", "drop ct state new",
                        "drop ip daddr { 1.2.3.4, 5.6.7.8 }", "drop ip daddr vmap { 1.2.3.4 : jump x }",
                        "drop numgen random mod 2 vmap { 0 : jump x, 1 : jump x }", "goto x counter",
                        "jump x jump x", "return drop", "reject counter", "masquerade masquerade",
                        "meta l4proto tcp dnat to 1.2.3.4:80 counter", "meta l4proto tcp dnat to 1.2.3.4:80 foo 7",
                        "ip daddr 1.2.3.4 drop update @s { ip saddr }", "drop iifname \"eth0\""})
    rule(t);
  for (const char* end : {";\n", "", " }\n"}) scripts.push_back(base + "add rule ip kube-proxy services foo" + end);
  scripts.push_back(base + "add rule ip nosuch services foo 7\n");
  scripts.push_back(base + "add rule ip kube-proxy nochain foo 7\n");
  scripts.push_back(base + "add rule ip kube-proxy services foo 7\nadd rule ip kube-proxy services bar\n");
  // each keyword after a word nft does not know; each word nft's parser names, not a keyword
  // where a statement starts, compared with a value; a field nft does not know after each
  // protocol keyword
  for (auto k : nft::keyword_names()) rule("foo " + std::string(k));
  for (auto w : nft::parser_words())
    if (nft::is_plain_name(w)) rule(std::string(w) + " 7");
  for (const char* k : {"ip", "ip6", "tcp", "udp", "udplite", "sctp", "dccp", "th", "meta", "ct", "fib", "numgen",
                        "ether", "vlan", "arp", "icmp", "icmpv6", "ah", "esp", "comp", "rt", "exthdr"})
    rule(std::string(k) + " frobnicate 7");
  // blocks
  for (const char* t : {"table ip t {\n}\n}\n", "add table ip t\n}\n", "table ip t {\n}}\n", "table ip t {\n} }\n",
                        "table ip t {\n\tchain x {\n\t}}\n}\n", "table ip t { chain x { } }\n",
                        "table ip t { set s { type ipv4_addr; } }\n", "table ip t {\n\tchain x {\n\t\taccept }\n}\n",
                        "table ip t {\n\tchain x {\n\t\tfoo }\n}\n", "add table ip t\nadd chain ip t x\nadd rule ip t x accept }\n",
                        "add table ip t\nadd chain ip t x {\n", "table ip t {\n\tchain x {\n\t\taccept",
                        "table ip t {\n\tchain x {\n\t\tcounter packets 0 bytes 0", "table ip t {\n\tchain x {\n\t}",
                        "table ip t {\n\tchain x {", "table ip t {",
                        "table ip t {\n\tchain x {\n\t\ttype filter hook input priority 0; policy accept;"})
    scripts.push_back(t);
  size_t claimed = 0, not_modelled = 0, mismatches = 0;
  for (size_t i = 0; i < scripts.size(); ++i) {
    const std::string path = r.write("refuse.nft", scripts[i]);
    nft::NftState model;
    nft::ApplyResult mr = nft::apply_script(model, scripts[i], path);
    if (mr.not_modelled()) {
      ++not_modelled;
      continue;
    }
    CommandResult real = r.nft({"-c", "-f", path});
    ++claimed;
    const std::string first = real.err.substr(0, real.err.find('\n'));
    const bool lone = std::count(real.err.begin(), real.err.end(), '\n') == 3;
    if (mr.ok || real.exit_code == 0 || first != mr.error->to_string() || (lone && real.err != render_all(mr))) {
      ++mismatches;
      ADD_FAILURE() << "script " << i << ":\n" << scripts[i] << "--- nft (exit " << real.exit_code << "):\n" << real.err
                    << "--- model:\n" << (mr.ok ? "(taken)\n" : render_all(mr));
    }
  }
  std::printf("refusals: %zu scripts, %zu refused in nft's words as nft refuses them, %zu not modelled\n",
              scripts.size(), claimed, not_modelled);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(claimed, scripts.size() * 3 / 4);
}

// A real listing (the example's transaction applied by nft and listed) cut at every line break
// and at every 7th byte: wherever the model refuses the cut in nft's words, nft's first error
// line is the same; every cut at a line break is refused so.
TEST(NftModelKernel, TruncatedListingsAsInNft) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  Runner r;
  ASSERT_TRUE(r.ns.ok());
  CommandResult tx = run({bin_path("kpc"), "compile", source_path("fixtures/example"), "--backend", "nftables"});
  ASSERT_EQ(tx.exit_code, 0) << tx.err;
  ASSERT_EQ(r.nft({"-f", r.write("tx.nft", tx.out)}).exit_code, 0);
  const std::string listing = r.nft({"list", "ruleset"}).out;
  ASSERT_FALSE(listing.empty());
  size_t cuts = 0, claimed = 0, line_cuts = 0, line_claimed = 0, mismatches = 0;
  for (size_t n = 1; n < listing.size() && mismatches < 5; ++n) {
    const bool line_cut = listing[n - 1] == '\n';
    if (!line_cut && n % 7) continue;
    ++cuts;
    line_cuts += line_cut;
    const std::string cut = listing.substr(0, n);
    const std::string path = r.write("cut.nft", cut);
    nft::NftState model;
    nft::NftError err;
    ASSERT_FALSE(nft::parse_listing(cut, path, &model, &err)) << cut;
    if (err.not_modelled) continue;
    ++claimed;
    line_claimed += line_cut;
    CommandResult real = r.nft({"-c", "-f", path});
    const std::string first = real.err.substr(0, real.err.find('\n'));
    if (real.exit_code == 0 || first != err.to_string() || (line_cut && real.err != err.render())) {
      ++mismatches;
      ADD_FAILURE() << "cut at " << n << ":\n--- nft:\n" << real.err << "--- model:\n" << err.render();
    }
  }
  std::printf("truncated listing: %zu cuts (%zu at line breaks), %zu refused in nft's words (%zu at line breaks)\n",
              cuts, line_cuts, claimed, line_claimed);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(line_claimed, line_cuts);
}

// The words of nft's parser (nft::parser_words(), keywords.cpp) derived again from nft itself.
TEST(NftModelKernel, ParserWordsAsInNft) {
  if (auto why = differential_unavailable(); !why.empty()) GTEST_SKIP() << why;
  CommandResult lib = run({"sh", "-c", "ldd \"$(command -v nft)\" | grep -o '/[^ ]*libnftables[^ ]*'"});
  std::string path = lib.out.substr(0, lib.out.find('\n'));
  CommandResult words = run({"sh", "-c", "strings '" + path + "' | grep -E '^\"[a-z][a-z0-9_-]*\"$' | tr -d '\"' | LC_ALL=C sort -u"});
  if (path.empty() || words.exit_code != 0 || words.out.empty()) GTEST_SKIP() << "libnftables or strings(1) not found";
  std::string listed;
  for (auto w : nft::parser_words()) listed += std::string(w) + "\n";
  EXPECT_EQ(words.out, listed);
}

}  // namespace
}  // namespace kpc::test
