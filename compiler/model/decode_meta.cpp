#include <cstdint>

#include "compiler/model/decode.h"
#include "compiler/model/names.h"
#include "compiler/model/reader.h"

namespace kpc {

void decode_meta(const DocNode& obj, const char* kind, bool namespaced, int name_rule, ObjectMeta* meta,
                 ObjectReader& r) {
  meta->pos = obj.pos;
  const DocNode* md = r.map(&obj, "metadata", "metadata");
  auto name = r.str(md, "name", "metadata.name");
  auto ns = namespaced ? r.str(md, "namespace", "metadata.namespace") : std::nullopt;
  meta->name = name.value_or("");
  meta->ns = namespaced ? ns.value_or("default") : "";
  r.set_object(std::string(kind) + " " + (meta->name.empty() ? "<unnamed>" : meta->key()));
  if (!name) {
    r.error(DiagCode::MissingField, md ? md->pos : obj.pos, "metadata.name", "required value");
  } else {
    auto err = name_rule == 1 ? check_dns1035_label(*name) : check_dns1123_subdomain(*name);
    if (err) {
      // Never echo a hostile name into the object label: show it escaped in the message only.
      r.set_object(std::string(kind) + " <invalid name>");
      r.error(DiagCode::InvalidName, md->get("name")->pos, "metadata.name", "\"" + *name + "\": " + *err);
    }
  }
  if (ns) {
    if (auto err = check_dns1123_label(*ns)) {
      r.set_object(std::string(kind) + " <invalid namespace>");
      r.error(DiagCode::InvalidName, md->get("namespace")->pos, "metadata.namespace", "\"" + *ns + "\": " + *err);
    }
  }
  meta->labels = r.str_map(md, "labels", "metadata.labels");
  meta->annotations = r.str_map(md, "annotations", "metadata.annotations");
  if (const DocNode* labels = md ? md->get("labels") : nullptr; labels && labels->is_map()) {
    for (size_t i = 0; i < labels->keys.size(); ++i) {
      const auto& key = labels->keys[i];
      std::string path = "metadata.labels[" + key.name + "]";
      if (auto err = check_label_key(key.name))
        r.error(DiagCode::InvalidLabel, key.pos, path, "invalid label key \"" + key.name + "\": " + *err);
      auto it = meta->labels.find(key.name);
      if (it != meta->labels.end())
        if (auto err = check_label_value(it->second))
          r.error(DiagCode::InvalidLabel, labels->items[i].pos, path,
                  "invalid label value \"" + it->second + "\": " + *err);
    }
  }
}

std::optional<Duration> parse_go_duration(std::string_view s) {
  // Go's time.ParseDuration: [-+]? ([0-9]*(\.[0-9]*)? unit)+ | [-+]? "0", computed in exact
  // integer nanoseconds with the same overflow rules: the magnitude may reach 2^63 ns for a
  // negative duration and 2^63-1 ns (2562047h47m16.854775807s) for a positive one. (Go
  // scales the fraction in float64, which gives the same result for every fraction of up
  // to 15 digits; beyond that Go may differ by rounding, this is exact.)
  constexpr uint64_t kLimit = uint64_t{1} << 63;
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return Duration{0};
  if (s.empty()) return std::nullopt;
  uint64_t total = 0;
  while (!s.empty()) {
    if (!(s[0] == '.' || is_digit(s[0]))) return std::nullopt;
    // Integer part (Go's leadingInt): overflow is an error.
    size_t i = 0;
    uint64_t v = 0;
    for (; i < s.size() && is_digit(s[i]); ++i) {
      if (v > kLimit / 10) return std::nullopt;
      v = v * 10 + static_cast<uint64_t>(s[i] - '0');
      if (v > kLimit) return std::nullopt;
    }
    bool pre = i > 0;
    // Fraction (Go's leadingFraction): digits beyond what fits are read and ignored.
    uint64_t f = 0, scale = 1;
    bool post = false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      bool overflow = false;
      for (; i < s.size() && is_digit(s[i]); ++i) {
        post = true;
        if (overflow) continue;
        if (f > (kLimit - 1) / 10) {
          overflow = true;
          continue;
        }
        uint64_t y = f * 10 + static_cast<uint64_t>(s[i] - '0');
        if (y > kLimit) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
    }
    if (!pre && !post) return std::nullopt;  // ".s"
    size_t u = i;
    while (u < s.size() && !(is_digit(s[u]) || s[u] == '.')) ++u;
    if (u == i) return std::nullopt;  // missing unit
    std::string_view unit = s.substr(i, u - i);
    uint64_t mult;
    if (unit == "ns") mult = 1;
    else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") mult = 1'000;
    else if (unit == "ms") mult = 1'000'000;
    else if (unit == "s") mult = 1'000'000'000;
    else if (unit == "m") mult = 60'000'000'000;
    else if (unit == "h") mult = 3'600'000'000'000;
    else return std::nullopt;
    if (v > kLimit / mult) return std::nullopt;
    v *= mult;
    if (f > 0) {
      // f / scale of a unit, truncated toward zero; f < scale <= 10^19 and mult < 2^42, so
      // the product needs 128 bits.
      __extension__ using u128 = unsigned __int128;
      v += static_cast<uint64_t>(static_cast<u128>(f) * mult / scale);
      if (v > kLimit) return std::nullopt;
    }
    if (v > kLimit - total) return std::nullopt;
    total += v;
    s.remove_prefix(u);
  }
  if (neg) return Duration{total == kLimit ? INT64_MIN : -static_cast<int64_t>(total)};
  if (total > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return Duration{static_cast<int64_t>(total)};
}

}  // namespace kpc
