// apply_script: nft 1.0.6's evaluation against its cache, then the kernel's batch.
#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "verifier/nft/internal.h"

namespace kpc::verifier::nft {

bool Set::has_flag(std::string_view f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }

namespace {

// A position by name in a vector of named objects. A hit is checked (the object at that
// position has that name); a miss is trusted only when the index is current: the model's
// appends keep it current (index_appended), its erasures mark it stale (index_erased), and
// an index built at another size than the vector's is stale too (a replaced vector).
constexpr size_t kStaleIndex = static_cast<size_t>(-1);

template <class V>
void index_appended(V& v, Table::NameIndex& idx) {
  if (idx.built_size != kStaleIndex && idx.built_size + 1 == v.size()) {
    idx.pos.emplace(v.back().name, v.size() - 1);
    idx.built_size = v.size();
  } else {
    idx.built_size = kStaleIndex;
  }
}
void index_erased(Table::NameIndex& idx) { idx.built_size = kStaleIndex; }

template <class V>
auto* indexed_find(V& v, Table::NameIndex& idx, std::string_view n) {
  using P = decltype(&v[0]);
  if (v.size() < 32) {
    for (auto& x : v)
      if (x.name == n) return static_cast<P>(&x);
    return static_cast<P>(nullptr);
  }
  auto at = [&](std::string_view name) -> P {
    auto it = idx.pos.find(name);
    if (it == idx.pos.end() || it->second >= v.size() || v[it->second].name != name) return nullptr;
    return &v[it->second];
  };
  if (P p = at(n)) return p;
  if (idx.built_size == v.size()) return static_cast<P>(nullptr);
  idx.pos.clear();
  idx.pos.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) idx.pos.emplace(v[i].name, i);
  idx.built_size = v.size();
  return at(n);
}

}  // namespace

Chain* Table::find_chain(std::string_view n) { return indexed_find(chains, chain_index_, n); }
const Chain* Table::find_chain(std::string_view n) const { return indexed_find(chains, chain_index_, n); }
Set* Table::find_set(std::string_view n) { return indexed_find(sets, set_index_, n); }
const Set* Table::find_set(std::string_view n) const { return indexed_find(sets, set_index_, n); }
Flowtable* Table::find_flowtable(std::string_view n) {
  for (auto& f : flowtables)
    if (f.name == n) return &f;
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
    char c = i < static_cast<int>(source_line.size()) ? source_line[i] : ' ';
    marks += c == '\t' ? '\t' : ' ';
  }
  for (int i = std::max(col_begin, 1) - 1; i < end; ++i) marks[i] = '^';
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
  std::vector<unsigned> d((la + 1) * (lb + 1), 0);
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

struct CSet {
  std::string name;
  bool is_map = false;
  std::vector<Dtype> key;
  Dtype data = Dtype::Unknown;
};
struct CRule {
  uint64_t handle = 0, tx_id = 0;
};
struct CChain {
  std::string name;
  std::vector<CRule> rules;
};
struct CTable {
  Family family;
  std::string name;
  std::vector<CChain> chains;
  std::vector<CSet> sets;
  std::vector<std::string> flowtables;
  Table::NameIndex chain_index, set_index;  // as Table's look-ups (indexed_find)
  CChain* chain(std::string_view n) { return indexed_find(chains, chain_index, n); }
  CSet* set(std::string_view n) { return indexed_find(sets, set_index, n); }
};
struct Cache {
  std::vector<CTable> tables;
  CTable* table(Family f, std::string_view n) {
    for (auto& t : tables)
      if (t.family == f && t.name == n) return &t;
    return nullptr;
  }
};

unsigned cache_flags(const std::vector<Command>& cmds) {
  unsigned flags = 0;
  for (const auto& c : cmds) {
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
  }
  return flags;
}

Cache load_cache(const NftState& s, unsigned flags) {
  Cache c;
  if (!(flags & kTable) || (flags & kFlushed)) return c;
  for (const auto& t : s.tables) {
    CTable ct;
    ct.family = t.family;
    ct.name = t.name;
    if (flags & kChain)
      for (const auto& ch : t.chains) {
        CChain cc;
        cc.name = ch.name;
        if (flags & kRule)
          for (const auto& r : ch.rules) cc.rules.push_back({r.handle, 0});
        ct.chains.push_back(std::move(cc));
        index_appended(ct.chains, ct.chain_index);
      }
    if (flags & kSet)
      for (const auto& st : t.sets) {
        ct.sets.push_back({st.name, st.is_map, st.key, st.data});
        index_appended(ct.sets, ct.set_index);
      }
    if (flags & kFlowtable)
      for (const auto& f : t.flowtables) ct.flowtables.push_back(f.name);
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
      int d = misspell_distance(s.name, name);
      if (d >= 0 && d < bestd) {
        bestd = d;
        best = {&t, &s};
      }
    }
  return best;
}
std::pair<const CTable*, const std::string*> flowtable_fuzzy(const Cache& c, std::string_view name) {
  std::pair<const CTable*, const std::string*> best{nullptr, nullptr};
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
  return kENOENT + "; did you mean table \u2018" + t.name + "\u2019 in family " + family_name(t.family) + "?";
}
std::string did_you_mean_chain(const CTable& t, const CChain& ch) {
  return kENOENT + "; did you mean chain \u2018" + ch.name + "\u2019 in table " + family_name(t.family) + " \u2018" +
         t.name + "\u2019?";
}
std::string did_you_mean_set(const CTable& t, const CSet& s) {
  return kENOENT + "; did you mean " + (s.is_map ? "map" : "set") + " \u2018" + s.name + "\u2019 in table " +
         family_name(t.family) + " \u2018" + t.name + "\u2019?";
}

// ------------------------------------------------------------------ errors

struct Err {
  Loc loc;
  std::string message;
  bool not_modelled = false;
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
  std::vector<std::string> warnings;
  uint64_t next_tx_id = 0;
  // derived reference counts, per table (by position in work.tables)
  std::unordered_map<const Table*, std::unordered_map<std::string, int>> chain_use, set_use, ft_use;

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

void count_rule_refs(Tx& tx, const Table& t, const Rule& r, int delta) {
  for (const auto& c : r.refs.chains) tx.chain_use[&t][c] += delta;
  for (const auto& s : r.refs.sets) tx.set_use[&t][s] += delta;
  for (const auto& f : r.refs.flowtables) tx.ft_use[&t][f] += delta;
}
std::optional<std::string> verdict_chain(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  if (v->rfind("goto ", 0) == 0) return v->substr(5);
  if (v->rfind("jump ", 0) == 0) return v->substr(5);
  return std::nullopt;
}
void count_elem_refs(Tx& tx, const Table& t, const Element& e, int delta) {
  if (auto c = verdict_chain(e.value)) tx.chain_use[&t][*c] += delta;
}
void build_uses(Tx& tx) {
  tx.chain_use.clear();
  tx.set_use.clear();
  tx.ft_use.clear();
  for (const auto& t : tx.work.tables) {
    for (const auto& ch : t.chains)
      for (const auto& r : ch.rules) count_rule_refs(tx, t, r, +1);
    for (const auto& s : t.sets)
      for (const auto& e : s.elements) count_elem_refs(tx, t, e, +1);
  }
}

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

class Applier {
 public:
  Applier(NftState& work, std::string_view file) : tx_(work), file_(file) {}

  // Evaluation (nft userspace). Returns false on errors (collected).
  bool evaluate(std::vector<Command>& cmds, size_t n_expanded) {
    tx_.flags = cache_flags(cmds);
    tx_.cache = load_cache(tx_.work, tx_.flags);
    pos_.assign(n_expanded, RulePos{});
    txid_.assign(n_expanded, 0);
    int nerrs = 0;
    for (size_t i = 0; i < cmds.size(); ++i) {
      if (!eval_one(cmds[i], cmds[i].seq)) {
        if (++nerrs == 10) break;
      }
    }
    return nerrs == 0;
  }

  // The kernel's batch: every message applied in order; failures recorded (the batch goes on,
  // as nfnetlink does, so that every error is reported).
  void kernel(std::vector<Command>& cmds) {
    build_uses(tx_);
    for (size_t i = 0; i < cmds.size(); ++i) kernel_one(cmds[i], i);
  }

  Tx tx_;
  std::string file_;
  bool listing = false;
  std::vector<RulePos> pos_;
  std::vector<uint64_t> txid_;
  std::vector<std::pair<const Table*, uint64_t>> counters_;  // unused

 private:
  void err(const Loc& l, std::string msg, bool not_modelled = false) {
    tx_.errors.push_back({l, std::move(msg), not_modelled});
  }
  bool refuse(const Loc& l, const std::string& what) {
    err(l, "not modelled by kpc: " + what, true);
    return false;
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

  bool eval_one(Command& c, size_t idx) {
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
          if (!t->chain(c.name)) {
            t->chains.push_back(CChain{c.name, {}});
            index_appended(t->chains, t->chain_index);
          }
          if (c.chain.has_hook && !modelled_hook(c.family, c.chain.type, c.chain.hook))
            return refuse(c.loc, "base chain type '" + c.chain.type + "' on hook '" + c.chain.hook + "'");
          if (c.chain.has_hook && c.chain.type == "nat" && c.chain.priority <= -200)
            return refuse(c.loc, "a nat chain at priority <= -200");
          if (c.chain.device) return refuse(c.loc, "a chain device");
        } else if (c.verb == Verb::Delete) {
          if (CTable* t = tx_.cache.table(c.family, c.table)) {
            auto& v = t->chains;
            for (size_t i = 0; i < v.size(); ++i)
              if (!c.name.empty() && v[i].name == c.name) {
                v.erase(v.begin() + i);
                break;
              }
            index_erased(t->chain_index);
          }
        }
        return true;
      }
      case Obj::Set:
      case Obj::Map: {
        if (c.verb == Verb::Add || c.verb == Verb::Create) {
          CTable* t = tx_.cache.table(c.family, c.table);
          if (!t) return table_not_found(c);
          CSet cs{c.name, c.set.is_map, {}, Dtype::Unknown};
          for (const auto& k : c.set.key_names) {
            Dtype d = dtype_from_name(k);
            if (d == Dtype::Unknown || d == Dtype::Verdict) return refuse(c.loc, "set key type '" + k + "'");
            cs.key.push_back(d);
          }
          if (c.set.is_map) {
            cs.data = dtype_from_name(c.set.data_name);
            if (cs.data == Dtype::Unknown) return refuse(c.loc, "map data type '" + c.set.data_name + "'");
          }
          if (c.set.auto_merge) return refuse(c.loc, "auto-merge");
          if (std::find(c.set.flags.begin(), c.set.flags.end(), "interval") != c.set.flags.end() && c.set.key_names.size() > 1)
            return refuse(c.loc, "interval sets of concatenations");
          if (!t->set(c.name)) {
            t->sets.push_back(cs);
            index_appended(t->sets, t->set_index);
          }
        } else if (c.verb == Verb::Delete) {
          if (CTable* t = tx_.cache.table(c.family, c.table)) {
            auto& v = t->sets;
            for (size_t i = 0; i < v.size(); ++i)
              if (!c.name.empty() && v[i].name == c.name) {
                v.erase(v.begin() + i);
                break;
              }
            index_erased(t->set_index);
          }
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
      case Obj::Element: {
        CTable* t = tx_.cache.table(c.family, c.table);
        if (!t) return table_not_found(c);
        CSet* s = t->set(c.name);
        if (!s) return set_not_found(c.name_loc, c.name);
        for (const auto& e : c.elements) {
          if (e.key.size() != s->key.size()) return refuse(e.key_loc, "an element whose key does not match the set's type");
          for (size_t k = 0; k < e.key.size(); ++k) {
            std::string a, b;
            if (!canonical_value(s->key[k], e.key[k], &a, &b))
              return refuse(e.key_loc, "element key '" + e.key[k] + "' as " + dtype_name(s->key[k]));
          }
          if (e.value && !s->is_map) return refuse(e.key_loc, "a value for an element of a set");
          if (e.value && c.verb == Verb::Delete) return refuse(e.key_loc, "a value in a delete element");
          if ((e.timeout || e.expires) && !listing) return refuse(e.key_loc, "element timeouts (their expiry depends on time)");
        }
        return true;
      }
      case Obj::Rule: {
        if (c.verb == Verb::Delete) return true;
        const ParsedRule& r = c.rule;
        if (c.verb == Verb::Replace)
          for (const auto& as : r.anon_sets)
            if (as.interval) return refuse(as.loc, "replace of a rule with an anonymous interval set (nft 1.0.6 aborts: BUG unhandled op)");
        if (!r.canonicalized) tx_.warnings.push_back(file_ + ":" + std::to_string(c.loc.line) + ": rule not canonicalized (" + r.why_not + "): " + r.text);
        for (const auto& ref : r.ref_locs) {
          if (ref.kind == ParsedRule::Ref::Chain) continue;
          CTable* t = tx_.cache.table(c.family, c.table);
          if (!t) return table_not_found(c);
          if (ref.kind == ParsedRule::Ref::Flowtable) {
            if (std::find(t->flowtables.begin(), t->flowtables.end(), ref.name) == t->flowtables.end()) {
              auto [ft, f] = flowtable_fuzzy(tx_.cache, ref.name);
              if (f)
                err(ref.loc, kENOENT + "; did you mean flowtable \u2018" + *f + "\u2019 in table " +
                                 family_name(ft->family) + " \u2018" + ft->name + "\u2019?");
              else err(ref.loc, kENOENT);
              return false;
            }
            continue;
          }
          CSet* s = t->set(ref.name);
          if (!s) return set_not_found(ref.loc, ref.name);
          for (const auto& tr : r.typed_refs) {
            if (tr.name != ref.name || tr.kind != ref.kind) continue;
            if (tr.types != s->key) return refuse(ref.loc, "a datatype mismatch between a rule and @" + ref.name);
            if (tr.kind == ParsedRule::Ref::Map && (!s->is_map || s->data != Dtype::Verdict))
              return refuse(ref.loc, "vmap on @" + ref.name + ", which is not a verdict map");
            if (tr.kind == ParsedRule::Ref::Dynset && s->is_map) return refuse(ref.loc, "update of a map");
          }
        }
        if (!r.canonicalized && !r.refs.sets.empty()) {
          // datatype checks of rules kpc does not parse are unknown: refuse nothing, but say it
        }
        if (tx_.flags & kUpdate) return rule_cache_update(c, idx);
        return true;
      }
    }
    return true;
  }

  bool rule_cache_update(Command& c, size_t idx) {
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
        return kENOENT + "; did you mean flowtable \u2018" + *f + "\u2019 in table " + family_name(t->family) +
               " \u2018" + t->name + "\u2019?";
      }
      default: return std::nullopt;
    }
  }

  Table* ktable(const Command& c) { return tx_.work.find_table(c.family, c.table); }

  static size_t index_of(const std::vector<Table>& v, const Table* t) { return static_cast<size_t>(t - v.data()); }

  // Rules this batch removed (table, chain, handle): the kernel still finds them by handle.
  std::set<std::tuple<const Table*, uint64_t, uint64_t>> removed_;  // (table, chain handle, rule handle)
  void release_rule(Table& t, const Chain& chain, const Rule& r) {
    count_rule_refs(tx_, t, r, -1);
    removed_.insert({&t, chain.handle, r.handle});
  }

  void kernel_one(Command& c, size_t idx) {
    switch (c.obj) {
      case Obj::Ruleset: {
        for (auto& t : tx_.work.tables) (void)t;
        tx_.work.tables.clear();
        build_uses(tx_);
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

  void k_table(Command& c) {
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
          tx_.work.tables.push_back(std::move(nt));
          build_uses(tx_);
        }
        return;
      case Verb::Delete:
        if (!t) return kerr(c, Errno::Noent, &c.table_loc);
        tx_.work.tables.erase(tx_.work.tables.begin() + index_of(tx_.work.tables, t));
        build_uses(tx_);
        return;
      case Verb::Flush:
        if (!t) return kerr(c, Errno::Noent, &c.table_loc);
        for (auto& ch : t->chains) {
          for (const auto& r : ch.rules) release_rule(*t, ch, r);
          ch.rules.clear();
        }
        return;
      default: return;
    }
  }

  void k_chain(Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    if (c.verb == Verb::Delete && c.handle) {
      Chain* found = nullptr;
      for (auto& ch : t->chains)
        if (ch.handle == *c.handle) found = &ch;
      if (!found) return kerr(c, Errno::Noent, &c.handle_loc);
      return delete_chain(c, *t, *found, c.handle_loc);
    }
    Chain* ch = t->find_chain(c.name);
    switch (c.verb) {
      case Verb::Add:
      case Verb::Create: {
        if (ch) {
          if (c.verb == Verb::Create) return kerr(c, Errno::Exist, &c.name_loc);
          if (!c.chain.has_hook) return;
          if (!ch->base) return kerr(c, Errno::Exist, &c.name_loc);
          if (ch->hook != c.chain.hook || ch->priority != c.chain.priority) return kerr(c, Errno::Notsupp, nullptr);
          if (ch->type != c.chain.type) return kerr(c, Errno::Exist, &c.name_loc);
          if (c.chain.policy) ch->policy = *c.chain.policy;
          return;
        }
        Chain nc;
        nc.name = c.name;
        nc.handle = ++t->next_handle;
        if (c.chain.has_hook) {
          nc.base = true;
          nc.type = c.chain.type;
          nc.hook = c.chain.hook;
          nc.priority = c.chain.priority;
          nc.policy = c.chain.policy.value_or("accept");
        } else if (c.chain.policy) {
          refuse(c.loc, "a policy on a regular chain");
          return;
        }
        nc.comment = c.chain.comment;
        t->chains.push_back(std::move(nc));
        index_appended(t->chains, t->chain_index_);
        return;
      }
      case Verb::Delete:
        if (!ch) return kerr(c, Errno::Noent, &c.name_loc);
        return delete_chain(c, *t, *ch, c.name_loc);
      case Verb::Flush:
        if (!ch) return kerr(c, Errno::Noent, &c.name_loc);
        for (const auto& r : ch->rules) release_rule(*t, *ch, r);
        ch->rules.clear();
        return;
      default: return;
    }
  }

  void delete_chain(const Command& c, Table& t, Chain& ch, const Loc& loc) {
    // The kernel removes the chain's rules first, then refuses a chain something still
    // references (EBUSY): the removals stay in the batch.
    for (const auto& r : ch.rules) release_rule(t, ch, r);
    ch.rules.clear();
    int use = tx_.chain_use[&t][ch.name];
    if (use > 0) return kerr(c, Errno::Busy, &loc);
    size_t i = &ch - t.chains.data();
    t.chains.erase(t.chains.begin() + i);
    index_erased(t.chain_index_);
  }

  void k_rule(Command& c, size_t idx) {
    Table* t = ktable(c);
    // anonymous sets come first (one message each)
    if (c.verb != Verb::Delete) {
      for (const auto& as : c.rule.anon_sets) {
        if (!t) {
          // the set's message, then its elements' message, each without a hint
          err(c.table_loc, std::string("Could not process rule: ") + strerr(Errno::Noent));
          err(as.loc, std::string("Could not process rule: ") + strerr(Errno::Noent));
          continue;
        }
        ++t->next_handle;
        for (const auto& [chain, loc] : as.chain_values) {
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
    Chain* ch = t->find_chain(c.name);
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
      if (i < 0 && removed_.count({t, ch->handle, *c.handle})) return kerr(c, Errno::Noent, nullptr);
      if (i < 0) return kerr(c, Errno::Noent, &c.handle_loc);
      release_rule(*t, *ch, ch->rules[i]);
      ch->rules.erase(ch->rules.begin() + i);
      return;
    }
    long at = -1;  // the rule the new one is placed against
    uint64_t handle = 0;
    if (c.verb == Verb::Replace) {
      at = find_handle(*c.handle);
      if (at < 0 && removed_.count({t, ch->handle, *c.handle})) {
        refuse(c.loc, "replace of a rule this transaction removed");
        return;
      }
      if (at < 0) return kerr(c, Errno::Noent, &c.handle_loc);
      handle = *c.handle;
    } else {
      handle = ++t->next_handle;
      const RulePos& p = pos_[idx];
      if (p.kind == RulePos::Handle) {
        at = find_handle(p.id);
        if (at < 0 && removed_.count({t, ch->handle, p.id})) {
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
      } else if (c.handle && !(tx_.flags & kUpdate)) {
        // (not reachable: a handle always asks for the rule cache)
      }
    }
    // expressions: jump/goto targets must exist
    for (const auto& ref : c.rule.ref_locs) {
      if (ref.kind == ParsedRule::Ref::Chain && ref.name == c.name) {
        refuse(ref.loc, "a rule that jumps to its own chain (a loop: the kernel's EMLINK)");
        return;
      }
      if (ref.kind == ParsedRule::Ref::Chain) {
        Chain* target = t->find_chain(ref.name);
        if (!target) return kerr(c, Errno::Noent, &ref.loc);
        if (target->base) {
          refuse(ref.loc, "a jump to a base chain");
          return;
        }
      } else if (ref.kind == ParsedRule::Ref::Flowtable) {
        if (!t->find_flowtable(ref.name)) return kerr(c, Errno::Noent, &ref.loc);
      } else {
        if (!t->find_set(ref.name)) return kerr(c, Errno::Noent, &ref.loc);
      }
    }
    Rule r;
    r.handle = handle;
    r.text = c.rule.text;
    r.comment = c.rule.comment;
    r.canonical = c.rule.canonical;
    r.canonicalized = c.rule.canonicalized;
    r.refs = c.rule.refs;
    r.tx_id = txid_[idx];
    count_rule_refs(tx_, *t, r, +1);
    for (const auto& d : r.refs.dynset)
      if (Set* s = t->find_set(d); s && s->size == 0) {
        s->size = 65535;
        s->size_implied = true;
      }
    if (c.verb == Verb::Replace) {
      release_rule(*t, *ch, ch->rules[at]);
      ch->rules[at] = std::move(r);
    } else if (c.verb == Verb::Insert) {
      ch->rules.insert(ch->rules.begin() + (at >= 0 ? at : 0), std::move(r));
    } else {
      if (at >= 0) ch->rules.insert(ch->rules.begin() + at + 1, std::move(r));
      else ch->rules.push_back(std::move(r));
    }
  }

  void kerr_elem(const Command& c, Errno e, const Loc& l) { err(l, std::string("Could not process rule: ") + strerr(e)); }

  void k_set(Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    if (c.verb == Verb::Delete && c.handle) {
      Set* found = nullptr;
      for (auto& s : t->sets)
        if (s.handle == *c.handle) found = &s;
      if (!found) return kerr(c, Errno::Noent, &c.handle_loc);
      return delete_set(c, *t, *found, c.handle_loc);
    }
    Set* s = t->find_set(c.name);
    switch (c.verb) {
      case Verb::Add:
      case Verb::Create: {
        Set ns;
        ns.name = c.name;
        ns.is_map = c.set.is_map;
        ns.key_names = c.set.key_names;
        for (const auto& k : c.set.key_names) ns.key.push_back(dtype_from_name(k));
        ns.data_name = c.set.data_name;
        ns.data = c.set.is_map ? dtype_from_name(c.set.data_name) : Dtype::Unknown;
        static const char* order[] = {"constant", "dynamic", "interval", "timeout"};
        for (const char* f : order)
          if (std::find(c.set.flags.begin(), c.set.flags.end(), f) != c.set.flags.end() ||
              (std::string_view(f) == "timeout" && c.set.timeout_ms && *c.set.timeout_ms))
            ns.flags.push_back(f);
        ns.timeout_ms = c.set.timeout_ms.value_or(0);
        ns.gc_interval_ms = c.set.gc_interval_ms.value_or(0);
        ns.size = c.set.size.value_or(0);
        ns.policy = c.set.policy && *c.set.policy == "memory" ? "memory" : "";
        ns.comment = c.set.comment;
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
        t->sets.push_back(std::move(ns));
        index_appended(t->sets, t->set_index_);
        return;
      }
      case Verb::Delete:
        if (!s) return kerr(c, Errno::Noent, &c.name_loc);
        return delete_set(c, *t, *s, c.name_loc);
      case Verb::Flush:
        if (!s) return kerr(c, Errno::Noent, &c.name_loc);
        for (const auto& e : s->elements) count_elem_refs(tx_, *t, e, -1);
        s->elements.clear();
        return;
      default: return;
    }
  }

  void delete_set(const Command& c, Table& t, Set& s, const Loc& loc) {
    if (tx_.set_use[&t][s.name] > 0) return kerr(c, Errno::Busy, &loc);
    for (const auto& e : s.elements) count_elem_refs(tx_, t, e, -1);
    size_t i = &s - t.sets.data();
    t.sets.erase(t.sets.begin() + i);
    index_erased(t.set_index_);
  }

  void k_element(Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    Set* s = t->find_set(c.name);
    if (!s) return kerr(c, Errno::Noent, &c.name_loc);
    for (const auto& spec : c.elements) {
      Element e;
      auto bad = make_element(*s, spec, &e, c.verb != Verb::Delete);
      if (bad && !bad->empty()) {
        refuse(spec.key_loc, *bad);
        return;
      }
      if (bad) return kerr_elem(c, Errno::Inval, spec.key_loc);  // a map element without a value
      auto it = std::find_if(s->elements.begin(), s->elements.end(),
                             [&](const Element& x) { return x.key == e.key; });
      if (c.verb == Verb::Delete) {
        if (it == s->elements.end()) return kerr_elem(c, Errno::Noent, spec.key_loc);
        count_elem_refs(tx_, *t, *it, -1);
        s->elements.erase(it);
        continue;
      }
      if (s->has_flag("interval")) {
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
      if (it != s->elements.end()) {
        if (c.verb == Verb::Create) return kerr_elem(c, Errno::Exist, spec.key_loc);
        if (s->is_map && it->value != e.value) return kerr_elem(c, Errno::Exist, spec.key_loc);
        continue;
      }
      count_elem_refs(tx_, *t, e, +1);
      s->elements.push_back(std::move(e));
    }
  }

  void k_flowtable(Command& c) {
    Table* t = ktable(c);
    if (!t) return kerr(c, Errno::Noent, &c.table_loc);
    if (c.verb == Verb::Delete && c.handle) {
      for (size_t i = 0; i < t->flowtables.size(); ++i)
        if (t->flowtables[i].handle == *c.handle) {
          if (tx_.ft_use[t][t->flowtables[i].name] > 0) return kerr(c, Errno::Busy, &c.handle_loc);
          t->flowtables.erase(t->flowtables.begin() + i);
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
          nf.priority = c.flowtable.priority.value_or(0);
          nf.devices = c.flowtable.devices;
          t->flowtables.push_back(std::move(nf));
        }
        return;
      case Verb::Delete:
        if (!f) return kerr(c, Errno::Noent, &c.name_loc);
        if (tx_.ft_use[t][c.name] > 0) return kerr(c, Errno::Busy, &c.name_loc);
        t->flowtables.erase(t->flowtables.begin() + (f - t->flowtables.data()));
        return;
      default: return;
    }
  }
};

// A cycle in a table's jump graph (rules and verdict maps): the kernel reports loops as
// EMLINK at places kpc does not model.
std::optional<std::string> find_loop(const NftState& s) {
  for (const auto& t : s.tables) {
    std::unordered_map<std::string, std::vector<std::string>> edges;
    std::unordered_map<std::string, std::vector<std::string>> set_targets;
    for (const auto& st : t.sets)
      for (const auto& e : st.elements)
        if (auto c = verdict_chain(e.value)) set_targets[st.name].push_back(*c);
    for (const auto& ch : t.chains)
      for (const auto& r : ch.rules) {
        auto& out = edges[ch.name];
        for (const auto& c : r.refs.chains) out.push_back(c);
        for (const auto& sname : r.refs.sets) {
          auto it = set_targets.find(sname);
          if (it != set_targets.end()) out.insert(out.end(), it->second.begin(), it->second.end());
        }
      }
    std::unordered_map<std::string, int> color;
    std::unordered_map<std::string, int> depth;
    std::optional<std::string> found;
    std::function<int(const std::string&)> dfs = [&](const std::string& n) -> int {
      int& c = color[n];
      if (c == 1) {
        found = n;
        return 0;
      }
      if (c == 2) return depth[n];
      c = 1;
      int d = 0;
      auto it = edges.find(n);
      if (it != edges.end())
        for (const auto& m : it->second) {
          d = std::max(d, 1 + dfs(m));
          if (found) return 0;
        }
      c = 2;
      depth[n] = d;
      return d;
    };
    for (const auto& ch : t.chains) {
      int d = dfs(ch.name);
      if (found) return "a loop through chain " + *found + " in table " + family_name(t.family) + " " + t.name;
      if (ch.base && d > 15) return "a jump depth over 16 from base chain " + ch.name;
    }
  }
  return std::nullopt;
}

// dnat/snat/masquerade/reject in a chain a base chain of another type or hook reaches: the
// kernel refuses it (EOPNOTSUPP) on a message kpc does not pin down. Not modelled.
std::optional<std::string> find_misplaced(const NftState& s) {
  for (const auto& t : s.tables) {
    std::unordered_map<std::string, std::vector<std::string>> set_targets;
    for (const auto& st : t.sets)
      for (const auto& e : st.elements)
        if (auto c = verdict_chain(e.value)) set_targets[st.name].push_back(*c);
    std::unordered_map<std::string, const Chain*> by_name;
    for (const auto& ch : t.chains) by_name[ch.name] = &ch;
    for (const auto& base : t.chains) {
      if (!base.base) continue;
      std::set<std::string> seen;
      std::vector<const Chain*> todo{&base};
      while (!todo.empty()) {
        const Chain* ch = todo.back();
        todo.pop_back();
        if (!seen.insert(ch->name).second) continue;
        for (const auto& r : ch->rules) {
          const RuleRefs& f = r.refs;
          const std::string& h = base.hook;
          bool nat = base.type == "nat";
          bool bad = (f.dnat && !(nat && (h == "prerouting" || h == "output"))) ||
                     (f.snat && !(nat && (h == "postrouting" || h == "input"))) ||
                     (f.masquerade && !(nat && h == "postrouting")) ||
                     (f.reject && !(h == "prerouting" || h == "input" || h == "forward" || h == "output"));
          if (bad)
            return "a rule of chain " + ch->name + " (" + r.canonical + ") reached from base chain " + base.name +
                   " (type " + base.type + " hook " + h + ")";
          auto go = [&](const std::string& n) {
            auto it = by_name.find(n);
            if (it != by_name.end()) todo.push_back(it->second);
          };
          for (const auto& c : f.chains) go(c);
          for (const auto& sn : f.sets) {
            auto it = set_targets.find(sn);
            if (it != set_targets.end())
              for (const auto& c : it->second) go(c);
          }
        }
      }
    }
  }
  return std::nullopt;
}

std::string line_of(std::string_view text, int line) {
  int l = 1;
  size_t b = 0;
  while (l < line) {
    size_t n = text.find('\n', b);
    if (n == std::string_view::npos) return "";
    b = n + 1;
    ++l;
  }
  size_t e = text.find('\n', b);
  return std::string(text.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
}

// The expanded commands (table blocks and sets with elements split as nft_cmd_expand does).
std::vector<Command> expand(std::vector<Command>& cmds) {
  std::vector<Command> out;
  for (auto& c : cmds) {
    std::vector<Command> block = std::move(c.block);
    c.block.clear();
    bool set_elems = (c.obj == Obj::Set || c.obj == Obj::Map) && c.set.has_elements && !c.set.elements.empty();
    out.push_back(c);
    std::vector<Command> extra;
    if (set_elems) {
      Command e;
      e.verb = Verb::Add;
      e.obj = Obj::Element;
      e.family = c.family;
      e.table = c.table;
      e.table_loc = c.table_loc;
      e.name = c.name;
      e.name_loc = c.name_loc;
      e.loc = c.loc;
      e.elements = c.set.elements;
      out.push_back(std::move(e));
    }
    for (auto& b : block) {
      bool be = (b.obj == Obj::Set || b.obj == Obj::Map) && b.set.has_elements && !b.set.elements.empty();
      out.push_back(b);
      if (be) {
        Command e;
        e.verb = Verb::Add;
        e.obj = Obj::Element;
        e.family = b.family;
        e.table = b.table;
        e.table_loc = b.table_loc;
        e.name = b.name;
        e.name_loc = b.name_loc;
        e.loc = b.loc;
        e.elements = b.set.elements;
        out.push_back(std::move(e));
      }
    }
  }
  return out;
}

// nft 1.0.6 merges consecutive `add element` (or `create element`) commands on the same set
// into the first one (nft_cmd_collapse): one evaluation, one netlink message. Each element
// keeps its own location.
std::vector<Command> collapse(std::vector<Command> cmds) {  // by value: a copy
  std::vector<Command> out;
  long ei = -1;  // the command collecting elements (an index: `out` grows)
  for (auto& c : cmds) {
    bool candidate = c.obj == Obj::Element && (c.verb == Verb::Add || c.verb == Verb::Create);
    if (candidate && ei >= 0) {
      Command& e = out[ei];
      if (e.verb == c.verb && e.family == c.family && e.table == c.table && e.name == c.name) {
        for (auto& el : c.elements) e.elements.push_back(std::move(el));
        continue;
      }
    }
    out.push_back(std::move(c));
    ei = candidate ? static_cast<long>(out.size()) - 1 : -1;
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
  return n;
}

}  // namespace

ApplyResult apply_impl(NftState& state, std::string_view text, std::string_view file_name, bool listing,
                       std::vector<Command>* expanded) {
  ApplyResult res;
  std::vector<Command> parsed;
  try {
    parsed = parse_script(text);
  } catch (const ParseFailure& f) {
    Err e{f.loc, f.not_modelled ? "not modelled by kpc: " + f.message : f.message, true};
    if (!f.not_modelled) e.not_modelled = false;
    res.errors.push_back(make_error(e, file_name, text));
    res.error = res.errors.front();
    return res;
  }
  std::vector<Command> cmds = expand(parsed);
  res.operations = cmds.size();
  for (size_t i = 0; i < cmds.size(); ++i) cmds[i].seq = i;
  if (listing)
    for (const auto& c : parsed)
      if (c.obj != Obj::Table || c.verb != Verb::Add || !c.table_block) {
        Err e{c.loc, "not an nft listing: expected 'table FAMILY NAME { ... }'", true};
        res.errors = {make_error(e, file_name, text)};
        res.error = res.errors.front();
        return res;
      }
  NftState work = state;
  Applier a(work, file_name);
  a.listing = listing;
  // nft evaluates consecutive element commands on one set as one (nft_cmd_collapse), then
  // sends them apart again.
  std::vector<Command> collapsed = collapse(cmds);
  bool eval_ok = a.evaluate(collapsed, cmds.size());
  if (eval_ok) a.kernel(cmds);
  // A refusal anywhere wins: kpc cannot say what nft does with the file.
  for (const auto& e : a.tx_.errors)
    if (e.not_modelled) {
      res.errors = {make_error(e, file_name, text)};
      res.error = res.errors.front();
      return res;
    }
  if (eval_ok) {
    if (auto bad = find_misplaced(work)) {
      Err e{Loc{1, 1, 1}, "not modelled by kpc: " + *bad + " (the kernel refuses such statements there)", true};
      res.errors = {make_error(e, file_name, text)};
      res.error = res.errors.front();
      return res;
    }
  }
  if (eval_ok) {
    if (auto loop = find_loop(work)) {
      Err e{Loc{1, 1, 1}, "not modelled by kpc: " + *loop + " (the kernel refuses loops with EMLINK)", true};
      res.errors = {make_error(e, file_name, text)};
      res.error = res.errors.front();
      return res;
    }
  }
  res.warnings = a.tx_.warnings;
  if (!a.tx_.errors.empty()) {
    for (const auto& e : a.tx_.errors) res.errors.push_back(make_error(e, file_name, text));
    res.error = res.errors.front();
    // Nothing changes, but the kernel's handle generators keep what the batch consumed.
    if (eval_ok) {
      state.next_table_handle = work.next_table_handle;
      for (auto& t : state.tables)
        if (const Table* w = work.find_table(t.family, t.name); w && w->handle == t.handle) {
          t.next_handle = std::max(t.next_handle, w->next_handle);
          // and the size the kernel gave a set a rule of the batch updates (never rolled back)
          for (auto& st : t.sets)
            if (const Set* ws = w->find_set(st.name); ws && ws->handle == st.handle && st.size == 0 && ws->size_implied) {
              st.size = ws->size;
              st.size_implied = true;
            }
        }
    }
    return res;
  }
  for (auto& t : work.tables)
    for (auto& ch : t.chains)
      for (auto& r : ch.rules) r.tx_id = 0;
  state = std::move(work);
  res.ok = true;
  if (expanded) *expanded = std::move(cmds);
  return res;
}

ApplyResult apply_script(NftState& state, std::string_view text, std::string_view file_name) {
  return apply_impl(state, text, file_name, false, nullptr);
}

}  // namespace kpc::verifier::nft
