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
  // Grammar of Go's time.ParseDuration: [-+]? (number unit)+ | "0".
  if (s == "0" || s == "+0" || s == "-0") return Duration{0};
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  long double total = 0;
  while (!s.empty()) {
    size_t i = 0;
    long double v = 0, scale = 1;
    bool digits = false, dot = false;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || (s[i] == '.' && !dot))) {
      if (s[i] == '.') dot = true;
      else {
        digits = true;
        if (dot) scale /= 10, v += (s[i] - '0') * scale;
        else v = v * 10 + (s[i] - '0');
      }
      ++i;
    }
    if (!digits) return std::nullopt;
    size_t u = i;
    while (u < s.size() && !((s[u] >= '0' && s[u] <= '9') || s[u] == '.')) ++u;
    std::string_view unit = s.substr(i, u - i);
    long double mult;
    if (unit == "ns") mult = 1;
    else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") mult = 1e3;
    else if (unit == "ms") mult = 1e6;
    else if (unit == "s") mult = 1e9;
    else if (unit == "m") mult = 60e9;
    else if (unit == "h") mult = 3600e9;
    else return std::nullopt;
    total += v * mult;
    if (total > 9.2e18L) return std::nullopt;
    s.remove_prefix(u);
  }
  auto ns = static_cast<int64_t>(total);
  return Duration{neg ? -ns : ns};
}

}  // namespace kpc
