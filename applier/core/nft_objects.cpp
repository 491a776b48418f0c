#include "applier/core/nft_objects.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "compiler/support/text.h"

namespace kpc::applier {
namespace {

constexpr std::string_view kPrefixes[] = {"service-", "local-", "external-", "firewall-", "endpoint-", "affinity-"};

bool is_base32(char c) { return (c >= 'A' && c <= 'Z') || (c >= '2' && c <= '7'); }

// A per-service object name: PREFIX + 8 base32 characters + "-" + "ns/name/proto/port[__ip/port]".
struct ObjectName {
  std::string_view prefix;  ///< "service-", ...
  std::string service;      ///< "ns/name:port"
  std::string endpoint;     ///< "10.1.0.5:8080", "[fd00::5]:8080" for endpoint- and affinity- names
};

std::optional<ObjectName> parse_object_name(std::string_view tok) {
  for (std::string_view p : kPrefixes) {
    if (!tok.starts_with(p) || tok.size() < p.size() + 10) continue;
    std::string_view h = tok.substr(p.size(), 9);
    if (!std::all_of(h.begin(), h.begin() + 8, is_base32) || h[8] != '-') continue;
    std::string_view rest = tok.substr(p.size() + 9);
    ObjectName n;
    n.prefix = p;
    size_t sep = rest.find("__");
    std::string_view svc = rest.substr(0, sep);
    auto parts = split(svc, '/');
    if (parts.size() == 4 && !parts[0].empty() && !parts[1].empty()) {
      n.service.append(parts[0]).append("/").append(parts[1]);
      if (!parts[3].empty()) n.service.append(":").append(parts[3]);
    } else {
      n.service = std::string(svc);  // shortened (hashAndTruncate's "...") or not kube-proxy's: as written
    }
    if (sep != std::string_view::npos) {
      std::string_view ep = rest.substr(sep + 2);
      size_t slash = ep.rfind('/');
      std::string ip(ep.substr(0, slash));
      std::string port = slash == std::string_view::npos ? "" : std::string(ep.substr(slash + 1));
      bool v4 = std::count(ip.begin(), ip.end(), '.') == 3 && ip.find_first_not_of("0123456789.") == std::string::npos;
      if (!v4) std::replace(ip.begin(), ip.end(), '.', ':');  // kube-proxy writes IPv6 colons as dots
      n.endpoint = v4 ? ip + ":" + port : "[" + ip + "]:" + port;
    }
    return n;
  }
  return std::nullopt;
}

// One line of knftables' text: VERB KIND FAMILY TABLE [NAME [REST]].
struct Line {
  std::string_view text, verb, kind, name, rest;
  std::string_view key, verdict, comment;  ///< an element's, inside its braces
  std::optional<ObjectName> first_object;  ///< the first per-service name the line holds
};

std::string_view next_word(std::string_view& s) {
  s = trim(s);
  size_t e = s.find(' ');
  std::string_view w = s.substr(0, e);
  s = e == std::string_view::npos ? std::string_view() : s.substr(e + 1);
  return w;
}

Line parse_line(std::string_view text) {
  Line l;
  l.text = text;
  std::string_view s = text;
  l.verb = next_word(s);
  l.kind = next_word(s);
  next_word(s);                               // family
  if (l.kind != "table") next_word(s);        // table
  l.name = next_word(s);
  l.rest = trim(s);
  if (l.kind == "element" && l.rest.starts_with("{") && l.rest.ends_with("}")) {
    std::string_view body = trim(l.rest.substr(1, l.rest.size() - 2));
    size_t colon = body.find(" : ");
    if (colon != std::string_view::npos) l.verdict = trim(body.substr(colon + 3)), body = body.substr(0, colon);
    size_t c = body.find(" comment \"");
    if (c != std::string_view::npos) {
      l.comment = body.substr(c + 10);
      if (l.comment.ends_with("\"")) l.comment.remove_suffix(1);
      body = body.substr(0, c);
    }
    l.key = trim(body);
  }
  std::string_view t = text;
  while (!t.empty() && !l.first_object) {
    std::string_view w = next_word(t);
    while (!w.empty() && (w.front() == '@' || w.front() == '{')) w.remove_prefix(1);
    while (!w.empty() && (w.back() == ',' || w.back() == '}' || w.back() == ';')) w.remove_suffix(1);
    l.first_object = parse_object_name(w);
  }
  return l;
}

std::vector<std::string_view> lines_of(std::string_view s) {
  std::vector<std::string_view> out;
  for (auto l : split(s, '\n')) {
    l = trim(l);
    if (!l.empty() && l.front() != '#') out.push_back(l);
  }
  return out;
}

struct Side {
  std::vector<Line> lines;
  std::set<std::string> services;  ///< Services any line of the side belongs to
};

struct Attribution {
  std::map<std::string, std::vector<std::string>, std::less<>> by_address;  ///< dispatch elements' first key part
};

std::vector<std::string> owners(const Line& l, const Attribution& a) {
  if (l.first_object) return {l.first_object->service};
  if (l.kind == "element" && !l.comment.empty()) return {std::string(l.comment)};
  if (l.kind == "element" && !l.key.empty() && l.key.find(' ') == std::string_view::npos) {
    auto it = a.by_address.find(l.key);
    if (it != a.by_address.end()) return it->second;
  }
  return {""};
}

const char* object_word(std::string_view prefix) {
  if (prefix == "service-") return "service chain";
  if (prefix == "local-") return "local-endpoints chain";
  if (prefix == "external-") return "external chain";
  if (prefix == "firewall-") return "firewall chain";
  if (prefix == "affinity-") return "affinity set";
  return "endpoint";
}

std::string deletion(const Line& l) { return l.verb == "delete" || l.verb == "destroy" ? "deletion of " : ""; }

// A per-service chain or set the line declares, flushes or deletes: "endpoint 10.1.0.5:8080",
// "external chain", "affinity set for 10.1.0.5:8080" (its added / removed / changed said later).
std::optional<std::string> service_object(const Line& l) {
  if ((l.kind != "chain" && l.kind != "set" && l.kind != "map") || !l.first_object ||
      l.name.find(l.first_object->prefix) != 0)
    return std::nullopt;
  const ObjectName& n = *l.first_object;
  if (n.prefix == "endpoint-") return deletion(l) + "endpoint " + n.endpoint;
  return deletion(l) + object_word(n.prefix) + (n.endpoint.empty() ? "" : " for " + n.endpoint);
}

// The item any other changed line gives (rules are counted, not itemised: "").
std::string item(const Line& l, bool added) {
  const char* dir = added ? "added" : "removed";
  if (l.kind == "rule") return "";
  if (!l.name.empty()) return deletion(l) + std::string(l.kind) + " " + printable_capped(l.name, 120) + " " + dir;
  return std::string(l.kind) + " line " + dir + ": " + printable_capped(l.text, 120);
}

// "endpoint removed 10.1.0.5:8080", "external chain added", "endpoint 10.1.0.5:8080 changed" (lines
// of it both gone and new: its name or declaration differs).
std::string object_item(const std::string& desc, int sides) {
  const char* dir = sides == 3 ? "changed" : sides == 2 ? "added" : "removed";
  if (sides != 3 && desc.starts_with("endpoint ")) return "endpoint " + std::string(dir) + desc.substr(8);
  return desc + " " + dir;
}

struct Acc {
  NftServiceChange change;
  std::set<std::string> seen_items;
  std::vector<std::string> objects;     ///< service_object()s in order of appearance
  std::map<std::string, int> object_sides;  ///< 1 removed, 2 added, 3 both
  std::map<std::string, std::pair<std::string_view, std::string_view>> elements;  ///< "set key" -> verdicts (-, +)
  std::set<std::string> endpoints[2], chains[2];
  size_t elements_n[2] = {0, 0};
};

void add_item(Acc& a, std::string s) {
  if (!s.empty() && a.seen_items.insert(s).second) a.change.items.push_back(std::move(s));
}

}  // namespace

std::vector<NftServiceChange> nft_object_changes(std::string_view before_text, std::string_view after_text) {
  Side sides[2];
  Attribution attr;
  std::unordered_map<std::string_view, long> net;
  int i = 0;
  for (std::string_view text : {before_text, after_text}) {
    for (auto t : lines_of(text)) {
      sides[i].lines.push_back(parse_line(t));
      net[t] += i == 0 ? -1 : 1;
      const Line& l = sides[i].lines.back();
      // A dispatch element (address . proto . port) names its Service by its target or its comment.
      if (l.kind == "element" && (l.first_object || !l.comment.empty()) && l.key.find(" . ") != std::string_view::npos) {
        std::string svc = l.first_object ? l.first_object->service : std::string(l.comment);
        auto& v = attr.by_address[std::string(l.key.substr(0, l.key.find(" . ")))];
        if (std::find(v.begin(), v.end(), svc) == v.end()) v.push_back(svc);
      }
    }
    ++i;
  }
  for (auto& [addr, v] : attr.by_address) std::sort(v.begin(), v.end());
  std::map<std::string, Acc> acc;
  for (int side = 0; side < 2; ++side) {
    for (const Line& l : sides[side].lines) {
      auto who = owners(l, attr);
      for (const auto& s : who) sides[side].services.insert(s);
      long& n = net[l.text];
      bool changed = side == 0 ? n < 0 : n > 0;
      if (!changed) continue;
      n += side == 0 ? 1 : -1;  // one occurrence accounted for
      for (const auto& s : who) {
        Acc& a = acc[s];
        a.change.service = s;
        bool added = side == 1;
        (added ? a.change.lines_added : a.change.lines_removed)++;
        if (l.kind == "rule") (added ? a.change.rules_added : a.change.rules_removed)++;
        if (l.kind == "element") {
          a.elements_n[side]++;
          auto& e = a.elements[std::string(l.name) + " " + std::string(l.key)];
          (added ? e.second : e.first) = l.verdict.empty() ? std::string_view("(no verdict)") : l.verdict;
        }
        if (l.kind == "chain" && l.verb == "add") a.chains[side].insert(std::string(l.name));
        if (l.first_object && l.first_object->prefix == "endpoint-" && l.kind == "chain")
          a.endpoints[side].insert(l.first_object->endpoint);
        if (l.kind == "element") continue;  // itemised below, as added, removed or changed
        if (auto obj = service_object(l)) {
          int& sides = a.object_sides[*obj];
          if (!sides) a.objects.push_back(*obj);
          sides |= added ? 2 : 1;
          continue;
        }
        add_item(a, item(l, added));
      }
    }
  }
  std::vector<NftServiceChange> out;
  for (auto& [svc, a] : acc) {
    NftServiceChange& c = a.change;
    c.added = !svc.empty() && !sides[0].services.count(svc);
    c.removed = !svc.empty() && !sides[1].services.count(svc);
    if (c.added || c.removed) {
      int side = c.added ? 1 : 0;
      auto n = [](size_t k, const char* one, const char* many) { return std::to_string(k) + " " + (k == 1 ? one : many); };
      c.items = {std::string(c.added ? "Service port added (" : "Service port removed (") +
                 n(a.endpoints[side].size(), "endpoint", "endpoints") + ", " +
                 n(a.chains[side].size(), "chain", "chains") + ", " +
                 n(a.elements_n[side], "map/set element", "map/set elements") + ", " +
                 n(c.added ? c.rules_added : c.rules_removed, "rule", "rules") + ")"};
    } else {
      std::vector<std::string> others = std::move(c.items);
      c.items.clear();
      for (const auto& obj : a.objects) add_item(a, object_item(obj, a.object_sides[obj]));
      for (auto& o : others) c.items.push_back(std::move(o));
      for (const auto& [key, v] : a.elements) {
        std::string k = printable_capped(key, 160);
        if (v.first.empty()) add_item(a, k.insert(k.find(' '), " element") + " added");
        else if (v.second.empty()) add_item(a, k.insert(k.find(' '), " element") + " removed");
        else
          add_item(a, k.insert(k.find(' '), " element") + " changed: " + printable_capped(v.first, 120) + " -> " +
                          printable_capped(v.second, 120));
      }
    }
    out.push_back(std::move(c));
  }
  // Services by name, then the objects of no Service.
  std::stable_partition(out.begin(), out.end(), [](const NftServiceChange& c) { return !c.service.empty(); });
  return out;
}

std::string nft_change_words(const NftServiceChange& c, size_t max_items) {
  std::string s;
  size_t n = 0;
  for (const auto& i : c.items) {
    if (n++ == max_items) {
      s += "; and " + std::to_string(c.items.size() - max_items) + " more";
      break;
    }
    s += (s.empty() ? "" : "; ") + i;
  }
  if (!c.added && !c.removed && (c.rules_added || c.rules_removed))
    s += (s.empty() ? "" : "; ") + std::string("rules +") + std::to_string(c.rules_added) + " -" +
         std::to_string(c.rules_removed);
  return s.empty() ? "lines differ" : s;
}

}  // namespace kpc::applier
