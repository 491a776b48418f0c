// TextTable: an open-addressing hash map from text to a 32-bit value, for the
// rule store's two indexes (canonical rule text -> id, raw restore line -> id).
//
// Why not std::unordered_map<std::string_view, uint32_t>: loading a 10,000-Service
// program looks up ~1.1 M texts, and the node-based map costs a bucket miss, a node
// miss and a key miss per lookup plus one allocation per insert. Here a lookup is one
// probe into a flat slot array that holds the full 64-bit hash (so a different text
// is rejected without touching its bytes) and then one compare of the text.
// The table does not own the texts: the caller keeps them alive at stable addresses.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace kpc::verifier {

/// 64-bit hash of a byte string (8 bytes per step, multiply-xorshift mixing).
inline uint64_t text_hash(std::string_view s, uint64_t seed = 0) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = seed ^ (s.size() * kMul);
  const char* p = s.data();
  size_t n = s.size();
  auto mix = [](uint64_t x) {
    x ^= x >> 32;
    x *= 0xD6E8FEB86659FD93ull;
    x ^= x >> 32;
    return x;
  };
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ mix(w * kMul)) * kMul;
    p += 8;
    n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ mix(w * kMul + n)) * kMul;
  }
  return mix(h);
}

class TextTable {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  /// The value stored for text, or kNone.
  uint32_t find(std::string_view text, uint64_t hash) const {
    if (slots_.empty()) return kNone;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kNone) return kNone;
      if (s.hash == hash && same(s, text)) return s.value;
    }
  }
  uint32_t find(std::string_view text) const { return find(text, text_hash(text)); }

  /// Stores text -> value; text must not be in the table and must outlive it.
  void insert(std::string_view text, uint64_t hash, uint32_t value) {
    make_room_for_one();
    place(Slot{hash, text.data(), static_cast<uint32_t>(text.size()), value});
    ++count_;
  }

  // A lookup that may insert, in one probe sequence (interning half a million texts:
  // find-then-insert walked every probe sequence twice):
  //   table.make_room_for_one();
  //   auto p = table.probe(text, hash);
  //   if (p.value != TextTable::kNone) return p.value;
  //   ... store the text at a stable address ...
  //   table.fill(p, stored, hash, value);
  struct Probe {
    size_t slot;
    uint32_t value;  ///< kNone: not there, and slot is where it goes
  };
  void make_room_for_one() {
    if ((count_ + 1) * 4 > slots_.size() * 3) grow();
  }
  Probe probe(std::string_view text, uint64_t hash) const {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value == kNone) return {i, kNone};
      if (s.hash == hash && same(s, text)) return {i, s.value};
    }
  }
  /// Fills the free slot a probe() found (no insert or growth since).
  void fill(const Probe& p, std::string_view text, uint64_t hash, uint32_t value) {
    slots_[p.slot] = Slot{hash, text.data(), static_cast<uint32_t>(text.size()), value};
    ++count_;
  }
  /// Starts loading the slot a hash probes first (a batch of lookups with known
  /// hashes overlaps its cache misses instead of taking them one after another).
  void prefetch(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask_]);
  }

  size_t size() const { return count_; }
  void reserve(size_t n) {
    while (n * 4 > slots_.size() * 3) grow();
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    const char* data = nullptr;
    uint32_t size = 0;
    uint32_t value = kNone;
  };
  // An empty text may have no bytes at all (data == nullptr), and memcmp's pointers
  // must not be null even for a zero length.
  static bool same(const Slot& s, std::string_view text) {
    return s.size == text.size() && (text.empty() || std::memcmp(s.data, text.data(), text.size()) == 0);
  }
  void place(const Slot& s) {
    for (size_t i = s.hash & mask_;; i = (i + 1) & mask_)
      if (slots_[i].value == kNone) {
        slots_[i] = s;
        return;
      }
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.value != kNone) place(s);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace kpc::verifier
