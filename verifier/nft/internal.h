// Internals of the nft model shared by its files: tokens, parsed commands, statements.
#pragma once

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "verifier/nft/nft.h"

namespace kpc::verifier::nft::detail {

enum class Tok { Word, String, LBrace, RBrace, Comma, Semi, Colon, SetRef, Newline, Handle, End };

struct Token {
  Tok kind = Tok::End;
  std::string_view text;  ///< word, string contents (unquoted), set name (without '@'), handle number (a view of the input)
  Loc loc;
  size_t off = 0, end = 0;  ///< byte range in the input
};

/// Splits nft input into tokens (with locations), one at a time. '#' comments are dropped,
/// except "# handle N" (listings printed with -a), which becomes a Handle token. The tokens'
/// texts are views of the input.
class Lexer {
 public:
  /// first_line: the line number of text's first line (a part of a larger input).
  explicit Lexer(std::string_view text, int first_line = 1) : text_(text), line_(first_line) {}
  Token next();  ///< the next token (End at the end, again and again); throws ParseFailure
 private:
  std::string_view text_;
  size_t i_ = 0, line_start_ = 0;
  int line_ = 1;
};

/// Every token of the input (End last).
std::vector<Token> lex(std::string_view text);

/// A value-semantic optional box: a part of a command only some kinds of commands have
/// (kept out of line so that the other commands stay small). Reading an empty box gives a
/// default value; mut() creates it.
template <class T>
class Box {
 public:
  Box() = default;
  Box(const Box& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Box& operator=(const Box& o) {
    p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Box(Box&&) noexcept = default;
  Box& operator=(Box&&) noexcept = default;
  Box& operator=(T v) {
    p_ = std::make_unique<T>(std::move(v));
    return *this;
  }
  const T* operator->() const { return p_ ? p_.get() : &empty(); }
  const T& operator*() const { return p_ ? *p_ : empty(); }
  T& mut() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }
  bool has_value() const { return p_ != nullptr; }
  void reset() { p_.reset(); }
 private:
  static const T& empty() {
    static const T e{};
    return e;
  }
  std::unique_ptr<T> p_;
};

/// A read-only part of a command, shared by its copies (a command copied from another
/// script's parse shares its rule: prepare_script_like). Reading an empty one gives a default
/// value.
template <class T>
class Shared {
 public:
  Shared& operator=(T v) {
    p_ = std::make_shared<const T>(std::move(v));
    return *this;
  }
  const T* operator->() const { return p_ ? p_.get() : &empty(); }
  const T& operator*() const { return p_ ? *p_ : empty(); }
  bool has_value() const { return p_ != nullptr; }
 private:
  static const T& empty() {
    static const T e{};
    return e;
  }
  std::shared_ptr<const T> p_;
};

/// Thrown while parsing; carries a located message. not_modelled: kpc's refusal.
struct ParseFailure {
  Loc loc;
  std::string message;
  bool not_modelled = true;
};

/// A map/set element as written.
struct ElemSpec {
  std::vector<std::string> key;  ///< key fields as written
  Loc key_loc;                   ///< the key's location (nft reports element errors there)
  std::optional<std::string> comment;
  std::optional<std::string> value;  ///< "goto x", "drop", ... as written
  std::optional<std::string> timeout, expires;
};

struct SetSpec {
  std::string name;
  bool is_map = false;
  std::vector<std::string> key_names;
  std::string data_name;
  std::vector<std::string> flags;
  std::optional<uint64_t> timeout_ms, gc_interval_ms;
  std::optional<uint32_t> size;
  std::optional<std::string> policy;
  bool auto_merge = false;
  std::optional<std::string> comment;
  std::vector<ElemSpec> elements;  ///< `elements = { ... }` of a block
  bool has_elements = false;
  Loc elements_loc;
  uint64_t handle = 0;  ///< from a listing's "# handle N"
};

struct ChainSpec {
  std::string name;
  bool has_hook = false;
  std::string type, hook;
  Loc type_loc;
  int priority = 0;
  std::optional<std::string> device;
  std::optional<std::string> policy;
  std::optional<std::string> comment;
  uint64_t handle = 0;
};

/// A parsed rule statement list (statement.cpp).
struct ParsedRule {
  /// The line of the command the rule was parsed in. Its locations below are that parse's; a
  /// command copied to another line (prepare_script_like) shares the rule, and a location of
  /// it is read moved by the difference (Applier::moved).
  int line = 0;
  /// What the rule says (text as written, comment excluded, whitespace-normalised; the canonical
  /// text; references), made once by the parser and shared by the state's rule (k_rule): a
  /// command's rule is only read when it is applied, so that one parse can serve two scripts.
  std::shared_ptr<const RuleBody> body;
  struct Ref {
    std::string name;
    Loc loc;
    enum Kind { Chain, Set, Map, Dynset, Flowtable } kind;
  };
  std::vector<Ref> ref_locs;
  /// Anonymous sets/maps the rule declares (each one a set in the kernel: a handle).
  struct AnonSet {
    std::vector<std::pair<std::string, Loc>> chain_values;  ///< verdict chain of each element, at the element key's location
    Loc loc;                ///< the `{ ... }`
    bool interval = false;  ///< an anonymous set with prefixes (nft makes it an interval set)
  };
  std::vector<AnonSet> anon_sets;
  /// Sets the rule uses with the key types it gives them (datatype checks).
  struct TypedRef {
    std::string name;
    std::vector<Dtype> types;
    Ref::Kind kind;
  };
  std::vector<TypedRef> typed_refs;
  /// What nft's evaluation says of a statement of the rule, in the statements' order (nft
  /// stops at the first): reported once the references before it (refs_before of ref_locs) are
  /// evaluated, at loc, with mark (a second range, '~') when given. Among them:
  ///  * a nat statement with a port and no transport protocol known before it (`ip daddr X
  ///    dnat to Y:80`): "transport protocol mapping is only valid after transport protocol
  ///    match" at the port, the statement's keyword marked;
  ///  * a statement after a terminal one (a verdict other than continue, reject, dnat, snat,
  ///    masquerade): "Statement after terminal statement has no effect", the terminal marked;
  ///  * a word nft reads as its `string` token where a statement starts, compared with a value
  ///    (`foo bar`, `frobnicate 7`): "No symbol type information" at the word.
  struct StmtError {
    Loc loc, mark;
    std::string message;
    size_t refs_before = 0;
    bool command_only = false;  ///< not said of a listing (the kernel's state as nft lists it)
  };
  std::vector<StmtError> stmt_errors;
};

enum class Verb { Add, Create, Insert, Replace, Delete, Flush, Destroy };
enum class Obj { Table, Chain, Rule, Set, Map, Element, Flowtable, Ruleset };

struct FlowtableSpec {
  std::string name;
  std::optional<int> priority;
  std::vector<std::string> devices;
  uint64_t handle = 0;
};

struct Command {
  // (first, in one cache line: what the passes over a whole script read of every command —
  // the cache flags, whether flushes may be deferred, the collapsed element groups; a 10,000-
  // Service full transaction has 582,000 commands)
  Verb verb = Verb::Add;
  Obj obj = Obj::Table;
  Family family = Family::Ip;
  bool table_block = false;
  bool chain_props = false;
  std::optional<uint64_t> handle;  ///< `handle N`
  std::optional<uint64_t> index;   ///< `index N`
  std::vector<Command> block;  ///< a table block: the commands it stands for (nft_cmd_expand order)
  Loc loc;  ///< the whole command
  std::string table;
  Loc table_loc;
  std::string name;  ///< chain / set / map / flowtable name (element: its set; rule: its chain)
  Loc name_loc;
  Loc handle_loc;
  Loc index_loc;
  // table
  std::optional<std::string> table_comment;
  std::vector<std::string> table_flags;
  // chain
  Box<ChainSpec> chain;
  // set / map
  Box<SetSpec> set;
  // element
  std::vector<ElemSpec> elements;
  // rule
  Shared<ParsedRule> rule;
  // flowtable
  Box<FlowtableSpec> flowtable;
  uint64_t listed_handle = 0;   ///< a listing's "# handle N" for this object
};

/// The (expanded) commands a script applies, in order, read through pointers, so that a script
/// made from another's parse (prepare_script_like) points into that parse instead of copying
/// it: at 10,000 Services a copy of the prior's commands took ~0.5 s, the pointers ~0.01 s.
/// Such a command keeps the locations it has in the other parse; moved_by(i) is how many lines
/// command i moved. A list whose commands are all where they are written is located(); the
/// applier reports errors only from a located list (apply_prepared applies the located copy,
/// relocated(), again when the batch fails: it is rolled back first), and moves the one
/// location it reports otherwise (a warning's line) itself.
class CommandList {
 public:
  CommandList() = default;
  /// The commands of own, in its order (own must outlive the list, or be kept: keep()).
  explicit CommandList(const std::vector<Command>& own);
  const Command& operator[](size_t i) const { return *at_[i]; }
  size_t size() const { return at_.size(); }
  int moved_by(size_t i) const { return moving_ ? moved_[i] : 0; }
  bool located() const { return !moving_; }
  void reserve(size_t n) { at_.reserve(n); }
  /// Appends c, which is moved_by lines below where c's locations say (negative: above).
  void push(const Command* c, int moved_by);
  /// Keeps an owner of commands pushed (a parse) alive as long as the list.
  void keep(std::shared_ptr<const void> owner) { keep_.push_back(std::move(owner)); }
  /// Copies of the commands with their locations moved where they are: a located list.
  std::vector<Command> relocated() const;

  struct Iter {
    const Command* const* p;
    const Command& operator*() const { return **p; }
    Iter& operator++() {
      ++p;
      return *this;
    }
    bool operator!=(const Iter& o) const { return p != o.p; }
  };
  Iter begin() const { return {at_.data()}; }
  Iter end() const { return {at_.data() + at_.size()}; }

 private:
  std::vector<const Command*> at_;
  std::vector<int> moved_;  // per command, once one has moved (moving_)
  bool moving_ = false;
  std::vector<std::shared_ptr<const void>> keep_;
};

/// The line breaks in t. (memchr: std::count over bytes runs at ~1.7 GB/s here, a 75 MB
/// prior took 45 ms.)
inline size_t count_line_breaks(std::string_view t) {
  size_t n = 0;
  const char* p = t.data();
  const char* const end = p + t.size();
  while (p < end) {
    p = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (!p) break;
    ++n;
    ++p;
  }
  return n;
}

/// Parses a whole script (commands and table blocks). Throws ParseFailure.
std::vector<Command> parse_script(std::string_view text);
/// The commands of a part of a larger script, the part starting at line first_line between two
/// commands (outside braces). Throws ParseFailure (without looking for a lexical error after
/// it, as parse_script does: the caller parses the whole script then).
std::vector<Command> parse_script_part(std::string_view part, int first_line);
/// parse_script on two threads for a large input: split at a line break in the middle, the
/// halves parsed side by side, the commands appended. Exact: the split is kept only when the
/// first half parses to its end (so the break is between commands, where parsing the whole
/// text would be too: nothing of a command carries over a line break outside braces) and
/// the second half parses too; otherwise the whole text is parsed as parse_script does, so
/// a failure is reported exactly as parse_script reports it.
/// Inputs under split_min bytes are parsed whole, on this thread.
std::vector<Command> parse_script_split(std::string_view text, size_t split_min);

/// Throws the model's refusal (ParseFailure, not modelled) when t is an unquoted name (a word or
/// an @set reference) that is not a plain name (nft::is_plain_name): nft reads it as a keyword
/// or another token in some places.
void refuse_unplain_name(const Token& t);

/// Parses a rule's statements (the n tokens of one rule, from toks, then the token that ends
/// the rule: a newline, ';', '}' or the end) for the given family. What nft's parser refuses is
/// thrown (ParseFailure, nft's words), what nft's evaluation refuses is noted
/// (ParsedRule::stmt_errors), and what kpc does not read is thrown as the model's refusal:
/// a rule is never kept unread.
ParsedRule parse_rule(std::string_view src, const Token* toks, size_t n, const Token& term, Family family);

/// Canonical value of a key/value field of the given datatype; false if kpc does not
/// model the text for that type. sort bytes appended to *bytes (the kernel's register layout).
bool canonical_value(Dtype t, std::string_view text, std::string* out, std::string* bytes);
Dtype dtype_from_name(std::string_view name);
uint32_t dtype_len(Dtype t);  ///< bytes

/// "0x%08x" as nft prints marks.
std::string hex8(uint32_t v);
bool parse_uint(std::string_view s, uint64_t* out);  ///< decimal or 0x hex
bool parse_time(std::string_view s, uint64_t* ms);   ///< "10800s", "3h", "1h30m", "500ms", "10" (s)

std::string quote(std::string_view s);  ///< "\"s\""

// ------------------------------------------------------------------ indexes

// Deliberately not noexcept: libstdc++ stores a node's hash in the node only for a hash it
// does not consider cheap, and a noexcept hash is considered cheap. Without the stored
// hash, every step along a bucket's chain hashes the next node's name again to find its
// bucket: half of applying a 10,000-Service transaction was spent so (mostly hashing
// 60-byte chain names).
struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using NameIndex = std::unordered_map<std::string, uint32_t, SvHash, std::equal_to<>>;

/// Names -> positions in a vector whose objects hold the names (a table's chains or sets): a
/// flat open-addressing table of (hash, position) pairs, without key strings. The names are
/// read from the objects themselves (name_at(position)), so adding a chain allocates nothing
/// and copying a state's index is one block copy (copying a 10,000-Service table's chain and
/// set index of 150,000 string-keyed nodes was a third of the copy `kpc verify` makes of the
/// prior). Each position has at most one entry: erase and move identify an entry by it.
class PosIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  void reserve(size_t n) {
    if (n + tombs_ + live_ > grow_at()) rehash(n + live_);
  }
  size_t size() const { return live_; }
  /// The position whose object's name is key (kNone: none). name_at(pos) -> std::string_view.
  template <class NameAt>
  uint32_t find(std::string_view key, const NameAt& name_at) const {
    return find_hashed(key, hash(key), name_at);
  }
  /// key -> pos, unless key has an entry (as std::unordered_map::emplace).
  template <class NameAt>
  void emplace(std::string_view key, uint32_t pos, const NameAt& name_at) {
    const uint64_t h = hash(key);  // (once for the look-up and the entry)
    if (find_hashed(key, h, name_at) != kNone) return;
    if (live_ + tombs_ + 1 > grow_at()) rehash(live_ + 1);
    put(h, pos);
    ++live_;
  }
  /// Drops the entry of key at pos, if there is one.
  void erase(std::string_view key, uint32_t pos) {
    if (Slot* s = slot_of(key, pos)) {
      s->pos = kTomb;
      --live_;
      ++tombs_;
    }
  }
  /// The object of key moved from position `from` to `to`: its entry follows.
  void move(std::string_view key, uint32_t from, uint32_t to) {
    if (Slot* s = slot_of(key, from)) s->pos = to;
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX, kTomb = UINT32_MAX - 1;
  struct Slot {
    uint64_t hash = 0;
    uint32_t pos = kEmpty;
  };
  std::vector<Slot> slots_;  // a power of two, at most 3/4 used (live and tombstones)
  size_t live_ = 0, tombs_ = 0;
  static uint64_t hash(std::string_view k) { return std::hash<std::string_view>{}(k); }
  template <class NameAt>
  uint32_t find_hashed(std::string_view key, uint64_t h, const NameAt& name_at) const {
    if (slots_.empty()) return kNone;
    for (size_t i = h & mask(); ; i = (i + 1) & mask()) {
      const Slot& s = slots_[i];
      if (s.pos == kEmpty) return kNone;
      if (s.pos != kTomb && s.hash == h && name_at(s.pos) == key) return s.pos;
    }
  }
  size_t mask() const { return slots_.size() - 1; }
  size_t grow_at() const { return slots_.size() / 4 * 3; }
  void put(uint64_t h, uint32_t pos) {
    size_t i = h & mask();
    while (slots_[i].pos != kEmpty && slots_[i].pos != kTomb) i = (i + 1) & mask();
    if (slots_[i].pos == kTomb) --tombs_;
    slots_[i] = Slot{h, pos};
  }
  Slot* slot_of(std::string_view key, uint32_t pos) {
    if (slots_.empty()) return nullptr;
    const uint64_t h = hash(key);
    for (size_t i = h & mask(); ; i = (i + 1) & mask()) {
      Slot& s = slots_[i];
      if (s.pos == kEmpty) return nullptr;
      if (s.pos == pos && s.hash == h) return &s;
    }
  }
  void rehash(size_t live) {
    size_t n = 16;
    while (n / 4 * 3 < live * 2) n *= 2;  // (room to grow: half full at most after a rehash)
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    tombs_ = 0;
    for (const Slot& s : old)
      if (s.pos != kEmpty && s.pos != kTomb) put(s.hash, s.pos);
  }
};

/// PosIndex's name_at over a vector of named objects (chains, sets).
template <class V>
struct NamesOf {
  const V& v;
  std::string_view operator()(uint32_t p) const { return p < v.size() ? std::string_view(v[p].name) : std::string_view(); }
};
template <class V>
NamesOf(const V&) -> NamesOf<V>;

/// A table's live chains and sets by name (positions in its vectors).
using UseMap = std::unordered_map<std::string, int, SvHash, std::equal_to<>>;
struct GraphCache;  // graph.cpp
std::shared_ptr<GraphCache> clone(const GraphCache& g);
struct TableIndex {
  TableIndex() = default;
  TableIndex(const TableIndex& o);  ///< deep: the copy owns a copy of the graph cache
  TableIndex& operator=(const TableIndex&) = delete;
  PosIndex chains, sets;
  size_t n_chains = 0, n_sets = 0;  ///< the vectors' sizes the index covers
  /// References held by the table's rules and map elements (what the kernel's use counts say:
  /// a chain, set or flowtable in use cannot go): per chain and per set by position (the
  /// vectors' sizes; they follow the objects when the vectors are compacted), per flowtable by
  /// name. A reference always names a live object: a rule or element is only added when what
  /// it references exists, and an object with references cannot be deleted.
  std::vector<int> chain_use, set_use;
  UseMap ft_use;
  /// What the last successful check of the jump graph knew (graph.cpp), so that the next
  /// batch is checked from its changes only; null: check the whole table.
  std::shared_ptr<GraphCache> graph;
};
/// A set's live elements by key (elem_key) -> position.
struct SetIndex {
  NameIndex elems;
  size_t n = 0;
};
/// The index key of canonical key fields.
std::string elem_key(const std::vector<std::string>& key);
/// A map element's verdict target ("goto X" / "jump X" -> X).
std::optional<std::string_view> verdict_chain(const std::optional<std::string>& v);

/// What one batch added to one table that can close a loop, deepen the jump graph or bring a
/// statement under a base chain that refuses it (positions in the table's vectors during the
/// batch, before the removed objects are compacted away).
struct GraphChanges {
  std::vector<uint32_t> rule_chains;                     ///< chains that got a rule (added or replaced)
  std::vector<std::pair<uint32_t, uint32_t>> elements;   ///< (set, element) added
  std::vector<uint32_t> new_chains, removed_chains;
  bool any() const { return !rule_chains.empty() || !elements.empty() || !new_chains.empty(); }
};
/// A problem the kernel would refuse the batch for: a rule's statement under a base chain of a
/// type or hook that refuses it (misplaced, reported first), or a loop / a jump depth over 16.
struct GraphProblem {
  bool misplaced = false;
  std::string what;
};
/// The checks after a batch over every table of s: the first misplaced statement of any table,
/// else the first loop or excess depth (the whole-table check's order and messages, always).
/// changes: per table of s (same order), or null when the batch's changes were not tracked;
/// update_cache: the batch commits if the check passes (false: a batch that fails anyway is
/// checked in full and no cache changes). A table with a cache and tracked changes is checked
/// from its changes only; anything the quick check cannot clear is checked in full.
std::optional<GraphProblem> check_graphs(const NftState& s, const std::vector<GraphChanges>* changes,
                                         bool update_cache);
/// Tables with this many chains in all or more have their graph caches built on a second
/// thread while the whole check runs (graph.cpp); the tests set it to 0 to take that path.
extern size_t graph_build_aside_min;

/// The table's / set's index, built (or rebuilt when the vectors changed size) on demand.
TableIndex& table_index(const Table& t);
SetIndex& set_index(const Set& s);

}  // namespace kpc::verifier::nft::detail

namespace kpc::verifier::nft {
/// apply_script, optionally for a listing (only table blocks; element timeouts kept), and
/// the expanded commands it applied (for the listed handles).
ApplyResult apply_impl(NftState& state, std::string_view text, std::string_view file_name, bool listing,
                       std::vector<detail::Command>* expanded, bool defer_flushes = true);
/// apply_script with every `flush chain` carried out where it is written, never deferred
/// (apply.cpp, "rules kept through a flush"): the reference the tests hold the deferred
/// flushes to.
ApplyResult apply_script_eager(NftState& state, std::string_view text, std::string_view file_name);
}  // namespace kpc::verifier::nft
