// Printers: `nft list ruleset` (nft 1.0.6, byte for byte) and knftables' Fake.Dump().
#include <algorithm>
#include <cstdlib>

#include "verifier/nft/internal.h"

namespace kpc::verifier::nft {

std::string format_time_ms(uint64_t ms) {
  std::string out;
  uint64_t d = ms / 86400000;
  ms %= 86400000;
  uint64_t h = ms / 3600000;
  ms %= 3600000;
  uint64_t m = ms / 60000;
  ms %= 60000;
  uint64_t s = ms / 1000;
  ms %= 1000;
  if (d) out += std::to_string(d) + "d";
  if (h) out += std::to_string(h) + "h";
  if (m) out += std::to_string(m) + "m";
  if (s) out += std::to_string(s) + "s";
  if (ms) out += std::to_string(ms) + "ms";
  return out;
}

std::string priority_text(Family f, std::string_view hook, int prio) {
  struct P {
    int v;
    const char* n;
  };
  static const P prios[] = {{-300, "raw"}, {-150, "mangle"}, {-100, "dstnat"}, {0, "filter"}, {50, "security"}, {100, "srcnat"}};
  bool fam_ip = f == Family::Ip || f == Family::Ip6 || f == Family::Inet;
  for (const auto& p : prios) {
    if (std::abs(prio - p.v) > 10) continue;
    bool ok;
    if (p.v == 0) ok = fam_ip || f == Family::Arp || f == Family::Netdev;
    else if (p.v == -100) ok = fam_ip && hook == "prerouting";
    else if (p.v == 100) ok = fam_ip && hook == "postrouting";
    else ok = fam_ip;
    if (!ok) break;
    int off = prio - p.v;
    std::string out = p.n;
    if (off > 0) out += " + " + std::to_string(off);
    else if (off < 0) out += " - " + std::to_string(-off);
    return out;
  }
  return std::to_string(prio);
}

namespace {

// nft's calculate_delim: how many elements of a named set share a line.
int per_line(const Set& s) {
  if (s.key.size() != 1) return 1;
  switch (s.key[0]) {
    case Dtype::InetProto:
    case Dtype::InetService:
    case Dtype::Mark:
    case Dtype::Integer: return 5;
    case Dtype::Ipv4Addr:
    case Dtype::CtState: return 2;
    default: return 1;
  }
}

std::string element_text(const Element& e) {
  std::string out;
  for (size_t i = 0; i < e.key.size(); ++i) {
    if (i) out += " . ";
    out += e.key[i];
  }
  if (e.timeout) out += " timeout " + *e.timeout;
  if (e.expires) out += " expires " + *e.expires;
  if (e.comment) out += " comment \"" + *e.comment + "\"";
  if (e.value) out += " : " + *e.value;
  return out;
}

void print_set(std::string& o, const Set& s, const PrintOptions& po) {
  o += std::string("\t") + (s.is_map ? "map" : "set") + " " + s.name + " {";
  if (po.handles) o += " # handle " + std::to_string(s.handle);
  o += "\n\t\ttype ";
  for (size_t i = 0; i < s.key_names.size(); ++i) {
    if (i) o += " . ";
    o += s.key_names[i];
  }
  if (s.is_map) o += " : " + s.data_name;
  o += "\n";
  if (!s.has_flag("constant")) {
    if (s.policy == "memory") o += "\t\tpolicy memory\n";
    if (s.size) o += "\t\tsize " + std::to_string(s.size) + "\n";
  }
  std::vector<std::string> fl;
  for (const auto& f : s.flags)
    if (!(f == "timeout" && s.timeout_ms)) fl.push_back(f);
  if (!fl.empty()) {
    o += "\t\tflags ";
    // printed in nft's order from the full flag set
    bool first = true;
    for (const char* f : {"constant", "dynamic", "interval", "timeout"})
      if (s.has_flag(f)) {
        o += (first ? "" : ",") + std::string(f);
        first = false;
      }
    o += "\n";
  }
  if (s.auto_merge) o += "\t\tauto-merge\n";
  if (s.timeout_ms) o += "\t\ttimeout " + format_time_ms(s.timeout_ms) + "\n";
  if (s.gc_interval_ms) o += "\t\tgc-interval " + format_time_ms(s.gc_interval_ms) + "\n";
  if (s.comment) o += "\t\tcomment \"" + *s.comment + "\"\n";
  if (!s.elements.empty()) {
    std::vector<const Element*> es;
    for (const auto& e : s.elements) es.push_back(&e);
    std::stable_sort(es.begin(), es.end(), [](const Element* a, const Element* b) { return a->sort_key < b->sort_key; });
    o += "\t\telements = { ";
    int n = per_line(s), count = 0;
    for (size_t i = 0; i < es.size(); ++i) {
      if (i) {
        if (count < n) o += ", ";
        else {
          o += ",\n\t\t\t     ";
          count = 0;
        }
      }
      o += element_text(*es[i]);
      ++count;
    }
    o += " }\n";
  }
  o += "\t}\n";
}

void print_chain(std::string& o, const Table& t, const Chain& c, const PrintOptions& po) {
  o += "\tchain " + c.name + " {";
  if (po.handles) o += " # handle " + std::to_string(c.handle);
  if (c.comment) o += "\n\t\tcomment \"" + *c.comment + "\"";
  o += "\n";
  if (c.base) {
    o += "\t\ttype " + c.type + " hook " + c.hook;
    if (c.device) o += " device \"" + *c.device + "\"";
    o += " priority " + priority_text(t.family, c.hook, c.priority) + "; policy " + c.policy + ";\n";
  }
  for (const auto& r : c.rules) {
    o += "\t\t" + r.canonical;
    if (po.handles) o += " # handle " + std::to_string(r.handle);
    o += "\n";
  }
  o += "\t}\n";
}

void print_flowtable(std::string& o, const Flowtable& f, const PrintOptions& po) {
  o += "\tflowtable " + f.name + " {";
  if (po.handles) o += " # handle " + std::to_string(f.handle);
  o += "\n\t\thook ingress priority " + priority_text(Family::Netdev, "ingress", f.priority) + "\n";
  if (!f.devices.empty()) {
    o += "\t\tdevices = { ";
    for (size_t i = 0; i < f.devices.size(); ++i) o += (i ? ", " : "") + f.devices[i];
    o += " }\n";
  }
  o += "\t}\n";
}

std::string go_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

}  // namespace

std::string print_ruleset(const NftState& s, const PrintOptions& po) {
  std::string o;
  for (const auto& t : s.tables) {
    o += std::string("table ") + family_name(t.family) + " " + t.name + " {";
    if (po.handles) o += " # handle " + std::to_string(t.handle);
    o += "\n";
    if (!t.flags.empty()) {
      o += "\tflags ";
      for (size_t i = 0; i < t.flags.size(); ++i) o += (i ? "," : "") + t.flags[i];
      o += "\n";
    }
    if (t.comment) o += "\tcomment \"" + *t.comment + "\"\n";
    const char* delim = "";
    for (const auto& st : t.sets) {
      o += delim;
      print_set(o, st, po);
      delim = "\n";
    }
    for (const auto& f : t.flowtables) {
      o += delim;
      print_flowtable(o, f, po);
      delim = "\n";
    }
    for (const auto& c : t.chains) {
      o += delim;
      print_chain(o, t, c, po);
      delim = "\n";
    }
    o += "}\n";
  }
  return o;
}

std::string print_knftables_dump(const NftState& s, Family family, std::string_view table) {
  const Table* t = s.find_table(family, table);
  if (!t) return "";
  const std::string prefix = std::string(family_name(family)) + " " + std::string(table) + " ";
  std::string o = "add table " + std::string(family_name(family)) + " " + std::string(table);
  if (t->comment || !t->flags.empty()) {
    o += " {";
    if (t->comment) o += " comment " + go_quote(*t->comment) + " ;";
    if (!t->flags.empty()) {
      o += " flags ";
      for (size_t i = 0; i < t->flags.size(); ++i) o += (i ? "," : "") + t->flags[i];
      o += " ;";
    }
    o += " }";
  }
  o += "\n";
  auto by_name = [](const auto* a, const auto* b) { return a->name < b->name; };
  std::vector<const Flowtable*> fts;
  for (const auto& f : t->flowtables) fts.push_back(&f);
  std::sort(fts.begin(), fts.end(), by_name);
  std::vector<const Chain*> chains;
  for (const auto& c : t->chains) chains.push_back(&c);
  std::sort(chains.begin(), chains.end(), by_name);
  std::vector<const Set*> sets, maps;
  for (const auto& st : t->sets) (st.is_map ? maps : sets).push_back(&st);
  std::sort(sets.begin(), sets.end(), by_name);
  std::sort(maps.begin(), maps.end(), by_name);
  for (const auto* f : fts) {
    o += "add flowtable " + prefix + f->name + " { hook ingress priority " + std::to_string(f->priority) + " ;";
    if (!f->devices.empty()) {
      o += " devices = { ";
      for (size_t i = 0; i < f->devices.size(); ++i) o += (i ? ", " : "") + f->devices[i];
      o += " } ;";
    }
    o += " }\n";
  }
  for (const auto* c : chains) {
    o += "add chain " + prefix + c->name;
    if (c->base || c->comment) {
      o += " {";
      if (c->base) {
        o += " type " + c->type + " hook " + c->hook;
        if (c->device) o += " device " + go_quote(*c->device);
        o += " priority " + std::to_string(c->priority) + " ;";
        if (c->policy != "accept") o += " policy " + c->policy + " ;";
      }
      if (c->comment) o += " comment " + go_quote(*c->comment) + " ;";
      o += " }";
    }
    o += "\n";
  }
  auto set_line = [&](const Set* st) {
    o += std::string("add ") + (st->is_map ? "map " : "set ") + prefix + st->name + " { type ";
    for (size_t i = 0; i < st->key_names.size(); ++i) o += (i ? " . " : "") + st->key_names[i];
    if (st->is_map) o += " : " + st->data_name;
    o += " ;";
    if (!st->flags.empty()) {
      o += " flags ";
      for (size_t i = 0; i < st->flags.size(); ++i) o += (i ? "," : "") + st->flags[i];
      o += " ;";
    }
    if (st->timeout_ms) o += " timeout " + std::to_string(st->timeout_ms / 1000) + "s ;";
    if (st->gc_interval_ms) o += " gc-interval " + std::to_string(st->gc_interval_ms / 1000) + "s ;";
    if (st->size && !st->size_implied) o += " size " + std::to_string(st->size) + " ;";
    if (!st->policy.empty()) o += " policy " + st->policy + " ;";
    if (st->auto_merge) o += " auto-merge ;";
    if (st->comment) o += " comment " + go_quote(*st->comment) + " ;";
    o += " }\n";
  };
  for (const auto* st : sets) set_line(st);
  for (const auto* st : maps) set_line(st);
  for (const auto* c : chains)
    for (const auto& r : c->rules) {
      o += "add rule " + prefix + c->name + " " + r.text;
      if (r.comment) o += " comment " + go_quote(*r.comment);
      o += "\n";
    }
  auto elems = [&](const Set* st) {
    for (const auto& e : st->elements) {
      o += "add element " + prefix + st->name + " { ";
      const auto& key = e.written_key.empty() ? e.key : e.written_key;
      for (size_t i = 0; i < key.size(); ++i) o += (i ? " . " : "") + key[i];
      if (e.comment) o += " comment " + go_quote(*e.comment);
      if (e.value) o += " : " + (e.written_value ? *e.written_value : *e.value);
      o += " }\n";
    }
  };
  for (const auto* st : sets) elems(st);
  for (const auto* st : maps) elems(st);
  return o;
}

}  // namespace kpc::verifier::nft
