// apply_script: nft 1.0.6's evaluation against its cache, then the kernel's batch.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <variant>

#include "compiler/support/side_by_side.h"
#include "verifier/nft/internal.h"

namespace kpc::verifier::nft {

bool Set::has_flag(std::string_view f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }

namespace detail {

std::string elem_key(const std::vector<std::string>& key) {
  std::string out;
  size_t n = 0;
  for (const auto& f : key) n += f.size() + 4;
  out.reserve(n);
  for (const auto& f : key) {
    uint32_t len = static_cast<uint32_t>(f.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += f;
  }
  return out;
}

namespace {
void bump(UseMap& m, std::string_view name, int delta) {
  auto it = m.find(name);
  if (it == m.end()) it = m.emplace(std::string(name), 0).first;
  it->second += delta;
}
}  // namespace

std::optional<std::string_view> verdict_chain(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  if (v->rfind("goto ", 0) == 0) return std::string_view(*v).substr(5);
  if (v->rfind("jump ", 0) == 0) return std::string_view(*v).substr(5);
  return std::nullopt;
}
// (a name that is not a live object's counts nowhere: see TableIndex::chain_use)
void bump_chain(const Table& t, TableIndex& ix, std::string_view name, int delta) {
  const uint32_t p = ix.chains.find(name, NamesOf{t.chains});
  if (p < ix.chain_use.size()) ix.chain_use[p] += delta;
}
void count_refs(const Table& t, TableIndex& ix, const Rule& r, int delta) {
  for (const auto& c : r.refs().chains) bump_chain(t, ix, c, delta);
  for (const auto& s : r.refs().sets) {
    const uint32_t p = ix.sets.find(s, NamesOf{t.sets});
    if (p < ix.set_use.size()) ix.set_use[p] += delta;
  }
  for (const auto& f : r.refs().flowtables) bump(ix.ft_use, f, delta);
}
void count_refs(const Table& t, TableIndex& ix, const Element& e, int delta) {
  if (auto c = verdict_chain(e.value)) bump_chain(t, ix, *c, delta);
}

TableIndex& table_index(const Table& t) {
  auto& p = t.index.p;
  if (!p || p->n_chains != t.chains.size() || p->n_sets != t.sets.size()) {
    auto ix = std::make_shared<TableIndex>();
    ix->chains.reserve(t.chains.size());
    for (size_t i = 0; i < t.chains.size(); ++i)
      if (!t.chains[i].removed) ix->chains.emplace(t.chains[i].name, static_cast<uint32_t>(i), NamesOf{t.chains});
    ix->sets.reserve(t.sets.size());
    for (size_t i = 0; i < t.sets.size(); ++i)
      if (!t.sets[i].removed) ix->sets.emplace(t.sets[i].name, static_cast<uint32_t>(i), NamesOf{t.sets});
    ix->n_chains = t.chains.size();
    ix->n_sets = t.sets.size();
    ix->chain_use.assign(t.chains.size(), 0);
    ix->set_use.assign(t.sets.size(), 0);
    for (const auto& ch : t.chains)
      if (!ch.removed)
        for (const auto& r : ch.rules) count_refs(t, *ix, r, +1);
    for (const auto& st : t.sets)
      if (!st.removed)
        for (const auto& e : st.elements)
          if (!e.removed) count_refs(t, *ix, e, +1);
    p = std::move(ix);
  }
  return *p;
}

SetIndex& set_index(const Set& s) {
  auto& p = s.index.p;
  if (!p || p->n != s.elements.size()) {
    auto ix = std::make_shared<SetIndex>();
    ix->elems.reserve(s.elements.size());
    for (size_t i = 0; i < s.elements.size(); ++i)
      if (!s.elements[i].removed) ix->elems.emplace(elem_key(s.elements[i].key), static_cast<uint32_t>(i));
    ix->n = s.elements.size();
    p = std::move(ix);
  }
  return *p;
}

}  // namespace detail

namespace {
// An index look-up, checked (a stale index is rebuilt once).
template <class V, class Ix>
auto* indexed(V& v, std::string_view n, Ix get) {
  using T = std::remove_reference_t<decltype(v[0])>;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const uint32_t p = get().find(n, detail::NamesOf{v});
    if (p == detail::PosIndex::kNone) return static_cast<T*>(nullptr);
    if (p < v.size() && !v[p].removed) return &v[p];
    if (attempt == 0) {
      // stale: rebuild
      get.reset();
    }
  }
  return static_cast<T*>(nullptr);
}
struct ChainIx {
  const Table& t;
  const detail::PosIndex& operator()() const { return detail::table_index(t).chains; }
  void reset() const { t.index.p.reset(); }
};
struct SetIx {
  const Table& t;
  const detail::PosIndex& operator()() const { return detail::table_index(t).sets; }
  void reset() const { t.index.p.reset(); }
};
}  // namespace

Chain* Table::find_chain(std::string_view n) { return indexed(chains, n, ChainIx{*this}); }
const Chain* Table::find_chain(std::string_view n) const { return indexed(chains, n, ChainIx{*this}); }
Set* Table::find_set(std::string_view n) { return indexed(sets, n, SetIx{*this}); }
const Set* Table::find_set(std::string_view n) const { return indexed(sets, n, SetIx{*this}); }
Flowtable* Table::find_flowtable(std::string_view n) {
  for (auto& f : flowtables)
    if (f.name == n) return &f;
  return nullptr;
}
const Flowtable* Table::find_flowtable(std::string_view n) const {
  for (const auto& f : flowtables)
    if (f.name == n) return &f;
  return nullptr;
}
const Element* Set::find_element(const std::vector<std::string>& key) const {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const detail::SetIndex& ix = detail::set_index(*this);
    auto it = ix.elems.find(detail::elem_key(key));
    if (it == ix.elems.end()) return nullptr;
    if (it->second < elements.size() && !elements[it->second].removed && elements[it->second].key == key)
      return &elements[it->second];
    index.p.reset();
  }
  return nullptr;
}
Table* NftState::find_table(Family f, std::string_view name) {
  for (auto& t : tables)
    if (t.family == f && t.name == name) return &t;
  return nullptr;
}
const Table* NftState::find_table(Family f, std::string_view name) const {
  for (const auto& t : tables)
    if (t.family == f && t.name == name) return &t;
  return nullptr;
}
namespace detail {
TableIndex::TableIndex(const TableIndex& o)
    : chains(o.chains), sets(o.sets), n_chains(o.n_chains), n_sets(o.n_sets), chain_use(o.chain_use),
      set_use(o.set_use), ft_use(o.ft_use), graph(o.graph ? clone(*o.graph) : nullptr) {}
std::shared_ptr<TableIndex> clone(const TableIndex& ix) { return std::make_shared<TableIndex>(ix); }
std::shared_ptr<SetIndex> clone(const SetIndex& ix) { return std::make_shared<SetIndex>(ix); }
}  // namespace detail

int chain_references(const Table& t, std::string_view name) {
  const detail::TableIndex& ix = detail::table_index(t);
  const uint32_t p = ix.chains.find(name, detail::NamesOf{t.chains});
  return p < ix.chain_use.size() ? ix.chain_use[p] : 0;
}

void NftState::reindex() {
  for (auto& t : tables) {
    t.index.p.reset();
    for (auto& s : t.sets) s.index.p.reset();
  }
}

std::string NftError::to_string() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(col_begin) + "-" + std::to_string(col_end) +
         ": Error: " + message;
}

std::string NftError::render() const {
  std::string out = to_string() + "\n";
  if (line <= 0) return out;
  out += source_line + "\n";
  std::string marks;
  int end = col_end;
  for (int i = 0; i < end; ++i) {
    const char c = i < static_cast<int>(source_line.size()) ? source_line[i] : ' ';
    marks += c == '\t' ? '\t' : ' ';
  }
  for (int i = std::max(col_begin, 1) - 1; i < end; ++i) marks[i] = '^';
  for (int i = std::max(mark_begin, 1) - 1; i < mark_end && i < end; ++i) marks[i] = '~';
  return out + marks + "\n";
}

int misspell_distance(std::string_view a, std::string_view b) {
  // nft 1.0.6 (src/misspell.c): a Damerau-Levenshtein table with its indexing kept as
  // nft has it (rows of len_b cells, characters read one position late), so that the
  // suggestions are the ones nft makes.
  const unsigned la = a.size(), lb = b.size();
  const unsigned maxl = std::max(la, lb), minl = std::min(la, lb);
  if (maxl <= 1) return -1;
  unsigned threshold = maxl - minl <= 1 ? std::max((maxl + 2) / 3, 1u) : (maxl + 2 + 2) / 3;
  static thread_local std::vector<unsigned> d;  // (one allocation for the many look-ups of a hint)
  d.assign((la + 1) * (lb + 1), 0);
  auto at = [&](unsigned i, unsigned j) -> unsigned& { return d[i * lb + j]; };
  auto ch = [](std::string_view s, unsigned i) -> char { return i < s.size() ? s[i] : '\0'; };
  for (unsigned i = 0; i <= la; ++i) at(i, 0) = i;
  for (unsigned j = 0; j <= lb; ++j) at(0, j) = j;
  for (unsigned i = 1; i <= la; ++i) {
    for (unsigned j = 1; j <= lb; ++j) {
      unsigned sub = ch(a, i) == ch(b, j) ? 0 : 1;
      unsigned c1 = at(i - 1, j) + 1, c2 = at(i, j - 1) + 1, c3 = at(i - 1, j - 1) + sub;
      at(i, j) = std::min({c1, c2, c3});
      if (i > 1 && j > 1 && ch(a, i) == ch(b, j - 1) && ch(a, i - 1) == ch(b, j))
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + sub);
    }
  }
  unsigned dist = at(la, lb);
  if (dist > threshold) return -1;
  return static_cast<int>(dist);
}

namespace {

using namespace detail;

// ------------------------------------------------------------------ nft's cache

enum : unsigned {
  kTable = 1, kChain = 2, kSet = 4, kFlowtable = 8, kObject = 16, kSetelem = 32, kRule = 64,
  kFull = 127, kUpdate = 1u << 30, kFlushed = 1u << 31,
};

// The cache's names are views of the state's names and of the commands' (neither changes
// while the commands are evaluated). Deleted objects stay in place (gone), so that the
// fuzzy look-ups see the cache in nft's order.
struct CSet {
  std::string_view name;
  bool is_map = false;
  std::vector<Dtype> key;
  Dtype data = Dtype::Unknown;
  bool gone = false;
};
struct CRule {
  uint64_t handle = 0, tx_id = 0;
};
struct CChain {
  std::string_view name;
  std::vector<CRule> rules;
  bool gone = false;
};
struct CTable {
  Family family;
  std::string_view name;
  std::vector<CChain> chains;
  std::vector<CSet> sets;
  std::vector<std::string_view> flowtables;
  // What evaluation added (by name); what the cache loaded mirrors the state's table (same
  // positions) and is found through its index. st is only set while commands are evaluated
  // (the state does not change then).
  // (flat: a prior of 10,000 Services adds 133,000 chains, a node each in a std::unordered_map)
  PosIndex chain_ix, set_ix;
  const Table* st = nullptr;
  size_t loaded_chains = 0, loaded_sets = 0;
  // (the indexes read the names from the vectors)
  std::string_view chain_name(uint32_t p) const { return chains[p].name; }
  std::string_view set_name(uint32_t p) const { return sets[p].name; }
  // The chain last found (a position in chains): commands on one chain come in runs (add,
  // flush, its rules), and a live chain is the only one of its name, so the hint is checked by
  // name and saves the look-ups of the run's later commands.
  uint32_t chain_hint = UINT32_MAX;
  CChain* chain(std::string_view n) {
    // (the hint, or the chain after it: see Applier::command_chain)
    for (size_t p = chain_hint; p < chains.size() && p <= size_t{chain_hint} + 1; ++p)
      if (!chains[p].gone && chains[p].name == n) {
        chain_hint = static_cast<uint32_t>(p);
        return &chains[p];
      }
    CChain* found = nullptr;
    if (const uint32_t p = chain_ix.find(n, [this](uint32_t p) { return chain_name(p); }); p != PosIndex::kNone) found = &chains[p];
    else if (st && loaded_chains) {
      const uint32_t p = table_index(*st).chains.find(n, NamesOf{st->chains});
      if (p < loaded_chains && !chains[p].gone) found = &chains[p];
    }
    if (found) chain_hint = static_cast<uint32_t>(found - chains.data());
    return found;
  }
  CSet* set(std::string_view n) {
    if (const uint32_t p = set_ix.find(n, [this](uint32_t p) { return set_name(p); }); p != PosIndex::kNone) return &sets[p];
    if (st && loaded_sets) {
      const uint32_t p = table_index(*st).sets.find(n, NamesOf{st->sets});
      if (p < loaded_sets && !sets[p].gone) return &sets[p];
    }
    return nullptr;
  }
  void add_chain(CChain c) {
    if (chain(c.name)) return;
    chains.push_back(std::move(c));
    chain_ix.emplace(chains.back().name, static_cast<uint32_t>(chains.size() - 1),
                     [this](uint32_t p) { return chain_name(p); });
  }
  void add_set(CSet c) {
    if (set(c.name)) return;
    sets.push_back(std::move(c));
    set_ix.emplace(sets.back().name, static_cast<uint32_t>(sets.size() - 1),
                   [this](uint32_t p) { return set_name(p); });
  }
  void delete_chain(std::string_view n) {
    if (CChain* c = chain(n)) {
      c->gone = true;
      chain_ix.erase(n, static_cast<uint32_t>(c - chains.data()));
    }
  }
  void delete_set(std::string_view n) {
    if (CSet* c = set(n)) {
      c->gone = true;
      set_ix.erase(n, static_cast<uint32_t>(c - sets.data()));
    }
  }
};
struct Cache {
  std::vector<CTable> tables;
  // The names loaded from the state (which the kernel's batch changes while the cache is
  // still read for hints): copies in one block. Names the commands add are views of them.
  std::unique_ptr<char[]> arena;
  size_t arena_used = 0;
  std::string_view intern(std::string_view n) {
    char* p = arena.get() + arena_used;
    std::memcpy(p, n.data(), n.size());
    arena_used += n.size();
    return std::string_view(p, n.size());
  }
  CTable* table(Family f, std::string_view n) {
    for (auto& t : tables)
      if (t.family == f && t.name == n) return &t;
    return nullptr;
  }
};

// The cache flags one command asks for (cache_flags: `replace` asks for everything, kFull,
// whatever the others ask for).
unsigned cache_flags_of(const Command& c) {
  unsigned flags = 0;
  switch (c.verb) {
    case Verb::Add:
    case Verb::Insert:
    case Verb::Create:
      switch (c.obj) {
        case Obj::Table:
          if (c.table_block || c.table_comment || !c.table_flags.empty()) flags |= kTable | kChain | kSet | kObject | kFlowtable;
          break;
        case Obj::Chain:
        case Obj::Set:
        case Obj::Map:
        case Obj::Flowtable: flags |= kTable; break;
        case Obj::Element: flags |= kTable | kChain | kSet | kObject; break;
        case Obj::Rule:
          flags |= kTable | kChain | kSet | kObject | kFlowtable;
          if (c.index || c.handle) flags |= kRule | kUpdate;
          break;
        default: break;
      }
      break;
    case Verb::Replace: flags = kFull; break;
    case Verb::Delete: flags |= kTable | kChain | kSet | kFlowtable | kObject; break;
    case Verb::Flush:
      if (c.obj == Obj::Set || c.obj == Obj::Map) flags |= kTable | kSet;
      if (c.obj == Obj::Ruleset) flags |= kFlushed;
      break;
    default: break;
  }
  return flags;
}

unsigned cache_flags(const CommandList& cmds) {
  unsigned flags = 0;
  for (const auto& c : cmds) flags = c.verb == Verb::Replace ? kFull : flags | cache_flags_of(c);
  return flags;
}

Cache load_cache(const NftState& s, unsigned flags) {
  Cache c;
  if (!(flags & kTable) || (flags & kFlushed)) return c;
  size_t total = 1;
  for (const auto& t : s.tables) {
    total += t.name.size();
    if (flags & kChain)
      for (const auto& ch : t.chains) total += ch.name.size();
    if (flags & kSet)
      for (const auto& st : t.sets) total += st.name.size();
    if (flags & kFlowtable)
      for (const auto& f : t.flowtables) total += f.name.size();
  }
  c.arena = std::make_unique<char[]>(total);
  for (const auto& t : s.tables) {
    CTable ct;
    ct.family = t.family;
    ct.name = c.intern(t.name);
    ct.st = &t;
    if (flags & kChain) {
      ct.chains.reserve(t.chains.size());
      for (const auto& ch : t.chains) {
        CChain cc;
        cc.name = c.intern(ch.name);
        if (flags & kRule) {
          cc.rules.reserve(ch.rules.size());
          for (const auto& r : ch.rules) cc.rules.push_back({r.handle, 0});
        }
        ct.chains.push_back(std::move(cc));
      }
      ct.loaded_chains = ct.chains.size();
    }
    if (flags & kSet) {
      ct.sets.reserve(t.sets.size());
      for (const auto& st : t.sets) ct.sets.push_back(CSet{c.intern(st.name), st.is_map, st.key, st.data});
      ct.loaded_sets = ct.sets.size();
    }
    if (flags & kFlowtable)
      for (const auto& f : t.flowtables) ct.flowtables.push_back(c.intern(f.name));
    c.tables.push_back(std::move(ct));
  }
  return c;
}

// The fuzzy look-ups of nft (rule.c *_lookup_fuzzy): the first object at the smallest distance.
const CTable* table_fuzzy(const Cache& c, std::string_view name) {
  const CTable* best = nullptr;
  int bestd = 1 << 30;
  for (const auto& t : c.tables) {
    int d = misspell_distance(t.name, name);
    if (d >= 0 && d < bestd) {
      bestd = d;
      best = &t;
    }
  }
  return best;
}
std::pair<const CTable*, const CChain*> chain_fuzzy(const Cache& c, std::string_view name) {
  std::pair<const CTable*, const CChain*> best{nullptr, nullptr};
  int bestd = 1 << 30;
  for (const auto& t : c.tables)
    for (const auto& ch : t.chains) {
      if (ch.gone) continue;
      int d = misspell_distance(ch.name, name);
      if (d >= 0 && d < bestd) {
        bestd = d;
        best = {&t, &ch};
      }
    }
  return best;
}
std::pair<const CTable*, const CSet*> set_fuzzy(const Cache& c, std::string_view name) {
  std::pair<const CTable*, const CSet*> best{nullptr, nullptr};
  int bestd = 1 << 30;
  for (const auto& t : c.tables)
    for (const auto& s : t.sets) {
      if (s.gone) continue;
      int d = misspell_distance(s.name, name);
      if (d >= 0 && d < bestd) {
        bestd = d;
        best = {&t, &s};
      }
    }
  return best;
}
std::pair<const CTable*, const std::string_view*> flowtable_fuzzy(const Cache& c, std::string_view name) {
  std::pair<const CTable*, const std::string_view*> best{nullptr, nullptr};
  int bestd = 1 << 30;
  for (const auto& t : c.tables)
    for (const auto& f : t.flowtables) {
      int d = misspell_distance(f, name);
      if (d >= 0 && d < bestd) {
        bestd = d;
        best = {&t, &f};
      }
    }
  return best;
}

const std::string kENOENT = "No such file or directory";

std::string did_you_mean_table(const CTable& t) {
  return kENOENT + "; did you mean table \u2018" + std::string(t.name) + "\u2019 in family " + family_name(t.family) + "?";
}
std::string did_you_mean_chain(const CTable& t, const CChain& ch) {
  return kENOENT + "; did you mean chain \u2018" + std::string(ch.name) + "\u2019 in table " + family_name(t.family) +
         " \u2018" + std::string(t.name) + "\u2019?";
}
std::string did_you_mean_set(const CTable& t, const CSet& s) {
  return kENOENT + "; did you mean " + (s.is_map ? "map" : "set") + " \u2018" + std::string(s.name) +
         "\u2019 in table " + family_name(t.family) + " \u2018" + std::string(t.name) + "\u2019?";
}

// ------------------------------------------------------------------ errors

struct Err {
  Loc loc;
  std::string message;
  bool not_modelled = false;
  Loc mark;  ///< NftError::mark_begin/mark_end (line 0: none)
};

// ------------------------------------------------------------------ the transaction

enum class Errno { Noent, Exist, Busy, Notsupp, Inval, Mlink };
const char* strerr(Errno e) {
  switch (e) {
    case Errno::Noent: return "No such file or directory";
    case Errno::Exist: return "File exists";
    case Errno::Busy: return "Device or resource busy";
    case Errno::Notsupp: return "Operation not supported";
    case Errno::Inval: return "Invalid argument";
    case Errno::Mlink: return "Too many links";
  }
  return "?";
}

// What evaluation resolved for a rule command: where the kernel puts it.
struct RulePos {
  enum Kind { None, Handle, TxId } kind = None;
  uint64_t id = 0;
};

struct Tx {
  NftState& work;
  Cache cache;
  unsigned flags = 0;
  std::vector<Err> errors;
  uint64_t next_tx_id = 0;
  explicit Tx(NftState& w) : work(w) {}
};

bool modelled_hook(Family f, const std::string& type, const std::string& hook) {
  static const char* hooks[] = {"prerouting", "input", "forward", "output", "postrouting"};
  bool known = false;
  for (const char* h : hooks) known = known || hook == h;
  if (!known) return false;
  if (f == Family::Inet && hook == "ingress") return false;
  if (type == "filter") return true;
  if (type == "nat") return hook != "forward";
  return false;  // route and others: not modelled
}

int use_at(const std::vector<int>& use, uint32_t pos) { return pos < use.size() ? use[pos] : 0; }
int use_of(const UseMap& m, std::string_view name) {
  auto it = m.find(name);
  return it == m.end() ? 0 : it->second;
}
void count_rule_refs(const Table& t, const Rule& r, int delta) { count_refs(t, table_index(t), r, delta); }
void count_elem_refs(const Table& t, const Element& e, int delta) { count_refs(t, table_index(t), e, delta); }

// Canonical element of a set (key fields by the set's key types, value by its data type).
std::optional<std::string> make_element(const Set& s, const ElemSpec& spec, Element* out, bool need_value) {
  if (spec.key.size() != s.key.size()) return "an element with " + std::to_string(spec.key.size()) + " key fields for a key of " + std::to_string(s.key.size());
  std::string raw;
  for (size_t i = 0; i < spec.key.size(); ++i) {
    std::string canon, bytes;
    if (!canonical_value(s.key[i], spec.key[i], &canon, &bytes))
      return "element key '" + spec.key[i] + "' as " + dtype_name(s.key[i]);
    out->key.push_back(canon);
    if (s.key.size() > 1) bytes.resize((bytes.size() + 3) / 4 * 4, '\0');
    raw += bytes;
  }
  // nft lists elements sorted as numbers: big-endian values of one field by their bytes,
  // concatenations (and host-endian values) as a little-endian number.
  bool host = s.key.size() > 1 || s.key[0] == Dtype::Mark || s.key[0] == Dtype::Integer;
  if (host) std::reverse(raw.begin(), raw.end());
  out->sort_key = raw;
  out->written_key = spec.key;
  out->comment = spec.comment;
  out->timeout = spec.timeout;
  out->expires = spec.expires;
  if (spec.value) {
    if (!s.is_map) return std::string("a value for a set element");
    if (s.data == Dtype::Verdict) {
      const std::string& v = *spec.value;
      if (!(v == "accept" || v == "drop" || v == "return" || v == "continue" || v.rfind("goto ", 0) == 0 ||
            v.rfind("jump ", 0) == 0))
        return "map value '" + v + "'";
      out->value = v;
    } else {
      std::string canon, bytes;
      if (!canonical_value(s.data, *spec.value, &canon, &bytes)) return "map value '" + *spec.value + "'";
      out->value = canon;
    }
    out->written_value = spec.value;
  } else if (s.is_map && need_value) {
    return std::string();  // EINVAL, handled by the caller
  }
  return std::nullopt;
}

// The end of the group of element commands nft 1.0.6 collapses into cmds[i] (nft_cmd_collapse:
// consecutive `add element` or `create element` commands on one set); i + 1 for any other.
size_t collapsed_end(const CommandList& cmds, size_t i) {
  auto collapsible = [](const Command& c) {
    return c.obj == Obj::Element && (c.verb == Verb::Add || c.verb == Verb::Create);
  };
  size_t j = i + 1;
  if (collapsible(cmds[i]))
    while (j < cmds.size() && collapsible(cmds[j]) && cmds[j].verb == cmds[i].verb && cmds[j].family == cmds[i].family &&
           cmds[j].table == cmds[i].table && cmds[j].name == cmds[i].name)
      ++j;
  return j;
}

// Does an element key (as written) appear in two commands of the group [b, e)?
bool group_repeats_a_key(const CommandList& cmds, size_t b, size_t e) {
  std::unordered_map<std::string, size_t> first;  // key -> command
  for (size_t k = b; k < e; ++k)
    for (const auto& el : cmds[k].elements) {
      std::string key;
      for (const auto& f : el.key) key += f + " . ";
      auto [it, fresh] = first.emplace(std::move(key), k);
      if (!fresh && it->second != k) return true;
    }
  return false;
}

class Applier {
 public:
  Applier(NftState& work, std::string_view file) : tx_(work), file_(file) {}

  // Evaluation (nft userspace). Returns false on errors (collected).
  bool evaluate(const CommandList& cmds) {
    list_ = &cmds;
    tx_.flags = cache_flags(cmds);
    tx_.cache = load_cache(tx_.work, tx_.flags);
    pos_.assign(cmds.size(), RulePos{});
    txid_.assign(cmds.size(), 0);
    int nerrs = 0;
    // nft 1.0.6 merges consecutive `add element` (or `create element`) commands on the same
    // set into the first one (nft_cmd_collapse): one evaluation. (Each element keeps its own
    // location; the kernel gets them apart again.)
    for (size_t i = 0; i < cmds.size();) {
      size_t j = collapsed_end(cmds, i);
      bool ok = cmds[i].obj == Obj::Element ? eval_elements(cmds, i, j) : eval_one(cmds[i], i);
      i = j;
      if (!ok && ++nerrs == 10) break;
    }
    for (auto& t : tx_.cache.tables) t.st = nullptr;  // the state changes from here
    return nerrs == 0;
  }

  // ---------------------------------------------------------------- streaming
  // apply_while_parsing: a script applied to a state with no tables while it is still being
  // parsed, its commands evaluated and sent to the kernel range by range (whole collapsed
  // groups) instead of all evaluated first. The same as evaluate() then kernel() when nothing
  // fails and the script has none of what ties a command's outcome to later commands:
  //  * evaluation reads only nft's cache, which starts empty for a state with no tables (the
  //    cache flags load nothing) and which the kernel's batch never changes; the kernel reads
  //    the state and the positions evaluation gave the command (pos_, txid_), and the cache
  //    only for the hints of its error messages;
  //  * the flags do change evaluation for a rule with a handle or an index (kUpdate) and with
  //    `replace`: such a script is not streamed;
  //  * flushes are applied as written (no rules kept, keep_allowed_ false), and a flush of a
  //    chain with rules stops the stream (keeping them would have counted as rules_kept).
  // stream() false: stop, discard the state, and apply the whole script as usual (errors,
  // messages and their order are that path's).
  void stream_begin() {
    streaming_ = true;
    tx_.flags = 0;
    tx_.cache = load_cache(tx_.work, 0);
    begin();
  }
  bool stream(const CommandList& cmds, size_t b, size_t e) {
    list_ = &cmds;
    for (size_t i = b; i < e; ++i) {
      const Command& c = cmds[i];
      if (c.verb == Verb::Replace || (c.obj == Obj::Rule && (c.handle || c.index)) || !c.block.empty()) return false;
      tx_.flags |= cache_flags_of(c);
    }
    pos_.resize(e, RulePos{});
    txid_.resize(e, 0);
    for (size_t i = b; i < e;) {
      const size_t j = collapsed_end(cmds, i);
      if (!(cmds[i].obj == Obj::Element ? eval_elements(cmds, i, j) : eval_one(cmds[i], i))) return false;
      i = j;
    }
    if (!tx_.errors.empty() || (tx_.flags & kUpdate)) return false;
    kernel_range(cmds, b, e);
    return tx_.errors.empty() && !stream_stop_;
  }

  // The kernel's batch: every message applied in order; failures recorded (the batch goes on,
  // as nfnetlink does, so that every error is reported).
  void kernel(const CommandList& cmds) {
    keep_allowed_ = defer_flushes && !listing && keeping_allowed(cmds, &deleted_names_);
    kernel_range(cmds, 0, cmds.size());
    for (auto [tp, cp] : keeping_) {
      Table& t = tx_.work.tables[tp];
      if (t.chains[cp].keeping) end_keeping(t, t.chains[cp]);
    }
    keeping_.clear();
  }

  // The messages of cmds[b, e) (whole collapsed groups) in order.
  void kernel_range(const CommandList& cmds, size_t b, size_t e) {
    for (size_t i = b; i < e;) {
      const size_t j = collapsed_end(cmds, i);
      if (j - i < 3) {
        for (; i < j; ++i) kernel_one(cmds[i], i);
        continue;
      }
      kernel_collapsed(cmds, i, j);
      i = j;
    }
  }

  // A collapsed group of three or more element commands [b, e). After evaluating them as one,
  // nft splits them again (nft_cmd_uncollapse) by inserting each later command right after
  // the first: the kernel gets b, then e-1 down to b+1 (seen with nft 1.0.6 on this kernel:
  // errors of lines 1..4 are printed 1, 4, 3, 2; long differential seed 20261121 pair 4321).
  // The commands are applied here in their order, so that the set's insertion order stays the
  // transaction's (knftables' Dump), and their errors are reported in the kernel's order.
  // That is exact when no command's outcome depends on another's, which holds unless two of
  // them name the same element: such a group is refused.
  void kernel_collapsed(const CommandList& cmds, size_t b, size_t e) {
    if (group_repeats_a_key(cmds, b, e)) {
      refuse(cmds[b].loc, "element commands on one set that name an element twice (nft sends them to the kernel "
                          "in another order)");
      return;
    }
    std::vector<std::vector<Err>> errs(e - b);
    for (size_t k = b; k < e; ++k) {
      const size_t before = tx_.errors.size();
      kernel_one(cmds[k], k);
      errs[k - b].assign(std::make_move_iterator(tx_.errors.begin() + static_cast<long>(before)),
                         std::make_move_iterator(tx_.errors.end()));
      tx_.errors.resize(before);
    }
    auto put = [&](std::vector<Err>& v) { tx_.errors.insert(tx_.errors.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end())); };
    put(errs[0]);
    for (size_t k = e - b; k-- > 1;) put(errs[k]);
  }

  Tx tx_;
  std::string file_;
  bool listing = false;
  bool defer_flushes = true;  ///< false: every flush as written (the tests' reference)
  size_t rules_kept = 0;      ///< rules added again that a deferred flush kept
  std::vector<RulePos> pos_;
  std::vector<uint64_t> txid_;
  const CommandList* list_ = nullptr;  ///< the commands evaluated (a warning's line: moved_by)

 private:
  void err(const Loc& l, std::string msg, bool not_modelled = false) {
    tx_.errors.push_back({l, std::move(msg), not_modelled, {}});
  }
  bool refuse(const Loc& l, const std::string& what) {
    err(l, "not modelled by kpc: " + what, true);
    return false;
  }
  // A location of c's rule where c is now (ParsedRule::line).
  static Loc moved(const Command& c, Loc l) {
    if (l.line) l.line += c.loc.line - c.rule->line;
    return l;
  }

  // ---------------------------------------------------------------- evaluation
  bool table_not_found(const Command& c) {
    if (const CTable* t = table_fuzzy(tx_.cache, c.table)) err(c.table_loc, did_you_mean_table(*t));
    else err(c.table_loc, kENOENT);
    return false;
  }
  bool chain_not_found(const Command& c) {
    auto [t, ch] = chain_fuzzy(tx_.cache, c.name);
    if (ch) err(c.name_loc, did_you_mean_chain(*t, *ch));
    else err(c.name_loc, kENOENT);
    return false;
  }
  bool set_not_found(const Loc& l, const std::string& name) {
    auto [t, s] = set_fuzzy(tx_.cache, name);
    if (s) err(l, did_you_mean_set(*t, *s));
    else err(l, kENOENT);
    return false;
  }

  bool eval_one(const Command& c, size_t idx) {
    switch (c.obj) {
      case Obj::Ruleset:
        tx_.cache.tables.clear();
        return true;
      case Obj::Table:
        if (c.verb == Verb::Add || c.verb == Verb::Create) {
          if (!tx_.cache.table(c.family, c.table)) tx_.cache.tables.push_back(CTable{c.family, c.table, {}, {}, {}});
        } else if (c.verb == Verb::Delete) {
          auto& v = tx_.cache.tables;
          for (size_t i = 0; i < v.size(); ++i)
            if (v[i].family == c.family && v[i].name == c.table) {
              v.erase(v.begin() + i);
              break;
            }
        }
        return true;
      case Obj::Chain: {
        if (c.verb == Verb::Add || c.verb == Verb::Create) {
          CTable* t = tx_.cache.table(c.family, c.table);
          if (!t) return table_not_found(c);
          if (!t->chain(c.name)) t->add_chain(CChain{c.name, {}});
          if (c.chain->has_hook && !modelled_hook(c.family, c.chain->type, c.chain->hook))
            return refuse(c.loc, "base chain type '" + c.chain->type + "' on hook '" + c.chain->hook + "'");
          if (c.chain->has_hook && c.chain->type == "nat" && c.chain->priority <= -200)
            return refuse(c.loc, "a nat chain at priority <= -200");
          if (c.chain->device) return refuse(c.loc, "a chain device");
        } else if (c.verb == Verb::Delete) {
          if (CTable* t = tx_.cache.table(c.family, c.table))
            if (!c.name.empty()) t->delete_chain(c.name);
        }
        return true;
      }
      case Obj::Set:
      case Obj::Map: {
        if (c.verb == Verb::Add || c.verb == Verb::Create) {
          CTable* t = tx_.cache.table(c.family, c.table);
          if (!t) return table_not_found(c);
          CSet cs{c.name, c.set->is_map, {}, Dtype::Unknown};
          for (const auto& k : c.set->key_names) {
            Dtype d = dtype_from_name(k);
            if (d == Dtype::Unknown || d == Dtype::Verdict) return refuse(c.loc, "set key type '" + k + "'");
            cs.key.push_back(d);
          }
          if (c.set->is_map) {
            cs.data = dtype_from_name(c.set->data_name);
            if (cs.data == Dtype::Unknown) return refuse(c.loc, "map data type '" + c.set->data_name + "'");
          }
          if (c.set->auto_merge) return refuse(c.loc, "auto-merge");
          if (std::find(c.set->flags.begin(), c.set->flags.end(), "interval") != c.set->flags.end() && c.set->key_names.size() > 1)
            return refuse(c.loc, "interval sets of concatenations");
          if (!t->set(c.name)) t->add_set(std::move(cs));
        } else if (c.verb == Verb::Delete) {
          if (CTable* t = tx_.cache.table(c.family, c.table))
            if (!c.name.empty()) t->delete_set(c.name);
        } else if (c.verb == Verb::Flush) {
          CTable* t = tx_.cache.table(c.family, c.table);
          if (!t) return table_not_found(c);
          CSet* s = t->set(c.name);
          if (!s) return set_not_found(c.name_loc, c.name);
          if (s->is_map != (c.obj == Obj::Map)) {
            err(c.name_loc, kENOENT);
            return false;
          }
        }
        return true;
      }
      case Obj::Flowtable:
        if (c.verb == Verb::Add || c.verb == Verb::Create) {
          CTable* t = tx_.cache.table(c.family, c.table);
          if (!t) return table_not_found(c);
          if (std::find(t->flowtables.begin(), t->flowtables.end(), c.name) == t->flowtables.end())
            t->flowtables.push_back(c.name);
        } else if (c.verb == Verb::Delete) {
          if (CTable* t = tx_.cache.table(c.family, c.table)) {
            auto it = std::find(t->flowtables.begin(), t->flowtables.end(), c.name);
            if (it != t->flowtables.end()) t->flowtables.erase(it);
          }
        }
        return true;
      case Obj::Element: return true;  // (evaluated by eval_elements)
      case Obj::Rule: {
        if (c.verb == Verb::Delete) return true;
        const ParsedRule& r = *c.rule;
        if (c.verb == Verb::Replace)
          for (const auto& as : r.anon_sets)
            if (as.interval) return refuse(moved(c, as.loc), "replace of a rule with an anonymous interval set (nft 1.0.6 aborts: BUG unhandled op)");
        // nft evaluates the statements in order and stops at the first error: a statement's
        // error (ParsedRule::stmt_errors) is reported after the references before it.
        const ParsedRule::StmtError* stmt_error = nullptr;
        for (const auto& e : r.stmt_errors)
          if (!(listing && e.command_only)) {
            stmt_error = &e;
            break;
          }
        auto report_stmt_error = [&] {
          tx_.errors.push_back({moved(c, stmt_error->loc), stmt_error->message, false, moved(c, stmt_error->mark)});
          return false;
        };
        for (size_t k = 0; k < r.ref_locs.size(); ++k) {
          const auto& ref = r.ref_locs[k];
          if (stmt_error && stmt_error->refs_before == k) return report_stmt_error();
          if (ref.kind == ParsedRule::Ref::Chain) continue;
          CTable* t = tx_.cache.table(c.family, c.table);
          if (!t) return table_not_found(c);
          if (ref.kind == ParsedRule::Ref::Flowtable) {
            if (std::find(t->flowtables.begin(), t->flowtables.end(), ref.name) == t->flowtables.end()) {
              auto [ft, f] = flowtable_fuzzy(tx_.cache, ref.name);
              if (f)
                err(moved(c, ref.loc), kENOENT + "; did you mean flowtable \u2018" + std::string(*f) + "\u2019 in table " +
                                           family_name(ft->family) + " \u2018" + std::string(ft->name) + "\u2019?");
              else err(moved(c, ref.loc), kENOENT);
              return false;
            }
            continue;
          }
          CSet* s = t->set(ref.name);
          if (!s) return set_not_found(moved(c, ref.loc), ref.name);
          for (const auto& tr : r.typed_refs) {
            if (tr.name != ref.name || tr.kind != ref.kind) continue;
            if (tr.types != s->key) return refuse(moved(c, ref.loc), "a datatype mismatch between a rule and @" + ref.name);
            if (tr.kind == ParsedRule::Ref::Map && (!s->is_map || s->data != Dtype::Verdict))
              return refuse(moved(c, ref.loc), "vmap on @" + ref.name + ", which is not a verdict map");
            if (tr.kind == ParsedRule::Ref::Dynset && s->is_map) return refuse(moved(c, ref.loc), "update of a map");
          }
        }
        if (stmt_error) return report_stmt_error();
        if (tx_.flags & kUpdate) return rule_cache_update(c, idx);
        return true;
      }
    }
    return true;
  }

  // Element commands [b, e): one evaluation (see evaluate()), with the first's table and set.
  bool eval_elements(const CommandList& cmds, size_t b, size_t e) {
    const Command& c = cmds[b];
    CTable* t = tx_.cache.table(c.family, c.table);
    if (!t) return table_not_found(c);
    CSet* s = t->set(c.name);
    if (!s) return set_not_found(c.name_loc, c.name);
    std::string a, bytes;
    for (size_t i = b; i < e; ++i)
      for (const auto& el : cmds[i].elements) {
        if (el.key.size() != s->key.size()) return refuse(el.key_loc, "an element whose key does not match the set's type");
        for (size_t k = 0; k < el.key.size(); ++k) {
          a.clear();
          bytes.clear();
          if (!canonical_value(s->key[k], el.key[k], &a, &bytes))
            return refuse(el.key_loc, "element key '" + el.key[k] + "' as " + dtype_name(s->key[k]));
        }
        if (el.value && !s->is_map) return refuse(el.key_loc, "a value for an element of a set");
        if (el.value && c.verb == Verb::Delete) return refuse(el.key_loc, "a value in a delete element");
        if ((el.timeout || el.expires) && !listing) return refuse(el.key_loc, "element timeouts (their expiry depends on time)");
      }
    return true;
  }

  bool rule_cache_update(const Command& c, size_t idx) {
    CTable* t = tx_.cache.table(c.family, c.table);
    if (!t) return table_not_found(c);
    CChain* ch = t->chain(c.name);
    if (!ch) return chain_not_found(c);
    long ref = -1;
    if (c.index) {
      uint64_t n = *c.index + 1;
      for (size_t i = 0; i < ch->rules.size(); ++i)
        if (!--n) {
          ref = static_cast<long>(i);
          break;
        }
      if (ref < 0) {
        err(c.index_loc, "Could not process rule: " + kENOENT);
        return false;
      }
    } else if (c.handle) {
      for (size_t i = 0; i < ch->rules.size(); ++i)
        if (ch->rules[i].handle == *c.handle && *c.handle != 0) {
          ref = static_cast<long>(i);
          break;
        }
      if (ref < 0) {
        err(c.handle_loc, "Could not process rule: " + kENOENT);
        return false;
      }
    }
    CRule me{0, ++tx_.next_tx_id};
    txid_[idx] = me.tx_id;
    if (ref >= 0) {
      CRule& rr = ch->rules[ref];
      if (rr.handle) pos_[idx] = RulePos{RulePos::Handle, rr.handle};
      else pos_[idx] = RulePos{RulePos::TxId, rr.tx_id};
    }
    switch (c.verb) {
      case Verb::Insert:
        ch->rules.insert(ch->rules.begin() + (ref >= 0 ? ref : 0), me);
        break;
      case Verb::Add:
        if (ref >= 0) ch->rules.insert(ch->rules.begin() + ref + 1, me);
        else ch->rules.push_back(me);
        break;
      case Verb::Replace:
        ch->rules[ref] = me;
        break;
      default: break;
    }
    return true;
  }

  // ---------------------------------------------------------------- kernel
  void kerr(const Command& c, Errno e, const Loc* attr) {
    // nft_cmd_error: with the bad attribute's location and ENOENT, nft looks for a similar
    // object in its cache (nft_cmd_enoent).
    if (!attr) {
      err(c.loc, std::string("Could not process rule: ") + strerr(e));
      return;
    }
    if (e == Errno::Noent) {
      hint_at_table_ = false;
      if (auto m = enoent_hint(c)) {
        // nft's table_fuzzy_check reports at the command's table, other hints at the attribute
        err(hint_at_table_ ? c.table_loc : *attr, *m);
        return;
      }
    }
    err(*attr, std::string("Could not process rule: ") + strerr(e));
  }

  // table_fuzzy_check: the command's table is not in the cache but a similar one is.
  bool hint_at_table_ = false;
  std::optional<std::string> table_fuzzy_check(const Command& c, const CTable& found) {
    if (tx_.cache.table(c.family, c.table)) return std::nullopt;
    if (found.name != c.table || found.family != c.family) {
      hint_at_table_ = true;
      return did_you_mean_table(found);
    }
    return std::nullopt;
  }

  std::optional<std::string> enoent_hint(const Command& c) {
    switch (c.obj) {
      case Obj::Table: {
        if (const CTable* t = table_fuzzy(tx_.cache, c.table)) return did_you_mean_table(*t);
        return std::nullopt;
      }
      case Obj::Chain: {
        if (c.name.empty()) return std::nullopt;
        auto [t, ch] = chain_fuzzy(tx_.cache, c.name);
        if (!t) return std::nullopt;
        if (auto m = table_fuzzy_check(c, *t)) return m;
        return did_you_mean_chain(*t, *ch);
      }
      case Obj::Set:
      case Obj::Map: {
        if (c.name.empty()) return std::nullopt;
        if (c.verb == Verb::Flush && c.obj == Obj::Map) return std::nullopt;
        auto [t, s] = set_fuzzy(tx_.cache, c.name);
        if (!t) return std::nullopt;
        if (auto m = table_fuzzy_check(c, *t)) return m;
        return did_you_mean_set(*t, *s);
      }
      case Obj::Rule: {
        auto [t, ch] = chain_fuzzy(tx_.cache, c.name);
        if (!t) return std::nullopt;
        if (auto m = table_fuzzy_check(c, *t)) return m;
        if (ch->name != c.name) return did_you_mean_chain(*t, *ch);
        return std::nullopt;
      }
      case Obj::Flowtable: {
        if (c.name.empty()) return std::nullopt;
        auto [t, f] = flowtable_fuzzy(tx_.cache, c.name);
        if (!t) return std::nullopt;
        if (auto m = table_fuzzy_check(c, *t)) return m;
        return kENOENT + "; did you mean flowtable \u2018" + std::string(*f) + "\u2019 in table " +
               family_name(t->family) + " \u2018" + std::string(t->name) + "\u2019?";
      }
      default: return std::nullopt;
    }
  }

  Table* ktable(const Command& c) { return tx_.work.find_table(c.family, c.table); }

  // ---------------------------------------------------------------- the undo log
  // The kernel's batch changes the state in place; every change to a table that existed
  // before the transaction is logged, and rollback() undoes them in reverse order (a table
  // the transaction created goes as a whole). Chains, sets and elements the batch deletes
  // stay in their vectors, marked removed (out of the indexes), until commit() compacts them.
 public:
  struct Undo {
    enum Kind : uint8_t {
      TableAdded, TableRemoved, TablesCleared, ChainAdded, ChainRemoved, ChainPolicy, RulesCleared, RuleInserted,
      RuleRemoved, RuleReplaced, SetAdded, SetRemoved, SetSize, ElementsCleared, ElementAdded, ElementRemoved,
      FlowtableAdded, FlowtableRemoved, HandlesRenewed, RulesTruncated,
    } kind;
    uint32_t t = 0, o = 0, i = 0;  // table, object (chain, set, flowtable), item (rule, element) positions
    uint32_t size = 0;
    bool implied = false;
    std::variant<std::monostate, std::string, std::unique_ptr<Table>, std::unique_ptr<Rule>, std::vector<Table>,
                 std::vector<Rule>, std::vector<Element>, std::unique_ptr<Flowtable>>
        v;
  };
  std::vector<Undo> log_;
  std::vector<uint64_t> renewed_;  // HandlesRenewed: rules' handles before, [u.i, u.i + u.size)
  std::vector<uint64_t> start_tables_;                 // handles of the tables before the batch
  std::vector<std::pair<uint64_t, uint64_t>> start_next_;  // (table handle, next_handle) before
  uint64_t start_table_handle_ = 0;
  std::vector<uint64_t> dirty_tables_;                  // tables with removed chains or sets
  std::vector<std::pair<uint64_t, uint64_t>> dirty_sets_;  // (table, set) handles: removed elements

  bool begun_ = false;
  void begin() {
    begun_ = true;
    start_table_handle_ = tx_.work.next_table_handle;
    for (const auto& t : tx_.work.tables) {
      start_tables_.push_back(t.handle);
      start_next_.push_back({t.handle, t.next_handle});
    }
  }

 private:
  uint32_t tpos(const Table& t) const { return static_cast<uint32_t>(&t - tx_.work.tables.data()); }
  static uint32_t cpos(const Table& t, const Chain& c) { return static_cast<uint32_t>(&c - t.chains.data()); }
  static uint32_t spos(const Table& t, const Set& s) { return static_cast<uint32_t>(&s - t.sets.data()); }
  bool logged(const Table& t) const {
    return std::find(start_tables_.begin(), start_tables_.end(), t.handle) != start_tables_.end();
  }
  void log(Undo::Kind k, uint32_t t, uint32_t o = 0, uint32_t i = 0) {
    Undo u;
    u.kind = k;
    u.t = t;
    u.o = o;
    u.i = i;
    log_.push_back(std::move(u));
  }
  void mark_dirty(const Table& t) {
    if (std::find(dirty_tables_.begin(), dirty_tables_.end(), t.handle) == dirty_tables_.end())
      dirty_tables_.push_back(t.handle);
  }

  void add_table(Table nt) {
    tx_.work.tables.push_back(std::move(nt));
    log(Undo::TableAdded, static_cast<uint32_t>(tx_.work.tables.size() - 1));
  }
  void erase_table(Table& t) {
    uint32_t p = tpos(t);
    Undo u;
    u.kind = Undo::TableRemoved;
    u.t = p;
    u.v = std::make_unique<Table>(std::move(t));
    log_.push_back(std::move(u));
    tx_.work.tables.erase(tx_.work.tables.begin() + p);
  }
  void clear_tables() {
    Undo u;
    u.kind = Undo::TablesCleared;
    u.v = std::move(tx_.work.tables);
    log_.push_back(std::move(u));
    tx_.work.tables.clear();
  }
  void add_chain(Table& t, Chain c) {
    TableIndex& ix = table_index(t);
    ix.chains.emplace(c.name, static_cast<uint32_t>(t.chains.size()), NamesOf{t.chains});
    t.chains.push_back(std::move(c));
    ix.n_chains = t.chains.size();
    ix.chain_use.push_back(0);
    if (logged(t)) log(Undo::ChainAdded, tpos(t), static_cast<uint32_t>(t.chains.size() - 1));
  }
  void remove_chain(Table& t, Chain& c) {
    TableIndex& ix = table_index(t);
    ix.chains.erase(c.name, cpos(t, c));
    c.removed = true;
    mark_dirty(t);
    if (logged(t)) log(Undo::ChainRemoved, tpos(t), cpos(t, c));
  }
  void set_policy(Table& t, Chain& c, const std::string& policy) {
    if (logged(t)) {
      log(Undo::ChainPolicy, tpos(t), cpos(t, c));
      log_.back().v = c.policy;
    }
    c.policy = policy;
  }
  void clear_rules(Table& t, Chain& c) {
    if (logged(t) && !c.rules.empty()) {
      log(Undo::RulesCleared, tpos(t), cpos(t, c));
      log_.back().v = std::move(c.rules);
    }
    c.rules.clear();
  }
  void insert_rule(Table& t, Chain& c, size_t at, Rule r) {
    c.rules.insert(c.rules.begin() + static_cast<long>(at), std::move(r));
    if (logged(t)) log(Undo::RuleInserted, tpos(t), cpos(t, c), static_cast<uint32_t>(at));
  }
  void erase_rule(Table& t, Chain& c, size_t at) {
    if (logged(t)) {
      log(Undo::RuleRemoved, tpos(t), cpos(t, c), static_cast<uint32_t>(at));
      log_.back().v = std::make_unique<Rule>(std::move(c.rules[at]));
    }
    c.rules.erase(c.rules.begin() + static_cast<long>(at));
  }
  void replace_rule(Table& t, Chain& c, size_t at, Rule r) {
    if (logged(t)) {
      log(Undo::RuleReplaced, tpos(t), cpos(t, c), static_cast<uint32_t>(at));
      log_.back().v = std::make_unique<Rule>(std::move(c.rules[at]));
    }
    c.rules[at] = std::move(r);
  }
  void add_set(Table& t, Set s) {
    TableIndex& ix = table_index(t);
    ix.sets.emplace(s.name, static_cast<uint32_t>(t.sets.size()), NamesOf{t.sets});
    t.sets.push_back(std::move(s));
    ix.n_sets = t.sets.size();
    ix.set_use.push_back(0);
    if (logged(t)) log(Undo::SetAdded, tpos(t));
  }
  void remove_set(Table& t, Set& s) {
    TableIndex& ix = table_index(t);
    ix.sets.erase(s.name, spos(t, s));
    s.removed = true;
    mark_dirty(t);
    if (logged(t)) log(Undo::SetRemoved, tpos(t), spos(t, s));
  }
  void set_size(Table& t, Set& s, uint32_t size, bool implied) {
    if (logged(t)) {
      log(Undo::SetSize, tpos(t), spos(t, s));
      log_.back().size = s.size;
      log_.back().implied = s.size_implied;
    }
    s.size = size;
    s.size_implied = implied;
  }
  void clear_elements(Table& t, Set& s) {
    if (logged(t) && !s.elements.empty()) {
      log(Undo::ElementsCleared, tpos(t), spos(t, s));
      log_.back().v = std::move(s.elements);
    }
    s.elements.clear();
    s.index.p.reset();
  }
  void add_element(Table& t, Set& s, Element e, std::string key) {
    SetIndex& ix = set_index(s);
    ix.elems.emplace(std::move(key), static_cast<uint32_t>(s.elements.size()));
    s.elements.push_back(std::move(e));
    ix.n = s.elements.size();
    if (logged(t)) log(Undo::ElementAdded, tpos(t), spos(t, s), static_cast<uint32_t>(s.elements.size() - 1));
  }
  void remove_element(Table& t, Set& s, NameIndex::iterator it) {
    SetIndex& ix = set_index(s);
    uint32_t at = it->second;
    ix.elems.erase(it);
    s.elements[at].removed = true;
    std::pair<uint64_t, uint64_t> id{t.handle, s.handle};
    if (std::find(dirty_sets_.begin(), dirty_sets_.end(), id) == dirty_sets_.end()) dirty_sets_.push_back(id);
    if (logged(t)) log(Undo::ElementRemoved, tpos(t), spos(t, s), at);
  }
  void add_flowtable(Table& t, Flowtable f) {
    t.flowtables.push_back(std::move(f));
    if (logged(t)) log(Undo::FlowtableAdded, tpos(t));
  }
  void erase_flowtable(Table& t, size_t at) {
    if (logged(t)) {
      log(Undo::FlowtableRemoved, tpos(t), static_cast<uint32_t>(at));
      log_.back().v = std::make_unique<Flowtable>(std::move(t.flowtables[at]));
    }
    t.flowtables.erase(t.flowtables.begin() + static_cast<long>(at));
  }

 public:
  // Undoes the batch: the state as it was before it (handle generators included; the caller
  // keeps what the kernel keeps).
  void rollback() {
    if (!begun_) return;  // the kernel's batch did not run: nothing changed
    auto& tables = tx_.work.tables;
    for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
      Undo& u = *it;
      switch (u.kind) {
        case Undo::TableAdded: tables.erase(tables.begin() + u.t); break;
        case Undo::TableRemoved:
          tables.insert(tables.begin() + u.t, std::move(*std::get<std::unique_ptr<Table>>(u.v)));
          break;
        case Undo::TablesCleared: tables = std::move(std::get<std::vector<Table>>(u.v)); break;
        case Undo::ChainAdded: tables[u.t].chains.pop_back(); break;
        case Undo::ChainRemoved: tables[u.t].chains[u.o].removed = false; break;
        case Undo::ChainPolicy: tables[u.t].chains[u.o].policy = std::move(std::get<std::string>(u.v)); break;
        case Undo::RulesCleared: tables[u.t].chains[u.o].rules = std::move(std::get<std::vector<Rule>>(u.v)); break;
        case Undo::RuleInserted: {
          auto& r = tables[u.t].chains[u.o].rules;
          r.erase(r.begin() + u.i);
          break;
        }
        case Undo::RuleRemoved: {
          auto& r = tables[u.t].chains[u.o].rules;
          r.insert(r.begin() + u.i, std::move(*std::get<std::unique_ptr<Rule>>(u.v)));
          break;
        }
        case Undo::RuleReplaced:
          tables[u.t].chains[u.o].rules[u.i] = std::move(*std::get<std::unique_ptr<Rule>>(u.v));
          break;
        case Undo::SetAdded: tables[u.t].sets.pop_back(); break;
        case Undo::SetRemoved: tables[u.t].sets[u.o].removed = false; break;
        case Undo::SetSize:
          tables[u.t].sets[u.o].size = u.size;
          tables[u.t].sets[u.o].size_implied = u.implied;
          break;
        case Undo::ElementsCleared:
          tables[u.t].sets[u.o].elements = std::move(std::get<std::vector<Element>>(u.v));
          break;
        case Undo::ElementAdded: tables[u.t].sets[u.o].elements.pop_back(); break;
        case Undo::ElementRemoved: tables[u.t].sets[u.o].elements[u.i].removed = false; break;
        case Undo::FlowtableAdded: tables[u.t].flowtables.pop_back(); break;
        case Undo::FlowtableRemoved: {
          auto& f = tables[u.t].flowtables;
          f.insert(f.begin() + u.o, std::move(*std::get<std::unique_ptr<Flowtable>>(u.v)));
          break;
        }
        case Undo::HandlesRenewed: {
          auto& r = tables[u.t].chains[u.o].rules;
          for (size_t j = 0; j < u.size; ++j) r[j].handle = renewed_[u.i + j];
          break;
        }
        case Undo::RulesTruncated: {
          auto& r = tables[u.t].chains[u.o].rules;
          auto& gone = std::get<std::vector<Rule>>(u.v);
          r.insert(r.end(), std::make_move_iterator(gone.begin()), std::make_move_iterator(gone.end()));
          break;
        }
      }
    }
    log_.clear();
    renewed_.clear();
    tx_.work.next_table_handle = start_table_handle_;
    for (auto& t : tables) {
      for (const auto& [h, n] : start_next_)
        if (h == t.handle) t.next_handle = n;
      // the indexes are rebuilt on demand
      t.index.p.reset();
      for (auto& s : t.sets) s.index.p.reset();
    }
  }

  // Drops the removed objects of v, keeping the order; ix follows the others.
  template <class V>
  static void compact(V& v, PosIndex& ix, std::vector<int>& use) {
    size_t w = 0;
    for (size_t r = 0; r < v.size(); ++r) {
      if (v[r].removed) continue;
      if (w != r) {
        v[w] = std::move(v[r]);
        ix.move(v[w].name, static_cast<uint32_t>(r), static_cast<uint32_t>(w));
        use[w] = use[r];
      }
      ++w;
    }
    v.erase(v.begin() + static_cast<long>(w), v.end());
    use.resize(w);
  }

  // Commits the batch: removed objects leave their vectors.
  // What the batch added, per table, for the jump-graph check (null: not tracked, e.g. a table
  // added or removed; positions of tables would not be the batch's).
  std::optional<std::vector<GraphChanges>> graph_changes() const {
    std::vector<GraphChanges> out(tx_.work.tables.size());
    for (const auto& u : log_) {
      if (u.kind == Undo::TableAdded || u.kind == Undo::TableRemoved || u.kind == Undo::TablesCleared) return std::nullopt;
      if (u.t >= out.size()) return std::nullopt;
      GraphChanges& c = out[u.t];
      switch (u.kind) {
        case Undo::RuleInserted:
        case Undo::RuleReplaced: c.rule_chains.push_back(u.o); break;
        case Undo::ElementAdded: c.elements.push_back({u.o, u.i}); break;
        case Undo::ChainAdded: c.new_chains.push_back(u.o); break;
        case Undo::ChainRemoved: c.removed_chains.push_back(u.o); break;
        default: break;
      }
    }
    return out;
  }

  void commit() {
    log_.clear();
    renewed_.clear();
    for (auto& t : tx_.work.tables) {
      for (const auto& [th, sh] : dirty_sets_) {
        if (th != t.handle) continue;
        for (auto& s : t.sets) {
          if (s.handle != sh || s.removed) continue;
          size_t w = 0;
          for (size_t r = 0; r < s.elements.size(); ++r) {
            if (s.elements[r].removed) continue;
            if (w != r) s.elements[w] = std::move(s.elements[r]);
            ++w;
          }
          s.elements.erase(s.elements.begin() + static_cast<long>(w), s.elements.end());
          s.index.p.reset();
        }
      }
      if (std::find(dirty_tables_.begin(), dirty_tables_.end(), t.handle) != dirty_tables_.end()) {
        // the index's names and use counts move with their objects
        TableIndex& ix = table_index(t);
        compact(t.chains, ix.chains, ix.chain_use);
        compact(t.sets, ix.sets, ix.set_use);
        ix.n_chains = t.chains.size();
        ix.n_sets = t.sets.size();
      }
    }
  }

 private:
  // Rules this batch removed (table, chain, handle): the kernel still finds them by handle.
  std::set<std::tuple<uint64_t, uint64_t, uint64_t>> removed_;  // (table handle, chain handle, rule handle)
  void release_rule(Table& t, const Chain& chain, const Rule& r) {
    count_rule_refs(t, r, -1);
    removed_.insert({t.handle, chain.handle, r.handle});
  }

  void kernel_one(const Command& c, size_t idx) {
    switch (c.obj) {
      case Obj::Ruleset: {
        clear_tables();
        return;
      }
      case Obj::Table: return k_table(c);
      case Obj::Chain: return k_chain(c);
      case Obj::Rule: return k_rule(c, idx);
      case Obj::Set:
      case Obj::Map: return k_set(c);
      case Obj::Element: return k_element(c);
      case Obj::Flowtable: return k_flowtable(c);
    }
  }

  void k_table(const Command& c) {
    Table* t = ktable(c);
    switch (c.verb) {
      case Verb::Add:
      case Verb::Create:
        if (t) {
          if (c.verb == Verb::Create) return kerr(c, Errno::Exist, &c.table_loc);
          if (!c.table_flags.empty() && c.table_flags != t->flags) {
            refuse(c.loc, "a change of table flags");
          }
          return;
        }
        {
          Table nt;
          nt.family = c.family;
          nt.name = c.table;
          nt.handle = ++tx_.work.next_table_handle;
          nt.comment = c.table_comment;
          nt.flags = c.table_flags;
          add_table(std::move(nt));
        }
        return;
      case Verb::Delete:
        if (!t) return kerr(c, Errno::Noent, &c.table_loc);
        erase_table(*t);
        return;
      case Verb::Flush:
        if (!t) return kerr(c, Errno::Noent, &c.table_loc);
        for (auto& ch : t->chains) {
          if (ch.removed) continue;
          for (const auto& r : ch.rules) release_rule(*t, ch, r);
          clear_rules(*t, ch);
        }
        return;
      default: return;
    }
  }

  // The chain a command names (Table::find_chain), first tried at the position of the chain the
  // last command named: commands on one chain come in runs (add, flush, its rules), and a live
  // chain is the only one of its name, so the hint is checked by name.
  Chain* command_chain(Table& t, std::string_view n) {
    // The chain of the last command, or the one after it: commands come in runs on one chain,
    // and a full transaction names the chains in the order the table holds them. (A live chain
    // is the only one of its name: a hint checked by name is what the index would find.)
    if (hint_table_ == &t)
      for (size_t p = hint_chain_; p < t.chains.size() && p <= hint_chain_ + 1; ++p) {
        Chain& h = t.chains[p];
        if (!h.removed && h.name == n) {
          hint_chain_ = p;
          return &h;
        }
      }
    Chain* found = t.find_chain(n);
    if (found) {
      hint_table_ = &t;
      hint_chain_ = static_cast<size_t>(found - t.chains.data());
    }
    return found;
  }
  const Table* hint_table_ = nullptr;
  size_t hint_chain_ = 0;

  void k_chain(const Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    if (c.verb == Verb::Delete && c.handle) {
      Chain* found = nullptr;
      for (auto& ch : t->chains)
        if (!ch.removed && ch.handle == *c.handle) found = &ch;
      if (!found) return kerr(c, Errno::Noent, &c.handle_loc);
      return delete_chain(c, *t, *found, c.handle_loc);
    }
    Chain* ch = command_chain(*t, c.name);
    const ChainSpec& spec = *c.chain;
    switch (c.verb) {
      case Verb::Add:
      case Verb::Create: {
        if (ch) {
          if (c.verb == Verb::Create) return kerr(c, Errno::Exist, &c.name_loc);
          if (!spec.has_hook) return;
          if (!ch->base) return kerr(c, Errno::Exist, &c.name_loc);
          if (ch->hook != spec.hook || ch->priority != spec.priority) return kerr(c, Errno::Notsupp, nullptr);
          if (ch->type != spec.type) return kerr(c, Errno::Exist, &c.name_loc);
          if (spec.policy) set_policy(*t, *ch, *spec.policy);
          return;
        }
        Chain nc;
        nc.name = c.name;
        nc.handle = ++t->next_handle;
        if (spec.has_hook) {
          nc.base = true;
          nc.type = spec.type;
          nc.hook = spec.hook;
          nc.priority = spec.priority;
          nc.policy = spec.policy.value_or("accept");
        } else if (spec.policy) {
          refuse(c.loc, "a policy on a regular chain");
          return;
        }
        nc.comment = spec.comment;
        add_chain(*t, std::move(nc));
        return;
      }
      case Verb::Delete:
        if (!ch) return kerr(c, Errno::Noent, &c.name_loc);
        return delete_chain(c, *t, *ch, c.name_loc);
      case Verb::Flush:
        if (!ch) return kerr(c, Errno::Noent, &c.name_loc);
        if (streaming_ && !ch->rules.empty()) stream_stop_ = true;
        if (ch->keeping) end_keeping(*t, *ch);  // a second flush: the first one's rest first
        else if (may_keep(*ch)) return start_keeping(*t, *ch);
        for (const auto& r : ch->rules) release_rule(*t, *ch, r);
        clear_rules(*t, *ch);
        return;
      default: return;
    }
  }

  // ---------------------------------------------------------------- rules kept through a flush
  // kube-proxy's full syncs flush every chain and add its rules again, and almost every chain
  // comes out as it was: applying a 10,000-Service full transaction released and re-added
  // 300,000 rules (use counts, undo log, jump-graph changes) to leave them as they were. So a
  // flush is deferred: the chain keeps its rules, and each `add rule` that adds the chain's
  // next rule again (the same text and comment, so the same parse) only gives it the handle
  // the new rule would get (anonymous sets first, as k_rule counts them). The first other
  // command on the chain (another rule, another flush), or the end of the batch, ends this:
  // the rules not added again are released then (end_keeping), and that command goes on as
  // usual. The result (state, handle generators, errors, messages) is the flush's, because
  // nothing between the flush and the release can tell the two apart:
  //  * the rules kept are equal to the rules the flush and the adds make, with their handles;
  //  * the use counts the deferred release holds back are only read when an object is
  //    deleted, and no chain, set or flowtable a kept chain's rules reference, nor the chain,
  //    is deleted anywhere in the transaction (may_keep);
  //  * an `add rule` again of a rule the state holds cannot fail: what the rule references
  //    exists while the rule does (a state's references resolve: apply_script keeps it so),
  //    and a chain does not become a base chain;
  //  * the transaction names no rule by handle or index and replaces none (the handles the
  //    flush retires, and positions, are never looked up), and deletes or flushes no table
  //    nor the ruleset (keeping_allowed).
  // The jump-graph check sees no change in a kept chain (rules only leave it at the release,
  // and removals cannot make a loop or a refused statement reachable).
  // nft's evaluation runs before all this, over every command, unchanged.
  static bool keeping_allowed(const CommandList& cmds, std::vector<std::string_view>* deleted) {
    deleted->clear();
    for (const auto& c : cmds) {
      if (c.handle || c.index || !c.block.empty() || c.verb == Verb::Replace || c.obj == Obj::Ruleset) return false;
      bool remove = c.verb == Verb::Delete || c.verb == Verb::Destroy;
      if (c.obj == Obj::Table && (remove || c.verb == Verb::Flush)) return false;
      if (remove && c.obj != Obj::Rule && c.obj != Obj::Element) deleted->push_back(c.name);
    }
    // (names are compared one by one below: a transaction that deletes many objects is
    // applied as written)
    return deleted->size() <= 16;
  }
  bool keep_allowed_ = false;
  bool streaming_ = false, stream_stop_ = false;  // (stream())
  std::vector<std::string_view> deleted_names_;        // chains, sets, flowtables the transaction deletes
  std::vector<std::pair<uint32_t, uint32_t>> keeping_;  // (table, chain) positions with a deferred flush
  bool deleted_name(std::string_view n) const {
    return std::find(deleted_names_.begin(), deleted_names_.end(), n) != deleted_names_.end();
  }
  bool may_keep(const Chain& ch) const {
    if (!keep_allowed_ || ch.rules.empty() || deleted_name(ch.name)) return false;
    if (!deleted_names_.empty())
      for (const auto& r : ch.rules) {
        for (const auto* names : {&r.refs().chains, &r.refs().sets, &r.refs().dynset, &r.refs().flowtables})
          for (const auto& n : *names)
            if (deleted_name(n)) return false;
      }
    return true;
  }
  void start_keeping(Table& t, Chain& ch) {
    if (logged(t)) {
      // (the old handles in one vector for the whole batch: a full transaction defers 133,000
      // flushes, a vector each was an allocation each)
      log(Undo::HandlesRenewed, tpos(t), cpos(t, ch), static_cast<uint32_t>(renewed_.size()));
      log_.back().size = static_cast<uint32_t>(ch.rules.size());
      for (const auto& r : ch.rules) renewed_.push_back(r.handle);
    }
    ch.keeping = 1;
    keeping_.push_back({tpos(t), cpos(t, ch)});
  }
  // The `add rule` c on a chain that keeps its rules: true when it adds the next one again.
  bool keep_rule(Table& t, Chain& ch, const Command& c) {
    size_t j = ch.keeping - 1;
    if (c.verb != Verb::Add || j >= ch.rules.size()) return false;
    Rule& r = ch.rules[j];
    const ParsedRule& pr = *c.rule;
    const RuleBody& said = *pr.body;
    if (pr.body != r.body &&
        (said.text != r.text() || said.comment != r.comment()))
      return false;
    t.next_handle += pr.anon_sets.size();
    r.handle = ++t.next_handle;
    for (const auto& d : r.refs().dynset)
      if (Set* s = t.find_set(d); s && s->size == 0) set_size(t, *s, 65535, true);
    ++ch.keeping;
    ++rules_kept;
    return true;
  }
  // The rest of a deferred flush: the rules not added again are released.
  void end_keeping(Table& t, Chain& ch) {
    size_t n = ch.keeping - 1;
    ch.keeping = 0;
    if (n >= ch.rules.size()) return;
    std::vector<Rule> gone(std::make_move_iterator(ch.rules.begin() + static_cast<long>(n)),
                           std::make_move_iterator(ch.rules.end()));
    ch.rules.erase(ch.rules.begin() + static_cast<long>(n), ch.rules.end());
    for (const auto& r : gone) count_rule_refs(t, r, -1);
    if (logged(t)) {
      log(Undo::RulesTruncated, tpos(t), cpos(t, ch), static_cast<uint32_t>(n));
      log_.back().v = std::move(gone);
    }
  }

  void delete_chain(const Command& c, Table& t, Chain& ch, const Loc& loc) {
    // The kernel removes the chain's rules first, then refuses a chain something still
    // references (EBUSY): the removals stay in the batch. It takes the count of its rules off
    // the chain's use, not what those rules reference: a rule of the chain whose anonymous
    // vmap goes to the chain itself still counts (nf_tables_delchain's local `use`; long
    // differential, seed 4242 pair 3744).
    int self = 0;
    for (const auto& r : ch.rules) self += static_cast<int>(std::count(r.refs().chains.begin(), r.refs().chains.end(), ch.name));
    for (const auto& r : ch.rules) release_rule(t, ch, r);
    clear_rules(t, ch);
    int use = use_at(table_index(t).chain_use, cpos(t, ch)) + self;
    if (use > 0) return kerr(c, Errno::Busy, &loc);
    remove_chain(t, ch);
  }

  void k_rule(const Command& c, size_t idx) {
    if (!keeping_.empty())
      if (Table* t = ktable(c))
        if (Chain* ch = command_chain(*t, c.name); ch && ch->keeping) {
          if (keep_rule(*t, *ch, c)) return;
          end_keeping(*t, *ch);
        }
    Table* t = ktable(c);
    const ParsedRule& pr = *c.rule;
    // anonymous sets come first (one message each)
    if (c.verb != Verb::Delete) {
      for (const auto& as : pr.anon_sets) {
        if (!t) {
          // the set's message, then its elements' message, each without a hint
          err(c.table_loc, std::string("Could not process rule: ") + strerr(Errno::Noent));
          err(moved(c, as.loc), std::string("Could not process rule: ") + strerr(Errno::Noent));
          continue;
        }
        ++t->next_handle;
        for (const auto& [chain, at] : as.chain_values) {
          const Loc loc = moved(c, at);
          Chain* target = t->find_chain(chain);
          if (!target) {
            kerr_elem(c, Errno::Noent, loc);
            break;
          }
          if (target->base) {
            refuse(loc, "a jump to a base chain");
            break;
          }
        }
      }
    }
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    Chain* ch = command_chain(*t, c.name);
    if (!ch) return kerr(c, Errno::Noent, &c.name_loc);
    auto find_handle = [&](uint64_t h) -> long {
      for (size_t i = 0; i < ch->rules.size(); ++i)
        if (ch->rules[i].handle == h) return static_cast<long>(i);
      return -1;
    };
    if (c.verb == Verb::Delete) {
      long i = find_handle(*c.handle);
      // a rule this batch already removed is still found, but cannot be deactivated twice:
      // ENOENT without a bad attribute (the whole command)
      if (i < 0 && removed_.count({t->handle, ch->handle, *c.handle})) return kerr(c, Errno::Noent, nullptr);
      if (i < 0) return kerr(c, Errno::Noent, &c.handle_loc);
      release_rule(*t, *ch, ch->rules[i]);
      erase_rule(*t, *ch, static_cast<size_t>(i));
      return;
    }
    long at = -1;  // the rule the new one is placed against
    uint64_t handle = 0;
    if (c.verb == Verb::Replace) {
      at = find_handle(*c.handle);
      if (at < 0 && removed_.count({t->handle, ch->handle, *c.handle})) {
        refuse(c.loc, "replace of a rule this transaction removed");
        return;
      }
      if (at < 0) return kerr(c, Errno::Noent, &c.handle_loc);
      handle = *c.handle;
    } else {
      handle = ++t->next_handle;
      const RulePos& p = pos_[idx];
      if (p.kind == RulePos::None && c.handle) {
        // nft did not look the handle up itself: a `replace` elsewhere in the transaction sets
        // its cache flags to "full", which drops the update bit (nft_cache_evaluate), so
        // `handle N` goes to the kernel as the position (an `index`, which only nft's cache
        // translates, is dropped: the rule goes to the start or the end). The kernel finds the
        // rule in the chain or refuses the command as a whole (seen with nft 1.0.6: long
        // differential seed 20261121 pairs 9354 and 9478).
        at = find_handle(*c.handle);
        if (at < 0 && removed_.count({t->handle, ch->handle, *c.handle})) {
          refuse(c.loc, "a position on a rule this transaction removed");
          return;
        }
        if (at < 0) return kerr(c, Errno::Noent, nullptr);
      } else if (p.kind == RulePos::Handle) {
        at = find_handle(p.id);
        if (at < 0 && removed_.count({t->handle, ch->handle, p.id})) {
          refuse(c.loc, "a position on a rule this transaction removed");
          return;
        }
        if (at < 0) return kerr(c, Errno::Noent, c.index ? &c.index_loc : &c.handle_loc);
      } else if (p.kind == RulePos::TxId) {
        for (size_t i = 0; i < ch->rules.size(); ++i)
          if (ch->rules[i].tx_id == p.id) at = static_cast<long>(i);
        if (at < 0) {
          refuse(c.loc, "a position on a rule this transaction removed");
          return;
        }
      }
    }
    // expressions: jump/goto targets must exist
    for (const auto& ref : pr.ref_locs) {
      const Loc loc = moved(c, ref.loc);
      if (ref.kind == ParsedRule::Ref::Chain && ref.name == c.name) {
        refuse(loc, "a rule that jumps to its own chain (a loop: the kernel's EMLINK)");
        return;
      }
      if (ref.kind == ParsedRule::Ref::Chain) {
        Chain* target = t->find_chain(ref.name);
        if (!target) return kerr(c, Errno::Noent, &loc);
        if (target->base) {
          refuse(loc, "a jump to a base chain");
          return;
        }
      } else if (ref.kind == ParsedRule::Ref::Flowtable) {
        if (!t->find_flowtable(ref.name)) return kerr(c, Errno::Noent, &loc);
      } else {
        if (!t->find_set(ref.name)) return kerr(c, Errno::Noent, &loc);
      }
    }
    // (the rule shares the parse's body: the command is left as it is)
    Rule r;
    r.handle = handle;
    r.body = pr.body;
    r.tx_id = txid_[idx];
    count_rule_refs(*t, r, +1);
    for (const auto& d : r.refs().dynset)
      if (Set* s = t->find_set(d); s && s->size == 0) set_size(*t, *s, 65535, true);
    if (c.verb == Verb::Replace) {
      release_rule(*t, *ch, ch->rules[at]);
      replace_rule(*t, *ch, static_cast<size_t>(at), std::move(r));
    } else if (c.verb == Verb::Insert) {
      insert_rule(*t, *ch, at >= 0 ? static_cast<size_t>(at) : 0, std::move(r));
    } else {
      insert_rule(*t, *ch, at >= 0 ? static_cast<size_t>(at) + 1 : ch->rules.size(), std::move(r));
    }
  }

  void kerr_elem(const Command& c, Errno e, const Loc& l) { err(l, std::string("Could not process rule: ") + strerr(e)); }

  void k_set(const Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    if (c.verb == Verb::Delete && c.handle) {
      Set* found = nullptr;
      for (auto& s : t->sets)
        if (!s.removed && s.handle == *c.handle) found = &s;
      if (!found) return kerr(c, Errno::Noent, &c.handle_loc);
      return delete_set(c, *t, *found, c.handle_loc);
    }
    Set* s = t->find_set(c.name);
    const SetSpec& spec = *c.set;
    switch (c.verb) {
      case Verb::Add:
      case Verb::Create: {
        Set ns;
        ns.name = c.name;
        ns.is_map = spec.is_map;
        ns.key_names = spec.key_names;
        for (const auto& k : spec.key_names) ns.key.push_back(dtype_from_name(k));
        ns.data_name = spec.data_name;
        ns.data = spec.is_map ? dtype_from_name(spec.data_name) : Dtype::Unknown;
        static const char* order[] = {"constant", "dynamic", "interval", "timeout"};
        for (const char* f : order)
          if (std::find(spec.flags.begin(), spec.flags.end(), f) != spec.flags.end() ||
              (std::string_view(f) == "timeout" && spec.timeout_ms && *spec.timeout_ms))
            ns.flags.push_back(f);
        ns.timeout_ms = spec.timeout_ms.value_or(0);
        ns.gc_interval_ms = spec.gc_interval_ms.value_or(0);
        ns.size = spec.size.value_or(0);
        ns.policy = spec.policy && *spec.policy == "memory" ? "memory" : "";
        ns.comment = spec.comment;
        if (s) {
          if (c.verb == Verb::Create) return kerr(c, Errno::Exist, &c.name_loc);
          if (s->is_map != ns.is_map || s->key != ns.key || s->data != ns.data || s->flags != ns.flags)
            return kerr(c, Errno::Exist, &c.name_loc);
          if (s->timeout_ms != ns.timeout_ms || s->gc_interval_ms != ns.gc_interval_ms ||
              (ns.size && s->size != ns.size) || s->policy != ns.policy) {
            refuse(c.loc, "an add of an existing set with other timeout, gc-interval, size or policy");
          }
          return;
        }
        if (ns.has_flag("interval")) {
          refuse(c.loc, "interval sets");
          return;
        }
        ns.handle = ++t->next_handle;
        add_set(*t, std::move(ns));
        return;
      }
      case Verb::Delete:
        if (!s) return kerr(c, Errno::Noent, &c.name_loc);
        return delete_set(c, *t, *s, c.name_loc);
      case Verb::Flush:
        if (!s) return kerr(c, Errno::Noent, &c.name_loc);
        for (const auto& e : s->elements)
          if (!e.removed) count_elem_refs(*t, e, -1);
        clear_elements(*t, *s);
        return;
      default: return;
    }
  }

  void delete_set(const Command& c, Table& t, Set& s, const Loc& loc) {
    if (use_at(table_index(t).set_use, spos(t, s)) > 0) return kerr(c, Errno::Busy, &loc);
    for (const auto& e : s.elements)
      if (!e.removed) count_elem_refs(t, e, -1);
    remove_set(t, s);
  }

  void k_element(const Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    Set* s = t->find_set(c.name);
    if (!s) return kerr(c, Errno::Noent, &c.name_loc);
    const bool interval = s->has_flag("interval");
    for (auto& spec : c.elements) {
      Element e;
      auto bad = make_element(*s, spec, &e, c.verb != Verb::Delete);
      if (bad && !bad->empty()) {
        refuse(spec.key_loc, *bad);
        return;
      }
      if (bad) return kerr_elem(c, Errno::Inval, spec.key_loc);  // a map element without a value
      std::string key = elem_key(e.key);
      SetIndex& ix = set_index(*s);
      auto it = ix.elems.find(key);
      if (c.verb == Verb::Delete) {
        if (it == ix.elems.end()) return kerr_elem(c, Errno::Noent, spec.key_loc);
        count_elem_refs(*t, s->elements[it->second], -1);
        remove_element(*t, *s, it);
        continue;
      }
      if (interval) {
        refuse(spec.key_loc, "elements of interval sets");
        return;
      }
      // the value (a verdict's chain) is read before the key is looked up
      if (auto ch = verdict_chain(e.value)) {
        Chain* target = t->find_chain(*ch);
        if (!target) return kerr_elem(c, Errno::Noent, spec.key_loc);
        if (target->base) {
          refuse(spec.key_loc, "a map element that jumps to a base chain");
          return;
        }
      }
      if (it != ix.elems.end()) {
        const Element& x = s->elements[it->second];
        if (c.verb == Verb::Create) return kerr_elem(c, Errno::Exist, spec.key_loc);
        if (s->is_map && x.value != e.value) return kerr_elem(c, Errno::Exist, spec.key_loc);
        continue;
      }
      count_elem_refs(*t, e, +1);
      add_element(*t, *s, std::move(e), std::move(key));
    }
  }

  void k_flowtable(const Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    if (c.verb == Verb::Delete && c.handle) {
      for (size_t i = 0; i < t->flowtables.size(); ++i)
        if (t->flowtables[i].handle == *c.handle) {
          if (use_of(table_index(*t).ft_use, t->flowtables[i].name) > 0) return kerr(c, Errno::Busy, &c.handle_loc);
          erase_flowtable(*t, i);
          return;
        }
      return kerr(c, Errno::Noent, &c.handle_loc);
    }
    Flowtable* f = t->find_flowtable(c.name);
    switch (c.verb) {
      case Verb::Add:
      case Verb::Create:
        if (f) {
          if (c.verb == Verb::Create) return kerr(c, Errno::Exist, &c.name_loc);
          return;
        } else {
          Flowtable nf;
          nf.name = c.name;
          nf.handle = ++t->next_handle;
          nf.priority = c.flowtable->priority.value_or(0);
          nf.devices = c.flowtable->devices;
          add_flowtable(*t, std::move(nf));
        }
        return;
      case Verb::Delete:
        if (!f) return kerr(c, Errno::Noent, &c.name_loc);
        if (use_of(table_index(*t).ft_use, c.name) > 0) return kerr(c, Errno::Busy, &c.name_loc);
        erase_flowtable(*t, static_cast<size_t>(f - t->flowtables.data()));
        return;
      default: return;
    }
  }
};

std::string line_of(std::string_view text, int line) {
  int l = 1;
  size_t b = 0, prev = 0;
  while (l < line) {
    size_t n = text.find('\n', b);
    if (n == std::string_view::npos) return "";
    prev = b;
    b = n + 1;
    ++l;
  }
  // The end of a file that ends with a line break: nft prints the last line there.
  if (b == text.size() && line > 1) b = prev;
  size_t e = text.find('\n', b);
  return std::string(text.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
}

// The expanded commands (table blocks and sets with elements split as nft_cmd_expand does).
// The parsed commands are moved, not copied.
std::vector<Command> expand(std::vector<Command>& cmds) {
  // Nothing to expand (no table block, no set with elements): the commands as they are.
  bool any = false;
  for (const auto& c : cmds)
    if (!c.block.empty() || ((c.obj == Obj::Set || c.obj == Obj::Map) && c.set->has_elements && !c.set->elements.empty())) {
      any = true;
      break;
    }
  if (!any) return std::move(cmds);
  size_t n = 0;
  for (const auto& c : cmds) n += 2 + c.block.size();
  std::vector<Command> out;
  out.reserve(n);
  auto push = [&](Command&& c) {
    bool set_elems = (c.obj == Obj::Set || c.obj == Obj::Map) && c.set->has_elements && !c.set->elements.empty();
    std::vector<ElemSpec> elems;
    if (set_elems) elems = std::move(c.set.mut().elements);
    Command e;
    if (set_elems) {
      e.verb = Verb::Add;
      e.obj = Obj::Element;
      e.family = c.family;
      e.table = c.table;
      e.table_loc = c.table_loc;
      e.name = c.name;
      e.name_loc = c.name_loc;
      e.loc = c.loc;
      e.elements = std::move(elems);
    }
    out.push_back(std::move(c));
    if (set_elems) out.push_back(std::move(e));
  };
  for (auto& c : cmds) {
    std::vector<Command> block = std::move(c.block);
    c.block.clear();
    push(std::move(c));
    for (auto& b : block) push(std::move(b));
  }
  return out;
}

NftError make_error(const Err& e, std::string_view file, std::string_view text) {
  NftError n;
  n.file = std::string(file);
  n.line = e.loc.line;
  n.col_begin = e.loc.col_begin;
  n.col_end = e.loc.col_end;
  n.message = e.message;
  n.not_modelled = e.not_modelled;
  n.source_line = line_of(text, e.loc.line);
  if (e.mark.line == e.loc.line) {
    n.mark_begin = e.mark.col_begin;
    n.mark_end = e.mark.col_end;
  }
  return n;
}

}  // namespace

namespace {
ApplyResult parse_failed(const ParseFailure& f, std::string_view file_name, std::string_view text) {
  ApplyResult res;
  Err e{f.loc, f.not_modelled ? "not modelled by kpc: " + f.message : f.message, true, {}};
  if (!f.not_modelled) e.not_modelled = false;
  res.errors.push_back(make_error(e, file_name, text));
  res.error = res.errors.front();
  return res;
}
// A copy of the state made while the commands are evaluated, and what to do with it while the
// kernel's batch runs (apply_prepared_forking).
struct Fork {
  const std::function<void(NftState&)>& with_copy;
};
ApplyResult apply_commands(NftState& state, const CommandList& cmds, std::string_view text,
                           std::string_view file_name, bool listing, bool defer_flushes = true,
                           const Fork* fork = nullptr);
ApplyResult finish_commands(Applier& a, NftState& state, const CommandList& cmds, bool eval_ok,
                            std::string_view text, std::string_view file_name, bool kernel_done = false);
}  // namespace

ApplyResult apply_impl(NftState& state, std::string_view text, std::string_view file_name, bool listing,
                       std::vector<Command>* expanded, bool defer_flushes) {
  ApplyResult res;
  std::vector<Command> cmds;
  {
    std::vector<Command> parsed;
    try {
      parsed = parse_script(text);
    } catch (const ParseFailure& f) {
      return parse_failed(f, file_name, text);
    }
    if (listing)
      for (const auto& c : parsed)
        if (c.obj != Obj::Table || c.verb != Verb::Add || !c.table_block) {
          Err e{c.loc, "not an nft listing: expected 'table FAMILY NAME { ... }'", true, {}};
          res.errors = {make_error(e, file_name, text)};
          res.error = res.errors.front();
          return res;
        }
    cmds = expand(parsed);
  }
  ApplyResult r = apply_commands(state, CommandList(cmds), text, file_name, listing, defer_flushes);
  if (r.ok && expanded) *expanded = std::move(cmds);
  return r;
}

namespace {
// The application of parsed, expanded commands (nft's evaluation, then the kernel's batch).
ApplyResult apply_commands(NftState& state, const CommandList& cmds, std::string_view text,
                           std::string_view file_name, bool listing, bool defer_flushes, const Fork* fork) {
  // The batch is applied to the state itself; an undo log takes it back when it fails.
  Applier a(state, file_name);
  a.listing = listing;
  a.defer_flushes = defer_flushes;
  if (!fork) {
    const bool eval_ok = a.evaluate(cmds);
    return finish_commands(a, state, cmds, eval_ok, text, file_name);
  }
  // Evaluation only reads the state (through its look-up indexes, which are brought up to date
  // first so that no look-up builds one), so the copy is made meanwhile; the copy is then the
  // caller's, on the second thread, while the kernel's batch changes the state.
  for (const auto& t : state.tables) table_index(t);
  NftState copy;
  bool eval_ok = false;
  side_by_side([&] { copy = state; }, [&] { eval_ok = a.evaluate(cmds); });
  ApplyResult res;
  side_by_side([&] { fork->with_copy(copy); },
               [&] { res = finish_commands(a, state, cmds, eval_ok, text, file_name); });
  return res;
}

// apply_commands after the evaluation: the kernel's batch, the checks after it, and the commit
// or the rollback.
ApplyResult finish_commands(Applier& a, NftState& state, const CommandList& cmds, bool eval_ok,
                            std::string_view text, std::string_view file_name, bool kernel_done) {
  ApplyResult res;
  res.operations = cmds.size();
  if (eval_ok && !kernel_done) {
    a.begin();
    a.kernel(cmds);
  }
  res.rules_kept = a.rules_kept;
  auto fail_whole = [&](const Err& e) {
    a.rollback();
    res.errors = {make_error(e, file_name, text)};
    res.error = res.errors.front();
    return res;
  };
  // A refusal anywhere wins: kpc cannot say what nft does with the file.
  for (const auto& e : a.tx_.errors)
    if (e.not_modelled) return fail_whole(e);
  if (eval_ok) {
    // (only a batch with no error so far can commit, and update the graph cache)
    const auto changes = a.graph_changes();
    if (auto bad = check_graphs(state, changes ? &*changes : nullptr, a.tx_.errors.empty())) {
      Err e{Loc{1, 1, 1},
            "not modelled by kpc: " + bad->what +
                (bad->misplaced ? " (the kernel refuses such statements there)" : " (the kernel refuses loops with EMLINK)"),
            true, {}};
      return fail_whole(e);
    }
  }
  if (!a.tx_.errors.empty()) {
    for (const auto& e : a.tx_.errors) res.errors.push_back(make_error(e, file_name, text));
    res.error = res.errors.front();
    if (eval_ok) {
      // Nothing changes, but the kernel's handle generators keep what the batch consumed
      // (and a set keeps the size the kernel gave it for a rule of the batch that updates it).
      uint64_t table_handle = state.next_table_handle;
      std::vector<std::tuple<uint64_t, Family, std::string, uint64_t>> next;  // table handle, family, name, next
      std::vector<std::tuple<uint64_t, uint64_t, std::string, uint32_t>> sizes;  // table, set handle, name, size
      for (const auto& t : state.tables) {
        next.emplace_back(t.handle, t.family, t.name, t.next_handle);
        for (const auto& st : t.sets)
          if (!st.removed && st.size_implied) sizes.emplace_back(t.handle, st.handle, st.name, st.size);
      }
      // A table the batch deleted (or `flush ruleset` cleared) after adding to it: the kernel's
      // generator of that table still counts what the batch consumed before (the differential's
      // pair 1514 of seed 4242: an anonymous vmap's set and its rule, then `delete table`), and
      // its sets keep the sizes a rule of the batch gave them (seed 20268542: `update
      // @cluster-ips` in a new rule, then `delete table`: nft lists the set with size 65535).
      auto keep_counters = [&](const Table& t) {
        next.emplace_back(t.handle, t.family, t.name, t.next_handle);
        for (const auto& st : t.sets)
          if (!st.removed && st.size_implied) sizes.emplace_back(t.handle, st.handle, st.name, st.size);
      };
      for (const auto& u : a.log_) {
        if (u.kind == Applier::Undo::TableRemoved) keep_counters(*std::get<std::unique_ptr<Table>>(u.v));
        else if (u.kind == Applier::Undo::TablesCleared)
          for (const auto& t : std::get<std::vector<Table>>(u.v)) keep_counters(t);
      }
      a.rollback();
      state.next_table_handle = table_handle;
      for (auto& t : state.tables) {
        for (const auto& [h, f, n, nh] : next)
          if (h == t.handle && f == t.family && n == t.name) t.next_handle = std::max(t.next_handle, nh);
        for (const auto& [h, sh, n, size] : sizes) {
          if (h != t.handle) continue;
          if (Set* st = t.find_set(n); st && st->handle == sh && st->size == 0) {
            st->size = size;
            st->size_implied = true;
          }
        }
      }
    }
    return res;
  }
  a.commit();
  if (a.tx_.flags & kUpdate)
    for (auto& t : state.tables)
      for (auto& ch : t.chains)
        for (auto& r : ch.rules) r.tx_id = 0;
  res.ok = true;
  return res;
}

}  // namespace

ApplyResult apply_script(NftState& state, std::string_view text, std::string_view file_name) {
  return apply_impl(state, text, file_name, false, nullptr);
}

ApplyResult apply_script_eager(NftState& state, std::string_view text, std::string_view file_name) {
  return apply_impl(state, text, file_name, false, nullptr, false);
}

struct PreparedScript::Impl {
  std::shared_ptr<const CommandList> cmds;  ///< shared by share() (applying only reads them)
  std::optional<ParseFailure> failure;
};

CommandList::CommandList(const std::vector<Command>& own) {
  at_.reserve(own.size());
  for (const auto& c : own) at_.push_back(&c);
}

void CommandList::push(const Command* c, int moved_by) {
  if (moved_by != 0 && !moving_) {
    moved_.assign(at_.size(), 0);
    moving_ = true;
  }
  at_.push_back(c);
  if (moving_) moved_.push_back(moved_by);
}

namespace {
// A list owning its commands.
std::shared_ptr<const CommandList> owning(std::vector<Command>&& cmds) {
  auto own = std::make_shared<const std::vector<Command>>(std::move(cmds));
  auto list = std::make_shared<CommandList>(*own);
  list->keep(std::move(own));
  return list;
}
}  // namespace

PreparedScript::PreparedScript() = default;
PreparedScript::~PreparedScript() = default;
PreparedScript::PreparedScript(PreparedScript&&) noexcept = default;
PreparedScript& PreparedScript::operator=(PreparedScript&&) noexcept = default;

PreparedScript prepare_script(std::string_view text, ParseThreads threads, size_t split_min) {
  PreparedScript p;
  p.impl_ = std::make_unique<PreparedScript::Impl>();
  std::vector<Command> parsed;
  try {
    parsed = threads == ParseThreads::Two ? parse_script_split(text, split_min) : parse_script(text);
  } catch (const ParseFailure& f) {
    p.impl_->failure = f;
    return p;
  }
  p.impl_->cmds = owning(expand(parsed));
  return p;
}

PreparedScript PreparedScript::share() const {
  PreparedScript p;
  if (impl_) p.impl_ = std::make_unique<Impl>(*impl_);
  return p;
}

// ------------------------------------------------------------------ a parse from another's

namespace {

// A text's lines, and which of them hold whole commands outside braces ("simple" lines): the
// braces before the line are closed, the line's own are balanced, no string is left open and
// no '#' is read (after one, no later line is simple: a comment's braces do not count, a
// word's '#' is not a comment, and kpc does not tell them apart here). A simple line ends in
// a newline (the last line of a text without one ends the command differently).
struct Lines {
  std::vector<std::string_view> text;  // without the newline
  std::vector<bool> simple;
  explicit Lines(std::string_view t) {
    text.reserve(count_line_breaks(t) + 1);
    simple.reserve(text.capacity());
    int depth = 0;
    bool lost = false;  // a '#', an open string or a '}' too many: nothing after is simple
    size_t b = 0;
    while (b < t.size()) {
      size_t e = t.find('\n', b);
      const bool newline = e != std::string_view::npos;
      if (!newline) e = t.size();
      const std::string_view line = t.substr(b, e - b);
      const int start = depth;
      // (most lines have none of the four bytes: one pass the compiler vectorizes tells)
      unsigned char special = 0;
      for (const char c : line) special |= static_cast<unsigned char>((c == '"') | (c == '#') | (c == '{') | (c == '}'));
      for (size_t i = 0; special && i < line.size() && !lost; ++i) {
        const char c = line[i];
        if (c == '"') {
          const size_t q = line.find('"', i + 1);
          if (q == std::string_view::npos) lost = true;
          i = q;
        } else if (c == '#') {
          lost = true;
        } else if (c == '{') {
          ++depth;
        } else if (c == '}' && --depth < 0) {
          lost = true;
        }
      }
      text.push_back(line);
      simple.push_back(!lost && newline && start == 0 && depth == 0);
      b = e + 1;
    }
  }
};

// Every location of a command of one line moved from line `from` to line `to`.
void relocate(Command& c, int from, int to) {
  auto at = [&](Loc& l) {
    if (l.line == from) l.line = to;
  };
  at(c.loc);
  at(c.table_loc);
  at(c.name_loc);
  at(c.handle_loc);
  at(c.index_loc);
  if (c.chain.has_value()) at(c.chain.mut().type_loc);
  if (c.set.has_value()) {
    SetSpec& s = c.set.mut();
    at(s.elements_loc);
    for (auto& e : s.elements) at(e.key_loc);
  }
  for (auto& e : c.elements) at(e.key_loc);
  // (the rule is shared, its locations read moved: Applier::moved)
  for (auto& b : c.block) relocate(b, from, to);
}

}  // namespace

std::vector<Command> CommandList::relocated() const {
  std::vector<Command> out;
  out.reserve(at_.size());
  for (size_t i = 0; i < at_.size(); ++i) {
    out.push_back(*at_[i]);
    if (const int d = moved_by(i)) relocate(out.back(), at_[i]->loc.line, at_[i]->loc.line + d);
  }
  return out;
}

PreparedScript prepare_script_like(std::string_view text, const PreparedScript& like, std::string_view like_text) {
  if (!like.impl_ || like.impl_->failure || !like.impl_->cmds || !like.impl_->cmds->located())
    return prepare_script(text);
  const CommandList& donor = *like.impl_->cmds;
  // The donor's lines and the commands of each (first[l], first[l + 1]): a line's commands are
  // consecutive, expanded ones included. A simple donor line with commands can be donated.
  const Lines dl(like_text);
  const size_t nd = dl.text.size();
  std::vector<uint32_t> first(nd + 1, 0);
  {
    size_t i = 0;
    for (size_t l = 0; l < nd; ++l) {
      first[l] = static_cast<uint32_t>(i);
      while (i < donor.size() && donor[i].loc.line == static_cast<int>(l + 1)) ++i;
    }
    first[nd] = static_cast<uint32_t>(i);
    if (i != donor.size()) return prepare_script(text);  // (a located parse's lines never fall outside its text)
  }
  auto donatable = [&](size_t l) { return dl.simple[l] && first[l] < first[l + 1]; };
  // A line is looked for where the donor's lines went on from the last line found (the two
  // texts are mostly in the same order: kube-proxy's full transactions at two syncs differ by
  // lines here and there), then a few lines further; only when that keeps failing are the
  // donor's lines indexed (a flat table of 600,000 lines costs more than the rest together).
  constexpr size_t kAhead = 64, kMissesBeforeIndex = 1024;
  PosIndex by_line;
  bool indexed = false;
  size_t misses = 0;
  auto line_at = [&](uint32_t l) { return dl.text[l]; };
  auto find = [&](std::string_view line, size_t from) -> uint32_t {
    for (size_t l = from; l < nd && l < from + kAhead; ++l)
      if (dl.text[l].size() == line.size() && dl.text[l] == line && donatable(l)) return static_cast<uint32_t>(l);
    if (!indexed && ++misses > kMissesBeforeIndex) {
      by_line.reserve(nd);
      for (size_t l = 0; l < nd; ++l)
        if (donatable(l)) by_line.emplace(dl.text[l], static_cast<uint32_t>(l), line_at);
      indexed = true;
    }
    return indexed ? by_line.find(line, line_at) : PosIndex::kNone;
  };
  const Lines tl(text);
  PreparedScript p;
  p.impl_ = std::make_unique<PreparedScript::Impl>();
  auto out = std::make_shared<CommandList>();
  out->reserve(donor.size());
  out->keep(like.impl_->cmds);
  size_t part_begin = 0, part_line = 1;  // the pending part: bytes from part_begin, its first line
  size_t off = 0;                          // byte offset of line k
  size_t next_donor = 0;                   // the donor line after the last one found
  try {
    auto flush_part = [&](size_t end) {
      if (end <= part_begin) return;
      std::vector<Command> part = parse_script_part(text.substr(part_begin, end - part_begin), static_cast<int>(part_line));
      auto cmds = std::make_shared<const std::vector<Command>>(expand(part));
      for (const auto& c : *cmds) out->push(&c, 0);
      out->keep(std::move(cmds));
    };
    for (size_t k = 0; k < tl.text.size(); ++k) {
      const size_t next = off + tl.text[k].size() + 1;
      const uint32_t d = tl.simple[k] ? find(tl.text[k], next_donor) : PosIndex::kNone;
      if (d == PosIndex::kNone) {
        off = next;
        continue;
      }
      flush_part(off);
      const int moved = static_cast<int>(k) - static_cast<int>(d);
      for (uint32_t i = first[d]; i < first[d + 1]; ++i) out->push(&donor[i], moved);
      next_donor = d + 1;
      part_begin = off = next;
      part_line = k + 2;
    }
    flush_part(text.size());
  } catch (const ParseFailure&) {
    return prepare_script(text);  // (the failure exactly as a whole parse finds it)
  }
  p.impl_->cmds = std::move(out);
  return p;
}

namespace {
// What a failed batch leaves changed in a state (finish_commands): the handle generators and the
// sizes the kernel gave sets.
struct Counters {
  uint64_t next_table = 0;
  std::vector<uint64_t> next;                       // per table
  std::vector<std::vector<std::pair<uint32_t, bool>>> sizes;  // per table, per set: size, implied
  void save(const NftState& s) {
    next_table = s.next_table_handle;
    for (const auto& t : s.tables) {
      next.push_back(t.next_handle);
      auto& v = sizes.emplace_back();
      v.reserve(t.sets.size());
      for (const auto& st : t.sets) v.emplace_back(st.size, st.size_implied);
    }
  }
  void restore(NftState& s) const {
    s.next_table_handle = next_table;
    // (a rolled-back state has the tables and sets it had, at the same positions)
    for (size_t i = 0; i < s.tables.size() && i < next.size(); ++i) {
      s.tables[i].next_handle = next[i];
      for (size_t k = 0; k < s.tables[i].sets.size() && k < sizes[i].size(); ++k)
        std::tie(s.tables[i].sets[k].size, s.tables[i].sets[k].size_implied) = sizes[i][k];
    }
  }
};

ApplyResult apply_prepared_impl(NftState& state, PreparedScript&& script, std::string_view text,
                                std::string_view file_name, PreparedScript* spent, const Fork* fork) {
  if (!script.impl_ || script.impl_->failure) {
    // (nothing to evaluate: the copy first, as it is without the script)
    if (fork) {
      NftState copy = state;
      fork->with_copy(copy);
    }
    if (!script.impl_) return apply_script(state, text, file_name);
    return parse_failed(*script.impl_->failure, file_name, text);
  }
  std::unique_ptr<PreparedScript::Impl> im = std::move(script.impl_);
  Counters counters;
  if (!im->cmds->located()) counters.save(state);
  ApplyResult r = apply_commands(state, *im->cmds, text, file_name, false, true, fork);
  if (!im->cmds->located() && (!r.ok || !r.errors.empty())) {
    // The errors' locations are where the commands were parsed: the commands again, copied
    // where they are, to the state as it was (the failed batch was rolled back but for the
    // handle generators and set sizes it consumed; a fork's copy has been handed over).
    counters.restore(state);
    const std::vector<Command> here = im->cmds->relocated();
    r = apply_commands(state, CommandList(here), text, file_name, false, true, nullptr);
  }
  if (spent) spent->impl_ = std::move(im);
  return r;
}
}  // namespace

ApplyResult apply_prepared(NftState& state, PreparedScript&& script, std::string_view text,
                           std::string_view file_name, PreparedScript* spent) {
  return apply_prepared_impl(state, std::move(script), text, file_name, spent, nullptr);
}

ApplyResult apply_prepared_forking(NftState& state, PreparedScript&& script, std::string_view text,
                                   std::string_view file_name, const std::function<void(NftState&)>& with_copy,
                                   PreparedScript* spent) {
  const Fork fork{with_copy};
  return apply_prepared_impl(state, std::move(script), text, file_name, spent, &fork);
}

// ------------------------------------------------------------------ applied while parsed

namespace {

// A text cut into parts at line breaks (about `parts` of them, none empty), each part's first line.
struct TextParts {
  std::vector<std::string_view> text;
  std::vector<int> first_line;
  TextParts(std::string_view t, size_t parts) {
    size_t b = 0;
    for (size_t k = 1; k <= parts && b < t.size(); ++k) {
      size_t e = k == parts ? t.size() : std::max(b, t.size() / parts * k);
      if (e < t.size()) {
        e = t.find('\n', e);
        e = e == std::string_view::npos ? t.size() : e + 1;
      }
      if (e <= b) continue;
      text.push_back(t.substr(b, e - b));
      b = e;
    }
    // Each part's first line: its line breaks counted on two threads (a 75 MB text: ~0.04 s).
    std::vector<int> breaks(text.size(), 0);
    auto count = [&](size_t from, size_t to) {
      for (size_t k = from; k < to; ++k) breaks[k] = static_cast<int>(count_line_breaks(text[k]));
    };
    const size_t half = text.size() / 2;
    if (t.size() >= (size_t{1} << 20)) side_by_side([&] { count(half, text.size()); }, [&] { count(0, half); });
    else count(0, text.size());
    int line = 1;
    for (size_t k = 0; k < text.size(); ++k) {
      first_line.push_back(line);
      line += breaks[k];
    }
  }
};

// The parts' parses, made on two threads; the parts in order as they come.
class PartParses {
 public:
  explicit PartParses(const TextParts& p) : parts_(p), cmds_(p.text.size()), state_(p.text.size(), kTodo) {}
  size_t size() const { return cmds_.size(); }
  // Parses the next part nobody took; false when none is left.
  bool parse_next() {
    const size_t k = next_.fetch_add(1);
    if (k >= size()) return false;
    std::shared_ptr<const std::vector<Command>> cmds;
    try {
      std::vector<Command> parsed = parse_script_part(parts_.text[k], parts_.first_line[k]);
      cmds = std::make_shared<const std::vector<Command>>(expand(parsed));
    } catch (const ParseFailure&) {
      // (the whole text is parsed then, for nft's first error)
    } catch (...) {
      settle(k, nullptr);  // (no thread may wait for this part forever)
      throw;
    }
    settle(k, std::move(cmds));
    return true;
  }
  // Part k's commands once parsed (null: it does not parse alone); waits when another thread parses it.
  std::shared_ptr<const std::vector<Command>> wait(size_t k) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return state_[k] != kTodo; });
    return cmds_[k];
  }
  bool ready(size_t k) {
    std::lock_guard<std::mutex> l(m_);
    return state_[k] != kTodo;
  }
  // Every part parsed: the whole text's parse (prepare_script's), or null when a part does not
  // parse alone (then the text is parsed whole).
  std::shared_ptr<const CommandList> whole() {
    auto list = std::make_shared<CommandList>();
    for (size_t k = 0; k < size(); ++k) {
      auto cmds = wait(k);
      if (!cmds) return nullptr;
      for (const auto& c : *cmds) list->push(&c, 0);
      list->keep(std::move(cmds));
    }
    return list;
  }

 private:
  enum State : uint8_t { kTodo, kParsed, kFailed };
  void settle(size_t k, std::shared_ptr<const std::vector<Command>> cmds) {
    {
      std::lock_guard<std::mutex> l(m_);
      cmds_[k] = std::move(cmds);
      state_[k] = cmds_[k] ? kParsed : kFailed;
    }
    cv_.notify_all();
  }
  const TextParts& parts_;
  std::vector<std::shared_ptr<const std::vector<Command>>> cmds_;
  std::vector<State> state_;
  std::atomic<size_t> next_{0};
  std::mutex m_;
  std::condition_variable cv_;
};

// Where a range of cmds[b, n) may end to hold whole collapsed groups when more commands may
// follow: before the run of element commands on one set that ends cmds (it may go on).
size_t whole_groups_end(const CommandList& cmds, size_t b) {
  size_t e = cmds.size();
  auto collapsible = [](const Command& c) { return c.obj == Obj::Element && (c.verb == Verb::Add || c.verb == Verb::Create); };
  if (e == b || !collapsible(cmds[e - 1])) return e;
  const Command& last = cmds[e - 1];
  while (e > b && collapsible(cmds[e - 1]) && cmds[e - 1].verb == last.verb && cmds[e - 1].family == last.family &&
         cmds[e - 1].table == last.table && cmds[e - 1].name == last.name)
    --e;
  return e;
}

}  // namespace

ApplyResult apply_while_parsing(NftState& state, std::string_view text, std::string_view file_name,
                                const std::function<void(const PreparedScript&)>& with_parse, size_t min_size,
                                size_t parts, bool* streamed) {
  if (streamed) *streamed = false;
  if (text.size() < min_size || !state.tables.empty()) {
    // As before: the parse (on two threads), then the application beside with_parse.
    PreparedScript script = prepare_script(text, ParseThreads::Two);
    const PreparedScript parse = script.share();
    ApplyResult r;
    side_by_side([&] { with_parse(parse); }, [&] { r = apply_prepared(state, std::move(script), text, file_name); });
    return r;
  }
  const NftState empty = state;  // (no tables: a cheap copy to start again from)
  const TextParts cut(text, std::max<size_t>(parts, 1));
  PartParses parses(cut);
  PreparedScript whole;  // the parse, once complete (the second thread's)
  CommandList cmds;      // the parts applied so far, in order
  auto applier = std::make_unique<Applier>(state, file_name);
  applier->stream_begin();
  bool streaming = true, parse_failed = false;
  size_t sent = 0;  // cmds[0, sent) evaluated and applied
  side_by_side(
      [&] {
        while (parses.parse_next()) {
        }
        whole.impl_ = std::make_unique<PreparedScript::Impl>();
        if (auto list = parses.whole()) whole.impl_->cmds = std::move(list);
        else whole = prepare_script(text);  // (the failure as a whole parse finds it)
        with_parse(whole);
      },
      [&] {
        for (size_t k = 0; k < parses.size();) {
          if (!parses.ready(k) && parses.parse_next()) continue;  // (help while part k is parsed)
          auto part = parses.wait(k++);
          if (!part) {
            parse_failed = true;
            break;
          }
          for (const auto& c : *part) cmds.push(&c, 0);
          cmds.keep(std::move(part));
          if (!streaming) continue;
          const size_t e = k == parses.size() ? cmds.size() : whole_groups_end(cmds, sent);
          if (e > sent && !applier->stream(cmds, sent, e)) streaming = false;
          sent = e;
        }
      });
  if (parse_failed) {
    state = empty;
    return apply_prepared(state, whole.share(), text, file_name);
  }
  if (!streaming) {
    // The stream stopped (something failed, or the script is not one it takes): the whole
    // script as usual, on the state as it was.
    state = empty;
    return apply_prepared(state, whole.share(), text, file_name);
  }
  if (streamed) *streamed = true;
  return finish_commands(*applier, state, cmds, true, text, file_name, true);
}

}  // namespace kpc::verifier::nft
