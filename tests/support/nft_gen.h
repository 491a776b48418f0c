// Random nft states and transactions over kube-proxy's vocabulary (nftables mode), for the
// differential test against the real `nft -f` and for fuzz seeds. Deterministic in the seed.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "verifier/nft/nft.h"

namespace kpc::test {

class NftGen {
 public:
  explicit NftGen(uint64_t seed) : rng_(seed) {}

  /// A valid script that builds a kube-proxy-like state from nothing (tables, base chains,
  /// sets and maps, some services with their chains, rules and elements), in dependency order.
  std::string state_script();
  /// A transaction against `state` (as the model holds it): 1..8 operations, valid or not
  /// (missing chains, referenced chains deleted, absent elements, duplicate creates,
  /// misspelled names, rule handles and indexes, kube-proxy's first-sync add+delete, ...).
  std::string transaction(const verifier::nft::NftState& state);
  /// A full sync's rewrite of 1..3 chains against `state`: `flush chain X` and X's rules
  /// added again (as written), mostly unchanged, sometimes with one changed, dropped, added
  /// or reordered, flushed twice, or with other commands between the re-adds (rules on other
  /// chains, flushes, deletions of what the rules reference, elements, a transaction()).
  std::string rewrite(const verifier::nft::NftState& state);

  uint64_t next(uint64_t n) { return n ? rng_() % n : 0; }
  bool chance(int percent) { return static_cast<int>(next(100)) < percent; }

 private:
  std::mt19937_64 rng_;
  std::vector<std::string> fam_;  ///< per state: families with a kube-proxy table

  std::string pick(const std::vector<std::string>& v) { return v.empty() ? std::string("x") : v[next(v.size())]; }
  std::string chain_name(int rank);
  std::string rule_for(const std::string& chain, const verifier::nft::Table& t, bool v6);
  std::string misspell(const std::string& s);
};

/// An apply's result as one comparable text: ok / failed, then every error as nft prints it.
inline std::string apply_outcome(const verifier::nft::ApplyResult& r) {
  std::string s = r.ok ? "ok" : "failed";
  for (const auto& e : r.errors) s += "\n" + e.render();
  return s;
}

/// A chain's rank in kube-proxy's jump graph (base 0 ... leaves 5): the generator only jumps
/// to higher ranks, so that it writes no loops.
int nft_chain_rank(const std::string& name, bool base);

}  // namespace kpc::test
