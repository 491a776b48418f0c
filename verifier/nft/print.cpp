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
    o += "\t\t" + r.canonical();
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

namespace {

// A listing in print order, piece by piece: each table's head, its sets, flowtables and
// chains (with the blank line print_ruleset puts before all but the first), its "}".
struct Piece {
  enum Kind { Head, SetP, FlowP, ChainP, Tail } kind;
  const Table* t;
  const void* obj;
  bool delim;
};

std::vector<Piece> pieces(const NftState& s) {
  std::vector<Piece> out;
  for (const auto& t : s.tables) {
    out.push_back({Piece::Head, &t, nullptr, false});
    bool delim = false;
    for (const auto& x : t.sets) out.push_back({Piece::SetP, &t, &x, delim}), delim = true;
    for (const auto& x : t.flowtables) out.push_back({Piece::FlowP, &t, &x, delim}), delim = true;
    for (const auto& x : t.chains) out.push_back({Piece::ChainP, &t, &x, delim}), delim = true;
    out.push_back({Piece::Tail, &t, nullptr, false});
  }
  return out;
}

// Exactly what print_ruleset appends for the piece (no handles).
void print_piece(std::string& o, const Piece& p) {
  const PrintOptions po;
  const Table& t = *p.t;
  if (p.delim) o += "\n";
  switch (p.kind) {
    case Piece::Head:
      o += std::string("table ") + family_name(t.family) + " " + t.name + " {\n";
      if (!t.flags.empty()) {
        o += "\tflags ";
        for (size_t i = 0; i < t.flags.size(); ++i) o += (i ? "," : "") + t.flags[i];
        o += "\n";
      }
      if (t.comment) o += "\tcomment \"" + *t.comment + "\"\n";
      break;
    case Piece::SetP: print_set(o, *static_cast<const Set*>(p.obj), po); break;
    case Piece::FlowP: print_flowtable(o, *static_cast<const Flowtable*>(p.obj), po); break;
    case Piece::ChainP: print_chain(o, t, *static_cast<const Chain*>(p.obj), po); break;
    case Piece::Tail: o += "}\n"; break;
  }
}

// Equal printed fields (every field the piece's printer reads): equal texts.
bool same_fields(const Piece& a, const Piece& b) {
  if (a.kind != b.kind || a.delim != b.delim) return false;
  const Table &ta = *a.t, &tb = *b.t;
  switch (a.kind) {
    case Piece::Head: return ta.family == tb.family && ta.name == tb.name && ta.flags == tb.flags && ta.comment == tb.comment;
    case Piece::Tail: return true;
    case Piece::SetP: {
      const Set &x = *static_cast<const Set*>(a.obj), &y = *static_cast<const Set*>(b.obj);
      if (x.name != y.name || x.is_map != y.is_map || x.key != y.key || x.key_names != y.key_names ||
          x.data_name != y.data_name || x.flags != y.flags || x.policy != y.policy || x.size != y.size ||
          x.timeout_ms != y.timeout_ms || x.gc_interval_ms != y.gc_interval_ms || x.auto_merge != y.auto_merge ||
          x.comment != y.comment || x.elements.size() != y.elements.size())
        return false;
      for (size_t i = 0; i < x.elements.size(); ++i) {
        const Element &e = x.elements[i], &f = y.elements[i];
        if (e.key != f.key || e.sort_key != f.sort_key || e.timeout != f.timeout || e.expires != f.expires ||
            e.comment != f.comment || e.value != f.value)
          return false;
      }
      return true;
    }
    case Piece::FlowP: {
      const Flowtable &x = *static_cast<const Flowtable*>(a.obj), &y = *static_cast<const Flowtable*>(b.obj);
      return x.name == y.name && x.priority == y.priority && x.devices == y.devices;
    }
    case Piece::ChainP: {
      const Chain &x = *static_cast<const Chain*>(a.obj), &y = *static_cast<const Chain*>(b.obj);
      if (x.name != y.name || x.comment != y.comment || x.base != y.base || x.rules.size() != y.rules.size())
        return false;
      if (x.base && (x.type != y.type || x.hook != y.hook || x.device != y.device || x.priority != y.priority ||
                     x.policy != y.policy || ta.family != tb.family))  // the family names the priority
        return false;
      for (size_t i = 0; i < x.rules.size(); ++i)
        if (x.rules[i].canonical() != y.rules[i].canonical()) return false;
      return true;
    }
  }
  return false;
}

}  // namespace

bool same_listing(const NftState& a, const NftState& b) {
  // Both listings streamed piece by piece: a pair of pieces with equal fields at the same
  // offset of both texts is skipped unprinted; otherwise both are printed and the printed
  // prefix they share is dropped. The first byte that differs ends the walk.
  std::vector<Piece> pa = pieces(a), pb = pieces(b);
  std::string ba, bb;
  size_t i = 0, j = 0;
  while (i < pa.size() || j < pb.size()) {
    if (ba.empty() && bb.empty() && i < pa.size() && j < pb.size() && same_fields(pa[i], pb[j])) {
      ++i, ++j;
      continue;
    }
    if (i < pa.size()) print_piece(ba, pa[i++]);
    if (j < pb.size()) print_piece(bb, pb[j++]);
    size_t n = std::min(ba.size(), bb.size());
    if (ba.compare(0, n, bb, 0, n) != 0) return false;
    ba.erase(0, n);
    bb.erase(0, n);
  }
  return ba.empty() && bb.empty();
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
      o += "add rule " + prefix + c->name + " " + r.text();
      if (r.comment()) o += " comment " + go_quote(*r.comment());
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
