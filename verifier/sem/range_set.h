// Sets of integers as sorted, disjoint, inclusive intervals: the per-field
// domain of a packet class. Addresses use unsigned __int128 (an IPv4 address
// is its 32-bit value), ports uint32_t. Every operation is exact; the sets
// kube-proxy's rules produce stay small (a class is split by the few CIDRs and
// ports the rules on its path test), so a flat vector beats any tree here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kpc::verifier::sem {

using u128 = unsigned __int128;

template <typename T>
class RangeSet {
 public:
  using Interval = std::pair<T, T>;  ///< [first, second]

  RangeSet() = default;
  static RangeSet range(T lo, T hi) {
    RangeSet s;
    if (lo <= hi) s.iv_.push_back({lo, hi});
    return s;
  }
  static RangeSet point(T v) { return range(v, v); }

  bool empty() const { return iv_.empty(); }
  const std::vector<Interval>& intervals() const { return iv_; }
  T first() const { return iv_.front().first; }
  bool is_point() const { return iv_.size() == 1 && iv_[0].first == iv_[0].second; }

  bool contains(T v) const {
    auto it = std::upper_bound(iv_.begin(), iv_.end(), v, [](T x, const Interval& i) { return x < i.first; });
    return it != iv_.begin() && std::prev(it)->second >= v;
  }
  /// True if every element of [lo, hi] is in the set.
  bool covers(T lo, T hi) const {
    auto it = std::upper_bound(iv_.begin(), iv_.end(), lo, [](T x, const Interval& i) { return x < i.first; });
    return it != iv_.begin() && std::prev(it)->first <= lo && std::prev(it)->second >= hi;
  }
  bool overlaps(T lo, T hi) const {
    auto it = first_ending_at_or_after(lo, 0);
    return it < iv_.size() && iv_[it].first <= hi && lo <= hi;
  }

  /// this ∩ o is not empty (what !intersect(o).empty() says, without building it). A set of
  /// one interval is looked up in the other (sets with thousands of intervals — all ports but
  /// the NodePorts — meet one-port sets all the time).
  bool overlaps(const RangeSet& o) const {
    if (o.iv_.size() == 1) return overlaps(o.iv_[0].first, o.iv_[0].second);
    if (iv_.size() == 1) return o.overlaps(iv_[0].first, iv_[0].second);
    size_t a = 0, b = 0;
    while (a < iv_.size() && b < o.iv_.size()) {
      if (std::max(iv_[a].first, o.iv_[b].first) <= std::min(iv_[a].second, o.iv_[b].second)) return true;
      if (iv_[a].second < o.iv_[b].second)
        ++a;
      else
        ++b;
    }
    return false;
  }

  /// this ∩ [lo, hi]
  RangeSet intersect(T lo, T hi) const {
    RangeSet r;
    for (const auto& i : iv_) {
      T a = std::max(i.first, lo), b = std::min(i.second, hi);
      if (a <= b) r.iv_.push_back({a, b});
    }
    return r;
  }
  /// this \ [lo, hi]
  RangeSet subtract(T lo, T hi) const {
    RangeSet r;
    for (const auto& i : iv_) {
      if (i.second < lo || i.first > hi) {
        r.iv_.push_back(i);
        continue;
      }
      if (i.first < lo) r.iv_.push_back({i.first, lo - 1});
      if (i.second > hi) r.iv_.push_back({hi + 1, i.second});
    }
    return r;
  }
  // Both take each interval of this and walk o from the first interval that can meet it,
  // found by binary search: linear in the intervals met, so a one-port set against all ports
  // but the NodePorts costs a look-up, not a pass (or, for subtract, a pass per interval).
  RangeSet intersect(const RangeSet& o) const {
    RangeSet r;
    size_t b = 0;
    for (const auto& [lo, hi] : iv_) {
      b = o.first_ending_at_or_after(lo, b);
      for (size_t k = b; k < o.iv_.size() && o.iv_[k].first <= hi; ++k)
        r.iv_.push_back({std::max(lo, o.iv_[k].first), std::min(hi, o.iv_[k].second)});
    }
    return r;
  }
  RangeSet subtract(const RangeSet& o) const {
    RangeSet r;
    size_t b = 0;
    for (const auto& [lo, hi] : iv_) {
      b = o.first_ending_at_or_after(lo, b);
      T cur = lo;
      bool covered = false;  // the rest of [lo, hi] from cur is inside o
      for (size_t k = b; k < o.iv_.size() && o.iv_[k].first <= hi; ++k) {
        if (o.iv_[k].first > cur) r.iv_.push_back({cur, o.iv_[k].first - 1});
        if (o.iv_[k].second >= hi) {
          covered = true;
          break;
        }
        cur = o.iv_[k].second + 1;
      }
      if (!covered) r.iv_.push_back({cur, hi});
    }
    return r;
  }
  /// Splits into (this ∩ other, this \ other).
  std::pair<RangeSet, RangeSet> split(const RangeSet& other) const { return {intersect(other), subtract(other)}; }

  friend bool operator==(const RangeSet&, const RangeSet&) = default;
  friend bool operator<(const RangeSet& a, const RangeSet& b) { return a.iv_ < b.iv_; }

 private:
  /// The index of the first interval at or after `from` whose end is >= v (intervals are
  /// sorted and disjoint, so their ends are sorted too); iv_.size() if none.
  size_t first_ending_at_or_after(T v, size_t from) const {
    return static_cast<size_t>(
        std::lower_bound(iv_.begin() + static_cast<std::ptrdiff_t>(from), iv_.end(), v,
                         [](const Interval& i, T x) { return i.second < x; }) -
        iv_.begin());
  }

  std::vector<Interval> iv_;
};

using AddrSet = RangeSet<u128>;
using PortSet = RangeSet<uint32_t>;

/// Sets over a small finite universe (< 64 values): protocols are mapped onto
/// their own 256-value bitset; conntrack combinations, interface atoms and the
/// like use this.
struct SmallSet {
  uint64_t bits = 0;
  static SmallSet all(unsigned n) { return SmallSet{n >= 64 ? ~uint64_t(0) : ((uint64_t(1) << n) - 1)}; }
  static SmallSet of(unsigned v) { return SmallSet{uint64_t(1) << v}; }
  bool empty() const { return bits == 0; }
  bool has(unsigned v) const { return (bits >> v) & 1; }
  unsigned first() const { return static_cast<unsigned>(__builtin_ctzll(bits)); }
  friend bool operator==(const SmallSet&, const SmallSet&) = default;
};

}  // namespace kpc::verifier::sem
