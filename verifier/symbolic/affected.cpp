// Step 1 of compare_states: semantic chain hashes and the destination atoms a
// difference can reach. Sound over-approximation: an atom left out provably
// meets identical rules on both sides.
#include <algorithm>
#include <deque>
#include <iterator>
#include <functional>
#include <unordered_set>
#include <map>
#include <set>
#include <unordered_map>

#include "compiler/support/text.h"
#include "verifier/symbolic/affinity_lists.h"
#include "verifier/symbolic/compare.h"

namespace kpc::verifier::symbolic {

using ir::TableId;

namespace {

constexpr TableId kTables[] = {TableId::Raw, TableId::Mangle, TableId::Nat, TableId::Filter, TableId::Security};

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

/// The rule's save text without its comment and without its jump/goto target:
/// what the rule tests and does, apart from where it jumps.
std::string_view match_part(std::string_view t, bool jumps, std::string& buf) {
  buf.clear();
  size_t c = find_text(t, " -m comment --comment ");
  if (c != std::string_view::npos) {
    size_t v = c + 22, end = v;
    if (v < t.size() && t[v] == '"') {
      end = v + 1;
      while (end < t.size() && t[end] != '"') end += t[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, t.size());
    } else {
      while (end < t.size() && t[end] != ' ') ++end;
    }
    buf.append(t.substr(0, c));
    buf.append(t.substr(end));
    t = buf;
  }
  if (jumps) {
    size_t j = t.rfind(" -j ");
    size_t g = t.rfind(" -g ");
    size_t cut = j == std::string_view::npos ? g : (g == std::string_view::npos ? j : std::max(j, g));
    if (cut != std::string_view::npos) t = t.substr(0, cut);
  }
  return t;
}

bool dst_stable_hook(TableId t, const std::string& builtin);

// Destination atoms: every one, or the listed ones (sorted, once each). A chain pair is mostly
// reached with one Service's one or two atoms: a dense vector per pair (110,000 atoms at 10,000
// Services) made the narrowing quadratic — 4.4 GB and most of a minute when a setting changed
// every Service's chains.
struct AtomSet {
  bool all = false;
  std::vector<uint32_t> list;
  bool empty() const { return !all && list.empty(); }
};

struct Side {
  const RulesetState& st;
  std::unordered_map<std::string_view, uint64_t> chain_hash[5];  // keys: the state's chain names
  std::vector<uint64_t> match_hash;  // by rule id; 0 = not computed yet
  // Chains reachable from a built-in chain where the destination may already be NAT'ed.
  std::unordered_set<std::string_view> after_nat[5];
  bool all_after_nat[5] = {false, false, false, false, false};
  std::string buf;

  // recent --name LIST -> the list's key (affinity_lists.h): a renamed list with the
  // same key is the same affinity, as the engine sees it.
  std::unordered_map<std::string, std::string> list_keys;
  std::string named;

  explicit Side(const RulesetState& s) : st(s), match_hash(s.store->size(), 0), list_keys(affinity_list_keys(s)) {}

  uint64_t rule_match(uint32_t id) {
    if (match_hash[id]) return match_hash[id];
    const std::string& j = st.store->jump(id);
    std::string_view m = match_part(st.store->text(id), !j.empty(), buf);
    if (size_t n = find_text(m, " --name "); n != std::string_view::npos) {
      size_t b = n + 8, e = std::min(m.find(' ', b), m.size());
      auto k = list_keys.find(std::string(m.substr(b, e - b)));
      if (k != list_keys.end()) {
        named.assign(m.substr(0, b)).append("{").append(k->second).append("}").append(m.substr(e));
        m = named;
      }
    }
    uint64_t h = std::hash<std::string_view>{}(m);
    if (!j.empty()) h = mix(h, st.store->is_goto(id) ? 2 : 1);
    if (h == 0) h = 1;
    match_hash[id] = h;
    return h;
  }

  uint64_t rule_hash(TableId t, uint32_t id, int depth = 0) {
    uint64_t h = rule_match(id);
    const std::string& j = st.store->jump(id);
    if (!j.empty()) h = mix(h, chain(t, j, depth + 1));
    return h;
  }

  uint64_t chain(TableId t, const std::string& name, int depth = 0) {
    auto& memo = chain_hash[static_cast<int>(t)];
    auto it = memo.find(name);
    if (it != memo.end()) return it->second;
    const Chain* c = st.find(t, name);
    std::string_view key = c ? std::string_view(c->name) : std::string_view(missing.emplace_back(name));
    uint64_t h = 0x51ed27;
    if (!c || depth > 64) {
      h = mix(h, c ? 7 : 3);  // missing chain (a dangling jump the state machine let through) / too deep
    } else {
      h = mix(h, std::hash<std::string>{}(c->builtin ? c->policy : "-"));
      for (uint32_t id : c->rules) h = mix(h, rule_hash(t, id, depth));
    }
    memo.emplace(key, h);
    return h;
  }
  std::deque<std::string> missing;  // names of missing chains (stable storage for the memo keys)

  // Chains reachable from the built-in chains that are not destination-stable (below).
  // filter and security see only NAT'ed packets: every chain. nat: INPUT, POSTROUTING.
  void compute_after_nat(TableId t, bool (*stable)(TableId, const std::string&)) {
    int ti = static_cast<int>(t);
    bool any_stable = false;
    for (const auto& b : ir::builtin_chains(t)) any_stable |= stable(t, b);
    if (!any_stable) {
      all_after_nat[ti] = true;
      return;
    }
    std::vector<std::string_view> work;
    for (const auto& b : ir::builtin_chains(t))
      if (!stable(t, b))
        if (const Chain* c = st.find(t, b); c && after_nat[ti].insert(c->name).second) work.push_back(c->name);
    while (!work.empty()) {
      const Chain* c = st.find(t, std::string(work.back()));
      work.pop_back();
      if (!c) continue;
      for (uint32_t id : c->rules) {
        const std::string& j = st.store->jump(id);
        if (j.empty()) continue;
        const Chain* tc = st.find(t, j);
        if (tc && after_nat[ti].insert(tc->name).second) work.push_back(tc->name);
      }
    }
  }
  bool reached_after_nat(TableId t, const std::string& chain) const {
    int ti = static_cast<int>(t);
    return all_after_nat[ti] || after_nat[ti].count(chain);
  }
};

// Built-in chains whose packets still carry their original destination.
bool dst_stable_hook(TableId t, const std::string& builtin) {
  if (t == TableId::Raw || t == TableId::Mangle) return builtin == "PREROUTING" || builtin == "OUTPUT";
  if (t == TableId::Nat) return builtin == "PREROUTING" || builtin == "OUTPUT";
  return false;
}

}  // namespace

sem::AffectedAtoms affected_atoms(const RulesetState& a, const RulesetState& b, const sem::Universe& u) {
  sem::AffectedAtoms out;
  out.atom.assign(u.atom_count(), 0);
  Side A(a), B(b);
  bool all_equal = true;
  for (TableId t : kTables) {
    bool pa = a.table(t).present, pb = b.table(t).present;
    for (const auto& name : ir::builtin_chains(t)) {
      uint64_t ha = pa ? A.chain(t, name) : 0, hb = pb ? B.chain(t, name) : 0;
      if (!pa && pb && B.st.find(t, name)->rules.empty() && B.st.find(t, name)->policy == "ACCEPT") continue;
      if (pa && !pb && A.st.find(t, name)->rules.empty() && A.st.find(t, name)->policy == "ACCEPT") continue;
      if (ha != hb) all_equal = false;
    }
  }
  if (all_equal) {
    out.equal = true;
    return out;
  }
  auto mark_all = [&](std::string why) {
    out.all = true;
    out.why_all = std::move(why);
    std::fill(out.atom.begin(), out.atom.end(), 1);
  };
  std::vector<uint32_t> local_atoms;  // the atoms of the node's addresses
  for (uint32_t i = 0; i < u.atom_count(); ++i)
    if (u.local.contains(u.atom(i).first)) local_atoms.push_back(i);
  // The atoms a rule can apply to, within `reach`: its positive -d, or --dst-type LOCAL.
  auto rule_atoms = [&](const RulesetState& st, uint32_t id, const AtomSet& reach, AtomSet& dst) {
    const std::string_view t = st.store->text(id);
    dst = reach;
    // Leading "-d A/len" (not negated), as iptables-save prints it.
    size_t d = t.find(" -d ");
    if (d != std::string::npos && (d < 2 || t.compare(d - 2, 2, " !") != 0) && t.find(" -m ") > d) {
      size_t vb = d + 4, ve = t.find(' ', vb);
      if (auto c = CIDR::parse(t.substr(vb, ve == std::string::npos ? std::string::npos : ve - vb), false, nullptr,
                               true);
          c && c->family() == u.family) {
        auto r = sem::cidr_range(*c);
        uint32_t f = static_cast<uint32_t>(u.atom_of(r.first)), l = static_cast<uint32_t>(u.atom_of(r.second));
        if (dst.all) {
          dst.all = false;
          dst.list.clear();
          for (uint32_t i = f; i <= l; ++i) dst.list.push_back(i);
        } else {
          std::erase_if(dst.list, [&](uint32_t i) { return i < f || i > l; });
        }
      }
    }
    if (t.find(" -m addrtype --dst-type LOCAL") != std::string::npos) {
      if (dst.all) {
        dst.all = false;
        dst.list = local_atoms;
      } else {
        std::erase_if(dst.list, [&](uint32_t i) { return !std::binary_search(local_atoms.begin(), local_atoms.end(), i); });
      }
    }
  };
  auto add = [&](const AtomSet& atoms) {
    if (atoms.all) std::fill(out.atom.begin(), out.atom.end(), 1);
    for (uint32_t i : atoms.list) out.atom[i] = 1;
  };

  for (TableId t : kTables) {
    A.compute_after_nat(t, dst_stable_hook);
    B.compute_after_nat(t, dst_stable_hook);
  }
  struct Pair {
    TableId t;
    std::string ca, cb;
    AtomSet reach;
  };
  // Reach already handled per chain pair: a pair met again is walked again only for new atoms.
  std::map<std::tuple<int, std::string, std::string>, AtomSet> done;
  std::vector<Pair> work;
  const AtomSet everything{true, {}};
  for (TableId t : kTables)
    for (const auto& name : ir::builtin_chains(t)) {
      done[{static_cast<int>(t), name, name}] = everything;
      work.push_back(Pair{t, name, name, everything});
    }
  AtomSet tmp;
  while (!work.empty()) {
    Pair p = std::move(work.back());
    work.pop_back();
    const Chain* ca = a.table(p.t).present ? a.find(p.t, p.ca) : nullptr;
    const Chain* cb = b.table(p.t).present ? b.find(p.t, p.cb) : nullptr;
    uint64_t ha = ca ? A.chain(p.t, p.ca) : 1, hb = cb ? B.chain(p.t, p.cb) : 1;
    bool empty_a = !ca || (ca->rules.empty() && (!ca->builtin || ca->policy == "ACCEPT"));
    bool empty_b = !cb || (cb->rules.empty() && (!cb->builtin || cb->policy == "ACCEPT"));
    if (ha == hb || (empty_a && empty_b)) continue;
    // Reached from a hook where a DNAT may have rewritten the destination: every atom.
    for (int side = 0; side < 2; ++side)
      if ((side ? B : A).reached_after_nat(p.t, side ? p.cb : p.ca)) {
        mark_all(std::string(ir::table_name(p.t)) + " " + (side ? p.cb : p.ca) +
                 " differs where packets may already be NAT'ed");
        return out;
      }
    if ((ca && ca->builtin && ca->policy != (cb ? cb->policy : "ACCEPT")) ||
        (cb && cb->builtin && cb->policy != (ca ? ca->policy : "ACCEPT"))) {
      add(p.reach);
      continue;
    }
    static const std::vector<uint32_t> none;
    const std::vector<uint32_t>& ra = ca ? ca->rules : none;
    const std::vector<uint32_t>& rb = cb ? cb->rules : none;
    size_t pre = 0;
    while (pre < ra.size() && pre < rb.size() && A.rule_hash(p.t, ra[pre]) == B.rule_hash(p.t, rb[pre])) ++pre;
    size_t suf = 0;
    while (suf < ra.size() - pre && suf < rb.size() - pre &&
           A.rule_hash(p.t, ra[ra.size() - 1 - suf]) == B.rule_hash(p.t, rb[rb.size() - 1 - suf]))
      ++suf;
    size_t na = ra.size() - pre - suf, nb = rb.size() - pre - suf;
    bool aligned = na == nb;
    for (size_t i = 0; aligned && i < na; ++i)
      aligned = A.rule_match(ra[pre + i]) == B.rule_match(rb[pre + i]);
    if (aligned) {
      for (size_t i = 0; i < na; ++i) {
        uint32_t ia = ra[pre + i], ib = rb[pre + i];
        if (A.rule_hash(p.t, ia) == B.rule_hash(p.t, ib)) continue;
        rule_atoms(a, ia, p.reach, tmp);
        const std::string &ja = a.store->jump(ia), &jb = b.store->jump(ib);
        if (!ja.empty() && !jb.empty()) {
          // fresh = tmp \ seen; seen = seen ∪ tmp.
          AtomSet& seen = done[{static_cast<int>(p.t), ja, jb}];
          AtomSet fresh;
          if (seen.all) {
            // nothing new
          } else if (tmp.all) {
            if (seen.list.empty()) {
              fresh.all = true;
            } else {
              for (uint32_t i = 0, k = 0; i < u.atom_count(); ++i) {
                while (k < seen.list.size() && seen.list[k] < i) ++k;
                if (k == seen.list.size() || seen.list[k] != i) fresh.list.push_back(i);
              }
            }
            seen = everything;
          } else {
            std::set_difference(tmp.list.begin(), tmp.list.end(), seen.list.begin(), seen.list.end(),
                                std::back_inserter(fresh.list));
            if (!fresh.list.empty()) {
              std::vector<uint32_t> merged;
              std::set_union(seen.list.begin(), seen.list.end(), fresh.list.begin(), fresh.list.end(),
                             std::back_inserter(merged));
              seen.list = std::move(merged);
            }
          }
          if (!fresh.empty()) work.push_back(Pair{p.t, ja, jb, std::move(fresh)});
        } else {
          add(tmp);
        }
      }
    } else {
      for (size_t i = 0; i < na; ++i) {
        rule_atoms(a, ra[pre + i], p.reach, tmp);
        add(tmp);
      }
      for (size_t i = 0; i < nb; ++i) {
        rule_atoms(b, rb[pre + i], p.reach, tmp);
        add(tmp);
      }
    }
  }
  return out;
}

}  // namespace kpc::verifier::symbolic
