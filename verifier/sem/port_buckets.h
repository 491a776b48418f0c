// Entries (a side's leaves, the comparison's candidate classes) bucketed by destination
// port, so that "which of them may meet this class?" is not asked of every one. The
// comparison asks it of one witness packet per differing class: where a whole NodePort
// range differs (a full transaction read without the node it was written for), the local
// address's atom holds ~20 leaves per Service and a candidate class per port, and testing
// every leaf for every candidate made `kpc diff` quadratic (25 minutes at 10,000 Services).
// kube-proxy's leaves test one or a few ports each; the rest (every port, or all but some)
// are few and kept in one list that every question gets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "verifier/sem/range_set.h"

namespace kpc::verifier::sem {

class PortBuckets {
 public:
  /// A set of at most this many ports is bucketed port by port; a larger one is "wide".
  static constexpr uint32_t kNarrow = 8;

  /// Adds entry `id` (ids given in increasing order) whose destination ports are `ports`.
  void add(uint32_t id, const PortSet& ports) {
    if (!narrow(ports)) {
      wide_.push_back(id);
      return;
    }
    for (const auto& [lo, hi] : ports.intervals())
      for (uint32_t p = lo; p <= hi; ++p) by_port_[p].push_back(id);
  }

  /// The ids, ascending and once each, of every entry whose ports may meet `ports`: those
  /// bucketed under one of its ports and every wide one. False, with nothing collected, when
  /// `ports` is wide itself: then any entry may.
  bool collect(const PortSet& ports, std::vector<uint32_t>* out) const {
    out->clear();
    if (!narrow(ports)) return false;
    for (const auto& [lo, hi] : ports.intervals())
      for (uint32_t p = lo; p <= hi; ++p)
        if (auto it = by_port_.find(p); it != by_port_.end()) out->insert(out->end(), it->second.begin(), it->second.end());
    out->insert(out->end(), wide_.begin(), wide_.end());
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
    return true;
  }

 private:
  static bool narrow(const PortSet& ports) {
    uint64_t n = 0;
    for (const auto& [lo, hi] : ports.intervals())
      if ((n += uint64_t(hi) - lo + 1) > kNarrow) return false;
    return true;
  }

  std::unordered_map<uint32_t, std::vector<uint32_t>> by_port_;
  std::vector<uint32_t> wide_;
};

}  // namespace kpc::verifier::sem
