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
// A lookup sees the original destination in chains every base chain reaching them runs
// before DNAT (prerouting / output at priority <= -100; not prerouting when some dnat target
// is a node address, since a node -> local packet comes back through prerouting DNAT'ed);
// after DNAT it sees a dnat target or, for a packet not DNAT'ed, the original destination,
// so an element no dnat target (of either state) lies in is still met only from its range.
// A set's are those of every rule that names it (lookups, updates, anything else): a
// differing element only through the lookups that can meet it (as a chain's references),
// a differing definition, an affinity set (one a rule updates: the explorer reads its
// remembered clients from the packet class, not from other packets, and its updates are the
// updating rule's outcome) or a set whose affinity status differs: every such rule's chain.
// Anything else (a table only on one side, a differing base chain) gives all atoms.
//
// Cost: one reference index per side (names only, built side by side; no rule is parsed)
// plus the rules that name a differing set (parsed for their lookup keys) and the rules with
// "dnat" in their text; the base chains reaching a chain are found by walking the references
// back from it, only for the chains met. The same index answers object_differences'
// reachability (the forward walk's answers, found backwards from the differing objects).
#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "verifier/nft_sym/compare.h"
#include "compiler/support/side_by_side.h"
#include "verifier/nft_sym/verify.h"
#include "verifier/nft_trace/rule_model.h"

namespace kpc::verifier::nft_sym {
namespace {

using nft_trace::Field;
using nft_trace::Stmt;

bool names(const std::vector<std::string>& v, const std::string& n) {
  for (const auto& x : v)
    if (x == n) return true;
  return false;
}

// One table's reference index. Keys view names held by the table (which outlives the view).
struct TableView {
  const nft::Table* t = nullptr;
  bool v4 = true;
  struct Ref {
    const nft::Chain* from = nullptr;       ///< a rule of this chain references it
    const nft::Set* map = nullptr;          ///< or an element of this map
    const nft::Element* element = nullptr;
  };
  struct User {
    const nft::Chain* chain;
    const nft::Rule* rule;
  };
  struct Lookup {
    const nft::Chain* chain;
    std::vector<Field> fields;
  };
  struct SetUses {
    std::vector<Lookup> lookups;              ///< named-set matches and verdict-map look-ups
    std::vector<const nft::Chain*> others;    ///< rules naming the set otherwise (updates, unread)
  };
  std::unordered_map<std::string_view, std::vector<Ref>> refs;    // chain name -> references
  std::unordered_map<std::string_view, std::vector<User>> users;  // set name -> rules naming it
  std::set<std::string> missing;  // names of map-element targets not in the table (keys view them)
  std::map<std::string, SetUses> uses_cache;
  std::map<std::string, std::set<std::string>> bases_cache;

  // How the rules naming set `name` use it (their rules parsed once, on first need).
  const SetUses& uses(const std::string& name) {
    auto it = uses_cache.find(name);
    if (it != uses_cache.end()) return it->second;
    SetUses u;
    auto us = users.find(name);
    if (us != users.end())
      for (const auto& [c, r] : us->second) {
        bool looked_up = false, other = false;
        auto m = nft_trace::read_rule(r->canonical(), v4);
        for (const auto& s : m.stmts) {
          if ((s.kind == Stmt::Match || s.kind == Stmt::Vmap) && !s.anonymous && s.set == name) {
            u.lookups.push_back({c, s.key.fields});
            looked_up = true;
          } else if (s.set == name || (s.kind == Stmt::Unknown && s.text.find("@" + name) != std::string::npos)) {
            other = true;  // an update, or the set named in a part the model does not read
          }
        }
        // A rule that names the set without a lookup the model read (an update, a statement
        // the model stops at): the whole chain's atoms.
        if (other || !looked_up) u.others.push_back(c);
      }
    return uses_cache.emplace(name, std::move(u)).first->second;
  }

  // An affinity set, as the explorer decides them (explorer.cpp): flagged dynamic, or
  // updated by some rule.
  bool is_dynamic(const std::string& name) const {
    const nft::Set* set = t->find_set(name);
    if (set && set->has_flag("dynamic")) return true;
    auto us = users.find(name);
    if (us != users.end())
      for (const auto& u : us->second)
        if (names(u.rule->refs().dynset, name)) return true;
    return false;
  }

  // Reachable from a base chain (exactly as verify.cpp's forward walk decides it): a chain
  // that some live base chain reaches; a set that a rule of such a chain names.
  bool reachable(const std::string& name, bool is_set) {
    if (!is_set) {
      const nft::Chain* c = t->find_chain(name);
      return c && !c->removed && !bases_of(name).empty();
    }
    auto us = users.find(name);
    if (us != users.end())
      for (const auto& u : us->second)
        if (!bases_of(u.chain->name).empty()) return true;
    return false;
  }

  // The base chains from which chain `name` can be reached (itself included if it is one):
  // the references walked backwards, through map elements to the rules naming the map.
  const std::set<std::string>& bases_of(const std::string& name) {
    auto it = bases_cache.find(name);
    if (it != bases_cache.end()) return it->second;
    std::set<std::string> out;
    std::set<std::string_view> seen{name};
    std::vector<std::string_view> todo{name};
    auto visit = [&](const nft::Chain* c) {
      if (seen.insert(c->name).second) todo.push_back(c->name);
    };
    while (!todo.empty()) {
      std::string_view n = todo.back();
      todo.pop_back();
      const nft::Chain* c = t->find_chain(n);
      if (c && c->base && !c->removed) out.emplace(n);
      auto r = refs.find(n);
      if (r == refs.end()) continue;
      for (const auto& ref : r->second) {
        if (ref.from) {
          visit(ref.from);
          continue;
        }
        auto us = users.find(ref.map->name);
        if (us != users.end())
          for (const auto& u : us->second)
            if (names(u.rule->refs().sets, ref.map->name)) visit(u.chain);  // read, not only updated
      }
    }
    return bases_cache.emplace(name, std::move(out)).first->second;
  }
};

TableView view_of(const nft::Table& t, bool v4) {
  TableView v;
  v.t = &t;
  v.v4 = v4;
  for (const auto& c : t.chains) {
    if (c.removed) continue;
    for (const auto& r : c.rules) {
      for (const auto& n : r.refs().chains) v.refs[n].push_back({&c, nullptr, nullptr});
      for (const auto* list : {&r.refs().sets, &r.refs().dynset})
        for (size_t i = 0; i < list->size(); ++i) {
          const std::string& s = (*list)[i];
          auto& us = v.users[s];
          if (us.empty() || us.back().rule != &r) us.push_back({&c, &r});
        }
    }
  }
  // Verdict-map elements reference their chains (once per map named by some rule).
  for (const auto& [name, us] : v.users) {
    const nft::Set* set = t.find_set(name);
    if (!set || !set->is_map) continue;
    bool read = false;  // as a lookup (refs.sets), not only updated
    for (const auto& u : us) read = read || names(u.rule->refs().sets, set->name);
    if (!read) continue;
    for (const auto& el : set->elements) {
      nft_trace::VerdictSpec vs;
      if (!el.removed && el.value && nft_trace::read_verdict(*el.value, &vs) && !vs.chain.empty()) {
        const nft::Chain* target = t.find_chain(vs.chain);
        std::string_view key = target ? std::string_view(target->name) : *v.missing.insert(vs.chain).first;
        v.refs[key].push_back({nullptr, set, &el});
      }
    }
  }
  return v;
}

struct Narrower {
  const sem::Universe& u;
  bool v4;
  bool prerouting_post_dnat = false;  // some dnat target is a node address
  std::vector<sem::u128> dnat_targets;  // every dnat target address value, sorted
  // Some dnat statement the rule model does not read (a form the nft model accepts but the
  // tracer stops at): its target is unknown, so it may rewrite into any element.
  bool dnat_unknown = false;
  bool all = false;
  std::string why;
  std::vector<char> atoms;

  void mark_all(std::string w) {
    if (!all) why = std::move(w);
    all = true;
  }
  void mark_range(const nft_trace::Range& r) {
    if (r.lo.addr.family != u.family) return;
    size_t a = u.atom_of(sem::addr_value(r.lo.addr)), b = u.atom_of(sem::addr_value(r.hi.addr));
    for (size_t i = a; i <= b; ++i) atoms[i] = 1;
  }

  bool pre_dnat(TableView& v, const nft::Chain& c) const {
    for (const auto& bn : v.bases_of(c.name)) {  // none: unreachable, no packet sees it
      const nft::Chain* b = v.t->find_chain(bn);
      if (!b) return false;
      if (b->hook == "output" && b->priority <= -100) continue;
      if (b->hook == "prerouting" && b->priority <= -100 && !prerouting_post_dnat) continue;
      return false;
    }
    return true;
  }

  // Can a dnat (of either state) rewrite a destination into r?
  bool dnat_into(const nft_trace::Range& r) const {
    if (dnat_unknown) return true;
    auto lo = sem::addr_value(r.lo.addr), hi = sem::addr_value(r.hi.addr);
    auto it = std::lower_bound(dnat_targets.begin(), dnat_targets.end(), lo);
    return it != dnat_targets.end() && *it <= hi;
  }

  // The atoms a packet can reach chain `name` from.
  void reach_chain(TableView& v, const std::string& name, std::set<std::string>& seen) {
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
  void reach_element(TableView& v, const nft::Set& s, const std::vector<std::string>& key,
                     std::set<std::string>& seen) {
    const TableView::SetUses& uses = v.uses(s.name);
    for (const auto* c : uses.others) reach_chain(v, c->name, seen);
    for (const auto& [chain, fields] : uses.lookups) {
      int daddr = -1;
      for (size_t i = 0; i < fields.size(); ++i)
        if (fields[i] == Field::IpDaddr && daddr < 0) daddr = static_cast<int>(i);
      // The lookup's destination is the original one (pre_dnat), or a dnat target, or the
      // original one of a packet not DNAT'ed: when no dnat target lies in the element, only
      // packets to it meet it.
      nft_trace::Range r;
      if (daddr >= 0 && static_cast<size_t>(daddr) < key.size() &&
          nft_trace::read_range(Field::IpDaddr, key[daddr], v4, &r) && (pre_dnat(v, *chain) || !dnat_into(r))) {
        mark_range(r);
        continue;
      }
      reach_chain(v, chain->name, seen);
    }
  }

  // Every rule naming set `name`, from its chain's atoms.
  void reach_set(TableView& v, const std::string& name, std::set<std::string>& seen) {
    auto us = v.users.find(name);
    if (us == v.users.end()) return;
    for (const auto& u : us->second) reach_chain(v, u.chain->name, seen);
  }
};

std::vector<std::string> el_text(const nft::Element& e) {
  std::vector<std::string> k = e.key;
  k.push_back(e.value ? *e.value : "");
  return k;
}

std::string key_of(const nft::Table& t) { return std::string(nft::family_name(t.family)) + " " + t.name; }

}  // namespace

sem::AffectedAtoms affected_atoms_nft(const nft::NftState& a, const nft::NftState& b, const sem::Universe& u) {
  sem::AffectedAtoms out;
  Narrower n{u, u.family == IPFamily::V4, false, {}, false, false, {}, std::vector<char>(u.atom_count(), 0)};
  // A node -> local packet DNAT'ed to a node address comes back through prerouting. (Only a
  // rule whose text has "dnat" can hold a dnat statement: the others are not parsed.) The
  // two states are read side by side.
  // A rule with a dnat statement the rule model does not read (it stops at an Unknown) has an
  // unknown target: it may be a node address and may lie in any element.
  auto scan = [&](const nft::NftState& st, std::vector<sem::u128>* targets, bool* local, bool* unknown) {
    for (const auto& t : st.tables)
      for (const auto& c : t.chains)
        for (const auto& r : c.rules) {
          if (!r.refs().dnat && r.canonical().find("dnat") == std::string::npos) continue;
          auto m = nft_trace::read_rule(r.canonical(), n.v4);
          for (const auto& s : m.stmts) {
            if (s.kind == Stmt::Unknown) *unknown = *local = true;
            if (s.kind == Stmt::Dnat && s.nat_addr) {
              // Every target, of either family (the explorer compares address values).
              targets->push_back(sem::addr_value(*s.nat_addr));
              if (s.nat_addr->family == u.family && u.local.contains(targets->back())) *local = true;
            }
          }
        }
  };
  std::vector<sem::u128> tb_targets;
  bool tb_local = false, tb_unknown = false;
  side_by_side([&] { scan(b, &tb_targets, &tb_local, &tb_unknown); },
               [&] { scan(a, &n.dnat_targets, &n.prerouting_post_dnat, &n.dnat_unknown); });
  n.dnat_targets.insert(n.dnat_targets.end(), tb_targets.begin(), tb_targets.end());
  n.prerouting_post_dnat = n.prerouting_post_dnat || tb_local;
  n.dnat_unknown = n.dnat_unknown || tb_unknown;
  std::sort(n.dnat_targets.begin(), n.dnat_targets.end());
  std::map<std::string, std::pair<const nft::Table*, const nft::Table*>> tables;
  for (const auto& t : a.tables) tables[key_of(t)].first = &t;
  for (const auto& t : b.tables) tables[key_of(t)].second = &t;
  // Each table's two reference indexes (a's, b's), built side by side on first need.
  std::map<std::string, std::pair<TableView, TableView>> views;
  auto views_of = [&](const std::string& key) -> std::pair<TableView, TableView>& {
    auto it = views.find(key);
    if (it != views.end()) return it->second;
    auto [ta, tb] = tables[key];
    TableView va, vb;
    side_by_side([&, tb = tb] { vb = view_of(*tb, n.v4); }, [&, ta = ta] { va = view_of(*ta, n.v4); });
    return views.emplace(key, std::make_pair(std::move(va), std::move(vb))).first->second;
  };
  // (object_differences(b, a): x is b's table, y a's.)
  auto diffs = object_differences(b, a, [&](const nft::Table&, const nft::Table& y, const std::string& name, bool is_set) {
    auto& [va, vb] = views_of(key_of(y));
    return vb.reachable(name, is_set) || va.reachable(name, is_set);
  });
  // A set whose affinity status differs (a rule that updates it added or removed, in any
  // chain, reachable or not) changes how every lookup of it reads the packet class. Only a
  // set named by a differing object can: the other chains update on both sides alike.
  {
    std::map<std::string, std::set<std::string>> candidates;  // table -> set names
    for (const auto& d : diffs) {
      auto [ta, tb] = tables[d.table];
      if (!ta || !tb) continue;
      if (d.object.rfind("set ", 0) == 0 || d.object.rfind("map ", 0) == 0) {
        candidates[d.table].insert(d.object.substr(4));
        continue;
      }
      for (const nft::Table* t : {ta, tb})
        if (const nft::Chain* c = t->find_chain(d.object))
          for (const auto& r : c->rules) candidates[d.table].insert(r.refs().dynset.begin(), r.refs().dynset.end());
    }
    for (const auto& [key, sets] : candidates) {
      auto& [va, vb] = views_of(key);
      for (const auto& s : sets)
        if (va.is_dynamic(s) != vb.is_dynamic(s)) diffs.push_back({key, "set " + s, "affinity differs", true, {}});
    }
  }
  for (const auto& d : diffs) {
    if (!d.reachable) continue;
    auto [ta, tb] = tables[d.table];
    if (!ta || !tb) {
      n.mark_all("table " + d.table + " exists on one side only");
      break;
    }
    bool is_set = d.object.rfind("set ", 0) == 0 || d.object.rfind("map ", 0) == 0;
    if (d.kind == "definition differs" && !is_set) {
      n.mark_all("chain " + d.object + ": definition differs");
      break;
    }
    auto& vv = views_of(d.table);
    for (int side = 0; side < 2; ++side) {
      TableView& v = side ? vv.second : vv.first;
      std::set<std::string> seen;
      if (!is_set) {
        n.reach_chain(v, d.object, seen);
        continue;
      }
      std::string name = d.object.substr(4);
      const nft::Set* s = v.t->find_set(name);
      const nft::Set* o = (side ? ta : tb)->find_set(name);
      if (!s || !o || d.kind != "elements differ" || v.is_dynamic(name)) {
        // The whole set: every rule naming it, from its chain's atoms.
        n.reach_set(v, name, seen);
        continue;
      }
      std::set<std::vector<std::string>> other;
      for (const auto& e : o->elements)
        if (!e.removed) other.insert(el_text(e));
      for (const auto& e : s->elements)
        if (!e.removed && !other.count(el_text(e))) n.reach_element(v, *s, e.key, seen);
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
