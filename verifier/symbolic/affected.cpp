// Step 1 of compare_states: semantic chain hashes and the destination atoms a
// difference can reach. Sound over-approximation: an atom left out provably
// meets identical rules on both sides.
#include <functional>
#include <set>
#include <unordered_map>

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
  size_t c = t.find(" -m comment --comment ");
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

struct Side {
  const RulesetState& st;
  std::unordered_map<std::string, uint64_t> chain_hash[5];
  std::unordered_map<uint32_t, uint64_t> match_hash;  // by rule id (the store may be shared)
  std::unordered_map<std::string, unsigned> hooks[5];  // chain -> bit set of built-in chains reaching it
  std::string buf;

  explicit Side(const RulesetState& s) : st(s) {}

  uint64_t rule_match(uint32_t id) {
    auto it = match_hash.find(id);
    if (it != match_hash.end()) return it->second;
    const std::string& j = st.store->jump(id);
    uint64_t h = std::hash<std::string_view>{}(match_part(st.store->text(id), !j.empty(), buf));
    if (!j.empty()) h = mix(h, st.store->is_goto(id) ? 2 : 1);
    match_hash.emplace(id, h);
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
    const Chain* c = st.table(t).find(name);
    uint64_t h = 0x51ed27;
    if (!c || depth > 64) {
      h = mix(h, c ? 7 : 3);  // missing chain (a dangling jump the state machine let through) / too deep
    } else {
      h = mix(h, std::hash<std::string>{}(c->builtin ? c->policy : "-"));
      for (uint32_t id : c->rules) h = mix(h, rule_hash(t, id, depth));
    }
    memo.emplace(name, h);
    return h;
  }

  // Which built-in chains reach each chain (bit i = ir::builtin_chains(t)[i]).
  void compute_hooks(TableId t) {
    auto& m = hooks[static_cast<int>(t)];
    const auto& builtins = ir::builtin_chains(t);
    for (size_t b = 0; b < builtins.size(); ++b) {
      std::vector<std::string> stack{builtins[b]};
      while (!stack.empty()) {
        std::string n = std::move(stack.back());
        stack.pop_back();
        unsigned& bits = m[n];
        if (bits & (1u << b)) continue;
        bits |= 1u << b;
        if (const Chain* c = st.table(t).find(n))
          for (uint32_t id : c->rules)
            if (const std::string& j = st.store->jump(id); !j.empty()) stack.push_back(j);
      }
    }
  }
};

// Built-in chains whose packets still carry their original destination.
bool dst_stable_hook(TableId t, const std::string& builtin) {
  if (t == TableId::Raw || t == TableId::Mangle) return builtin == "PREROUTING" || builtin == "OUTPUT";
  if (t == TableId::Nat) return builtin == "PREROUTING" || builtin == "OUTPUT";
  return false;
}

}  // namespace

AffectedAtoms affected_atoms(const RulesetState& a, const RulesetState& b, const Universe& u) {
  AffectedAtoms out;
  out.atom.assign(u.atom_count(), 0);
  Side A(a), B(b);
  bool all_equal = true;
  for (TableId t : kTables) {
    bool pa = a.table(t).present, pb = b.table(t).present;
    for (const auto& name : ir::builtin_chains(t)) {
      uint64_t ha = pa ? A.chain(t, name) : 0, hb = pb ? B.chain(t, name) : 0;
      if (!pa && pb && B.st.table(t).find(name)->rules.empty() && B.st.table(t).find(name)->policy == "ACCEPT") continue;
      if (pa && !pb && A.st.table(t).find(name)->rules.empty() && A.st.table(t).find(name)->policy == "ACCEPT") continue;
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
  // The atoms a rule can apply to, within `reach`: its positive -d, or --dst-type LOCAL.
  auto rule_atoms = [&](const RulesetState& st, uint32_t id, const std::vector<char>& reach, std::vector<char>& dst) {
    const std::string& t = st.store->text(id);
    dst = reach;
    // Leading "-d A/len" (not negated), as iptables-save prints it.
    size_t d = t.find(" -d ");
    if (d != std::string::npos && (d < 2 || t.compare(d - 2, 2, " !") != 0) && t.find(" -m ") > d) {
      size_t vb = d + 4, ve = t.find(' ', vb);
      if (auto c = CIDR::parse(t.substr(vb, ve == std::string::npos ? std::string::npos : ve - vb), false, nullptr,
                               true);
          c && c->family() == u.family) {
        auto r = cidr_range(*c);
        size_t f = u.atom_of(r.first), l = u.atom_of(r.second);
        for (size_t i = 0; i < dst.size(); ++i)
          if (i < f || i > l) dst[i] = 0;
      }
    }
    if (t.find(" -m addrtype --dst-type LOCAL") != std::string::npos) {
      for (size_t i = 0; i < dst.size(); ++i)
        if (dst[i] && !u.local.contains(u.atom(i).first)) dst[i] = 0;
    }
  };
  auto add = [&](const std::vector<char>& atoms) {
    for (size_t i = 0; i < atoms.size(); ++i) out.atom[i] |= atoms[i];
  };

  for (TableId t : kTables) {
    A.compute_hooks(t);
    B.compute_hooks(t);
  }
  struct Pair {
    TableId t;
    std::string ca, cb;
    std::vector<char> reach;
  };
  std::vector<Pair> work;
  std::vector<char> everything(u.atom_count(), 1);
  for (TableId t : kTables)
    for (const auto& name : ir::builtin_chains(t)) work.push_back(Pair{t, name, name, everything});
  std::set<std::tuple<int, std::string, std::string>> done;
  std::vector<char> tmp;
  while (!work.empty()) {
    Pair p = std::move(work.back());
    work.pop_back();
    const Chain* ca = a.table(p.t).present ? a.table(p.t).find(p.ca) : nullptr;
    const Chain* cb = b.table(p.t).present ? b.table(p.t).find(p.cb) : nullptr;
    uint64_t ha = ca ? A.chain(p.t, p.ca) : 1, hb = cb ? B.chain(p.t, p.cb) : 1;
    bool empty_a = !ca || (ca->rules.empty() && (!ca->builtin || ca->policy == "ACCEPT"));
    bool empty_b = !cb || (cb->rules.empty() && (!cb->builtin || cb->policy == "ACCEPT"));
    if (ha == hb || (empty_a && empty_b)) continue;
    // Reached from a hook where a DNAT may have rewritten the destination: every atom.
    const auto& builtins = ir::builtin_chains(p.t);
    for (int side = 0; side < 2; ++side) {
      auto& hm = (side ? B : A).hooks[static_cast<int>(p.t)];
      auto it = hm.find(side ? p.cb : p.ca);
      unsigned bits = it == hm.end() ? 0 : it->second;
      for (size_t k = 0; k < builtins.size(); ++k)
        if ((bits & (1u << k)) && !dst_stable_hook(p.t, builtins[k])) {
          mark_all(std::string(ir::table_name(p.t)) + " " + (side ? p.cb : p.ca) + " differs and is reached from " +
                   builtins[k] + " (after NAT)");
          return out;
        }
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
          if (done.insert({static_cast<int>(p.t), ja, jb}).second) work.push_back(Pair{p.t, ja, jb, tmp});
          else add(tmp);  // visited through another path: be safe
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
