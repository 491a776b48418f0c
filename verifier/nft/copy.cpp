// A copy of a large state on two threads (nft.h, copy_on_two_threads).
#include <utility>
#include <vector>

#include "compiler/support/side_by_side.h"
#include "verifier/nft/nft.h"

namespace kpc::verifier::nft {

NftState copy_on_two_threads(NftState& s) {
  // The chains (most of a kube-proxy table: 130,000 chains, 300,000 rules at 10,000
  // Services) are set aside and copied in two halves, one on each thread; the rest (tables,
  // sets and elements, the look-up indexes) is an ordinary copy of the state without them,
  // on the second thread. Chains are plain values (no index refers to their addresses), so
  // the copy is the copy constructor's, and s is as it was when this returns.
  std::vector<std::vector<Chain>> aside(s.tables.size()), copies(s.tables.size());
  for (size_t t = 0; t < s.tables.size(); ++t) {
    aside[t] = std::move(s.tables[t].chains);
    copies[t].resize(aside[t].size());
  }
  auto copy_range = [&](bool second_half) {
    for (size_t t = 0; t < aside.size(); ++t) {
      const size_t n = aside[t].size(), mid = n / 2;
      const size_t b = second_half ? mid : 0, e = second_half ? n : mid;
      for (size_t i = b; i < e; ++i) copies[t][i] = aside[t][i];
    }
  };
  // s gets its chains back however the copy ends.
  struct GiveBack {
    NftState& s;
    std::vector<std::vector<Chain>>& aside;
    ~GiveBack() {
      for (size_t t = 0; t < s.tables.size(); ++t) s.tables[t].chains = std::move(aside[t]);
    }
  };
  NftState out;
  {
    GiveBack give_back{s, aside};
    side_by_side(
        [&] {
          out = s;  // everything but the chains
          copy_range(true);
        },
        [&] { copy_range(false); });
  }
  for (size_t t = 0; t < out.tables.size(); ++t) out.tables[t].chains = std::move(copies[t]);
  return out;
}

}  // namespace kpc::verifier::nft
