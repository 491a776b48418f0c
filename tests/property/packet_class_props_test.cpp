// The packet-class operations the comparison leans on, against their definitions: overlaps
// (field by field, without building an intersection) says exactly !intersect(o).empty(u), for
// RangeSet, ClientSet and whole classes, and agrees with a search of every point of small
// domains; a class overlaps its own subtract pieces never and its intersections always.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "verifier/sem/packet_class.h"
#include "verifier/sem/universe.h"

namespace kpc::verifier::sem {
namespace {

// Small domains, so that random sets often touch and every point can be visited.
constexpr uint32_t kDomain = 10;

// A set of the points of a random mask: the whole domain with the others taken out (sorted,
// disjoint, maximal intervals, as the operations keep them).
template <typename T>
RangeSet<T> random_ranges(std::mt19937& rng) {
  const uint32_t kind = rng() % 6;
  if (kind == 0) return RangeSet<T>();                         // empty
  if (kind == 1) return RangeSet<T>::range(0, kDomain - 1);    // everything
  RangeSet<T> s = RangeSet<T>::range(0, kDomain - 1);
  const uint32_t keep = kind == 2 ? 1 : 2 + rng() % 3;          // points are kept with p = 1 - 1/(keep+1)
  for (uint32_t p = 0; p < kDomain; ++p)
    if (rng() % (keep + 1) == 0 || (kind == 2 && p % 3 != 0)) s = s.subtract(p, p);
  return s;
}

SmallSet random_small(std::mt19937& rng, unsigned n) {
  uint64_t b = rng() & ((uint64_t(1) << n) - 1);
  if (rng() % 3 == 0) b = (uint64_t(1) << n) - 1;
  return SmallSet{b};
}

ClientSet random_clients(std::mt19937& rng, uint32_t universe) {
  ClientSet c;
  c.complement = rng() % 2;
  for (uint32_t id = 0; id < universe; ++id)
    if (rng() % 3 == 0) c.ids.push_back(id);
  return c;
}

struct Fixture {
  Universe u;
  explicit Fixture(std::mt19937& rng) {
    u.addr_max = kDomain - 1;
    u.ifaces = {"eth0", "eth1"};
    const uint32_t clients = 1 + rng() % 3;  // "(new client)" and up to 2 remembered
    for (uint32_t i = 1; i < clients; ++i) u.affinity_id("k" + std::to_string(i));
    u.dst_cuts = {0};
  }
};

PacketClass random_class(std::mt19937& rng, const Universe& u) {
  PacketClass c = PacketClass::everything(u);
  // Most fields left whole, so that classes often overlap and the one field that decides is
  // exercised alone; the others random.
  auto pick = [&] { return rng() % 3 == 0; };
  if (pick()) c.src = random_ranges<u128>(rng);
  if (pick()) c.dst = random_ranges<u128>(rng);
  if (pick()) c.sport = random_ranges<uint32_t>(rng);
  if (pick()) c.dport = random_ranges<uint32_t>(rng);
  if (pick()) c.proto = rng() % 2 ? ProtoSet::of(6) : ProtoSet::of(17);
  if (pick()) c.ct = random_small(rng, kCtCombos);
  if (pick()) c.in_iface = random_small(rng, 2);
  if (pick()) c.out_iface = random_small(rng, 2);
  if (pick()) c.age = random_small(rng, u.age_buckets());
  if (pick()) c.client = random_clients(rng, static_cast<uint32_t>(u.affinity_keys.size()));
  if (pick()) {
    c.mark_known = rng() % 4;
    c.mark_value = rng() % 4 & c.mark_known;
  }
  if (pick()) {
    c.pred_known = rng() % 4;
    c.pred_value = rng() % 4 & c.pred_known;
  }
  return c;
}

// Is there a point in both sets? (every value of the small domain tried)
template <typename T>
bool common_point(const RangeSet<T>& a, const RangeSet<T>& b) {
  for (uint32_t p = 0; p < kDomain; ++p)
    if (a.contains(p) && b.contains(p)) return true;
  return false;
}

RC_GTEST_PROP(PacketClassProps, RangeSetOverlapsIsANonEmptyIntersection, (uint32_t seed)) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 200; ++i) {
    auto a = random_ranges<uint32_t>(rng), b = random_ranges<uint32_t>(rng);
    RC_ASSERT(a.overlaps(b) == !a.intersect(b).empty());
    RC_ASSERT(a.overlaps(b) == common_point(a, b));
    RC_ASSERT(a.overlaps(b) == b.overlaps(a));
  }
}

// The look-up versions of intersect and subtract give the very intervals the plain ones did
// (a pass over both sets; one subtraction per interval of o), so classes print as before.
// The intervals the plain intersection gave (one pass over both sets).
std::vector<std::pair<uint32_t, uint32_t>> plain_intersect(const RangeSet<uint32_t>& x, const RangeSet<uint32_t>& y) {
  const auto &a = x.intervals(), &b = y.intervals();
  std::vector<std::pair<uint32_t, uint32_t>> r;
  for (size_t i = 0, k = 0; i < a.size() && k < b.size();) {
    uint32_t lo = std::max(a[i].first, b[k].first), hi = std::min(a[i].second, b[k].second);
    if (lo <= hi) r.push_back({lo, hi});
    a[i].second < b[k].second ? ++i : ++k;
  }
  return r;
}

RC_GTEST_PROP(PacketClassProps, RangeSetIntersectAndSubtractAsBefore, (uint32_t seed)) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 200; ++i) {
    auto a = random_ranges<uint32_t>(rng), b = random_ranges<uint32_t>(rng);
    RangeSet<uint32_t> by_each = a;
    for (const auto& [lo, hi] : b.intervals()) by_each = by_each.subtract(lo, hi);
    RC_ASSERT(a.subtract(b) == by_each);
    RC_ASSERT(a.intersect(b).intervals() == plain_intersect(a, b));
    for (uint32_t p = 0; p < kDomain; ++p) {
      RC_ASSERT(a.intersect(b).contains(p) == (a.contains(p) && b.contains(p)));
      RC_ASSERT(a.subtract(b).contains(p) == (a.contains(p) && !b.contains(p)));
      RC_ASSERT(a.overlaps(p, p) == a.contains(p));
    }
  }
}

RC_GTEST_PROP(PacketClassProps, ClientSetOverlapsIsANonEmptyIntersection, (uint32_t seed)) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 200; ++i) {
    const uint32_t universe = 1 + rng() % 5;
    ClientSet a = random_clients(rng, universe), b = random_clients(rng, universe);
    bool common = false;
    for (uint32_t id = 0; id < universe; ++id) common |= a.has(id) && b.has(id);
    RC_ASSERT(a.overlaps(b, universe) == !a.intersect(b).empty(universe));
    RC_ASSERT(a.overlaps(b, universe) == common);
  }
}

RC_GTEST_PROP(PacketClassProps, ClassOverlapsIsANonEmptyIntersection, (uint32_t seed)) {
  std::mt19937 rng(seed);
  Fixture f(rng);
  size_t overlapping = 0;
  for (int i = 0; i < 300; ++i) {
    PacketClass a = random_class(rng, f.u), b = random_class(rng, f.u);
    const bool o = a.overlaps(b, f.u);
    RC_ASSERT(o == !a.intersect(b).empty(f.u));
    RC_ASSERT(o == b.overlaps(a, f.u));
    overlapping += o;
    // A class meets its intersection with another (when not empty) and none of what is
    // left of it once the other is taken out.
    if (o) RC_ASSERT(a.overlaps(a.intersect(b), f.u));
    for (const PacketClass& piece : a.subtract(b, f.u)) {
      RC_ASSERT(!piece.overlaps(b, f.u));
      if (!a.empty(f.u)) RC_ASSERT(piece.overlaps(a, f.u));  // an empty a comes back as it is
    }
  }
  RC_TAG(overlapping > 0 ? "some overlap" : "none overlap");
}

}  // namespace
}  // namespace kpc::verifier::sem
