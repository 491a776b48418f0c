#include "verifier/ipset/ipset.h"

#include <algorithm>
#include <cstdlib>

namespace kpc::verifier::ipset {

namespace {
void index_first_address(Set& s);
}  // namespace


namespace {

u128 addr_value(const IPAddr& a) {
  u128 v = 0;
  size_t n = a.family == IPFamily::V4 ? 4 : 16;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | a.bytes[i];
  return v;
}

// Words of a line as ipset prints them: spaces separate, "double quotes" group (comments).
std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    std::string w;
    if (line[i] == '"') {
      ++i;
      while (i < line.size() && line[i] != '"') w += line[i++];
      ++i;
    } else {
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') w += line[i++];
    }
    out.push_back(std::move(w));
  }
  return out;
}

std::optional<uint8_t> proto_number(std::string_view p) {
  if (p == "tcp") return 6;
  if (p == "udp") return 17;
  if (p == "sctp") return 132;
  if (p == "udplite") return 136;
  if (p == "icmp") return 1;
  if (p == "icmpv6") return 58;
  return std::nullopt;
}

bool port_range(std::string_view s, Range* r) {
  size_t dash = s.find('-');
  auto num = [](std::string_view t, u128* v) {
    if (t.empty() || t.size() > 5) return false;
    unsigned x = 0;
    for (char c : t) {
      if (c < '0' || c > '9') return false;
      x = x * 10 + unsigned(c - '0');
    }
    if (x > 65535) return false;
    *v = x;
    return true;
  };
  if (!num(s.substr(0, dash), &r->lo)) return false;
  r->hi = r->lo;
  if (dash != std::string_view::npos && !num(s.substr(dash + 1), &r->hi)) return false;
  return r->lo <= r->hi;
}

bool addr_range(std::string_view s, IPFamily f, Range* r, uint8_t* prefix) {
  size_t dash = s.find('-');
  if (dash != std::string_view::npos) {
    auto a = IPAddr::parse(s.substr(0, dash)), b = IPAddr::parse(s.substr(dash + 1));
    if (!a || !b || a->family != f || b->family != f) return false;
    r->lo = addr_value(*a), r->hi = addr_value(*b);
    *prefix = static_cast<uint8_t>(a->bit_length());
    return r->lo <= r->hi;
  }
  if (s.find('/') != std::string_view::npos) {
    auto c = CIDR::parse(s);
    if (!c || c->family() != f) return false;
    size_t host = c->addr.bit_length() - c->len;
    u128 span = host >= 128 ? ~u128(0) : ((u128(1) << host) - 1);
    r->lo = addr_value(c->masked().addr);
    r->hi = r->lo | span;
    *prefix = c->len;
    return true;
  }
  auto a = IPAddr::parse(s);
  if (!a || a->family != f) return false;
  r->lo = r->hi = addr_value(*a);
  *prefix = static_cast<uint8_t>(a->bit_length());
  return true;
}

}  // namespace

const Set* Table::find(std::string_view name) const {
  auto it = sets.find(std::string(name));
  return it == sets.end() ? nullptr : &it->second;
}

std::vector<bool> parse_flags(std::string_view flags) {
  std::vector<bool> out;
  size_t i = 0;
  while (i <= flags.size() && out.size() < 6) {
    size_t c = flags.find(',', i);
    std::string_view f = flags.substr(i, c == std::string_view::npos ? std::string_view::npos : c - i);
    out.push_back(f == "src");
    if (c == std::string_view::npos) break;
    i = c + 1;
  }
  return out;
}

bool parse_save(std::string_view text, Table* out, std::string* error) {
  size_t pos = 0, line_no = 0;
  auto fail = [&](const std::string& m) {
    if (error) *error = std::to_string(line_no) + ": " + m;
    return false;
  };
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    std::string_view line = text.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos);
    pos = e == std::string_view::npos ? text.size() : e + 1;
    ++line_no;
    auto w = words(line);
    if (w.empty() || w[0][0] == '#') continue;
    if (w[0] == "create" || w[0] == "-N" || w[0] == "n") {
      if (w.size() < 3) return fail("create needs a name and a type");
      Set s;
      s.name = w[1];
      s.type = w[2];
      s.any_family = true;
      for (size_t k = 3; k + 1 < w.size(); ++k)
        if (w[k] == "family") s.family = w[k + 1] == "inet6" ? IPFamily::V6 : IPFamily::V4, s.any_family = false;
      // hash types always have a family (inet when not printed); bitmap:port and list:set none.
      if (s.any_family && s.type != "bitmap:port" && s.type != "list:set") s.any_family = false;
      std::string_view t = s.type;
      size_t colon = t.find(':');
      if (colon == std::string_view::npos) return fail("set type \"" + s.type + "\" has no method:dimensions form");
      std::string_view method = t.substr(0, colon), dims = t.substr(colon + 1);
      if (method == "list") {
        if (dims != "set") s.unmodelled = "set type " + s.type + " not modelled";
      } else {
        size_t i = 0;
        while (i <= dims.size()) {
          size_t c = dims.find(',', i);
          std::string_view d = dims.substr(i, c == std::string_view::npos ? std::string_view::npos : c - i);
          if (d == "ip" || d == "net") s.dims.push_back(DimKind::Addr);
          else if (d == "port") s.dims.push_back(method == "bitmap" ? DimKind::Port : DimKind::ProtoPort);
          else s.unmodelled = "set type " + s.type + " (" + std::string(d) + ") not modelled";
          if (c == std::string_view::npos) break;
          i = c + 1;
        }
        if (method != "hash" && method != "bitmap") s.unmodelled = "set type " + s.type + " not modelled";
      }
      if (out->sets.count(s.name)) return fail("set " + s.name + " created twice");
      out->sets.emplace(s.name, std::move(s));
      continue;
    }
    if (w[0] == "add" || w[0] == "-A" || w[0] == "a") {
      if (w.size() < 3) return fail("add needs a set and an element");
      auto it = out->sets.find(w[1]);
      if (it == out->sets.end()) return fail("add to set " + w[1] + " before it was created");
      Set& s = it->second;
      if (s.type == "list:set") {
        s.members.push_back(w[2]);
        continue;
      }
      if (!s.unmodelled.empty()) continue;
      Entry en;
      std::vector<std::string_view> parts;
      std::string_view el = w[2];
      size_t i = 0;
      while (i <= el.size()) {
        size_t c = el.find(',', i);
        parts.push_back(el.substr(i, c == std::string_view::npos ? std::string_view::npos : c - i));
        if (c == std::string_view::npos) break;
        i = c + 1;
      }
      if (parts.size() != s.dims.size()) return fail("element \"" + w[2] + "\" does not fit set type " + s.type);
      for (size_t d = 0; d < s.dims.size(); ++d) {
        Range r;
        if (s.dims[d] == DimKind::Addr) {
          uint8_t prefix = 0;
          if (!addr_range(parts[d], s.family, &r, &prefix)) return fail("bad address \"" + std::string(parts[d]) + "\"");
          if (d == 0) en.prefix = prefix;
        } else if (s.dims[d] == DimKind::Port) {
          std::string_view p = parts[d];
          if (size_t c = p.find(':'); c != std::string_view::npos) p = p.substr(c + 1);
          if (!port_range(p, &r)) return fail("bad port \"" + std::string(parts[d]) + "\"");
        } else {
          std::string_view p = parts[d], proto = "tcp";
          if (size_t c = p.find(':'); c != std::string_view::npos) proto = p.substr(0, c), p = p.substr(c + 1);
          auto n = proto_number(proto);
          if (!n) return fail("unknown protocol \"" + std::string(proto) + "\"");
          if (*n != 6 && *n != 17 && *n != 132) {
            s.unmodelled = "entries of protocol " + std::string(proto) + " in " + s.name + " not modelled";
            break;
          }
          en.proto = *n;
          if (!port_range(p, &r)) return fail("bad port \"" + std::string(parts[d]) + "\"");
        }
        en.dims.push_back(r);
      }
      for (size_t k = 3; k < w.size(); ++k)
        if (w[k] == "nomatch") en.nomatch = true;
      if (en.nomatch && !(s.dims.size() == 1 && s.dims[0] == DimKind::Addr))
        s.unmodelled = "nomatch entries in " + s.type + " not modelled";
      if (s.unmodelled.empty()) s.entries.push_back(std::move(en));
      continue;
    }
    return fail("\"" + w[0] + "\" is not a line of ipset save");
  }
  // Most specific prefixes first: the first entry holding an address decides (nomatch).
  for (auto& [name, s] : out->sets) {
    std::stable_sort(s.entries.begin(), s.entries.end(),
                     [](const Entry& a, const Entry& b) { return a.prefix > b.prefix; });
    index_first_address(s);
  }
  return true;
}

std::vector<const Set*> reached(const Table& t, std::string_view name) {
  std::vector<const Set*> out;
  std::vector<std::string> stack{std::string(name)};
  while (!stack.empty() && out.size() < 64) {
    std::string n = stack.back();
    stack.pop_back();
    const Set* s = t.find(n);
    if (!s || std::find(out.begin(), out.end(), s) != out.end()) continue;
    out.push_back(s);
    for (auto it = s->members.rbegin(); it != s->members.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

namespace {

// The entries by their first dimension's address, when each entry holds exactly one there.
// Exact for first-match: an entry skipped cannot hold the packet's address in dimension 0,
// and the scan below tests dimension 0 first, so it would have been rejected there without
// reading any other dimension (no "unknown" skipped either).
void index_first_address(Set& s) {
  s.by_first_address.clear();
  s.indexed_entries = 0;
  if (s.dims.empty() || s.dims[0] != DimKind::Addr || s.entries.size() < 16) return;
  for (const Entry& e : s.entries)
    if (e.dims.empty() || e.dims[0].lo != e.dims[0].hi) return;
  for (uint32_t i = 0; i < s.entries.size(); ++i) s.by_first_address[s.entries[i].dims[0].lo].push_back(i);
  s.indexed_entries = s.entries.size();
}

}  // namespace

std::optional<bool> match(const Table& t, std::string_view name, std::string_view flags, const PacketFields& p,
                          std::string* why) {
  const Set* s = t.find(name);
  if (!s) {
    *why = "ipset \"" + std::string(name) + "\" is not in the --ipsets file";
    return std::nullopt;
  }
  if (!s->unmodelled.empty()) {
    *why = s->unmodelled;
    return std::nullopt;
  }
  std::vector<bool> f = parse_flags(flags);
  if (s->type == "list:set") {
    for (const auto& m : s->members) {
      auto r = match(t, m, flags, p, why);
      if (!r) return r;
      if (*r) return true;
    }
    return false;
  }
  // The kernel refuses a match with fewer flags than the set has dimensions, or of another family.
  if (f.size() < s->dims.size() || (!s->any_family && s->family != p.family)) return false;
  bool ports = p.proto == 6 || p.proto == 17 || p.proto == 132;
  // One entry, as the kernel tests it: true/false, or nullopt (with *why) when unknown.
  auto holds = [&](const Entry& e) -> std::optional<bool> {
    bool in = true;
    for (size_t d = 0; d < s->dims.size() && in; ++d) {
      bool src = f[d];
      if (s->dims[d] == DimKind::Addr) {
        u128 a = src ? p.src : p.dst;
        in = a >= e.dims[d].lo && a <= e.dims[d].hi;
      } else {
        if (!ports) {
          if (s->dims[d] == DimKind::Port && (p.proto == 1 || p.proto == 58 || p.proto == 136)) {
            *why = "bitmap:port on protocol " + std::to_string(p.proto) + " not modelled";
            return std::nullopt;
          }
          return false;
        }
        if (s->dims[d] == DimKind::ProtoPort && e.proto != p.proto) return false;
        if (src && !p.sport) {
          *why = "source port of the packet not given (--sport)";
          return std::nullopt;
        }
        uint16_t port = src ? *p.sport : p.dport;
        in = port >= e.dims[d].lo && port <= e.dims[d].hi;
      }
    }
    return in;
  };
  if (s->indexed_entries && s->indexed_entries == s->entries.size()) {
    auto it = s->by_first_address.find(f[0] ? p.src : p.dst);
    if (it == s->by_first_address.end()) return false;
    for (uint32_t i : it->second) {
      auto r = holds(s->entries[i]);
      if (!r) return r;
      if (*r) return !s->entries[i].nomatch;
    }
    return false;
  }
  for (const Entry& e : s->entries) {
    auto r = holds(e);
    if (!r) return r;
    if (*r) return !e.nomatch;
  }
  return false;
}

}  // namespace kpc::verifier::ipset
