#include "verifier/sem/universe.h"

#include <algorithm>
#include <set>

namespace kpc::verifier::sem {

// ------------------------------------------------------------------ addresses

u128 addr_value(const IPAddr& a) {
  u128 v = 0;
  size_t n = a.family == IPFamily::V4 ? 4 : 16;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | a.bytes[i];
  return v;
}

IPAddr addr_from_value(u128 v, IPFamily f) {
  IPAddr a;
  a.family = f;
  size_t n = f == IPFamily::V4 ? 4 : 16;
  for (size_t i = n; i-- > 0;) {
    a.bytes[i] = static_cast<uint8_t>(v & 0xff);
    v >>= 8;
  }
  return a;
}

std::pair<u128, u128> cidr_range(const CIDR& c) {
  size_t bits = c.addr.bit_length();
  u128 base = addr_value(c.masked().addr);
  size_t host = bits - c.len;
  u128 span = host >= 128 ? ~u128(0) : ((u128(1) << host) - 1);
  return {base, base | span};
}

size_t Universe::atom_of(u128 a) const {
  auto it = std::upper_bound(dst_cuts.begin(), dst_cuts.end(), a);
  return static_cast<size_t>(it - dst_cuts.begin()) - 1;
}

uint32_t Universe::affinity_id(const std::string& key_given) {
  auto alias = affinity_alias.find(key_given);
  const std::string& key = alias == affinity_alias.end() ? key_given : alias->second;
  auto [it, added] = affinity_index.emplace(key, static_cast<uint32_t>(affinity_keys.size()));
  if (added) affinity_keys.push_back(key);
  return it->second;
}

uint32_t Universe::service_id(const std::string& name) {
  if (name.empty()) return 0;
  auto [it, added] = service_index.emplace(name, static_cast<uint32_t>(services.size()));
  if (added) services.push_back(name);
  return it->second;
}

std::optional<unsigned> Universe::pred_bit(const std::string& key, const std::string& description) {
  auto it = pred_index.find(key);
  if (it != pred_index.end()) return it->second;
  if (preds.size() >= 64) return std::nullopt;
  unsigned bit = static_cast<unsigned>(preds.size());
  pred_index.emplace(key, bit);
  preds.push_back(description);
  return bit;
}

std::optional<SmallSet> Universe::ages_below(uint32_t seconds) const {
  if (seconds == 0) return SmallSet::all(age_buckets());
  auto it = std::lower_bound(age_cuts.begin(), age_cuts.end(), seconds);
  if (it == age_cuts.end() || *it != seconds) return std::nullopt;
  // Bucket b holds ages [cut[b-1], cut[b]): below `seconds` = cut[i] iff b <= i.
  return SmallSet::all(static_cast<unsigned>(it - age_cuts.begin()) + 1);
}

unsigned Universe::age_bucket_of(uint32_t age) const {
  return static_cast<unsigned>(std::upper_bound(age_cuts.begin(), age_cuts.end(), age) - age_cuts.begin());
}

// ------------------------------------------------------------------ the node's part

Universe node_universe(IPFamily family, const std::vector<IPAddr>& local_addresses) {
  Universe u;
  u.family = family;
  bool v4 = u.family == IPFamily::V4;
  u.addr_max = v4 ? u128(0xffffffffu) : ~u128(0);
  std::set<u128> cuts = {0};
  auto cut = [&](u128 lo, u128 hi) {
    cuts.insert(lo);
    if (hi < u.addr_max) cuts.insert(hi + 1);
  };
  // Loopback is always local; then the node's addresses.
  auto lo_range = v4 ? cidr_range(*CIDR::parse("127.0.0.0/8")) : cidr_range(*CIDR::parse("::1/128"));
  u.local = AddrSet::range(lo_range.first, lo_range.second);
  cut(lo_range.first, lo_range.second);
  for (const auto& a : local_addresses) {
    if (a.family != u.family) continue;
    u128 v = addr_value(a);
    u.local = u.local.subtract(v, v);
    u.local = AddrSet::range(0, u.addr_max).subtract(AddrSet::range(0, u.addr_max).subtract(u.local).subtract(v, v));
    cut(v, v);
  }
  u.dst_cuts.assign(cuts.begin(), cuts.end());
  return u;
}

}  // namespace kpc::verifier::sem
