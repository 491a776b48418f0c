// iptables-restore's state machine, exactly: a RulesetState (tables -> chains ->
// rules, built-in chain policies) and apply(), which models what the real tool
// does with a program, per flavour (docs/verifier.md has the empirical record):
//
//  - legacy (iptables-legacy-restore): every line is parsed and executed at once
//    against an in-memory copy of the table (libiptc); the first failing line
//    stops the run; COMMIT replaces the table atomically. A `*table` line
//    instantiates the table in the kernel even if the block later fails.
//  - nft (iptables-nft-restore): a table block is parsed completely first; at
//    COMMIT the commands run in order against a cache (errors name the command's
//    line, except a jump to a missing chain, which names the COMMIT line), then
//    the kernel applies the batch (chain deletion of a busy chain fails there).
//    Without --noflush the table is deleted, so built-in policies reset to ACCEPT.
//
// Rules are interned: a rule's identity is its canonical iptables-save text, so
// chains are vectors of small integers, `-D rule` is an id search, and two
// states built on one RuleStore compare chain by chain in linear time.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/ir/program.h"
#include "verifier/parse/parser.h"
#include "verifier/state/text_table.h"

namespace kpc::verifier {

enum class Flavor : uint8_t { Legacy, Nft };
const char* flavor_name(Flavor f);

/// Interned rules: canonical save text (after "-A CHAIN") -> id.
///
/// Also remembers raw restore lines: a "-A CHAIN ..." line read before, byte for
/// byte, in the same table and family parses to the same rule (the parser is a
/// function of those three), so apply_text() reuses its id instead of parsing and
/// printing it again. Verifying a partial reads the prior, the partial and the full
/// program, whose lines mostly repeat each other.
class RuleStore {
 public:
  static constexpr uint32_t kNoRule = 0xFFFFFFFFu;
  /// Name ids 0..4 are the built-in chains' names, in every store (kBuiltinNames order),
  /// so a table's built-in chains have the same ids whatever store it is used with.
  RuleStore();
  RuleStore(const RuleStore&) = delete;  // the indexes point into this store's own texts
  RuleStore& operator=(const RuleStore&) = delete;

  /// Interns a rule; jump is the chain a Jump/Goto target names ("" otherwise).
  uint32_t intern(const ir::Rule& rule, IPFamily family);
  /// A rule's identity: its iptables-save text after "-A CHAIN" (what intern() keys on).
  static std::string canonical_text(const ir::Rule& rule, IPFamily family);
  /// Appends canonical_text(rule, family) to out (no allocation once out has room).
  static void append_canonical_text(std::string& out, const ir::Rule& rule, IPFamily family);
  uint32_t intern_text(std::string_view text, std::string_view jump, bool is_goto);
  /// The same with text_hash(text) and text_hash(jump) already computed (by another thread).
  uint32_t intern_text(std::string_view text, uint64_t text_hash, std::string_view jump, uint64_t jump_hash, bool is_goto);
  /// Valid as long as the store (the bytes live in its arena).
  std::string_view text(uint32_t id) const { return texts_[id]; }
  const std::string& jump(uint32_t id) const {
    uint32_t n = meta_[id].jump_id;
    return n == kNoName ? empty_name_ : names_[n];
  }
  /// The name id of jump(id) (kNoName without a jump): refs and chain caches index by it.
  uint32_t jump_id(uint32_t id) const { return meta_[id].jump_id; }
  bool is_goto(uint32_t id) const { return meta_[id].is_goto; }
  /// An unconditional ACCEPT/DROP/RETURN: the kernel's loop check stops walking the chain there.
  bool terminal(uint32_t id) const { return meta_[id].terminal; }
  /// The rule has a " --name " option (recent lists, nfacct): the symbolic layer's
  /// affinity scans read only these texts (a 10,000-Service nat table has 400k rules).
  bool names_list(uint32_t id) const { return meta_[id].names_list; }
  /// The same rule with its jump/goto target renamed.
  uint32_t renamed(uint32_t id, const std::string& new_target);
  size_t size() const { return texts_.size(); }
  void reserve(size_t n) {
    index_.reserve(n);
    meta_.reserve(n);
  }

  /// Chain names as small integers (every jump target gets one when its rule is interned).
  static constexpr uint32_t kNoName = 0xFFFFFFFFu;
  uint32_t name_id(std::string_view name) { return name_id(name, text_hash(name)); }
  uint32_t name_id(std::string_view name, uint64_t hash);
  uint32_t find_name(std::string_view name) const { return name_index_.find(name); }
  /// find_name(), trying first the id after *last and *last itself: a program declares
  /// chains, and appends runs of rules to them, in the order their names got ids (the
  /// full program after its prior), so most lookups need no hash. Updates *last.
  uint32_t find_name_near(std::string_view name, uint32_t* last) const {
    for (uint32_t guess : {*last + 1, *last})
      if (guess < names_.size() && names_[guess] == name) return *last = guess;
    uint32_t id = find_name(name);
    if (id != kNoName) *last = id;
    return id;
  }
  const std::string& name(uint32_t id) const { return names_[id]; }
  size_t name_count() const { return names_.size(); }
  static constexpr std::string_view kBuiltinNames[] = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"};
  /// The fixed name id of a built-in chain's name (kNoName for any other name).
  static uint32_t builtin_name_id(std::string_view name);

  /// A restore line read before in that table: its record (kNoRule if never seen).
  uint32_t known_line(IPFamily family, ir::TableId table, std::string_view line) const {
    return lines_[line_slot(family, table)].find(line);
  }
  /// How a reader looks lines up in order. Records are numbered in the order lines were
  /// remembered, and a program mostly repeats its prior's lines in the prior's order (the
  /// full program after the prior it was written on), so the record after the last one
  /// found is tried first: one compare of bytes next in memory instead of a hash and a
  /// probe into a table of half a million lines. After a long run of misses (a program the store has not seen) the
  /// indexed lookup is made only for every 16th line, so reading a new program does
  /// not pay a hash and a probe per line (a skipped line is parsed: only slower).
  struct LineCursor {
    uint32_t next = 0;    ///< the record to try first
    uint32_t misses = 0;  ///< lookups missed in a row
  };
  uint32_t known_line(IPFamily family, ir::TableId table, std::string_view line, LineCursor* cursor) const;
  size_t record_count() const { return records_.size(); }
  /// A record's rule id and the name id of the chain its line appends to.
  uint32_t line_rule(uint32_t record) const { return records_[record].rule; }
  uint32_t line_chain(uint32_t record) const { return records_[record].chain; }
  /// Records that a restore line ("-A CHAIN ...") reads as rule id.
  void remember_line(IPFamily family, ir::TableId table, std::string_view line, uint32_t id);
  /// The same with text_hash(line) and text_hash(CHAIN) already computed (by another thread).
  void remember_line(IPFamily family, ir::TableId table, std::string_view line, uint64_t hash, uint32_t id,
                     uint64_t chain_hash);
  /// Room for n more lines of that table without regrowing its index.
  void reserve_lines(IPFamily family, ir::TableId table, size_t n) {
    lines_[line_slot(family, table)].reserve(lines_[line_slot(family, table)].size() + n);
    records_.reserve(records_.size() + n);
  }
  /// Starts loading what interning a text and remembering its line will touch first.
  /// (Prefetching the jump target's name slot as well measured slower: too many misses in flight.)
  void prefetch(IPFamily family, ir::TableId table, uint64_t line_hash, uint64_t text_hash) const {
    lines_[line_slot(family, table)].prefetch(line_hash);
    index_.prefetch(text_hash);
  }
  /// The chain word of a rememberable line ("-A CHAIN ...").
  static std::string_view line_chain_word(std::string_view line) {
    size_t end = line.find(' ', 3);
    return line.substr(3, end == std::string_view::npos ? std::string_view::npos : end - 3);
  }

 private:
  struct Meta {
    uint32_t jump_id = kNoName;
    bool is_goto = false;
    bool terminal = false;
    bool names_list = false;
  };
  static size_t line_slot(IPFamily family, ir::TableId table) {
    return (family == IPFamily::V6 ? 5 : 0) + static_cast<size_t>(table);
  }
  /// Copies bytes into the arena: stable, and freed in chunks, not one by one.
  std::string_view keep(std::string_view bytes);
  std::vector<std::string_view> texts_;  ///< rule id -> canonical text, in arena_
  std::string scratch_;                  ///< intern(): the canonical text being built
  std::vector<Meta> meta_;
  TextTable index_;
  std::deque<std::string> names_;
  const std::string empty_name_;
  TextTable name_index_;
  struct LineRecord {
    const char* data;  ///< the line's bytes, in arena_
    uint32_t size;
    uint32_t rule;
    uint32_t chain;    ///< name id
    uint8_t slot;      ///< line_slot(family, table)
  };
  std::vector<LineRecord> records_;
  TextTable lines_[10];                         ///< per family and table: raw line -> record
  std::vector<std::unique_ptr<char[]>> arena_;  ///< raw lines' and canonical texts' bytes
  char* arena_pos_ = nullptr;
  char* arena_end_ = nullptr;
};

struct Chain {
  /// Points into the rule store's names (or at a built-in chain's static name): a
  /// state is copied per verify, and 120k chain names were 120k allocations.
  std::string_view name;
  uint32_t id = RuleStore::kNoName;  ///< the store's name id of `name`
  bool builtin = false;
  std::string policy = "-";  ///< built-in: ACCEPT or DROP; user chains: "-"
  std::vector<uint32_t> rules;
  uint64_t seq = 0;          ///< creation order (0 for built-ins)
  /// nft only: iptables-nft creates built-in chains lazily (on a rule, a policy,
  /// ":CHAIN" or -F CHAIN); -Z CHAIN fails while the chain does not exist.
  bool materialized = false;
};

/// A table's chains, keyed by the store's name ids: a lookup is two array reads.
/// (Applying a 10,000-Service program looks chains up about a million times among
/// 120k; a string-keyed hash map made those lookups a third of verifying a partial.)
/// Chains are kept dense, in no meaningful order: erasing one moves the last chain
/// into its place, so a Chain* is valid only until the next insert or erase.
class ChainMap {
 public:
  Chain* find(uint32_t name_id) {
    return name_id < slot_.size() && slot_[name_id] != kNone ? &chains_[slot_[name_id]] : nullptr;
  }
  const Chain* find(uint32_t name_id) const {
    return name_id < slot_.size() && slot_[name_id] != kNone ? &chains_[slot_[name_id]] : nullptr;
  }
  /// Adds c (c.id must be set and not present).
  Chain& insert(Chain c);
  void erase(uint32_t name_id);
  /// Keeps the chains for which keep(chain) is true.
  template <class Keep>
  void keep_if(Keep keep) {
    for (size_t i = chains_.size(); i-- > 0;)
      if (!keep(chains_[i])) erase(chains_[i].id);
  }
  /// The chain's position in iteration order, in [0, size()).
  size_t index_of(const Chain& c) const { return static_cast<size_t>(&c - chains_.data()); }
  size_t size() const { return chains_.size(); }
  std::vector<Chain>::iterator begin() { return chains_.begin(); }
  std::vector<Chain>::iterator end() { return chains_.end(); }
  std::vector<Chain>::const_iterator begin() const { return chains_.begin(); }
  std::vector<Chain>::const_iterator end() const { return chains_.end(); }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  std::vector<Chain> chains_;
  std::vector<uint32_t> slot_;  ///< name id -> index into chains_, or kNone
};

struct TableState {
  ir::TableId id = ir::TableId::Filter;
  bool present = false;    ///< iptables-save prints the table
  uint64_t instantiated = 0;  ///< legacy: order in which the kernel created the table (save prints newest first)
  ChainMap chains;
  std::vector<uint32_t> refs;  ///< by the store's name id: rules jumping/going to that chain

  /// Built-in chains with ACCEPT policies, no user chains, not present.
  static TableState empty(ir::TableId id);
  /// The chain of that name (names are ids of the store the state is built on).
  Chain* find(const RuleStore& store, std::string_view name) { return chains.find(store.find_name(name)); }
  const Chain* find(const RuleStore& store, std::string_view name) const { return chains.find(store.find_name(name)); }
  size_t rule_count() const;
  /// Chains in iptables-save order: built-ins in hook order, then user chains by name (strcmp).
  std::vector<const Chain*> save_order() const;
};

struct RulesetState {
  IPFamily family = IPFamily::V4;
  std::shared_ptr<RuleStore> store = std::make_shared<RuleStore>();
  std::vector<TableState> tables;  ///< all five, indexed by TableId
  uint64_t next_seq = 1;           ///< chain creation counter
  uint64_t next_instantiation = 1; ///< table instantiation counter (legacy)
  /// nft only: after a batch failed the kernel's loop validation, the kernel validates
  /// every new rule of later batches at once (a loop that a later command of the same
  /// batch removes then fails too) until a batch commits. Per network namespace.
  bool nft_validate_each = false;

  static RulesetState empty(IPFamily family, std::shared_ptr<RuleStore> store = nullptr);
  TableState& table(ir::TableId id) { return tables[static_cast<size_t>(id)]; }
  const TableState& table(ir::TableId id) const { return tables[static_cast<size_t>(id)]; }
  /// A chain by table and name (nullptr: none).
  Chain* find(ir::TableId t, std::string_view name) { return table(t).find(*store, name); }
  const Chain* find(ir::TableId t, std::string_view name) const { return table(t).find(*store, name); }
};

struct ApplyOptions {
  bool noflush = false;
  Flavor flavor = Flavor::Legacy;
  /// The caller drops the state if the program fails (verify, diff, loading a file):
  /// a legacy table block then works on the table in place instead of on a copy, and
  /// after a failure the failing table holds what the block did up to the error.
  /// Saves copying and freeing every chain of the table per block (120k chains in a
  /// 10,000-Service nat table).
  bool discard_on_failure = false;
  /// apply_text on a program at least this large parses its last part on a second
  /// thread while the first part is applied (the state machine stays sequential;
  /// see apply_text). 0: always (tests); SIZE_MAX: never.
  size_t parallel_parse_min_bytes = size_t{4} << 20;
  /// Where that split falls, in percent of the program's bytes (see apply_text).
  unsigned parallel_parse_split_percent = 40;
};

/// Why a program fails (what kind of check of the real tool or kernel fires).
enum class ErrorClass : uint8_t {
  Syntax,              ///< the line does not parse (iptables' PARAMETER_PROBLEM)
  OutsideTable,        ///< a command or declaration outside *table ... COMMIT
  CommitExpected,      ///< end of input inside a table
  UnknownTable,        ///< *name of a table that does not exist
  JumpToMissingChain,  ///< -j/-g to a chain that does not exist (dangling jump)
  JumpToBuiltinChain,  ///< -j/-g to a built-in chain
  NoSuchChain,         ///< -A/-I/-D/-R/-F/-Z/-X/-E on a chain that does not exist
  NoSuchRule,          ///< -D of a rule the chain does not hold
  IndexTooBig,         ///< -I/-R/-D/-Z position beyond the chain
  ChainExists,         ///< -N/-E/":" of a name that exists
  ChainBusy,           ///< -X of a chain that is referenced or not empty
  BadPolicy,           ///< policy not ACCEPT/DROP, or on a user chain
  Loop,                ///< a loop of jumps reachable from a built-in chain (kernel)
  RenamedChain,        ///< nft: use of a chain renamed (or created and renamed) in the same batch
  ToolCrash,           ///< nft: iptables-nft-restore 1.8.9 segfaults (-R of a rule added in the same batch)
};
const char* error_class_name(ErrorClass c);

/// What the real tool says when a program fails.
struct ApplyError {
  uint32_t line = 0;      ///< the line number the real tool names
  int exit_code = 1;      ///< the real tool's exit status (1, 2 or 4)
  std::string reason;     ///< short reason ("jump to missing chain KUBE-SVC-X")
  std::string message;    ///< the real tool's stderr text, program name included
  ErrorClass cls = ErrorClass::Syntax;
};

struct ApplyResult {
  std::optional<ApplyError> error;  ///< empty: the whole program was applied
  size_t tables_committed = 0;
  bool ok() const { return !error; }
};

/// Applies a parsed program (stopping where the parser stopped, as the real tool
/// does). The state keeps every table committed before a failure.
ApplyResult apply(RulesetState& state, const ParseResult& parsed, const ApplyOptions& options);
/// Applies a program built in memory (no parse error possible).
ApplyResult apply(RulesetState& state, const ir::Program& program, const ApplyOptions& options);
/// Parses and applies in one pass, keeping no ir::Program (large inputs: a
/// 430k-line nat program). state.family selects iptables/ip6tables syntax; an
/// empty state (no tables) is taken as IPv4. *parse_error gets the parse error, if any.
ApplyResult apply_text(RulesetState& state, std::string_view text, const ApplyOptions& options,
                       ParseError* parse_error = nullptr);

/// The state exactly as iptables-save prints it, without `#` lines, counters [0:0].
std::string print_save(const RulesetState& state, Flavor flavor);
/// One table in save form ("*nat ... COMMIT\n").
void print_table_save(std::string& out, const TableState& table, const RuleStore& store);

/// Builds a state from iptables-save output (as if the kernel held it).
/// Returns false with *error set if the text does not parse or load.
bool load_save(std::string_view text, IPFamily family, Flavor flavor, RulesetState& out, std::string* error,
               std::shared_ptr<RuleStore> store = nullptr);

/// Chains that differ between two states.
struct ChainDiff {
  enum Kind : uint8_t { TablePresence, OnlyInA, OnlyInB, Policy, Rules };
  ir::TableId table;
  std::string chain;  ///< empty for TablePresence
  ChainDiff(ir::TableId t, std::string_view c, Kind k) : table(t), chain(c), kind(k) {}
  Kind kind;
};
std::vector<ChainDiff> diff_states(const RulesetState& a, const RulesetState& b);
std::string describe(const ChainDiff& d);

}  // namespace kpc::verifier
