#include "compiler/model/reader.h"

#include "compiler/support/text.h"

namespace kpc {

std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string out;
  out.reserve(parent.size() + 1 + key.size());
  out.append(parent).append(".").append(key);
  return out;
}

std::string index_path(std::string_view parent, size_t i) {
  return std::string(parent) + "[" + std::to_string(i) + "]";
}

void ObjectReader::error(DiagCode code, Pos pos, std::string path, std::string message) {
  if (!is_warning(code)) ++errors_;
  diags_.report(code, pos, object_, std::move(path), std::move(message));
}

void ObjectReader::wrong_type(const DocNode& n, const std::string& path, const char* expected) {
  std::string got = kind_name(n.kind);
  if (n.is_scalar()) got += " \"" + n.text.substr(0, 64) + "\"";
  std::string hint;
  if (std::string_view(expected) == "string" && n.is_scalar()) hint = " (quote it to make it a string)";
  error(DiagCode::WrongType, n.pos, path, std::string("expected ") + expected + ", got " + got + hint);
}

const DocNode* ObjectReader::child(const DocNode* map, std::string_view key, const std::string& path) {
  if (!map || !map->is_map()) return nullptr;
  const DocNode* c = map->get(key);
  if (!c || c->is_null()) return nullptr;
  if (fields_) fields_->set(path, c->pos);
  return c;
}

bool ObjectReader::expect_map(const DocNode& n, const std::string& path) {
  if (n.is_map()) return true;
  wrong_type(n, path, "object");
  return false;
}

const DocNode* ObjectReader::map(const DocNode* parent, std::string_view key, const std::string& path) {
  const DocNode* c = child(parent, key, path);
  if (c && !c->is_map()) {
    wrong_type(*c, path, "object");
    return nullptr;
  }
  return c;
}

const DocNode* ObjectReader::seq(const DocNode* parent, std::string_view key, const std::string& path) {
  const DocNode* c = child(parent, key, path);
  if (c && !c->is_seq()) {
    wrong_type(*c, path, "list");
    return nullptr;
  }
  return c;
}

std::optional<std::string> ObjectReader::as_str(const DocNode& n, const std::string& path) {
  if (n.kind != DocNode::Kind::String) {
    wrong_type(n, path, "string");
    return std::nullopt;
  }
  return n.text;
}

std::optional<std::string> ObjectReader::str(const DocNode* parent, std::string_view key, const std::string& path) {
  const DocNode* c = child(parent, key, path);
  if (!c) return std::nullopt;
  return as_str(*c, path);
}

std::optional<int64_t> ObjectReader::integer(const DocNode* parent, std::string_view key, const std::string& path,
                                             int64_t min, int64_t max, DiagCode range_code) {
  const DocNode* c = child(parent, key, path);
  if (!c) return std::nullopt;
  if (c->kind != DocNode::Kind::Int) {
    wrong_type(*c, path, "integer");
    return std::nullopt;
  }
  // Parse with saturation so that huge literals report "out of range", not garbage.
  std::string_view t = c->text;
  bool neg = !t.empty() && t[0] == '-';
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
  int64_t v = 0;
  bool overflow = false;
  for (char ch : t) {
    if (v > (INT64_MAX - 9) / 10) overflow = true;
    else v = v * 10 + (ch - '0');
  }
  if (neg) v = -v;
  if (overflow || v < min || v > max) {
    error(range_code, c->pos, path, printable(c->text) + " is out of range " + std::to_string(min) + "-" +
                                  std::to_string(max));
    return std::nullopt;
  }
  return v;
}

std::optional<bool> ObjectReader::boolean(const DocNode* parent, std::string_view key, const std::string& path) {
  const DocNode* c = child(parent, key, path);
  if (!c) return std::nullopt;
  if (c->kind != DocNode::Kind::Bool) {
    wrong_type(*c, path, "boolean");
    return std::nullopt;
  }
  static const char* const kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"};
  for (const char* t : kTrue)
    if (c->text == t) return true;
  return false;
}

std::vector<ObjectReader::ListEntry> ObjectReader::str_list(const DocNode* parent, std::string_view key,
                                                            const std::string& path) {
  std::vector<ListEntry> out;
  const DocNode* s = seq(parent, key, path);
  if (!s) return out;
  for (size_t i = 0; i < s->items.size(); ++i) {
    std::string p = index_path(path, i);
    if (fields_) fields_->set(p, s->items[i].pos);
    if (auto v = as_str(s->items[i], p)) out.push_back(ListEntry{i, s->items[i].pos, std::move(*v)});
  }
  return out;
}

std::map<std::string, std::string> ObjectReader::str_map(const DocNode* parent, std::string_view key,
                                                         const std::string& path) {
  std::map<std::string, std::string> out;
  const DocNode* m = map(parent, key, path);
  if (!m) return out;
  for (size_t i = 0; i < m->keys.size(); ++i) {
    std::string p = path + "[" + m->keys[i].name + "]";
    const DocNode& v = m->items[i];
    if (v.is_null()) {
      out[m->keys[i].name] = "";
      continue;
    }
    if (auto s = as_str(v, p)) out[m->keys[i].name] = *s;
  }
  return out;
}

std::optional<IPAddr> ObjectReader::ip_text(std::string_view text, Pos pos, const std::string& path) {
  IPAddr::ParseInfo info;
  auto ip = IPAddr::parse(text, /*sloppy=*/true, &info);
  if (!ip) {
    error(DiagCode::InvalidIP, pos, path, "\"" + std::string(text) + "\" is not a valid IP address");
    return std::nullopt;
  }
  if (info.leading_zero)
    error(DiagCode::WarnLegacyIP, pos, path,
          "\"" + std::string(text) + "\" has leading zeros; read as decimal " + ip->str() + " as kube-proxy does");
  return ip;
}

std::optional<IPAddr> ObjectReader::ip(const DocNode& n, const std::string& path) {
  auto s = as_str(n, path);
  if (!s) return std::nullopt;
  return ip_text(*s, n.pos, path);
}

std::optional<CIDR> ObjectReader::cidr_text(std::string_view text, Pos pos, const std::string& path) {
  IPAddr::ParseInfo info;
  auto c = CIDR::parse(text, /*sloppy=*/true, &info);
  if (!c) {
    error(DiagCode::InvalidCIDR, pos, path, "\"" + std::string(text) + "\" is not a valid CIDR");
    return std::nullopt;
  }
  if (info.leading_zero)
    error(DiagCode::WarnLegacyIP, pos, path,
          "\"" + std::string(text) + "\" has leading zeros; read as decimal " + c->str() + " as kube-proxy does");
  return c;
}

std::optional<size_t> ObjectReader::enumeration(const DocNode* parent, std::string_view key,
                                                const std::string& path, std::initializer_list<const char*> values,
                                                DiagCode code) {
  const DocNode* c = child(parent, key, path);
  if (!c) return std::nullopt;
  auto s = as_str(*c, path);
  if (!s) return std::nullopt;
  size_t i = 0;
  std::string allowed;
  for (const char* v : values) {
    if (*s == v) return i;
    allowed += (i ? ", " : "") + std::string("\"") + v + "\"";
    ++i;
  }
  error(code, c->pos, path, "unsupported value \"" + *s + "\": supported values: " + allowed);
  return std::nullopt;
}

void ObjectReader::reject_unknown(const DocNode& map, const std::string& path,
                                  std::initializer_list<const char*> known) {
  for (const auto& k : map.keys) {
    bool ok = false;
    for (const char* name : known) ok |= (k.name == name);
    if (!ok) error(DiagCode::UnknownField, k.pos, join_path(path, k.name), "unknown field \"" + k.name + "\"");
  }
}

}  // namespace kpc
