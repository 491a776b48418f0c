// Which destination atoms can behave differently between two nft states (step 1 of the
// comparison, as symbolic/affected.cpp for iptables): kube-proxy's partial syncs differ in a
// few service chains and map elements, each reached only through an element keyed by the
// packet's original destination (`ip daddr . meta l4proto . th dport vmap @service-ips`), so
// only the atoms of those elements need exploring.
//
// Sound by construction: the atoms of an object are those from which a packet can reach it.
// A chain's are the union over its references — a map element keyed by `ip daddr` in a
// lookup that sees the original destination: the element's range; a rule (or an element of a
// map looked up by other keys): the atoms of the chain holding that rule; a base chain: all.
// A lookup sees the original destination only in chains every base chain reaching them runs
// before DNAT (prerouting / output at priority <= -100; not prerouting when some dnat target
// is a node address, since a node -> local packet comes back through prerouting DNAT'ed).
// Anything else (a table only on one side, a differing base chain, a set a rule updates)
// gives all atoms.
#include <map>
#include <set>

#include "verifier/nft_sym/compare.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/nft_trace/rule_model.h"

namespace kpc::verifier::nft_sym {
namespace {

using nft_trace::Field;
using nft_trace::Stmt;

struct TableView {
  const nft::Table* t = nullptr;
  // chain -> references: (referencing chain, or "" for a map element) and the element's range.
  struct Ref {
    const nft::Chain* from = nullptr;       ///< a rule of this chain references it
    const nft::Set* map = nullptr;          ///< or an element of this map
    const nft::Element* element = nullptr;
  };
  std::map<std::string, std::vector<Ref>> refs;                 // chain name -> references
  std::map<std::string, std::vector<std::pair<const nft::Chain*, std::vector<Field>>>> lookups;  // set -> rules
  std::map<std::string, std::set<std::string>> bases;           // chain -> base chains reaching it
};

TableView view_of(const nft::Table& t, bool v4) {
  TableView v;
  v.t = &t;
  for (const auto& c : t.chains) {
    if (c.removed) continue;
    for (const auto& r : c.rules) {
      for (const auto& n : r.refs.chains) v.refs[n].push_back({&c, nullptr, nullptr});
      auto m = nft_trace::read_rule(r.canonical, v4);
      for (const auto& s : m.stmts)
        if ((s.kind == Stmt::Match || s.kind == Stmt::Vmap) && !s.anonymous && !s.set.empty())
          v.lookups[s.set].push_back({&c, s.key.fields});
      for (const auto& s : r.refs.sets) {
        const nft::Set* set = t.find_set(s);
        if (!set || !set->is_map) continue;
        for (const auto& el : set->elements) {
          nft_trace::VerdictSpec vs;
          if (!el.removed && el.value && nft_trace::read_verdict(*el.value, &vs) && !vs.chain.empty())
            v.refs[vs.chain].push_back({nullptr, set, &el});
        }
      }
    }
  }
  // Base chains reaching each chain (forward walk from each base chain).
  for (const auto& b : t.chains) {
    if (!b.base || b.removed) continue;
    std::vector<const nft::Chain*> todo{&b};
    std::set<std::string> seen{b.name};
    while (!todo.empty()) {
      const nft::Chain* c = todo.back();
      todo.pop_back();
      v.bases[c->name].insert(b.name);
      auto visit = [&](const std::string& n) {
        const nft::Chain* x = t.find_chain(n);
        if (x && !x->removed && seen.insert(n).second) todo.push_back(x);
      };
      for (const auto& r : c->rules) {
        for (const auto& n : r.refs.chains) visit(n);
        for (const auto& s : r.refs.sets) {
          const nft::Set* set = t.find_set(s);
          if (!set || !set->is_map) continue;
          for (const auto& el : set->elements) {
            nft_trace::VerdictSpec vs;
            if (!el.removed && el.value && nft_trace::read_verdict(*el.value, &vs) && !vs.chain.empty()) visit(vs.chain);
          }
        }
      }
    }
  }
  return v;
}

struct Narrower {
  const symbolic::Universe& u;
  bool v4;
  bool prerouting_post_dnat = false;  // some dnat target is a node address
  bool all = false;
  std::string why;
  std::vector<char> atoms;

  void mark_all(std::string w) {
    if (!all) why = std::move(w);
    all = true;
  }
  void mark_range(const nft_trace::Range& r) {
    if (r.lo.addr.family != u.family) return;
    size_t a = u.atom_of(symbolic::addr_value(r.lo.addr)), b = u.atom_of(symbolic::addr_value(r.hi.addr));
    for (size_t i = a; i <= b; ++i) atoms[i] = 1;
  }

  bool pre_dnat(const TableView& v, const nft::Chain& c) const {
    auto it = v.bases.find(c.name);
    if (it == v.bases.end()) return true;  // unreachable: no packet sees it
    for (const auto& bn : it->second) {
      const nft::Chain* b = v.t->find_chain(bn);
      if (!b) return false;
      if (b->hook == "output" && b->priority <= -100) continue;
      if (b->hook == "prerouting" && b->priority <= -100 && !prerouting_post_dnat) continue;
      return false;
    }
    return true;
  }

  // The atoms a packet can reach chain `name` from.
  void reach_chain(const TableView& v, const std::string& name, std::set<std::string>& seen) {
    if (all || !seen.insert(name).second) return;
    const nft::Chain* c = v.t->find_chain(name);
    if (c && c->base) return mark_all("a base chain differs (" + name + ")");
    auto it = v.refs.find(name);
    if (it == v.refs.end()) return;  // nothing reaches it
    for (const auto& r : it->second) {
      if (r.from) {
        reach_chain(v, r.from->name, seen);
        continue;
      }
      reach_element(v, *r.map, r.element->key, seen);
    }
  }

  // The atoms a packet can meet this element (key fields) of set/map s from.
  void reach_element(const TableView& v, const nft::Set& s, const std::vector<std::string>& key,
                     std::set<std::string>& seen) {
    auto it = v.lookups.find(s.name);
    if (it == v.lookups.end()) return;
    for (const auto& [chain, fields] : it->second) {
      int daddr = -1;
      for (size_t i = 0; i < fields.size(); ++i)
        if (fields[i] == Field::IpDaddr && daddr < 0) daddr = static_cast<int>(i);
      nft_trace::Range r;
      if (daddr >= 0 && pre_dnat(v, *chain) && static_cast<size_t>(daddr) < key.size() &&
          nft_trace::read_range(Field::IpDaddr, key[daddr], v4, &r)) {
        mark_range(r);
        continue;
      }
      reach_chain(v, chain->name, seen);
    }
  }
};

std::vector<std::string> el_text(const nft::Element& e) {
  std::vector<std::string> k = e.key;
  k.push_back(e.value ? *e.value : "");
  return k;
}

}  // namespace

symbolic::AffectedAtoms affected_atoms_nft(const nft::NftState& a, const nft::NftState& b, const symbolic::Universe& u) {
  symbolic::AffectedAtoms out;
  Narrower n{u, u.family == IPFamily::V4, false, false, {}, std::vector<char>(u.atom_count(), 0)};
  // A node -> local packet DNAT'ed to a node address comes back through prerouting.
  for (const auto* st : {&a, &b})
    for (const auto& t : st->tables)
      for (const auto& c : t.chains)
        for (const auto& r : c.rules) {
          auto m = nft_trace::read_rule(r.canonical, n.v4);
          for (const auto& s : m.stmts)
            if (s.kind == Stmt::Dnat && s.nat_addr && s.nat_addr->family == u.family &&
                u.local.contains(symbolic::addr_value(*s.nat_addr)))
              n.prerouting_post_dnat = true;
        }
  auto diffs = object_differences(b, a);
  std::map<std::string, std::pair<const nft::Table*, const nft::Table*>> tables;
  for (const auto& t : a.tables) tables[std::string(nft::family_name(t.family)) + " " + t.name].first = &t;
  for (const auto& t : b.tables) tables[std::string(nft::family_name(t.family)) + " " + t.name].second = &t;
  std::map<std::string, std::pair<TableView, TableView>> views;
  for (const auto& d : diffs) {
    if (!d.reachable) continue;
    auto [ta, tb] = tables[d.table];
    if (!ta || !tb) {
      n.mark_all("table " + d.table + " exists on one side only");
      break;
    }
    if (d.kind == "definition differs" && d.object.rfind("set ", 0) != 0 && d.object.rfind("map ", 0) != 0) {
      n.mark_all("chain " + d.object + ": definition differs");
      break;
    }
    auto it = views.find(d.table);
    if (it == views.end()) it = views.emplace(d.table, std::make_pair(view_of(*ta, n.v4), view_of(*tb, n.v4))).first;
    for (int side = 0; side < 2; ++side) {
      const TableView& v = side ? it->second.second : it->second.first;
      std::set<std::string> seen;
      if (d.object.rfind("set ", 0) == 0 || d.object.rfind("map ", 0) == 0) {
        std::string name = d.object.substr(4);
        const nft::Set* s = v.t->find_set(name);
        const nft::Set* o = (side ? ta : tb)->find_set(name);
        if (!s) continue;
        if (!o || d.kind != "elements differ" || s->has_flag("dynamic")) {
          // The whole set: every lookup of it reaches from its chain's atoms.
          auto lk = v.lookups.find(name);
          if (lk != v.lookups.end())
            for (const auto& [chain, fields] : lk->second) n.reach_chain(v, chain->name, seen);
          if (s->has_flag("dynamic")) n.mark_all("affinity set " + name + " differs");
          continue;
        }
        std::set<std::vector<std::string>> other;
        for (const auto& e : o->elements)
          if (!e.removed) other.insert(el_text(e));
        for (const auto& e : s->elements)
          if (!e.removed && !other.count(el_text(e))) n.reach_element(v, *s, e.key, seen);
      } else {
        n.reach_chain(v, d.object, seen);
      }
    }
    if (n.all) break;
  }
  if (n.all) {
    out.all = true;
    out.atom.assign(u.atom_count(), 1);
    out.why_all = n.why;
  } else {
    out.atom = std::move(n.atoms);
  }
  return out;
}

}  // namespace kpc::verifier::nft_sym
