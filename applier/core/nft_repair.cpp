#include "applier/core/nft_repair.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace kpc::applier {
namespace {

namespace nft = verifier::nft;

// knftables quotes strings with Go's %q; kube-proxy's comments need only '"' and '\'.
std::string go_quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) o += sep;
    o += v[i];
  }
  return o;
}

std::string element_key(const nft::Element& e) { return join(e.key, " . "); }

// The chain a verdict value ("goto x", "jump x") names, or "".
std::string_view verdict_chain(const std::optional<std::string>& value) {
  if (!value) return {};
  std::string_view v = *value;
  for (std::string_view p : {"goto ", "jump "})
    if (v.starts_with(p)) return v.substr(p.size());
  return {};
}

bool same_chain_properties(const nft::Chain& a, const nft::Chain& b) {
  if (a.base != b.base || a.comment != b.comment) return false;
  if (!a.base) return true;
  return a.type == b.type && a.hook == b.hook && a.priority == b.priority && a.device == b.device;
}

bool same_rules(const nft::Chain& a, const nft::Chain& b) {
  if (a.rules.size() != b.rules.size()) return false;
  for (size_t i = 0; i < a.rules.size(); ++i)
    if (a.rules[i].canonical() != b.rules[i].canonical()) return false;
  return true;
}

// Set properties nft cannot change on an existing set. `have` may lack the size the
// kernel gives a set when a rule that updates it is added (that rule is then rewritten).
bool same_set_properties(const nft::Set& want, const nft::Set& have) {
  bool size_ok = want.size == have.size || (want.size_implied && have.size == 0);
  return want.is_map == have.is_map && want.key_names == have.key_names && want.data_name == have.data_name &&
         want.flags == have.flags && want.timeout_ms == have.timeout_ms &&
         want.gc_interval_ms == have.gc_interval_ms && size_ok && want.policy == have.policy &&
         want.auto_merge == have.auto_merge && want.comment == have.comment;
}

// Elements of a dynamic set are the packet path's (affinity), not kube-proxy's writing.
bool elements_managed(const nft::Set& s) { return !s.has_flag("dynamic"); }

bool same_element(const nft::Element& a, const nft::Element& b) {
  return a.key == b.key && a.value == b.value && a.comment == b.comment;
}

// ------------------------------------------------------------------ knftables' text

struct Writer {
  std::string prefix;  ///< "ip kube-proxy "
  std::string out;
  size_t ops = 0;
  void line(std::string s) {
    out += s;
    out += '\n';
    ++ops;
  }
  void table(const nft::Table& t, std::string_view verb) {
    std::string o = std::string(verb) + " table " + prefix.substr(0, prefix.size() - 1);
    if (verb == "add" && (t.comment || !t.flags.empty())) {
      o += " {";
      if (t.comment) o += " comment " + go_quote(*t.comment) + " ;";
      if (!t.flags.empty()) o += " flags " + join(t.flags, ",") + " ;";
      o += " }";
    }
    line(std::move(o));
  }
  void add_chain(const nft::Chain& c, bool with_policy) {
    std::string o = "add chain " + prefix + c.name;
    if (c.base || c.comment) {
      o += " {";
      if (c.base) {
        o += " type " + c.type + " hook " + c.hook;
        if (c.device) o += " device " + go_quote(*c.device);
        o += " priority " + std::to_string(c.priority) + " ;";
        if (with_policy || c.policy != "accept") o += " policy " + c.policy + " ;";
      }
      if (c.comment) o += " comment " + go_quote(*c.comment) + " ;";
      o += " }";
    }
    line(std::move(o));
  }
  void add_set(const nft::Set& st) {
    std::string o = std::string("add ") + (st.is_map ? "map " : "set ") + prefix + st.name + " { type " +
                    join(st.key_names, " . ");
    if (st.is_map) o += " : " + st.data_name;
    o += " ;";
    std::vector<std::string> flags;  // as kube-proxy lists them to knftables
    for (const char* f : {"constant", "dynamic", "interval", "timeout"})
      if (st.has_flag(f)) flags.emplace_back(f);
    for (const auto& f : st.flags)
      if (std::find(flags.begin(), flags.end(), f) == flags.end()) flags.push_back(f);
    if (!flags.empty()) o += " flags " + join(flags, ",") + " ;";
    if (st.timeout_ms) o += " timeout " + std::to_string(st.timeout_ms / 1000) + "s ;";
    if (st.gc_interval_ms) o += " gc-interval " + std::to_string(st.gc_interval_ms / 1000) + "s ;";
    if (st.size && !st.size_implied) o += " size " + std::to_string(st.size) + " ;";
    if (!st.policy.empty()) o += " policy " + st.policy + " ;";
    if (st.auto_merge) o += " auto-merge ;";
    if (st.comment) o += " comment " + go_quote(*st.comment) + " ;";
    o += " }";
    line(std::move(o));
  }
  void rule(const std::string& chain, const nft::Rule& r) {
    std::string o = "add rule " + prefix + chain + " " + r.text();
    if (r.comment()) o += " comment " + go_quote(*r.comment());
    line(std::move(o));
  }
  void add_element(const nft::Set& st, const nft::Element& e) {
    const auto& key = e.written_key.empty() ? e.key : e.written_key;
    std::string o = "add element " + prefix + st.name + " { " + join(key, " . ");
    if (e.comment) o += " comment " + go_quote(*e.comment);
    if (e.value) o += " : " + (e.written_value ? *e.written_value : *e.value);
    line(std::move(o + " }"));
  }
  void delete_element(const nft::Set& st, const nft::Element& e) {
    line("delete element " + prefix + st.name + " { " + element_key(e) + " }");
  }
};

const char* kind_word(const nft::Set& s) { return s.is_map ? "map" : "set"; }

// ------------------------------------------------------------------ comparison

void differences(const nft::Table* want, const nft::Table* got, size_t max, std::vector<std::string>& out) {
  auto add = [&](std::string s) {
    if (out.size() < max) out.push_back(std::move(s));
  };
  if (!want || !got) {
    if (want != got) add(want ? "table missing" : "table present, but not wanted");
    return;
  }
  if (want->comment != got->comment) add("table comment differs");
  if (want->flags != got->flags) add("table flags differ");
  std::unordered_map<std::string_view, const nft::Chain*> gc;
  for (const auto& c : got->chains) gc.emplace(c.name, &c);
  std::unordered_set<std::string_view> wanted;
  for (const auto& w : want->chains) {
    wanted.insert(w.name);
    auto it = gc.find(w.name);
    if (it == gc.end()) {
      add("chain " + w.name + " missing");
      continue;
    }
    const nft::Chain& g = *it->second;
    if (!same_chain_properties(w, g)) add("chain " + w.name + ": properties differ");
    if (w.base && w.policy != g.policy) add("chain " + w.name + ": policy " + g.policy + ", wanted " + w.policy);
    if (!same_rules(w, g)) {
      size_t i = 0;
      while (i < w.rules.size() && i < g.rules.size() && w.rules[i].canonical() == g.rules[i].canonical()) ++i;
      add("chain " + w.name + ": rule " + std::to_string(i + 1) + " is " +
          (i < g.rules.size() ? "\"" + g.rules[i].canonical() + "\"" : "missing") + ", wanted " +
          (i < w.rules.size() ? "\"" + w.rules[i].canonical() + "\"" : "none"));
    }
  }
  for (const auto& g : got->chains)
    if (!wanted.count(g.name)) add("chain " + g.name + " present, but not wanted");
  std::unordered_map<std::string_view, const nft::Set*> gs;
  for (const auto& s : got->sets) gs.emplace(s.name, &s);
  wanted.clear();
  for (const auto& w : want->sets) {
    wanted.insert(w.name);
    auto it = gs.find(w.name);
    if (it == gs.end()) {
      add(std::string(kind_word(w)) + " " + w.name + " missing");
      continue;
    }
    const nft::Set& g = *it->second;
    if (!same_set_properties(w, g) || (w.size != g.size)) add(std::string(kind_word(w)) + " " + w.name + ": properties differ");
    if (!elements_managed(w) || !elements_managed(g)) continue;
    std::unordered_map<std::string, const nft::Element*> ge;
    for (const auto& e : g.elements) ge.emplace(element_key(e), &e);
    std::unordered_set<std::string> wk;
    for (const auto& e : w.elements) {
      std::string k = element_key(e);
      wk.insert(k);
      auto eit = ge.find(k);
      if (eit == ge.end()) add(std::string(kind_word(w)) + " " + w.name + ": element " + k + " missing");
      else if (!same_element(e, *eit->second))
        add(std::string(kind_word(w)) + " " + w.name + ": element " + k + " has another value or comment");
    }
    for (const auto& e : g.elements)
      if (!wk.count(element_key(e))) add(std::string(kind_word(w)) + " " + w.name + ": element " + element_key(e) + " not wanted");
  }
  for (const auto& g : got->sets)
    if (!wanted.count(g.name)) add(std::string(kind_word(g)) + " " + g.name + " present, but not wanted");
  if (want->flowtables.size() != got->flowtables.size()) add("flowtables differ");
  for (const auto& w : want->flowtables) {
    const nft::Flowtable* g = nullptr;
    for (const auto& f : got->flowtables)
      if (f.name == w.name) g = &f;
    if (!g || g->hook != w.hook || g->priority != w.priority || g->devices != w.devices)
      add("flowtable " + w.name + " differs");
  }
}

// Every table but (family, name), printed, for "nothing else was touched".
bool other_tables_equal(const nft::NftState& a, const nft::NftState& b, nft::Family family, std::string_view name,
                        std::string* why) {
  auto others = [&](const nft::NftState& s) {
    std::vector<const nft::Table*> v;
    for (const auto& t : s.tables)
      if (!(t.family == family && t.name == name)) v.push_back(&t);
    return v;
  };
  auto oa = others(a), ob = others(b);
  if (oa.size() != ob.size()) {
    *why = "the repair adds or removes another table";
    return false;
  }
  for (size_t i = 0; i < oa.size(); ++i) {
    std::vector<std::string> d;
    if (oa[i]->family != ob[i]->family || oa[i]->name != ob[i]->name) d.push_back("tables reordered");
    else differences(oa[i], ob[i], 1, d);
    if (!d.empty()) {
      *why = "the repair changes table " + std::string(nft::family_name(oa[i]->family)) + " " + oa[i]->name + ": " + d[0];
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> nft_table_differences(const nft::Table* want, const nft::Table* got, size_t max) {
  std::vector<std::string> out;
  differences(want, got, max, out);
  return out;
}

namespace {

// A listing with every top-level block but `table FAMILY NAME {` replaced by empty lines.
std::string only_block(std::string_view text, const TableName& t) {
  const std::string header = std::string("table ") + nft::family_name(t.family) + " " + t.name + " {";
  std::string out;
  out.reserve(text.size());
  bool keep = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(pos, end - pos);
    if (line.starts_with("table ")) keep = line.substr(0, header.size()) == header;
    if (keep) out.append(line);
    if (line == "}") keep = false;
    out += '\n';
    pos = end + 1;
  }
  return out;
}

}  // namespace

bool read_nft_state(std::string_view text, std::string_view file_name, nft::NftState* out, std::string* error,
                    const TableName* only_table) {
  nft::NftState s;
  std::string filtered;
  if (only_table && nft::looks_like_listing(text)) {
    filtered = only_block(text, *only_table);
    text = filtered;
    if (text.find_first_not_of('\n') == std::string_view::npos) {  // no such table on the node
      *out = std::move(s);
      return true;
    }
  }
  if (nft::looks_like_listing(text)) {
    nft::NftError e;
    if (!nft::parse_listing(text, file_name, &s, &e)) {
      *error = "not a loadable nft listing:\n" + e.render();
      return false;
    }
  } else {
    nft::ApplyResult r = nft::apply_script(s, text, file_name);
    if (!r.ok) {
      *error = "neither an nft listing nor a script that applies to an empty state:\n";
      for (const auto& e : r.errors) *error += e.render();
      return false;
    }
  }
  *out = std::move(s);
  return true;
}

NftRepairResult repair_nft(const nft::NftState& actual, std::string_view desired_transaction, nft::Family family,
                           std::string_view table_name) {
  NftRepairResult r;
  nft::NftState desired;
  if (auto res = nft::apply_script(desired, desired_transaction, "desired.nft"); !res.ok) {
    r.error = "the desired transaction does not apply to an empty state: " +
              (res.error ? res.error->to_string() : std::string("unknown error"));
    return r;
  }
  const nft::Table* want = desired.find_table(family, table_name);
  const nft::Table* have = actual.find_table(family, table_name);
  Writer w;
  w.prefix = std::string(nft::family_name(family)) + " " + std::string(table_name) + " ";
  NftRepairStats& st = r.stats;

  if (!want) {
    if (have) w.table(*have, "delete");
  } else {
    nft::Table empty;
    if (have && (have->comment != want->comment || have->flags != want->flags)) {
      // nft keeps an existing table's comment and flags: only a new table takes them.
      w.table(*have, "delete");
      have = nullptr;
      st.table_recreated = true;
    }
    if (!have) {
      w.table(*want, "add");
      st.table_created = !st.table_recreated;
      empty.family = family;
      empty.name = std::string(table_name);
      have = &empty;
    }
    if (!have->flowtables.empty() || !want->flowtables.empty()) {
      std::vector<std::string> d;
      nft::Table a = *want, b = *have;
      a.chains.clear(), a.sets.clear(), b.chains.clear(), b.sets.clear();
      differences(&a, &b, 1, d);
      if (!d.empty()) {
        r.error = "the table's flowtables differ; kpc's nftables repair does not write flowtables";
        return r;
      }
    }

    std::unordered_map<std::string_view, const nft::Chain*> have_chains, want_chains;
    for (const auto& c : have->chains) have_chains.emplace(c.name, &c);
    for (const auto& c : want->chains) want_chains.emplace(c.name, &c);
    std::unordered_map<std::string_view, const nft::Set*> have_sets, want_sets;
    for (const auto& s : have->sets) have_sets.emplace(s.name, &s);
    for (const auto& s : want->sets) want_sets.emplace(s.name, &s);

    enum class Do { Keep, Rewrite, Create, Recreate };
    std::unordered_map<std::string_view, Do> chain_do;
    std::set<std::string_view> del_chains, del_sets;  // deleted: extra, or re-created
    std::vector<const nft::Chain*> policy_only;
    for (const auto& c : want->chains) {
      auto it = have_chains.find(c.name);
      Do d;
      if (it == have_chains.end()) {
        d = Do::Create;
      } else if (!same_chain_properties(c, *it->second)) {
        d = Do::Recreate;
        del_chains.insert(c.name);
      } else {
        if (c.base && c.policy != it->second->policy) policy_only.push_back(&c);
        d = same_rules(c, *it->second) ? Do::Keep : Do::Rewrite;
      }
      chain_do[c.name] = d;
    }
    for (const auto& c : have->chains)
      if (!want_chains.count(c.name)) del_chains.insert(c.name);
    enum class SetDo { Keep, Create, Recreate };
    std::unordered_map<std::string_view, SetDo> set_do;
    for (const auto& s : want->sets) {
      auto it = have_sets.find(s.name);
      SetDo d = it == have_sets.end() ? SetDo::Create : same_set_properties(s, *it->second) ? SetDo::Keep : SetDo::Recreate;
      if (d == SetDo::Recreate) del_sets.insert(s.name);
      set_do[s.name] = d;
    }
    for (const auto& s : have->sets)
      if (!want_sets.count(s.name)) del_sets.insert(s.name);

    // A rule that references a chain or set about to be deleted must be gone first: a kept
    // chain holding one is rewritten (flushed before, its rules added again after).
    auto blocks = [&](const nft::Rule& rule) {
      for (const auto& c : rule.refs().chains)
        if (del_chains.count(c)) return true;
      for (const auto* v : {&rule.refs().sets, &rule.refs().dynset})
        for (const auto& s : *v)
          if (del_sets.count(s)) return true;
      return false;
    };
    for (const auto& c : want->chains) {
      Do& d = chain_do[c.name];
      if (d != Do::Keep) continue;
      const nft::Chain& h = *have_chains.at(c.name);
      if (std::any_of(h.rules.begin(), h.rules.end(), blocks)) d = Do::Rewrite;
    }

    // 1. Element deletions in sets that stay: extra keys, other values or comments, and
    //    verdicts that name a chain about to be deleted (added again at the end if wanted).
    std::vector<std::pair<const nft::Set*, const nft::Element*>> readd;
    for (const auto& s : have->sets) {
      if (del_sets.count(s.name)) continue;
      const nft::Set& ws = *want_sets.at(s.name);
      if (!elements_managed(ws)) continue;
      std::unordered_map<std::string, const nft::Element*> wanted;
      for (const auto& e : ws.elements) wanted.emplace(element_key(e), &e);
      std::unordered_set<std::string> present;
      for (const auto& e : s.elements) {
        std::string k = element_key(e);
        auto it = wanted.find(k);
        bool keep = it != wanted.end() && same_element(*it->second, e) && !del_chains.count(verdict_chain(e.value));
        if (keep) {
          present.insert(k);
          continue;
        }
        w.delete_element(s, e);
        ++st.elements_deleted;
      }
      for (const auto& e : ws.elements)
        if (!present.count(element_key(e))) readd.emplace_back(&ws, &e);
    }

    // 2. Flushes of the chains that are rewritten.
    for (const auto& c : want->chains)
      if (chain_do[c.name] == Do::Rewrite) w.line("flush chain " + w.prefix + c.name);

    // 3. Deletions, referrers first: a chain whose rules use another deleted chain or set,
    //    a map whose elements name a deleted chain, go before what they use (nft releases
    //    the references of a deleted chain's rules and a deleted map's elements at once).
    {
      using Node = std::pair<int, std::string_view>;  // 0 chain, 1 set
      std::map<Node, std::set<Node>> uses;           // node -> nodes it references
      std::map<Node, int> indegree;
      for (auto n : del_chains) indegree[{0, n}];
      for (auto n : del_sets) indegree[{1, n}];
      for (auto n : del_chains) {
        const nft::Chain& c = *have_chains.at(n);
        for (const auto& rule : c.rules) {
          for (const auto& t : rule.refs().chains)
            if (auto it = del_chains.find(t); it != del_chains.end()) uses[{0, n}].insert({0, *it});
          for (const auto* v : {&rule.refs().sets, &rule.refs().dynset})
            for (const auto& t : *v)
              if (auto it = del_sets.find(t); it != del_sets.end()) uses[{0, n}].insert({1, *it});
        }
      }
      for (auto n : del_sets)
        for (const auto& e : have_sets.at(n)->elements)
          if (auto it = del_chains.find(verdict_chain(e.value)); it != del_chains.end()) uses[{1, n}].insert({0, *it});
      for (const auto& [from, tos] : uses)
        for (const auto& to : tos) ++indegree[to];
      std::set<Node> ready;
      for (const auto& [n, deg] : indegree)
        if (deg == 0) ready.insert(n);
      size_t done = 0;
      while (!ready.empty()) {
        Node n = *ready.begin();
        ready.erase(ready.begin());
        ++done;
        if (n.first == 0) {
          w.line("delete chain " + w.prefix + std::string(n.second));
          if (!want_chains.count(n.second)) ++st.chains_deleted;
        } else {
          const nft::Set& s = *have_sets.at(n.second);
          w.line(std::string("delete ") + kind_word(s) + " " + w.prefix + s.name);
          if (!want_sets.count(n.second)) ++st.sets_deleted;
        }
        for (const auto& to : uses[n])
          if (--indegree[to] == 0) ready.insert(to);
      }
      if (done != indegree.size()) {
        r.error = "the node's chains and sets reference each other in a loop; nft could not delete them";
        return r;
      }
    }

    // 4. Chains: new and re-created ones with their properties; base chains whose policy
    //    differs get it in place.
    for (const auto& c : want->chains) {
      Do d = chain_do[c.name];
      if (d == Do::Create || d == Do::Recreate) {
        w.add_chain(c, false);
        ++(d == Do::Create ? st.chains_created : st.chains_recreated);
      }
    }
    for (const auto* c : policy_only) {
      w.add_chain(*c, true);
      ++st.policies_set;
    }
    // 5. Sets and maps.
    for (const auto& s : want->sets) {
      SetDo d = set_do[s.name];
      if (d == SetDo::Keep) {
        ++st.sets_kept;
        continue;
      }
      w.add_set(s);
      ++(d == SetDo::Create ? st.sets_created : st.sets_recreated);
    }
    // 6. Rules of every chain written, in the desired order, with kube-proxy's own text.
    for (const auto& c : want->chains) {
      Do d = chain_do[c.name];
      if (d == Do::Keep) {
        ++st.chains_kept;
        continue;
      }
      if (d == Do::Rewrite) ++st.chains_rewritten;
      for (const auto& rule : c.rules) {
        w.rule(c.name, rule);
        ++st.rules_written;
      }
    }
    // 7. Elements: every element of a new set, the missing and changed ones of the others.
    for (const auto& s : want->sets)
      if (set_do[s.name] != SetDo::Keep)
        for (const auto& e : s.elements) {
          w.add_element(s, e);
          ++st.elements_added;
        }
    for (const auto& [s, e] : readd) {
      w.add_element(*s, *e);
      ++st.elements_added;
    }
  }
  st.operations = w.ops;

  // The check: the node after the repair holds exactly the desired table, and nothing else
  // changed.
  nft::NftState repaired;  // the node after the repair (the node as it is when there is nothing to do)
  const nft::NftState* after = &actual;
  if (!w.out.empty()) {
    repaired = actual;
    auto res = nft::apply_script(repaired, w.out, "repair.nft");
    if (!res.ok) {
      r.error = "internal: the repair would fail:";
      for (const auto& e : res.errors) r.error += "\n" + e.to_string();
      return r;
    }
    after = &repaired;
  }
  auto d = nft_table_differences(want, after->find_table(family, table_name), 5);
  if (!d.empty()) {
    r.error = "internal: after the repair, the table would still differ from the desired one: " + join(d, "; ");
    return r;
  }
  std::string why;
  if (!other_tables_equal(actual, *after, family, table_name, &why)) {
    r.error = "internal: " + why;
    return r;
  }
  r.ok = true;
  r.transaction = std::move(w.out);
  return r;
}

}  // namespace kpc::applier
