// The nft transaction model (issue 14 §2, base of issue 16): what `nft -f FILE` (nftables
// 1.0.6 on a current kernel) does to a node's nftables state, and how `nft list ruleset`
// and knftables' Fake.Dump() print that state.
//
// An independent oracle: depends on kpc::support and std only (never on the compiler).
//
//  * apply_script() reads a script as nft reads it — one command a line (`add|create|
//    flush|delete|insert|replace` of table, chain, set, map, element, rule, flowtable, as
//    knftables writes them) and `table FAMILY NAME { ... }` blocks as `nft list` prints
//    them — and applies it atomically: nft's two phases are modelled, the evaluation of
//    every command against nft's cache (userspace errors: "No such file or directory; did
//    you mean ...", index/handle look-ups) and then the kernel's batch (every failing
//    message reported, "Could not process rule: <strerror>", at the location nft maps the
//    kernel's bad attribute to), and nothing changes unless every command succeeds.
//  * Rules are parsed into statements (statement.cpp). kube-proxy's vocabulary is printed
//    exactly as nft lists it; a statement nft refuses is refused with nft's words, and one kpc
//    does not read is never applied: it is refused with a "not modelled" error, as is what kpc
//    cannot model exactly (loops in the jump graph, datatype mismatches, typeof sets, ...).
//  * print_ruleset() prints `nft list ruleset` (optionally with `-a` handles),
//    print_knftables_dump() prints knftables' Fake.Dump() of one table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpc::verifier::nft {

enum class Family { Ip, Ip6, Inet, Arp, Bridge, Netdev };
const char* family_name(Family f);
std::optional<Family> family_from_name(std::string_view s);

/// A location in a script: 1-based line, first and last column (inclusive, bytes).
struct Loc {
  int line = 0, col_begin = 0, col_end = 0;
};

/// An error as nft prints it: "FILE:LINE:COL-COL: Error: MESSAGE", then the source line and
/// a marker line ('^' under the location).
struct NftError {
  std::string file;
  int line = 0, col_begin = 0, col_end = 0;
  std::string message;
  std::string source_line;     ///< the line the location is on (for render())
  /// A second range of the same line that nft marks with '~' (the statement of an expression
  /// in error, as stmt_binary_error does); 0: none.
  int mark_begin = 0, mark_end = 0;
  bool not_modelled = false;   ///< kpc's refusal: valid or not for nft, kpc cannot say what nft does
  std::string to_string() const;  ///< the first line, without newline
  std::string render() const;     ///< the three lines nft prints, each ending in '\n'
};

struct ApplyResult {
  bool ok = false;
  std::optional<NftError> error;  ///< the first error (as nft prints it first)
  std::vector<NftError> errors;   ///< every error nft prints (nft reports all the batch's errors)
  size_t operations = 0;          ///< commands in the script (each netlink message of a block counts)
  /// Rules a `flush chain` would have removed and the script added again unchanged, which
  /// the model kept instead (apply.cpp, "rules kept through a flush"); for a failed apply,
  /// those it kept before the batch was undone.
  size_t rules_kept = 0;
  bool not_modelled() const { return error && error->not_modelled; }
};

// ------------------------------------------------------------------ indexes (internal)

namespace detail {
struct TableIndex;
struct SetIndex;
/// A copy of an index (apply.cpp, where the types are complete).
std::shared_ptr<TableIndex> clone(const TableIndex& ix);
std::shared_ptr<SetIndex> clone(const SetIndex& ix);
}  // namespace detail

/// Internal to the model: a look-up index over a vector of the state (names -> positions),
/// built on first use and kept up to date by apply_script. A copy of a state gets its own copy
/// of the index (positions in identical vectors are the same positions): rebuilding it costs
/// a pass over every rule's references, ~0.45 s of applying an 80-command partial to a copy of
/// a 10,000-Service table, copying it a few tens of ms. Code outside the model only reads the
/// state's vectors; a caller that edits them must call NftState::reindex() afterwards. (A const
/// look-up may build the index: a state is not to be read from several threads at once before
/// its first look-up; each copy owns its index.)
template <class T>
class LazyIndex {
 public:
  LazyIndex() = default;
  LazyIndex(const LazyIndex& o) : p(o.p ? detail::clone(*o.p) : nullptr) {}
  LazyIndex& operator=(const LazyIndex& o) {
    p = o.p ? detail::clone(*o.p) : nullptr;
    return *this;
  }
  LazyIndex(LazyIndex&&) noexcept = default;
  LazyIndex& operator=(LazyIndex&&) noexcept = default;
  mutable std::shared_ptr<T> p;
};

// ------------------------------------------------------------------ values and statements

/// The datatypes of set keys and values kpc models.
enum class Dtype { Ipv4Addr, Ipv6Addr, InetProto, InetService, Mark, Ifname, Integer, Verdict, CtState, Unknown };
const char* dtype_name(Dtype d);

/// A parsed rule: its statements printed as `nft list` prints them, the text as written,
/// and what it references.
struct RuleRefs {
  std::vector<std::string> chains;  ///< jump/goto targets (also inside anonymous vmaps)
  std::vector<std::string> sets;    ///< @set / @map names (lookups, vmaps, updates)
  std::vector<std::string> dynset;  ///< sets a rule updates (`update @s { ... }`, `add @s { ... }`)
  std::vector<std::string> flowtables;  ///< `flow add @ft`
  /// Statements the kernel only takes in some base chains (checked against every base chain
  /// that reaches the rule): dnat, snat, masquerade, reject.
  bool dnat = false, snat = false, masquerade = false, reject = false;
};

/// What a rule says: made once when the rule is added and never changed, so that the copies
/// of a state share it (copying a 10,000-Service state copied 300,000 rules' texts: half of
/// the copy `kpc verify` makes of the prior) and a rule kept from one state in another is
/// recognised by its body alone.
struct RuleBody {
  std::string text;       ///< as written (knftables' Dump prints this), without the comment
  std::optional<std::string> comment;
  std::string canonical;  ///< as `nft list` prints it (comment included)
  RuleRefs refs;
};

struct Rule {
  uint64_t handle = 0;
  std::shared_ptr<const RuleBody> body;  ///< never null
  uint64_t tx_id = 0;     ///< internal: per-transaction id of a rule added in this transaction
  const std::string& text() const { return body->text; }
  const std::optional<std::string>& comment() const { return body->comment; }
  const std::string& canonical() const { return body->canonical; }
  const RuleRefs& refs() const { return body->refs; }
};

struct Element {
  std::vector<std::string> key;  ///< canonical key fields
  std::vector<std::string> written_key;  ///< as written (knftables' Dump)
  std::string sort_key;          ///< bytes nft sorts listed elements by
  std::optional<std::string> comment;
  std::optional<std::string> value;  ///< map value, canonical ("goto x", "drop", ...)
  std::optional<std::string> written_value;
  std::optional<std::string> timeout, expires;  ///< as listed (only read from listings)
  bool removed = false;  ///< internal: deleted by the transaction being applied (never set outside apply_script)
};

struct Set {
  std::string name;
  uint64_t handle = 0;
  bool is_map = false;
  std::vector<Dtype> key;
  std::vector<std::string> key_names;  ///< "ipv4_addr", ...
  Dtype data = Dtype::Unknown;
  std::string data_name;
  std::vector<std::string> flags;      ///< constant, dynamic, interval, timeout (kernel bit order)
  uint64_t timeout_ms = 0, gc_interval_ms = 0;
  uint32_t size = 0;
  bool size_implied = false;           ///< size 65535 given by the kernel to a set a rule updates
  std::string policy;                  ///< "" (performance) or "memory"
  bool auto_merge = false;
  std::optional<std::string> comment;
  std::vector<Element> elements;       ///< insertion order (knftables' Dump); nft lists them sorted
  bool has_flag(std::string_view f) const;
  /// The element with these canonical key fields (an index look-up), or nullptr.
  const Element* find_element(const std::vector<std::string>& key) const;
  bool removed = false;                ///< internal (as Element::removed)
  LazyIndex<detail::SetIndex> index;   ///< internal: elements by key
};

struct Chain {
  std::string name;
  uint64_t handle = 0;
  bool base = false;
  std::string type, hook;
  int priority = 0;
  std::optional<std::string> device;
  std::string policy = "accept";
  std::optional<std::string> comment;
  std::vector<Rule> rules;
  bool removed = false;  ///< internal (as Element::removed)
  /// internal: 1 + the rules re-added since a flush apply_script deferred (0 outside apply_script)
  uint32_t keeping = 0;
};

struct Flowtable {
  std::string name;
  uint64_t handle = 0;
  std::string hook = "ingress";
  int priority = 0;
  std::vector<std::string> devices;
};

struct Table {
  Family family = Family::Ip;
  std::string name;
  uint64_t handle = 0;
  std::optional<std::string> comment;
  std::vector<std::string> flags;
  std::vector<Chain> chains;          ///< creation order (as the kernel lists them)
  std::vector<Set> sets;              ///< sets and maps, creation order
  std::vector<Flowtable> flowtables;
  uint64_t next_handle = 0;           ///< the table's handle generator (never rolled back)
  Chain* find_chain(std::string_view n);
  const Chain* find_chain(std::string_view n) const;
  Set* find_set(std::string_view n);
  const Set* find_set(std::string_view n) const;
  Flowtable* find_flowtable(std::string_view n);
  const Flowtable* find_flowtable(std::string_view n) const;
  LazyIndex<detail::TableIndex> index;  ///< internal: chains and sets by name
};

/// A node's nftables state: tables in creation order.
class NftState {
 public:
  std::vector<Table> tables;
  uint64_t next_table_handle = 0;  ///< the network namespace's table handle generator
  Table* find_table(Family f, std::string_view name);
  const Table* find_table(Family f, std::string_view name) const;
  bool empty() const { return tables.empty(); }
  /// Drops the look-up indexes (rebuilt on demand): for a caller that edited the vectors.
  void reindex();
};

/// Applies a script atomically (see the file comment). file_name is used in messages.
ApplyResult apply_script(NftState& state, std::string_view text, std::string_view file_name);

/// A script parsed (and expanded, as nft does) before it is applied: apply_script in two
/// steps, so that a caller can parse on another thread (prepare_script touches no state).
/// apply_prepared(state, prepare_script(text), text, file) is apply_script(state, text, file):
/// the same state, result, errors and messages (a syntax error is reported when applied).
/// text must be the same text and outlive the prepared script; a prepared script is used once
/// (a moved-from or default one re-parses text). Applying a script does not change its parse.
class PreparedScript {
 public:
  PreparedScript();
  ~PreparedScript();
  PreparedScript(PreparedScript&&) noexcept;
  PreparedScript& operator=(PreparedScript&&) noexcept;
  /// Another handle on the same parse (applying either applies the same commands).
  PreparedScript share() const;
  struct Impl;
  std::unique_ptr<Impl> impl_;  ///< internal
};
/// Two: a script of split_min bytes or more is parsed in two halves on two threads (the same
/// commands and the same failure as One; the caller's other thread should be idle meanwhile).
/// Below a few MB a second thread costs more than it saves; tests pass 0.
enum class ParseThreads { One, Two };
inline constexpr size_t kParseSplitMin = size_t{4} << 20;
PreparedScript prepare_script(std::string_view text, ParseThreads threads = ParseThreads::One,
                              size_t split_min = kParseSplitMin);
/// prepare_script for a text that shares most of its lines with another script's text
/// (kube-proxy's full transactions at two syncs: the prior and the full of `kpc verify`). A
/// line that holds whole commands in both texts, outside braces, is not parsed again: its
/// commands are copies of like's, their locations moved to the line. The rest is parsed in
/// the parts between such lines; when a part does not parse, the whole text is parsed as
/// prepare_script does. The result is prepare_script(text)'s. like is only read (applying a
/// prepared script does not change it), so it may be applied on another thread meanwhile
/// when it is a share() of the script being applied.
PreparedScript prepare_script_like(std::string_view text, const PreparedScript& like, std::string_view like_text);
/// spent: when given, receives the script's commands after they are applied (for a caller that
/// frees them later: ~0.08 s for a 10,000-Service transaction).
ApplyResult apply_prepared(NftState& state, PreparedScript&& script, std::string_view text,
                           std::string_view file_name, PreparedScript* spent = nullptr);
/// apply_prepared, and meanwhile a copy of the state as it was before (`NftState copy = state`)
/// for the caller: the copy is made on a second thread while the script is evaluated (nft's
/// evaluation only reads the state), then handed to with_copy, which runs on that thread while
/// the kernel's batch changes the state. For a caller that applies one script to a state and
/// another to its copy (kpc verify: the full to the prior, the partial to a copy), so that the
/// copy takes no time of its own. with_copy may keep the copy (move it away); no other thread
/// may use state meanwhile.
ApplyResult apply_prepared_forking(NftState& state, PreparedScript&& script, std::string_view text,
                                   std::string_view file_name, const std::function<void(NftState&)>& with_copy,
                                   PreparedScript* spent = nullptr);

/// prepare_script(text, Two) then apply_prepared(state, ...), overlapping, for a state with no
/// tables (a prior applied to an empty node: how `kpc verify` reads its prior): the text is cut
/// into about `parts` parts at line breaks and parsed on two threads while this one applies the
/// parts parsed so far (apply.cpp, "streaming"). Once the whole text is parsed, with_parse(parse)
/// runs on the second thread, the parse being prepare_script(text)'s (it may share() it; text
/// must outlive what it keeps). The result and the state are apply_prepared's: whatever the
/// stream cannot take (a failure anywhere, a rule placed by handle or index, `replace`, a flush
/// of a chain with rules, a part that does not parse alone) is applied again as usual on the
/// state as it was. A state with tables, or a text under min_size bytes, is parsed first and
/// applied beside with_parse. *streamed (tests): whether the application overlapped the parse.
ApplyResult apply_while_parsing(NftState& state, std::string_view text, std::string_view file_name,
                                const std::function<void(const PreparedScript&)>& with_parse,
                                size_t min_size = kParseSplitMin, size_t parts = 8, bool* streamed = nullptr);

/// Reads `nft list ruleset` / `nft list table ...` output (with or without `-a` handles) into
/// *out (replacing it). False with *err set when the text is not such a listing or names
/// something kpc does not model.
bool parse_listing(std::string_view text, std::string_view file_name, NftState* out, NftError* err);

/// True when text's first command-or-block starts with `table FAMILY NAME {` (a listing),
/// false for a script of commands.
bool looks_like_listing(std::string_view text);

struct PrintOptions {
  bool handles = false;  ///< as `nft -a list ruleset`
};
/// References to chain `name` from the table's rules (jumps, gotos, anonymous verdict maps)
/// and map elements: the kernel's use count, which must be 0 for the chain to be deleted.
int chain_references(const Table& t, std::string_view name);

/// The state as `nft list ruleset` prints it (nft 1.0.6), byte for byte.
std::string print_ruleset(const NftState& s, const PrintOptions& o = {});
/// print_ruleset(a) == print_ruleset(b), without printing the objects whose printed fields
/// are equal at the same place of both listings, and stopping at the first difference.
bool same_listing(const NftState& a, const NftState& b);
/// One table as knftables' Fake.Dump() prints it ("" when the table does not exist).
std::string print_knftables_dump(const NftState& s, Family family, std::string_view table);

// ------------------------------------------------------------------ exposed for tests

/// nft 1.0.6's time format ("3h", "1m40s", "10s", "1d2h3m4s5ms").
std::string format_time_ms(uint64_t ms);
/// nft 1.0.6's misspelling check (src/misspell.c): is `b` close enough to `a` to suggest `a`,
/// and at which distance (as nft computes it, quirks included). -1: not a candidate.
int misspell_distance(std::string_view a, std::string_view b);
/// Is `name`, unquoted, a word nft 1.0.6 reads as a keyword where a name is expected (keywords.cpp)?
/// The model refuses such names ("not modelled"): nft refuses them in some places.
bool is_keyword_name(std::string_view name);
std::vector<std::string_view> keyword_names();  ///< the list, sorted
/// Is w one of the words nft 1.0.6's parser has a token for (keywords of any scanner state;
/// keywords.cpp)? A word that is neither this nor a keyword name is nft's `string` token
/// wherever it stands.
bool is_parser_word(std::string_view w);
std::vector<std::string_view> parser_words();  ///< the list, sorted
/// Has word the shape of nft's `string` token (a letter, then letters, digits and / - _ .)?
bool is_string_token(std::string_view word);
/// An unquoted name the model takes: a letter, then letters, digits and / - _ . (nft's string
/// token), and not a keyword name. The model refuses any other unquoted name ("not modelled").
bool is_plain_name(std::string_view name);
/// `nft list`'s priority text for a base chain ("dstnat - 10", "filter", "-110").
std::string priority_text(Family f, std::string_view hook, int priority);

}  // namespace kpc::verifier::nft
