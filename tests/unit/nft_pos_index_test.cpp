// detail::PosIndex (verifier/nft/internal.h): the nft model's flat name -> position index of a
// table's chains and sets, which keeps no key strings and reads the names from the objects.
// Held to a std::unordered_map under random churn: adds, removals (tombstones), objects moving
// (compaction), names coming back, names that collide in their first bytes, and enough of all
// of it to rehash many times.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "verifier/nft/internal.h"

namespace kpc::verifier::nft::detail {
namespace {

struct Named {
  std::string name;
};

TEST(NftPosIndex, FollowsAMapUnderChurn) {
  std::mt19937_64 rng(20261205);
  std::vector<Named> objects;                       // positions; a removed object keeps its slot
  std::vector<bool> live;
  std::unordered_map<std::string, uint32_t> want;  // the reference
  PosIndex ix;
  auto name_at = [&](uint32_t p) { return p < objects.size() ? std::string_view(objects[p].name) : std::string_view(); };
  auto some_name = [&] {
    // a small name space (names come back) with long shared prefixes
    return "service-" + std::string(40, 'x') + "/" + std::to_string(rng() % 3000);
  };
  size_t finds = 0, adds = 0, removals = 0, moves = 0;
  for (int step = 0; step < 200000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {  // add (emplace: a name already there keeps its entry)
      std::string n = some_name();
      objects.push_back({n});
      live.push_back(true);
      const uint32_t pos = static_cast<uint32_t>(objects.size() - 1);
      ix.emplace(n, pos, name_at);
      want.emplace(n, pos);
      ++adds;
    } else if (op < 6 && !want.empty()) {  // remove the entry of a name at its position
      auto it = want.begin();
      std::advance(it, static_cast<long>(rng() % std::min<size_t>(want.size(), 64)));
      ix.erase(it->first, it->second);
      live[it->second] = false;
      want.erase(it);
      ++removals;
    } else if (op == 6 && !objects.empty()) {  // an object moves (as compaction moves it)
      const uint32_t from = static_cast<uint32_t>(rng() % objects.size());
      auto it = want.find(objects[from].name);
      if (it == want.end() || it->second != from) continue;
      objects.push_back(objects[from]);
      live.push_back(true);
      const uint32_t to = static_cast<uint32_t>(objects.size() - 1);
      ix.move(objects[from].name, from, to);
      live[from] = false;
      it->second = to;
      ++moves;
    } else {  // look a name up
      const std::string n = some_name();
      auto it = want.find(n);
      ASSERT_EQ(ix.find(n, name_at), it == want.end() ? PosIndex::kNone : it->second) << n << " at step " << step;
      ++finds;
    }
    ASSERT_EQ(ix.size(), want.size()) << "at step " << step;
  }
  for (const auto& [n, p] : want) ASSERT_EQ(ix.find(n, name_at), p) << n;
  // a copy is the same index
  const PosIndex copy = ix;
  for (const auto& [n, p] : want) ASSERT_EQ(copy.find(n, name_at), p) << n;
  EXPECT_GT(adds, 10000u);
  EXPECT_GT(removals, 10000u);
  EXPECT_GT(moves, 1000u);
  EXPECT_GT(finds, 10000u);
}

TEST(NftPosIndex, AnEmptyIndexFindsNothing) {
  PosIndex ix;
  auto none = [](uint32_t) { return std::string_view(); };
  EXPECT_EQ(ix.find("a", none), PosIndex::kNone);
  ix.erase("a", 0);
  ix.move("a", 0, 1);
  EXPECT_EQ(ix.size(), 0u);
}

}  // namespace
}  // namespace kpc::verifier::nft::detail
